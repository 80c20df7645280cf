// The typed walk of ops: params, impl scratch, kernel and extern launches, launch args,
// packs and tensormaps.
#include "manifest_wire.hpp"

namespace kern::core::wire {

namespace {

Tensormap read_tensormap(const Node& n) {
  Object o(n, "tensormap", {"param", "dtype", "dims", "strides", "box", "swizzle", "l2_promotion", "oob_nan", "wrap"});
  Tensormap t;
  t.param = read_u32(o.required("param"));
  t.dtype = read_named(o.required("dtype"), tma_dtype_from_string, "tensormap dtype",
                       "expected one of u8, u16, u32, i32, u64, i64, f16, bf16, f32, tf32, u4, u4packed");
  t.dims = read_u64_list(o.required("dims"));
  t.strides = read_u64_list(o.required("strides"));
  t.box = read_u64_list(o.required("box"));
  if (auto f = o.optional("swizzle")) t.swizzle = read_u32(*f);
  if (auto f = o.optional("l2_promotion")) t.l2_promotion = read_u32(*f);
  if (auto f = o.optional("oob_nan")) t.oob_nan = read_bool(*f);
  if (auto f = o.optional("wrap")) t.wrap = read_bool(*f);
  return t;
}

PackField read_pack_field(const Node& n) {
  std::string_view tag = untagged_form(
      n, "pack field", {"param", "scratch", "i32", "i64", "f32", "u8", "var", "expr", "rank", "tensormap"});
  std::string what = fmt::format("\"{}\" pack field", tag);
  Object o(n, what, {"at", "width", tag});
  PackField f;
  f.at = read_u64(o.required("at"));
  if (auto w = o.optional("width")) f.width = read_u64(*w);
  Node src = o.required(tag);
  if (!read_shared_form(f, tag, src)) {
    f.kind = PackField::Kind::Tensormap;
    f.tensormap = read_tensormap(src);
  }
  return f;
}

std::shared_ptr<const Pack> read_pack(const Node& n) {
  Object o(n, "pack", {"size", "fields"});
  auto p = std::make_shared<Pack>();
  p->size = read_u64(o.required("size"));
  p->fields = read_array(o.required("fields"), read_pack_field);
  return p;
}

LaunchArg read_launch_arg(const Node& n) {
  std::string_view tag =
      untagged_form(n, "launch arg", {"param", "scratch", "i32", "i64", "f32", "u8", "rank", "pack"});
  std::string what = fmt::format("\"{}\" launch arg", tag);
  Object o(n, what, {tag});
  Node src = o.required(tag);
  LaunchArg a;
  if (!read_shared_form(a, tag, src)) {
    a.kind = LaunchArg::Kind::Pack;
    a.pack = read_pack(src);
  }
  return a;
}

When read_when(const Node& n) {
  Object o(n, "when", {"var", "min", "max"});
  When w;
  w.var = read_var_name(o.required("var"));
  if (auto f = o.optional("min")) w.min = read_u64(*f);
  if (auto f = o.optional("max")) w.max = read_u64(*f);
  return w;
}

Algo read_algo(const Node& n) {
  Object o(n, "algo",
           {"id", "tile", "stages", "split_k", "reduction", "swizzle", "custom", "inner_shape", "cluster_shape"});
  Algo a;
  a.id = read_i64(o.required("id"));
  a.tile = read_i64(o.required("tile"));
  a.stages = read_i64(o.required("stages"));
  a.split_k = read_i64(o.required("split_k"));
  a.reduction = read_i64(o.required("reduction"));
  a.swizzle = read_i64(o.required("swizzle"));
  a.custom = read_i64(o.required("custom"));
  a.inner_shape = read_i64(o.required("inner_shape"));
  a.cluster_shape = read_i64(o.required("cluster_shape"));
  return a;
}

std::array<Expr, 3> read_grid(const Node& n) {
  expect_array(n);
  if (n.json().size() != 3) n.fail("expected an array of 3 expressions, got {} entries", n.json().size());
  std::array<Expr, 3> g;
  for (std::size_t i = 0; i < 3; ++i) g[i] = read_expr(n.element(i, n.json()[i]));
  return g;
}

std::vector<ParamType> read_params(const Node& n) { return read_array(n, read_param_type); }

// One field set for kernel and extern launches: which fields fit which kind (no geometry, pdl
// or cooperative on externs, algo only on externs, module iff kernel) is the verifier's (R6,
// R12), so those mistakes are reported together with every other violation. The parser requires `entry`, and
// `block` + `grid` when the entry is a kernel symbol (not "extern:<name>").
Launch read_launch(const Node& n) {
  Object o(n, "launch",
           {"module", "entry", "params", "block", "grid", "shared_mem", "cluster", "pdl", "cooperative", "when", "args",
            "algo", "algo_m", "algo_candidate", "algo_per_m"});
  Launch l;
  if (auto f = o.optional("module")) l.module = read_string(*f);
  l.entry = read_string(o.required("entry"));
  if (auto f = o.optional("params")) l.params = read_params(*f);
  if (l.is_extern()) {
    if (auto f = o.optional("block")) l.block = read_u32x3(*f);
    if (auto f = o.optional("grid")) l.grid = read_grid(*f);
  } else {
    l.block = read_u32x3(o.required("block"));
    l.grid = read_grid(o.required("grid"));
  }
  if (auto f = o.optional("shared_mem")) l.shared_mem = read_expr(*f);
  if (auto f = o.optional("cluster")) l.cluster = read_u32x3(*f);
  if (auto f = o.optional("pdl")) l.pdl = read_bool(*f);
  if (auto f = o.optional("cooperative")) l.cooperative = read_bool(*f);
  if (auto f = o.optional("when")) l.when = read_when(*f);
  if (auto f = o.optional("args")) l.args = read_array(*f, read_launch_arg);
  if (auto f = o.optional("algo")) l.algo = read_algo(*f);
  if (auto f = o.optional("algo_m")) l.algo_m = read_u64(*f);
  if (auto f = o.optional("algo_candidate")) l.algo_candidate = read_u32(*f);
  if (auto f = o.optional("algo_per_m")) l.algo_per_m = read_bool(*f);
  return l;
}

Scratch read_scratch(const Node& n) {
  Object o(n, "scratch", {"dtype", "shape"});
  Scratch s;
  s.dtype = read_dtype(o.required("dtype"));
  s.shape = read_shape(o.required("shape"));
  return s;
}

Impl read_impl(const Node& n) {
  Object o(n, "impl", {"scratch", "launches"});
  Impl impl;
  if (auto f = o.optional("scratch")) impl.scratch = read_map(*f, "scratch map", read_scratch);
  impl.launches = read_array(o.required("launches"), read_launch);
  return impl;
}

}  // namespace

Op read_op(const Node& n) {
  Object o(n, "op", {"params", "impl"});
  Op op;
  op.params = read_params(o.required("params"));
  op.impl = read_impl(o.required("impl"));
  return op;
}

}  // namespace kern::core::wire
