// Host tier: one pinned block, accounted in grains. Parked stores are chains of host pages;
// a device page remembers its host twin so a sequence parked again copies only new pages.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "kern/pool/denied.hpp"
#include "kern/pool/plans.hpp"
#include "kern/pool/pool.hpp"
#include "kern/pool/store.hpp"

namespace kern::pool {

namespace detail {
struct HostCore;
void retain(HostCore* core);
void release(HostCore* core);
using HostRef = Ref<HostCore>;
}  // namespace detail

struct HostConfig {
  std::uint64_t bytes = 0;            // the pinned block
  std::uint64_t grain = 64ull << 10;  // allocation unit

  // The block that holds `pages` host pages and `slots` host slots of this pool's layout.
  static HostConfig for_objects(const Pool& pool, std::uint64_t pages, std::uint64_t slots,
                                std::uint64_t grain = 64ull << 10);
};

// A checkpoint on the host. Clones are further holders; host pages return with the last one.
class Parked {
 public:
  Parked() = default;
  Parked(const Parked& o);
  Parked(Parked&& o) noexcept;
  Parked& operator=(Parked o) noexcept;
  ~Parked();

  bool valid() const { return static_cast<bool>(host_); }
  std::uint64_t tokens() const { return len_; }
  bool has_slot() const { return slot_.has_value(); }
  std::uint64_t pages() const { return pages_; }
  std::vector<HostOffset> offsets() const;  // host page offsets, root first (observation)
  std::optional<HostOffset> slot_offset() const;

 private:
  friend class Host;
  friend struct detail::Handles;
  detail::HostRef host_;
  std::uint32_t tail_ = kNoNode;
  std::uint64_t len_ = 0, pages_ = 0;
  std::optional<std::uint32_t> slot_;  // host slot index
  void reset() noexcept;
};

// Space found on the host for one checkpoint, before any byte moves. Dropping it gives it back.
class Room {
 public:
  Room() = default;
  Room(const Room&) = delete;
  Room& operator=(const Room&) = delete;
  Room(Room&& o) noexcept;
  Room& operator=(Room&& o) noexcept;
  ~Room();
  bool valid() const { return static_cast<bool>(host_); }
  const Checkpoint& checkpoint() const { return cp_; }

 private:
  friend class Host;
  detail::HostRef host_;
  Checkpoint cp_;
  std::uint32_t reuse_tail_ = kNoNode;   // host twins reused (held so they cannot go away)
  std::uint64_t reuse_ = 0;              // chain nodes covered by them
  std::vector<std::uint64_t> reserved_;  // first grain of each reserved host page
  std::optional<std::uint64_t> slot_grain_;
  void reset() noexcept;
};

class Host {
 public:
  // The block is sized for this pool's layout: a host page is every paged state's page back to
  // back (unit * bytes_per_token), a host slot every per-seq state's slot back to back.
  Host(const Pool& pool, const HostConfig& config);
  Host(Host&&) noexcept = default;
  Host& operator=(Host&&) noexcept = default;

  // Finds host space for the checkpoint's pages without live twins and its slot. HostFull if
  // there is none (nothing kept).
  Granted<Room> room(const Checkpoint& cp);
  // Pages and slot copied to the host; twins reused. The runtime holds the checkpoint until the
  // copies land.
  std::pair<Parked, ParkCopies> park(Room&& room);
  Granted<std::pair<Parked, ParkCopies>> park(const Checkpoint& cp);  // room, then park
  // The first ceil(len/unit) pages copied into fresh device pages that remember their twins;
  // the slot copied when len is the full length (required with a slot).
  Granted<std::pair<Checkpoint, WakeCopies>> wake(const Parked& parked, Pool& pool, std::uint64_t len);
  // Wakes straight into a lease of `tokens` (as Pool::restore of the woken checkpoint, without
  // the checkpoint): the floor(len/unit) whole pages are copied into fresh device pages that join
  // the lease's chain as sealed nodes remembering their twins; the partial page len ends in and
  // the slot are copied into the lease's own page and slot, so each byte moves once. len as for
  // wake; tokens > len, ignored for a slot-only store (a slot-only lease).
  Granted<std::pair<Lease, WakeCopies>> restore(const Parked& parked, Pool& pool, std::uint64_t len,
                                                std::uint64_t tokens);

  std::uint64_t grain() const;
  std::uint64_t page_bytes() const;   // unit * bytes_per_token
  std::uint64_t page_stride() const;  // page_bytes rounded up to grains
  std::uint64_t slot_bytes() const;
  std::uint64_t slot_stride() const;
  std::uint64_t capacity() const;  // bytes in whole grains
  std::uint64_t used() const;      // bytes allocated
  std::uint64_t live_pages() const;
  std::uint64_t live_slots() const;
  // Live host pages and slots are pairwise disjoint, sum to used(), free runs are coalesced.
  void check_invariants() const;

 private:
  detail::HostRef host_;
};

}  // namespace kern::pool
