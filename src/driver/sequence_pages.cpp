#include "kern/driver/sequence_pages.hpp"

#include <algorithm>

#include "kern/base/error.hpp"
#include "kern/core/pages.hpp"

namespace kern::driver {

SequencePages::SequencePages(const std::vector<core::PageTable>& tables, std::uint64_t capacity_tokens)
    : tables_(tables) {
  for (const core::PageTable& t : tables_)
    if (t.stride == 0 || t.width == 0)
      fail(ErrorKind::Manifest, "page table {}: stride {} and width {} must be positive", t.buffer, t.stride, t.width);
  unit_ = core::page_unit(tables_);
  if (unit_ > (1ull << 32)) fail(ErrorKind::Manifest, "page tables: page unit {} is too large", unit_);
  const std::optional<std::uint64_t> reach = core::row_pages(tables_, unit_);
  unlimited_rows_ = !reach;
  row_pages_ = reach.value_or(0);
  if (!tables_.empty() && capacity_tokens == 0)
    fail(ErrorKind::Api, "the manifest has paged states: a token capacity is needed");
  total_pages_ = capacity_tokens / unit_;
}

std::uint64_t SequencePages::max_tokens() const {
  const std::uint64_t pages = unlimited_rows_ ? total_pages_ : std::min(total_pages_, row_pages_);
  return pages * unit_;
}

std::uint64_t SequencePages::reserve(std::uint64_t tokens) {
  if (tokens > max_tokens()) {
    if (!unlimited_rows_ && row_pages_ < total_pages_)
      fail(ErrorKind::Api, "{} positions do not fit one page-table row ({} pages of {} tokens = {} positions)", tokens,
           row_pages_, unit_, row_pages_ * unit_);
    fail(ErrorKind::Api, "{} positions do not fit the KV capacity of {} tokens ({} pages of {})", tokens,
         total_pages_ * unit_, total_pages_, unit_);
  }
  const std::uint64_t need = (tokens + unit_ - 1) / unit_;
  std::uint64_t added = 0;
  while (pages_.size() < need) {
    pages_.push_back(pages_.size());  // one sequence: pages in ascending order from 0
    ++added;
  }
  return added;
}

std::uint64_t SequencePages::slot(std::uint64_t pos) const {
  const std::uint64_t page = pos / unit_;
  if (page >= pages_.size())
    fail(ErrorKind::Api, "position {} has no page ({} pages of {} held)", pos, pages_.size(), unit_);
  return pages_[page] * unit_ + pos % unit_;
}

std::vector<std::int64_t> SequencePages::row(std::size_t t) const {
  const core::PageTable& table = tables_.at(t);
  const std::uint64_t per_page = unit_ / table.stride;
  std::vector<std::int64_t> out;
  out.reserve(std::min<std::uint64_t>(pages_.size() * per_page, table.width));
  for (std::uint64_t page : pages_)
    for (std::uint64_t k = 0; k < per_page && out.size() < table.width; ++k)
      out.push_back(static_cast<std::int64_t>(page * per_page + k));
  return out;
}

}  // namespace kern::driver
