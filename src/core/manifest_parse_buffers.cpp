// The typed walk of buffers: kind, placement, fill, domain and the v5 bind segment grammar.
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include "manifest_wire.hpp"

namespace kern::core::wire {

namespace {

BufferKind read_buffer_kind(const Node& n) {
  return read_named(n, buffer_kind_from_string, "buffer kind",
                    "expected one of input, output, weight, source, workspace, carry, peer");
}

Placement read_placement(const Node& n) {
  return read_named(n, placement_from_string, "placement", "expected device or host");
}

Fill read_fill(const Node& n) {
  return read_named(
      n, fill_from_string, "fill role",
      "expected one of token, position, valid, slot, seq_len, cu_seqlens, span_at, blocks, tokens, count, "
      "error, clock");
}

Bound bound_of(const Number& x) {
  Bound b;
  switch (x.kind) {
    case Number::Kind::Unsigned:
      if (x.u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        b.kind = Bound::Kind::Expr;  // beyond i64: kept exact as a constant expression
        b.expr = Expr::constant(x.u);
      } else {
        b.kind = Bound::Kind::Int;
        b.i = static_cast<std::int64_t>(x.u);
      }
      break;
    case Number::Kind::Negative:
      b.kind = Bound::Kind::Int;
      b.i = x.i;
      break;
    case Number::Kind::Float:
      b.kind = Bound::Kind::Float;
      b.f = x.f;
      break;
  }
  return b;
}

Bound read_bound(const Node& n) {
  const Json& j = n.json();
  if (j.is_number()) return bound_of(read_number(n, "a number"));
  if (j.is_string() && n.constants().find(j.get_ref<const std::string&>()) != nullptr)
    return bound_of(read_number(n, "a number"));
  if (j.is_string() || j.is_object()) {
    Bound b;
    b.kind = Bound::Kind::Expr;
    b.expr = read_expr(n);
    return b;
  }
  n.fail("expected an integer, a float, a var name or an expression object, got {}", json_type_name(j));
}

Domain read_domain(const Node& n) {
  Object o(n, "domain", {"min", "max", "index_into", "stride", "monotone"});
  Domain d;
  if (auto f = o.optional("min")) d.min = read_bound(*f);
  if (auto f = o.optional("max")) d.max = read_bound(*f);
  if (auto f = o.optional("index_into")) d.index_into = IndexInto{read_string(*f), 1};
  if (auto f = o.optional("stride")) {
    if (!d.index_into) f->fail("\"stride\" is only allowed together with \"index_into\"");
    d.index_into->stride = read_u64(*f);
  }
  if (auto f = o.optional("monotone")) d.monotone = read_bool(*f);
  return d;
}

// The {"group": g, <list>: [one per rank]} form of a rank-selected tensor or range: sets `group`
// (not empty) and returns the list, each entry read by `read_one`.
template <typename F>
auto read_rank_selected(const Node& n, std::string_view what, std::string_view list, std::string& group, F&& read_one) {
  Object o(n, what, {"group", list});
  group = read_string(o.required("group"));
  if (group.empty()) o.required("group").fail("group name must not be empty");
  return read_array(o.required(list), std::forward<F>(read_one));
}

TensorRef read_tensor_ref(const Node& n) {
  TensorRef t;
  if (n.json().is_string()) {
    t.name = n.json().get_ref<const std::string&>();
    return t;
  }
  if (!n.json().is_object())
    n.fail("expected a tensor name or {{\"group\": g, \"tensors\": [name per rank]}}, got {}",
           json_type_name(n.json()));
  t.per_rank =
      read_rank_selected(n, "rank-selected tensor", "tensors", t.group, [](const Node& e) { return read_string(e); });
  return t;
}

Range read_range(const Node& n) {
  expect_array(n);
  if (n.json().size() != 2) n.fail("expected a range [from, to], got {} entries", n.json().size());
  return Range{read_u64(n.element(0, n.json()[0])), read_u64(n.element(1, n.json()[1]))};
}

RangeRef read_range_ref(const Node& n) {
  RangeRef r;
  if (n.json().is_array()) {
    r.single = read_range(n);
    return r;
  }
  if (!n.json().is_object())
    n.fail("expected a range [from, to] or {{\"group\": g, \"ranges\": [[from, to] per rank]}}, got {}",
           json_type_name(n.json()));
  r.per_rank = read_rank_selected(n, "rank-selected range", "ranges", r.group, read_range);
  return r;
}

Interleave read_interleave(const Node& n) {
  Object o(n, "interleave", {"with", "rows"});
  Interleave i;
  i.with = read_tensor_ref(o.required("with"));
  i.rows = read_u64(o.required("rows"));
  return i;
}

BindSegment read_bind_segment(const Node& n) {
  Object o(n, "bind segment", {"tensor", "rows", "cols", "interleave"});
  BindSegment s;
  s.tensor = read_tensor_ref(o.required("tensor"));
  if (auto f = o.optional("rows")) s.rows = read_range_ref(*f);
  if (auto f = o.optional("cols")) s.cols = read_range_ref(*f);
  if (auto f = o.optional("interleave")) s.interleave = read_interleave(*f);
  return s;
}

}  // namespace

namespace {
// `of` / `group`: present means non-empty (the typed model uses empty for absent).
std::string read_var_name_like(const Node& n, std::string_view field) {
  std::string s = read_string(n);
  if (s.empty()) n.fail("{} must not be empty", field);
  return s;
}
}  // namespace

Buffer read_buffer(const Node& n) {
  Object o(n, "buffer", {"dtype", "shape", "kind", "placement", "fill", "domain", "export", "of", "group", "bind"});
  Buffer b;
  b.dtype = read_dtype(o.required("dtype"));
  b.shape = read_shape(o.required("shape"));
  b.kind = read_buffer_kind(o.required("kind"));
  if (auto f = o.optional("placement")) b.placement = read_placement(*f);
  if (auto f = o.optional("fill")) b.fill = read_fill(*f);
  if (auto f = o.optional("domain")) b.domain = read_domain(*f);
  if (auto f = o.optional("export")) b.exported = read_bool(*f);
  if (auto f = o.optional("of")) b.of = read_var_name_like(*f, "\"of\"");
  if (auto f = o.optional("group")) b.group = read_var_name_like(*f, "\"group\"");
  if (auto f = o.optional("bind")) b.bind = read_array(*f, read_bind_segment);
  return b;
}

}  // namespace kern::core::wire
