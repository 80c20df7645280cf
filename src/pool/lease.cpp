#include "kern/pool/lease.hpp"

#include <algorithm>

#include "kern/base/error.hpp"
#include "pool/core.hpp"

namespace kern::pool {

Lease::Lease(Lease&& o) noexcept
    : core_(std::move(o.core_)),
      pages_(std::move(o.pages_)),
      nodes_(std::move(o.nodes_)),
      shared_(std::exchange(o.shared_, 0)),
      slot_(std::exchange(o.slot_, std::nullopt)),
      prefix_(std::exchange(o.prefix_, 0)),
      position_(std::exchange(o.position_, 0)),
      unit_(o.unit_),
      paged_(std::exchange(o.paged_, false)) {
  o.pages_.clear();
  o.nodes_.clear();
}

Lease& Lease::operator=(Lease&& o) noexcept {
  if (this != &o) {
    reset();
    core_ = std::move(o.core_);
    pages_ = std::move(o.pages_);
    nodes_ = std::move(o.nodes_);
    shared_ = std::exchange(o.shared_, 0);
    slot_ = std::exchange(o.slot_, std::nullopt);
    prefix_ = std::exchange(o.prefix_, 0);
    position_ = std::exchange(o.position_, 0);
    unit_ = o.unit_;
    paged_ = std::exchange(o.paged_, false);
    o.pages_.clear();
    o.nodes_.clear();
  }
  return *this;
}

Lease::~Lease() { reset(); }

void Lease::reset() noexcept {
  if (core_) {
    detail::PoolCore& c = *core_.get();
    for (std::size_t i = shared_; i < pages_.size(); ++i) c.give_page(pages_[i]);
    if (!nodes_.empty()) c.release_node(nodes_.back());
    if (slot_) c.release_slot(*slot_);
  }
  core_ = detail::CoreRef();
  pages_.clear();
  nodes_.clear();
  shared_ = prefix_ = position_ = 0;
  slot_.reset();
  paged_ = false;
}

void Lease::advance(std::uint64_t position) {
  if (!core_) fail(ErrorKind::Api, "lease: advance() on an empty lease");
  if (paged_ && position > capacity())
    fail(ErrorKind::Api, "lease: advance({}) beyond the {} tokens held", position, capacity());
  position_ = std::max(position_, position);
}

void Lease::check_write(std::uint64_t pos) const {
  if (!core_) fail(ErrorKind::Api, "lease: slot() on an empty lease");
  if (!paged_) fail(ErrorKind::Api, "lease: slot({}) on a slot-only lease, which names no positions", pos);
  if (pos < prefix_)
    fail(ErrorKind::Api, "lease: position {} is below the prefix {} this lease started from", pos, prefix_);
  if (pos < shared_ * unit_)
    fail(ErrorKind::Api, "lease: position {} lies in sealed page {} (frozen by a checkpoint)", pos, pos / unit_);
  if (pos >= capacity()) fail(ErrorKind::Api, "lease: position {} is beyond the {} tokens held", pos, capacity());
}

std::uint64_t Lease::slot(std::uint64_t pos) {
  check_write(pos);
  position_ = std::max(position_, pos + 1);
  return static_cast<std::uint64_t>(pages_[pos / unit_]) * unit_ + pos % unit_;
}

std::vector<std::uint64_t> Lease::slots(std::uint64_t first, std::uint64_t count) {
  std::vector<std::uint64_t> out;
  if (count == 0) return out;
  check_write(first);
  check_write(first + count - 1);
  out.reserve(count);
  for (std::uint64_t p = first; p < first + count; ++p)
    out.push_back(static_cast<std::uint64_t>(pages_[p / unit_]) * unit_ + p % unit_);
  position_ = std::max(position_, first + count);
  return out;
}

std::size_t Lease::extend_row(std::string_view table, std::span<std::int64_t> row, std::size_t filled) const {
  if (!core_) fail(ErrorKind::Api, "lease: extend_row() on an empty lease");
  if (!paged_) fail(ErrorKind::Api, "lease: extend_row('{}') on a slot-only lease", table);
  const auto& t = core_.get()->page_table(table);
  const std::uint64_t per_page = unit_ / t.stride;
  const std::size_t n = pages_.size() * per_page;
  if (row.size() < n)
    fail(ErrorKind::Api, "lease: row of '{}' has {} entries, the lease needs {}", table, row.size(), n);
  if (filled > n)
    fail(ErrorKind::Api, "lease: extend_row('{}') from entry {} beyond the {} entries held", table, filled, n);
  for (std::size_t e = filled; e < n; ++e)
    row[e] = static_cast<std::int64_t>(pages_[e / per_page]) * static_cast<std::int64_t>(per_page) +
             static_cast<std::int64_t>(e % per_page);
  if (filled == 0 && n > 0) std::fill(row.begin() + static_cast<std::ptrdiff_t>(n), row.end(), row[0]);
  return n;
}

std::uint64_t Lease::seq_line(std::string_view table, std::uint64_t r) const {
  if (!core_) fail(ErrorKind::Api, "lease: seq_line() on an empty lease");
  const auto& c = *core_.get();
  const auto& t = c.line_table(table);
  if (r >= t.rows) fail(ErrorKind::Api, "lease: seq_line('{}', {}) but the table has {} rows", table, r, t.rows);
  if (!slot_) fail(ErrorKind::Api, "lease: seq_line('{}') on a lease without a slot", table);
  const std::uint64_t lines = c.layout.lines_per_slot(t);
  return static_cast<std::uint64_t>(*slot_) * lines + r % lines;
}

std::vector<std::uint64_t> Lease::seq_lines(std::string_view table) const {
  if (!core_) fail(ErrorKind::Api, "lease: seq_lines() on an empty lease");
  const auto& t = core_.get()->line_table(table);
  std::vector<std::uint64_t> out;
  for (std::uint64_t r = 0; r < t.rows; ++r) out.push_back(seq_line(table, r));
  return out;
}

std::uint64_t Lease::seq_width(std::string_view table) const {
  if (!core_) fail(ErrorKind::Api, "lease: seq_width() on an empty lease");
  return core_.get()->line_table(table).seq_width;
}

}  // namespace kern::pool
