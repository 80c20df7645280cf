// How bind-plan copies travel through pinned staging chunks (pure).
//
// A contiguous copy is read in chunk-sized pieces; a strided copy in pieces of whole rows
// whose source span ((rows-1)·src_pitch + width) fits a chunk, read with ONE pread per piece
// (the runtime scatters its rows with one H2D each). A row wider than a chunk becomes per-row contiguous pieces.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kern/bind_plan.hpp"

namespace kern::runtime {

struct StagingPiece {
  std::size_t copy = 0;            // index into the plan's copies
  bool strided = false;            // true: rows [row, row + rows) of a strided copy as one 2-D copy
  std::uint64_t row = 0, rows = 1;
  std::uint64_t src_offset = 0;    // bytes from the tensor's first byte (start of the span read)
  std::uint64_t dst_offset = 0;    // bytes from the buffer's first byte
  std::uint64_t bytes = 0;         // bytes read into the chunk
  std::uint64_t width = 0;         // strided: row bytes
};

std::vector<StagingPiece> plan_staging(std::span<const BindCopy> copies, std::uint64_t chunk_bytes);

}  // namespace kern::runtime
