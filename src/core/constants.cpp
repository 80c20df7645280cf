// Manifest `constants` (wire-only): name -> numeric literal.
//
// Rules: names are non-empty; values are JSON numbers only (integer or float; no strings, so a
// constant can never name another constant or an expression); a name must not also be a var
// (checked by the parser once `vars` is read, error at `constants.<name>`). Duplicate names are
// caught by the strict JSON reader before anything else. Constants are resolved while the typed
// walk reads each value (no rewritten JSON copy); the typed Manifest only holds resolved numbers.
//
// Where a constant's name may stand in for a number (every numeric position except
// `schema_version`):
//   vars.<v>.max
//   topology.groups.<g>; cut.stage, cut.stages
//   states.<s>.bytes_per_token / bytes_per_seq / bytes; states.<s>.host.shape[i] / strides[i]
//   buffers.<b>.shape[i]                (a string is a constant if one has that name, else a var)
//   buffers.<b>.domain.min / max        (constant first, else an expression over vars; an integer
//                                        constant gives an Int bound, a float one a Float bound)
//   buffers.<b>.domain.stride
//   buffers.<b>.bind[i].rows / cols     (both ends of [a, b], and each per-rank [a, b])
//   buffers.<b>.bind[i].interleave.rows
//   ops.<o>.impl.scratch.<s>.shape[i]   (as buffer shapes)
//   launches[i].block[j], cluster[j]; grid[j] and shared_mem (expressions)
//   launches[i].when.min / max; launches[i].algo.<field>
//   launch args: {"param": i}, {"i32"|"i64"|"f32"|"u8": C}
//   pack: size; fields[i].at / width / param; literal fields; {"expr": ...};
//         tensormap param / dims / strides / box / swizzle / l2_promotion
//   programs.<p>.batch.groups; batch.rows (constant first, else a var)
//   call args: {"buf"|"state": .., "offset": C}, {"expr": ...}, {"i32"|"i64"|"f32"|"u8": C}
//   every expression leaf, and the u64 operand of ceil_div / mul
// An expression leaf that is a string is a constant if one has that name, else a var reference.
// In a purely numeric position (not an expression, shape entry or batch.rows) a string that
// names no constant is an error ("unknown constant").
// Positions that hold names are never constants: model, var/buffer/state/op/module/scratch/group
// names, entry, label, batch.span / batch.context / batch.decode, when.var, {"var": name} args and pack fields,
// and the param-type strings (the N of bytes<N> is always a literal).
#include "manifest_wire.hpp"

namespace kern::core::wire {

Constants Constants::read(const Node& node) {
  expect_object(node, "constants map");
  Constants c;
  const Json& o = node.json();
  for (auto it = o.begin(); it != o.end(); ++it) {
    const std::string& name = it.key();
    Node entry = node.member(name, it.value());
    if (name.empty()) entry.fail("a constant name must not be empty");
    if (!it.value().is_number())
      entry.fail(
          "a constant's value must be a number (constants cannot name other constants or hold expressions), got {}",
          json_type_name(it.value()));
    c.values_.emplace(name, read_number(entry, "a number"));
  }
  return c;
}

const Number* Constants::find(std::string_view name) const {
  if (values_.empty()) return nullptr;
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

}  // namespace kern::core::wire
