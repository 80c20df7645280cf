// Checkpoint: a frozen prefix of a sequence on the device. It holds a chain of reference-counted
// page nodes (holding the tail holds the whole chain) and, with per-seq states, a slot.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kern/pool/core_ref.hpp"
#include "kern/pool/plans.hpp"

namespace kern::pool {

inline constexpr std::uint32_t kNoNode = 0xffffffffu;

namespace detail {
struct Handles;
}  // namespace detail

class Checkpoint {
 public:
  Checkpoint() = default;           // empty: names nothing
  Checkpoint(const Checkpoint& o);  // another holder of the same pages and slot
  Checkpoint(Checkpoint&& o) noexcept;
  Checkpoint& operator=(Checkpoint o) noexcept;
  ~Checkpoint();

  bool valid() const { return static_cast<bool>(core_); }
  std::uint64_t tokens() const { return len_; }        // the checkpoint's length
  bool has_slot() const { return slot_.has_value(); }  // usable only at exactly tokens()
  std::uint64_t pages() const { return pages_; }       // ceil(tokens / unit), 0 if slot-only
  std::optional<SlotId> seq_slot() const { return slot_; }
  // Observation only (tests, harnesses): the chain's pages, root first. O(pages).
  std::vector<PageId> page_ids() const;

 private:
  friend class Pool;
  friend class Host;
  friend struct detail::Handles;
  detail::CoreRef core_;
  std::uint32_t tail_ = kNoNode;
  std::uint64_t len_ = 0;
  std::uint64_t pages_ = 0;
  std::optional<SlotId> slot_;
  void reset() noexcept;
};

}  // namespace kern::pool
