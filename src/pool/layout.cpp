#include "kern/pool/layout.hpp"

#include <algorithm>
#include <limits>
#include <set>

#include "kern/base/error.hpp"
#include "kern/core/pages.hpp"
#include "pool/core.hpp"

namespace kern::pool {
namespace {

const PoolLayout::PagedState* find_paged(const PoolLayout& l, const std::string& name) {
  for (const auto& s : l.paged)
    if (s.name == name) return &s;
  return nullptr;
}
const PoolLayout::SeqState* find_seq(const PoolLayout& l, const std::string& name) {
  for (const auto& s : l.per_seq)
    if (s.name == name) return &s;
  return nullptr;
}

std::uint64_t mul_checked(std::uint64_t a, std::uint64_t b, const char* what) {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a)
    fail(ErrorKind::Manifest, "pool layout: {} overflows 64 bits", what);
  return a * b;
}

}  // namespace

void PoolLayout::validate() const {
  if (paged.empty() && per_seq.empty()) fail(ErrorKind::Manifest, "pool layout: no pooled state");
  std::set<std::string> names;
  for (const auto& s : paged) {
    if (s.name.empty()) fail(ErrorKind::Manifest, "pool layout: paged state with an empty name");
    if (s.bytes_per_token == 0)
      fail(ErrorKind::Manifest, "pool layout: paged state '{}' has bytes_per_token 0", s.name);
    if (!names.insert(s.name).second) fail(ErrorKind::Manifest, "pool layout: state '{}' listed twice", s.name);
  }
  for (const auto& s : per_seq) {
    if (s.name.empty()) fail(ErrorKind::Manifest, "pool layout: per-seq state with an empty name");
    if (s.bytes_per_seq == 0) fail(ErrorKind::Manifest, "pool layout: per-seq state '{}' has bytes_per_seq 0", s.name);
    if (!names.insert(s.name).second)
      fail(ErrorKind::Manifest, "pool layout: state '{}' mixes per-token and per-seq sizes (listed in both)", s.name);
  }
  std::set<std::string> tables;
  for (const auto& t : page_tables) {
    if (!tables.insert(t.name).second) fail(ErrorKind::Manifest, "pool layout: table '{}' listed twice", t.name);
    if (!find_paged(*this, t.state)) {
      if (find_seq(*this, t.state))
        fail(ErrorKind::Manifest, "pool layout: page table '{}' indexes per-seq state '{}'", t.name, t.state);
      fail(ErrorKind::Manifest, "pool layout: page table '{}' indexes unknown state '{}'", t.name, t.state);
    }
    if (t.stride == 0) fail(ErrorKind::Manifest, "pool layout: page table '{}' has stride 0", t.name);
    if (t.width == 0) fail(ErrorKind::Manifest, "pool layout: page table '{}' has width 0", t.name);
    mul_checked(t.width, t.stride, "page table width * stride");
  }
  for (const auto& t : line_tables) {
    if (!tables.insert(t.name).second) fail(ErrorKind::Manifest, "pool layout: table '{}' listed twice", t.name);
    const SeqState* s = find_seq(*this, t.state);
    if (!s) {
      if (find_paged(*this, t.state))
        fail(ErrorKind::Manifest, "pool layout: line table '{}' indexes paged state '{}'", t.name, t.state);
      fail(ErrorKind::Manifest, "pool layout: line table '{}' indexes unknown state '{}'", t.name, t.state);
    }
    if (t.stride == 0) fail(ErrorKind::Manifest, "pool layout: line table '{}' has stride 0", t.name);
    if (s->bytes_per_seq % t.stride != 0)
      fail(ErrorKind::Manifest, "pool layout: line table '{}' stride {} does not divide bytes_per_seq {} of '{}'",
           t.name, t.stride, s->bytes_per_seq, s->name);
    if (t.rows == 0) fail(ErrorKind::Manifest, "pool layout: line table '{}' has 0 rows", t.name);
    const std::uint64_t lines = s->bytes_per_seq / t.stride;
    if (t.rows > lines && lines != 1)
      fail(ErrorKind::Manifest,
           "pool layout: line table '{}' names {} rows but a slot of '{}' has {} lines (more rows are allowed "
           "only with one line per slot)",
           t.name, t.rows, s->name, lines);
    if (t.seq_width == 0) fail(ErrorKind::Manifest, "pool layout: line table '{}' has seq_width 0", t.name);
  }
  const std::uint64_t u = unit();
  for (const auto& s : paged) mul_checked(u, s.bytes_per_token, "page bytes");
  const std::optional<std::uint64_t> row = row_pages();  // nullopt without page tables: no row limit
  if (!paged.empty() && row && *row == 0)
    fail(ErrorKind::Manifest, "pool layout: the narrowest page-table row holds less than one page of {} tokens", u);
}

std::uint64_t PoolLayout::unit() const { return core::page_unit(page_tables); }

std::optional<std::uint64_t> PoolLayout::row_pages() const { return core::row_pages(page_tables, unit()); }

std::uint64_t PoolLayout::bytes_per_token() const {
  std::uint64_t sum = 0;
  for (const auto& s : paged) sum += s.bytes_per_token;
  return sum;
}

std::uint64_t PoolLayout::bytes_per_seq() const {
  std::uint64_t sum = 0;
  for (const auto& s : per_seq) sum += s.bytes_per_seq;
  return sum;
}

std::uint64_t PoolLayout::lines_per_slot(const LineTable& table) const {
  const SeqState* s = find_seq(*this, table.state);
  if (!s || table.stride == 0) fail(ErrorKind::Api, "pool layout: line table '{}' is not valid", table.name);
  return s->bytes_per_seq / table.stride;
}

std::uint64_t chunk_bytes_for(const PoolLayout& layout, std::uint64_t granule, std::uint64_t cap) {
  if (granule == 0 || cap < granule || cap % granule != 0)
    fail(ErrorKind::Api, "chunk_bytes_for: cap {} must be a non-zero multiple of granule {}", cap, granule);
  const std::uint64_t u = layout.unit();
  std::uint64_t smallest = std::numeric_limits<std::uint64_t>::max();
  for (const auto& s : layout.paged) smallest = std::min(smallest, u * s.bytes_per_token);
  for (const auto& s : layout.per_seq) smallest = std::min(smallest, s.bytes_per_seq);
  if (smallest < 2 * granule) return cap;
  return std::min(cap, (smallest / 2) / granule * granule);
}

std::uint64_t chunks_for(const PoolLayout& layout, std::uint64_t chunk_bytes, std::uint64_t tokens,
                         std::uint64_t slots) {
  if (chunk_bytes == 0) fail(ErrorKind::Api, "chunks_for: chunk_bytes is 0");
  const std::uint64_t u = layout.unit();
  const std::uint64_t pages = tokens / u;
  std::uint64_t chunks = 0;
  for (const auto& s : layout.paged)
    chunks += detail::ceil_div(mul_checked(pages, u * s.bytes_per_token, "token budget"), chunk_bytes);
  for (const auto& s : layout.per_seq)
    chunks += detail::ceil_div(mul_checked(slots, s.bytes_per_seq, "slot budget"), chunk_bytes);
  return chunks;
}

}  // namespace kern::pool
