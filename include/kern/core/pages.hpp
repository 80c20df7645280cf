// The page-unit rule, the one every layer that pages a state follows (the pool, the driver's
// single-sequence pages, kern run's capacity): a page is `page_unit` tokens, the lcm of the page
// tables' strides (tokens per entry), so that one page is a whole number of entries of every
// table (a 16-token draft table and a 784-token target table share one page). A table is anything
// with `stride` and `width` (entries per row): core::PageTable, pool::PoolLayout::PageTable.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

namespace kern::core {

// lcm(unit, stride); a stride of 0 (rejected where tables are validated) leaves the unit as it is.
// Error(Manifest) when the lcm overflows 64 bits.
std::uint64_t page_unit_with(std::uint64_t unit, std::uint64_t stride);

// The lcm of every table's stride; 1 without tables.
template <class Tables>
std::uint64_t page_unit(const Tables& tables) {
  std::uint64_t unit = 1;
  for (const auto& t : tables) unit = page_unit_with(unit, t.stride);
  return unit;
}

// Whole pages of `unit` tokens one row of every table can list: the min over tables of
// floor(width * stride / unit); nullopt without tables (no row limit).
template <class Tables>
std::optional<std::uint64_t> row_pages(const Tables& tables, std::uint64_t unit) {
  std::optional<std::uint64_t> pages;
  for (const auto& t : tables) pages = std::min(pages.value_or(UINT64_MAX), t.width * t.stride / unit);
  return pages;
}

}  // namespace kern::core
