// The typed walk of programs: batch, flags, calls and the untagged call args.
#include "manifest_wire.hpp"

namespace kern::core::wire {

namespace {

Batch read_batch(const Node& n) {
  Object o(n, "batch", {"groups", "rows", "span", "context", "decode", "packed"});
  Batch b;
  b.groups = read_u64(o.required("groups"));
  b.rows = read_dim(o.required("rows"));
  if (auto f = o.optional("span")) b.span = read_var_name(*f);
  if (auto f = o.optional("context")) b.context = read_var_name(*f);
  if (auto f = o.optional("decode")) b.decode = read_var_name(*f);
  if (auto f = o.optional("packed")) b.packed = read_bool(*f);
  return b;
}

CallArg read_call_arg(const Node& n) {
  std::string_view tag =
      untagged_form(n, "call arg", {"buf", "state", "var", "expr", "i32", "i64", "f32", "u8", "rank"});
  std::string what = fmt::format("\"{}\" call arg", tag);
  const bool has_offset = tag == "buf" || tag == "state";
  Object o = has_offset ? Object(n, what, {tag, "offset"}) : Object(n, what, {tag});
  Node src = o.required(tag);
  CallArg a;
  if (!read_shared_form(a, tag, src)) {
    a.kind = tag == "buf" ? CallArg::Kind::Buf : CallArg::Kind::State;
    a.name = read_string(src);
    if (auto f = o.optional("offset")) a.offset = read_u64(*f);
  }
  return a;
}

Call read_call(const Node& n) {
  Object o(n, "call", {"label", "op", "args"});
  Call c;
  if (auto f = o.optional("label")) c.label = read_string(*f);
  c.op = read_string(o.required("op"));
  c.args = read_array(o.required("args"), read_call_arg);
  return c;
}

}  // namespace

Program read_program(const Node& n) {
  Object o(n, "program", {"batch", "once", "derive", "graph", "calls"});
  Program p;
  if (auto f = o.optional("batch")) p.batch = read_batch(*f);
  if (auto f = o.optional("once")) p.once = read_bool(*f);
  if (auto f = o.optional("derive")) p.derive = read_bool(*f);
  if (auto f = o.optional("graph")) p.graph = read_bool(*f);
  p.calls = read_array(o.required("calls"), read_call);
  return p;
}

}  // namespace kern::core::wire
