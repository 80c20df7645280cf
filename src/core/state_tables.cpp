// Which inputs index which state (the tables of kern/core/state_tables.hpp).
#include "kern/core/state_tables.hpp"

#include "kern/base/json.hpp"

namespace kern::core {
namespace {

// A dim's extent with every var at its max (0 for a var the manifest does not declare: the
// verifier reports that one).
std::uint64_t extent_at_max(const Manifest& m, const Dim& d) {
  if (!d.is_var()) return d.value;
  auto it = m.vars.find(d.var);
  return it == m.vars.end() ? 0 : it->second.max;
}

std::string buffer_path(const std::string& name) { return json_path_key("buffers", name); }

void add_page_table(const Manifest& m, const std::string& name, const Buffer& b, const std::string& state,
                    StateTables& out) {
  PageTable t{name, state, b.dtype, b.domain->index_into->stride, 1, {}};
  if (!b.shape.empty()) {
    t.axis = b.shape[0].var;
    if (b.shape.size() > 1) t.width = extent_at_max(m, b.shape.back());
  }
  if (b.shape.size() > 2)
    out.violations.push_back(
        {json_path_key(buffer_path(name), "shape"), "P.table_shape", "a page table is [seqs] or [seqs, entries]"});
  out.page_tables.push_back(std::move(t));
}

void add_line_table(const std::string& name, const Buffer& b, const std::string& state, const State& s,
                    StateTables& out) {
  const std::uint64_t stride = b.domain->index_into->stride;
  LineTable t{name, state, b.dtype, stride, stride ? s.bytes_per_seq / stride : 0, b.shape};
  if (stride == 0 || s.bytes_per_seq % stride != 0)
    out.violations.push_back({json_path_key(json_path_key(buffer_path(name), "domain"), "stride"), "P.table_shape",
                              "line stride must divide the state's bytes_per_seq"});
  if (b.shape.empty() || b.shape.size() > 3)
    out.violations.push_back({json_path_key(buffer_path(name), "shape"), "P.table_shape",
                              "a line table is [lines], [lines, seqs] or [lines, seqs, w]"});
  out.line_tables.push_back(std::move(t));
}

}  // namespace

StateTables state_tables(const Manifest& m) {
  StateTables out;
  for (const auto& [name, b] : m.buffers) {
    if (b.kind != BufferKind::Input || !b.domain || !b.domain->index_into) continue;
    if (b.fill && *b.fill != Fill::Slot) continue;
    auto st = m.states.find(b.domain->index_into->target);
    if (st == m.states.end()) continue;  // indexes a buffer (an embedding row, a rope table)
    if (b.fill) {
      out.slot_fills.push_back(SlotFill{name, st->first, b.dtype, b.domain->index_into->stride});
      continue;
    }
    const State& s = st->second;
    if (s.bytes_per_token != 0)
      add_page_table(m, name, b, st->first, out);
    else if (s.bytes_per_seq != 0)
      add_line_table(name, b, st->first, s, out);
  }
  return out;
}

}  // namespace kern::core
