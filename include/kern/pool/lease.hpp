// Lease: the only writer. Owns its fresh pages and its slot, holds the sealed (shared, frozen)
// prefix of its page chain, and answers where each position lives.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "kern/pool/core_ref.hpp"
#include "kern/pool/plans.hpp"

namespace kern::pool {

class Lease {
 public:
  Lease() = default;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  Lease(Lease&& o) noexcept;
  Lease& operator=(Lease&& o) noexcept;
  ~Lease();

  bool valid() const { return static_cast<bool>(core_); }
  bool paged() const { return paged_; }  // false for a slot-only lease
  std::uint64_t unit() const { return unit_; }
  // Positions [0, prefix) came from a checkpoint or parent and are never written by this lease.
  std::uint64_t prefix() const { return prefix_; }
  // Pages [0, shared) are sealed into the chain: frozen, never written again.
  std::uint64_t shared() const { return shared_; }
  std::uint64_t capacity() const { return pages_.size() * unit_; }  // tokens the pages hold
  // One past the highest position handed out for writing (at least prefix()); a stateful
  // checkpoint or fork is only possible here. advance() moves it for writes made through rows.
  std::uint64_t position() const { return position_; }
  void advance(std::uint64_t position);

  std::span<const PageId> page_ids() const { return pages_; }  // observation only
  std::optional<SlotId> seq_slot() const { return slot_; }

  // Token slot of `pos` in every paged state: page * unit + pos % unit. Refuses (Api error)
  // positions below prefix(), inside sealed pages, or beyond capacity().
  std::uint64_t slot(std::uint64_t pos);
  // Token slots of positions [first, first + count), same checks.
  std::vector<std::uint64_t> slots(std::uint64_t first, std::uint64_t count);

  // Fills a page-table row: for page i, entries page*(unit/stride) + k for k < unit/stride.
  // Writes entries from `filled` to the end of the pages; when filled == 0 also pads the rest
  // of the row with the first entry (in-domain, never dereferenced). Returns entries written.
  std::size_t extend_row(std::string_view table, std::span<std::int64_t> row, std::size_t filled = 0) const;
  // Line-table entry for row r: slot * lines_per_slot + r % lines_per_slot.
  std::uint64_t seq_line(std::string_view table, std::uint64_t r) const;
  std::vector<std::uint64_t> seq_lines(std::string_view table) const;  // every row
  std::uint64_t seq_width(std::string_view table) const;

 private:
  friend class Pool;
  friend class Host;
  detail::CoreRef core_;
  std::vector<PageId> pages_;         // chain pages first, then own pages
  std::vector<std::uint32_t> nodes_;  // chain nodes of pages [0, shared_)
  std::uint64_t shared_ = 0;
  std::optional<SlotId> slot_;
  std::uint64_t prefix_ = 0;
  std::uint64_t position_ = 0;
  std::uint64_t unit_ = 1;
  bool paged_ = false;
  void reset() noexcept;
  void check_write(std::uint64_t pos) const;
};

}  // namespace kern::pool
