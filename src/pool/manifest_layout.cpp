// The pool layout of a manifest (kern/pool/manifest_layout.hpp).
#include "kern/pool/manifest_layout.hpp"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "kern/base/error.hpp"
#include "kern/core/state_tables.hpp"

namespace kern::pool {
namespace {

// A dim's extent with every var at its max (0 for an undeclared var, which the verifier reports
// and validate() then refuses as 0 rows or seq_width 0).
std::uint64_t extent_at_max(const core::Manifest& m, const core::Dim& d) {
  if (!d.is_var()) return d.value;
  auto it = m.vars.find(d.var);
  return it == m.vars.end() ? 0 : it->second.max;
}

}  // namespace

PoolLayout layout_of(const core::Manifest& m) {
  const core::StateTables tables = core::state_tables(m);
  if (!tables.violations.empty()) {
    const std::size_t n = tables.violations.size();
    std::vector<std::string> lines;
    for (const auto& v : tables.violations) lines.push_back(v.line());
    throw Error(ErrorKind::Manifest,
                fmt::format("pool layout: {} state table{} of an impossible shape", n, n == 1 ? "" : "s"),
                std::move(lines));
  }
  PoolLayout l;
  for (const auto& [name, s] : m.states) {
    if (s.bytes_per_token != 0) l.paged.push_back({name, s.bytes_per_token});
    if (s.bytes_per_seq != 0) l.per_seq.push_back({name, s.bytes_per_seq});
  }
  for (const auto& t : tables.page_tables) l.page_tables.push_back({t.buffer, t.state, t.stride, t.width});
  for (const auto& t : tables.line_tables) {
    // state_tables found no violation, so the shape has one to three dims.
    const std::uint64_t rows = extent_at_max(m, t.shape[0]);
    const std::uint64_t seq_width = t.shape.size() == 3 ? extent_at_max(m, t.shape[2]) : 1;
    l.line_tables.push_back({t.buffer, t.state, t.stride, rows, seq_width});
  }
  return l;
}

}  // namespace kern::pool
