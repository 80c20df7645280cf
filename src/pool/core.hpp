// The pool's bookkeeping, shared by the Pool and every handle through an intrusive count.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <vector>

#include "kern/base/error.hpp"
#include "kern/pool/denied.hpp"
#include "kern/pool/layout.hpp"
#include "kern/pool/plans.hpp"
#include "kern/pool/pool.hpp"
#include "pool/chunk_map.hpp"
#include "pool/free_list.hpp"

namespace kern::pool::detail {

inline std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return a / b + (a % b != 0); }

// Status of every page (or slot) id, with its free and absent sets and counters kept at the
// one status setter (scanning for them costs milliseconds per step at 1M tokens).
class ObjectTable {
 public:
  void init(std::uint64_t max) {
    status_.assign(max, ObjectStatus::Absent);
    free_.clear();
    absent_.clear();
    for (std::uint32_t i = 0; i < max; ++i) absent_.insert(absent_.end(), i);
    live_ = held_ = 0;
  }
  void set(std::uint32_t id, ObjectStatus s);
  ObjectStatus status(std::uint32_t id) const { return status_[id]; }
  std::uint64_t max() const { return status_.size(); }
  std::uint64_t live() const { return live_; }  // Free or Held
  std::uint64_t held() const { return held_; }
  const std::set<std::uint32_t>& free() const { return free_; }
  const std::set<std::uint32_t>& absent() const { return absent_; }

 private:
  std::vector<ObjectStatus> status_;
  std::set<std::uint32_t> free_, absent_;
  std::uint64_t live_ = 0, held_ = 0;
};

struct Twin {              // weak reference to a host copy of a device page
  std::uint64_t host = 0;  // Host id, 0 = none
  std::uint32_t node = 0;
  std::uint32_t gen = 0;
};

struct Node {  // one frozen device page of a chain
  PageId page = 0;
  std::uint32_t parent = kNoNode;
  std::uint32_t refs = 0;  // children + handles
  Twin twin;
};

struct Taken {
  std::vector<PageId> pages;
  std::optional<SlotId> slot;
};

struct PoolCore {
  std::uint32_t refs = 1;
  PoolLayout layout;
  std::uint64_t unit = 1, row_pages = 0;
  bool has_paged = false, has_seq = false;
  std::uint32_t page_arenas = 0, slot_arenas = 0;
  ChunkMap chunks;
  ObjectTable pages, slots;
  std::vector<std::uint32_t> slot_refs;
  Chains<Node> nodes;
  std::optional<Remap> pending;
  std::optional<std::uint64_t> in_flight;
  std::uint64_t next_plan = 1, remapped = 0;

  // ---- sizing
  std::uint64_t page_chunks(std::uint64_t pages) const;  // chunks of n pages laid from 0
  std::uint64_t slot_chunks(std::uint64_t slots) const;
  bool fits(std::uint64_t total_pages, bool need_slot) const;

  // ---- objects
  // All-or-nothing: the lowest free pages and (need_slot) the lowest free slot, now Held.
  Granted<Taken> take(std::uint64_t fresh_pages, bool need_slot);
  // take() of the fresh pages that make a row of `held` pages hold `tokens`, and (take_slot) a
  // slot; first ExceedsRow past one page-table row, ExceedsPool when no layout of the budget
  // holds the whole row (with a slot when with_slot).
  Granted<Taken> take_row(std::uint64_t tokens, std::uint64_t held, bool with_slot, bool take_slot);
  void give_page(PageId page);
  void retain_slot(SlotId slot) { ++slot_refs[slot]; }
  void release_slot(SlotId slot);
  bool anything_held() const { return pages.held() > 0 || slots.held() > (has_seq ? 1u : 0u); }

  // ---- nodes
  std::uint32_t make_node(PageId page, std::uint32_t parent);  // refs = 1, parent gains a ref
  void release_node(std::uint32_t n);                          // a freed node's page is given back

  // ---- remaps
  bool plan_rebalance(std::uint64_t fresh_pages, bool need_slot);

  // ---- layout lookups
  const PoolLayout::PageTable& page_table(std::string_view name) const;
  const PoolLayout::LineTable& line_table(std::string_view name) const;
};

inline PoolCore* core_of(const CoreRef& r) { return r.get(); }

// A stored prefix of `stored` tokens (a checkpoint, a parked store) resumes (restore, wake) at `len`:
// exactly its length when `exact` (it holds per-seq state), else its length or a whole number of
// pages of `unit` tokens below it. `who`, `store` and `verb` name the call in the Api error.
inline void check_resume_len(std::uint64_t len, std::uint64_t stored, std::uint64_t unit, bool exact, const char* who,
                             const char* store, const char* verb) {
  if (exact) {
    if (len != stored)
      fail(ErrorKind::Api, "{}: a {} with per-seq state {}s only at its length {}, not {}", who, store, verb, stored,
           len);
  } else if (len == 0 || len > stored || (len != stored && len % unit != 0)) {
    fail(ErrorKind::Api, "{}: {} at {} of a {} of {}: must be its length or a whole page below it", who, verb, len,
         store, stored);
  }
}

}  // namespace kern::pool::detail
