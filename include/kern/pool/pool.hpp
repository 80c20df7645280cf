// Pool: the device tier's accounting of pages and slots over chunked arenas. It decides; the
// runtime executes its decisions (Remap plans, Copies). Single-threaded, deterministic.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kern/pool/core_ref.hpp"
#include "kern/pool/denied.hpp"
#include "kern/pool/layout.hpp"
#include "kern/pool/lease.hpp"
#include "kern/pool/plans.hpp"
#include "kern/pool/store.hpp"

namespace kern::pool {

enum class ObjectStatus : std::uint8_t { Absent, Free, Held, Arriving, Leaving };

struct PoolConfig {
  std::uint64_t chunk_bytes = 0;        // physical chunk size (see chunk_bytes_for)
  std::uint64_t chunks = 0;             // physical chunks in the budget
  std::uint64_t first_slots = 0;        // slots made first (slot 0 included; ignored without per-seq)
  std::optional<std::uint64_t> tokens;  // cap on the pages made first (tokens / unit)

  // The budget for Capacity {tokens, seqs}: first_slots = seqs + 2 (slot 0 is the null slot,
  // one is padding), chunks = per-state rounded room for tokens and those slots.
  static PoolConfig from_capacity(const PoolLayout& layout, std::uint64_t chunk_bytes, const Capacity& capacity);
};

struct ArenaInfo {
  std::string state;
  bool paged;                  // page arena (else slot arena)
  std::uint64_t object_bytes;  // bytes of one page (unit * bytes_per_token) or one slot
  std::uint64_t positions;     // chunk positions reserved (never moved)
};

class Pool {
 public:
  // Makes slots 0..first_slots, then as many pages as the chunks hold (capped by tokens). The
  // returned plan maps them and counts as landed. Throws Manifest for a bad layout, Api for a
  // budget that cannot hold the first slots.
  static std::pair<Pool, Remap> create(const PoolLayout& layout, const PoolConfig& config);

  Pool(Pool&&) noexcept = default;
  Pool& operator=(Pool&&) noexcept = default;
  ~Pool() = default;

  // ---- leases
  Granted<Lease> lease(std::uint64_t tokens);  // fresh pages (+ a fresh slot with per-seq states)
  Granted<Lease> lease_slot();                 // a slot and no pages
  // Grows a paged lease to hold `tokens`. nullopt when granted.
  std::optional<Denied> extend(Lease& lease, std::uint64_t tokens);

  // ---- stores
  // Full pages up to len join the chain (shared); a partial last page still written by the
  // lease is copied into a checkpoint-owned page; the slot is copied into a fresh slot.
  Granted<std::pair<Checkpoint, DeviceCopies>> checkpoint(Lease& lease, std::uint64_t len);
  // Zero copy: pages up to ceil(len/unit) sealed in place, the rest returned, the slot handed over.
  Checkpoint retire(Lease&& lease, std::uint64_t len);
  // A new lease of `tokens` starting from the checkpoint's first len tokens: whole pages shared,
  // the partial page copied, fresh pages after; the slot copied. len = cp.tokens(), or for a
  // slotless checkpoint any whole-page multiple below it.
  Granted<std::pair<Lease, DeviceCopies>> restore(const Checkpoint& cp, std::uint64_t len, std::uint64_t tokens);
  // Same decisions from a live lease; with a slot, len must be the parent's position().
  Granted<std::pair<Lease, DeviceCopies>> fork(Lease& parent, std::uint64_t len, std::uint64_t tokens);

  // ---- remaps
  std::optional<Remap> take_pending();  // the planned remap, now in flight
  void complete(const Remap& plan);     // the runtime executed it: made objects become Free
  bool remapping() const;               // a plan is pending or in flight
  std::uint64_t remapped() const;       // plans completed so far (the initial one excluded)

  // ---- observation
  std::uint64_t unit() const;
  std::uint64_t row_pages() const;
  std::uint64_t max_seq_tokens() const;  // row_pages * unit
  std::uint64_t total() const;           // live pages (Free or Held)
  std::uint64_t used() const;            // held pages
  std::uint64_t pages_max() const;       // page ids the arenas reserve
  std::uint64_t slots() const;           // live slots (slot 0 included)
  std::uint64_t slots_used() const;      // held slots, slot 0 excluded
  std::uint64_t slots_max() const;
  std::uint64_t chunk_bytes() const;
  std::uint64_t chunks() const;
  std::uint64_t free_chunks() const;
  const std::vector<ArenaInfo>& arenas() const;
  std::optional<std::uint32_t> chunk_at(std::uint32_t arena, std::uint64_t pos) const;
  ObjectStatus page_status(PageId page) const;
  ObjectStatus slot_status(SlotId slot) const;
  std::uint64_t live_nodes() const;
  // Recomputes every counter and position user count from scratch; throws Api on a mismatch.
  void check_invariants() const;

 private:
  friend class Host;
  explicit Pool(detail::CoreRef core) : core_(std::move(core)) {}
  static void seal(detail::PoolCore& c, Lease& lease, std::uint64_t upto);
  // A lease sharing the first len/unit nodes of `chain` (root first), then `fresh` pages.
  // restore / fork of a slot-only holder: a fresh slot, a copy from `src`, no pages.
  Granted<std::pair<Lease, DeviceCopies>> slot_only_copy(SlotId src, std::uint64_t len);
  Lease start_lease(const std::vector<std::uint32_t>& chain, std::uint64_t len, std::vector<PageId> fresh,
                    std::optional<SlotId> slot);
  detail::CoreRef core_;
};

}  // namespace kern::pool
