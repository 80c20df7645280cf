// The pages of one sequence: the single place its page-table rows and token slots come from.
//
// A tiny allocator for kern run's one sequence over the runtime's contiguous paged states: the
// page unit is the lcm of the page tables' strides, pages are handed out in ascending order
// from page 0, a position's token slot is page * unit + pos % unit, and a page-table row lists
// page * (unit / stride) + k for each held page (k < unit / stride).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kern/core/protocol.hpp"

namespace kern::driver {

class SequencePages {
 public:
  // Error(Manifest) for a table with zero stride or width; capacity_tokens may be 0 only when
  // there are no page tables.
  SequencePages(const std::vector<core::PageTable>& tables, std::uint64_t capacity_tokens);

  std::uint64_t unit() const { return unit_; }
  std::uint64_t total_pages() const { return total_pages_; }  // capacity_tokens / unit
  std::uint64_t row_pages() const { return row_pages_; }      // pages one table row can list
  // Positions one sequence can hold: min(total_pages, row_pages) * unit (capacity when no tables).
  std::uint64_t max_tokens() const;

  void clear() { pages_.clear(); }
  // Holds pages for positions [0, tokens); returns the pages added. Error(Api) past max_tokens().
  std::uint64_t reserve(std::uint64_t tokens);
  std::uint64_t held_tokens() const { return pages_.size() * unit_; }
  std::span<const std::uint64_t> pages() const { return pages_; }

  // Token slot of a held position; Error(Api) for a position without a page.
  std::uint64_t slot(std::uint64_t pos) const;
  // The entries of table `t`'s row for the held pages (a prefix of the row).
  std::vector<std::int64_t> row(std::size_t t) const;

 private:
  std::vector<core::PageTable> tables_;
  std::uint64_t unit_ = 1;
  std::uint64_t total_pages_ = 0;
  std::uint64_t row_pages_ = 0;
  bool unlimited_rows_ = true;
  std::vector<std::uint64_t> pages_;
};

}  // namespace kern::driver
