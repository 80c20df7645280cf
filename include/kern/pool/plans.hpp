// Decisions as data: what the runtime must do to memory for the pool's bookkeeping to hold.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace kern::pool {

using PageId = std::uint32_t;
using SlotId = std::uint32_t;
using HostOffset = std::uint64_t;  // bytes from the start of the host block

// Arenas are numbered paged states first (layout order), then per-seq states.
struct Unmap {
  std::uint32_t arena;
  std::uint64_t pos;
  friend bool operator==(const Unmap&, const Unmap&) = default;
};
struct Map {
  std::uint32_t arena;
  std::uint64_t pos;
  std::uint32_t chunk;
  friend bool operator==(const Map&, const Map&) = default;
};
struct Access {  // set read/write access on positions [first, first + count)
  std::uint32_t arena;
  std::uint64_t first;
  std::uint64_t count;
  friend bool operator==(const Access&, const Access&) = default;
};

// A change of which objects exist. Executed in order: every unmap, then every map, then every
// access. The made objects become leasable only when the pool is told the plan completed.
struct Remap {
  std::uint64_t id = 0;
  std::vector<Unmap> unmaps;
  std::vector<Map> maps;
  std::vector<Access> access;
  std::vector<PageId> made_pages, unmade_pages;
  std::vector<SlotId> made_slots, unmade_slots;
  bool empty() const { return unmaps.empty() && maps.empty(); }
  friend bool operator==(const Remap&, const Remap&) = default;
};

// A run of `count` consecutive objects: source src, src+src_step, ...; destination likewise.
template <typename S, typename D>
struct CopyRun {
  S src;
  D dst;
  std::uint64_t count;
  friend bool operator==(const CopyRun&, const CopyRun&) = default;
};

template <typename S, typename D>
struct CopyPair {
  S src;
  D dst;
  friend bool operator==(const CopyPair&, const CopyPair&) = default;
};

// Copies the runtime performs at once, while the handles that asked for them are alive.
template <typename S, typename D>
struct Copies {
  std::vector<CopyPair<S, D>> pages;
  std::optional<CopyPair<S, D>> slot;

  bool empty() const { return pages.empty() && !slot; }
  // Folds consecutive page pairs (src advancing by src_step, dst by dst_step) into runs.
  std::vector<CopyRun<S, D>> runs(S src_step, D dst_step) const {
    std::vector<CopyRun<S, D>> out;
    for (const auto& p : pages) {
      if (!out.empty()) {
        auto& r = out.back();
        if (p.src == static_cast<S>(r.src + src_step * r.count) &&
            p.dst == static_cast<D>(r.dst + dst_step * r.count)) {
          ++r.count;
          continue;
        }
      }
      out.push_back({p.src, p.dst, 1});
    }
    return out;
  }
  friend bool operator==(const Copies&, const Copies&) = default;
};

using DeviceCopies = Copies<PageId, PageId>;  // device page/slot -> device page/slot
// Park: device page -> host offset of that host page; slot: device slot -> host offset.
using ParkCopies = Copies<std::uint64_t, HostOffset>;
// Wake: host offset -> device page; slot: host offset -> device slot.
using WakeCopies = Copies<HostOffset, std::uint64_t>;

}  // namespace kern::pool
