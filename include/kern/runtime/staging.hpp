// How bind-plan copies travel through pinned staging slabs (pure: no memory, files or threads).
//
// plan_staging: a contiguous copy is read in pieces of at most `chunk_bytes`; a strided copy in
// pieces of whole rows whose source span ((rows-1)·src_pitch + width) fits a chunk, read with
// one contiguous span per piece (the device side copies its rows with one 2-D copy); a row
// wider than a chunk becomes per-row contiguous pieces.
//
// plan_load: the pieces of many buffers' copies packed, in order, into *fills* of one slab
// each (a piece never straddles two fills; each starts `align`-aligned), and every piece's span
// split into reads of at most `read_bytes` (the unit a reader thread takes). Fill f uses slab
// f mod (slab count): the loader (weight_loader.hpp) executes this plan verbatim, so where every
// byte lands is decided here, never by thread timing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kern/weights/bind_plan.hpp"

namespace kern::runtime {

struct StagingPiece {
  std::size_t copy = 0;  // index into the plan's copies
  bool strided = false;  // true: rows [row, row + rows) of a strided copy as one 2-D copy
  std::uint64_t row = 0, rows = 1;
  std::uint64_t src_offset = 0;  // bytes from the tensor's first byte (start of the span read)
  std::uint64_t dst_offset = 0;  // bytes from the buffer's first byte
  std::uint64_t bytes = 0;       // bytes read into the chunk
  std::uint64_t width = 0;       // strided: row bytes
};

std::vector<StagingPiece> plan_staging(std::span<const weights::BindCopy> copies, std::uint64_t chunk_bytes);

// One piece placed in a slab.
struct SlabPiece {
  std::size_t target = 0;         // index into the targets given to plan_load
  StagingPiece piece;             // piece.copy indexes that target's copies
  std::uint64_t slab_offset = 0;  // where the piece's span starts in the slab
};

// One pread: `bytes` of the piece's tensor at tensor offset `src_offset` into the slab.
struct SlabRead {
  std::size_t piece = 0;         // index into the fill's pieces
  std::uint64_t src_offset = 0;  // bytes from the tensor's first byte
  std::uint64_t slab_offset = 0;
  std::uint64_t bytes = 0;
};

// What one slab holds between being read and being copied to the device.
struct SlabFill {
  std::vector<SlabPiece> pieces;  // in plan order
  std::vector<SlabRead> reads;    // in slab order; together they cover every piece's span once
  std::uint64_t bytes = 0;        // end of the last piece's span (<= slab bytes)
};

struct LoadLayout {
  std::uint64_t slab_bytes = 32ull << 20;  // 8 x 32 MiB: pinning 512 MiB alone took 0.3 s on the H200
  std::uint64_t read_bytes = 4ull << 20;   // largest single pread
  std::uint64_t align = 4096;              // every piece starts at a multiple of this in its slab
};

struct LoadPlan {
  LoadLayout layout;
  std::vector<SlabFill> fills;
  std::uint64_t payload_bytes = 0;  // bytes that land in buffers (sum of the copies' bytes)
  std::uint64_t read_bytes = 0;     // bytes read (strided spans include the skipped gaps)
  std::size_t read_count = 0;
  std::uint64_t max_fill_bytes() const;
};

// Plans every copy of every target. Error(Api) when the layout is unusable (zero sizes, an
// alignment that is not a power of two or exceeds the slab).
LoadPlan plan_load(std::span<const std::vector<weights::BindCopy>> targets, const LoadLayout& layout);

// Whether a strided piece may be one cuMemcpy2DAsync (both pitches within the driver's
// CU_DEVICE_ATTRIBUTE_MAX_PITCH floor of 2^31 - 1 bytes); otherwise it is copied row by row.
bool fits_2d_copy(const weights::BindCopy& copy);

}  // namespace kern::runtime
