// The pool's decisions (kern/pool: Remap plans, Copies) turned into memory operations on arenas
// and the host block: byte offsets, sizes and pitches, nothing executed (the CUDA side runs the
// lists in order). Pure: host-tested (tests/host/runtime/state_plan_test.cpp).
//
// Geometry: arena a (the pool's numbering: paged states, then per-seq states) holds object k at
// byte k · object_bytes; chunk position p at p · chunk_bytes. A host page is every paged state's
// page back to back (arena a's part at host_offset), a host slot every per-seq state's slot.
#pragma once

#include <cstdint>
#include <vector>

#include "kern/pool/host.hpp"
#include "kern/pool/plans.hpp"
#include "kern/pool/pool.hpp"

namespace kern::runtime {

struct ArenaGeometry {
  std::uint64_t object_bytes = 0;  // a page (unit · bytes_per_token) or a slot
  bool paged = true;
  std::uint64_t host_offset = 0;  // this arena's part of a host page / host slot
  friend bool operator==(const ArenaGeometry&, const ArenaGeometry&) = default;
};

struct StateGeometry {
  std::uint64_t chunk_bytes = 0;
  std::vector<ArenaGeometry> arenas;
  std::uint64_t host_page_stride = 0;  // bytes between host pages (0 without a host tier)
};
StateGeometry state_geometry(const pool::Pool& pool, const pool::Host* host);

struct VmmOp {
  enum class Kind { Unmap, Map, Access };
  Kind kind;
  std::uint32_t arena;
  std::uint64_t offset, bytes;  // in the arena
  std::uint32_t chunk = 0;      // Map: the pool's chunk number
  friend bool operator==(const VmmOp&, const VmmOp&) = default;
};
// The plan's unmaps, then maps, then access runs, in its order.
std::vector<VmmOp> vmm_ops(const pool::Remap& plan, const StateGeometry& g);

// `height` rows of `width` bytes (1-D when height is 1), each end in a device arena or the host block.
struct CopyOp {
  enum class End { Device, Host };
  End src_end, dst_end;
  std::uint32_t src_arena = 0, dst_arena = 0;  // device ends only
  std::uint64_t src = 0, dst = 0;              // byte offsets into the arena or the host block
  std::uint64_t width = 0, height = 1, src_pitch = 0, dst_pitch = 0;
  friend bool operator==(const CopyOp&, const CopyOp&) = default;
};
// Page runs (consecutive pairs folded) per paged arena, then the slot per per-seq arena.
std::vector<CopyOp> device_copy_ops(const pool::DeviceCopies& copies, const StateGeometry& g);
// Device pages to host pages: a run of n consecutive pages going to consecutive host pages is,
// per paged arena, one 2-D copy (n rows of the arena's page, device pitch the page, host pitch
// the host page stride), or one 1-D copy when the host pages are exactly that arena's pages.
std::vector<CopyOp> park_ops(const pool::ParkCopies& copies, const StateGeometry& g);
std::vector<CopyOp> wake_ops(const pool::WakeCopies& copies, const StateGeometry& g);

struct ZeroOp {
  std::uint32_t arena;
  std::uint64_t offset, bytes;
  friend bool operator==(const ZeroOp&, const ZeroOp&) = default;
};
// The objects' own bytes (never a whole chunk: a chunk may hold a live neighbour), consecutive ids
// folded, per arena.
std::vector<ZeroOp> zero_ops(const std::vector<pool::PageId>& pages, const std::vector<pool::SlotId>& slots,
                             const StateGeometry& g);

}  // namespace kern::runtime
