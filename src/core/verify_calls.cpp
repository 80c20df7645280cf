// Call rules: op exists, args match the interface position by position, scalar ranges,
// offsets (R8); rank args and peers (R11); tensormap footprints against the passed bytes (R12).
#include "core/verify_context.hpp"

namespace kern::core::verifier {
namespace {

// Bytes of a state a call offset may address; nullopt when unbounded (paged, per-seq, open host).
std::optional<std::uint64_t> state_extent(const State& s) {
  if (s.host) {
    std::uint64_t last = 0;
    for (std::size_t i = 0; i < s.host->shape.size() && i < s.host->strides.size(); ++i) {
      if (s.host->shape[i] == 0) return std::nullopt;
      std::uint64_t term = 0;
      if (__builtin_mul_overflow(s.host->shape[i] - 1, s.host->strides[i], &term) ||
          __builtin_add_overflow(last, term, &last))
        return std::nullopt;
    }
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(last + 1, dtype_size(s.host->dtype), &bytes)) return std::nullopt;
    return bytes;
  }
  if (s.bytes != 0 && s.bytes_per_token == 0 && s.bytes_per_seq == 0) return s.bytes;
  return std::nullopt;
}

// The arg's JSON path, built only when a violation needs it (the common valid case builds none).
struct ArgPath {
  const std::string& call;
  std::size_t j;
  operator std::string() const { return idx(key(call, "args"), j); }
};

void check_scalar_range(Context& c, const ParamType& p, std::uint64_t v, const ArgPath& path, const char* what) {
  if (v > scalar_max(p.kind))
    c.add(path, "R8.range",
          std::string(what) + " reaches " + std::to_string(v) + ", beyond what " + std::string(scalar_name(p.kind)) +
              " holds");
}

void check_arg(Context& c, const Op& op, const OpFacts* facts, std::size_t j, const CallArg& a, const ArgPath& path) {
  const ParamType& p = op.params[j];
  auto kind_mismatch = [&](const char* given) {
    c.add(path, "R8.arg_kind", std::string(given) + " passed to a '" + p.to_string() + "' param");
  };
  // Every non-wrapping tensormap over this param fits the `avail` bytes after the offset.
  auto check_footprints = [&](const char* what, std::uint64_t avail, const char* at) {
    if (!facts) return;
    for (const auto& t : facts->tensormaps)
      if (t.param == j && !t.wrap && t.footprint > avail)
        c.add(path, "R12.tensormap_footprint",
              "tensormap " + t.path + " spans " + std::to_string(t.footprint) + " bytes, " + what + " '" + a.name +
                  "' has " + std::to_string(avail) + " after the offset" + at);
  };
  switch (p.kind) {
    case ParamType::Kind::Bytes: return;  // reported on the interface
    case ParamType::Kind::Buffer: {
      if (a.kind != CallArg::Kind::Buf) return kind_mismatch(a.kind == CallArg::Kind::State ? "a state" : "a scalar");
      auto it = c.m.buffers.find(a.name);
      if (it == c.m.buffers.end()) return c.add(path, "R8.unknown", "undeclared buffer '" + a.name + "'");
      const Buffer& b = it->second;
      if (b.dtype != p.dtype)
        return c.add(path, "R8.dtype",
                     "buffer '" + a.name + "' is " + std::string(manifest_name(b.dtype)) + ", the param wants " +
                         std::string(manifest_name(p.dtype)));
      const std::uint64_t es = dtype_size(b.dtype);
      auto bytes = c.buffer_bytes_at_max(b);
      if (a.offset % es != 0)
        c.add(path, "R8.offset",
              "offset " + std::to_string(a.offset) + " is not a multiple of the element size " + std::to_string(es));
      else if (bytes && *bytes != 0 && a.offset >= *bytes)
        c.add(path, "R8.offset",
              "offset " + std::to_string(a.offset) + " is beyond buffer '" + a.name + "' (" + std::to_string(*bytes) +
                  " bytes at var max)");
      if (b.kind == BufferKind::Peer) {
        if (p.writes()) c.add(path, "R11.peer_write", "peer buffer '" + a.name + "' is read-only");
        if (facts && facts->has_extern)
          c.add(path, "R11.peer_extern", "an op with an extern launch never receives a peer buffer");
      }
      if (bytes && a.offset < *bytes) check_footprints("buffer", *bytes - a.offset, " at var max");
      return;
    }
    case ParamType::Kind::State: {
      if (a.kind != CallArg::Kind::State) return kind_mismatch(a.kind == CallArg::Kind::Buf ? "a buffer" : "a scalar");
      auto it = c.m.states.find(a.name);
      if (it == c.m.states.end()) return c.add(path, "R8.unknown", "undeclared state '" + a.name + "'");
      if (auto ext = state_extent(it->second); ext && *ext != 0) {
        if (a.offset >= *ext)
          c.add(path, "R8.offset",
                "offset " + std::to_string(a.offset) + " is beyond state '" + a.name + "' (" + std::to_string(*ext) +
                    " bytes)");
        else
          check_footprints("state", *ext - a.offset, "");
      }
      return;
    }
    default: break;
  }
  // scalar params
  switch (a.kind) {
    case CallArg::Kind::Buf: return kind_mismatch("a buffer");
    case CallArg::Kind::State: return kind_mismatch("a state");
    case CallArg::Kind::Var:
      if (!c.has_var(a.name)) return c.add(path, "R8.unknown", "undeclared var '" + a.name + "'");
      return check_scalar_range(c, p, c.var_at(a.name, At::Max), path, ("var '" + a.name + "'").c_str());
    case CallArg::Kind::Expr: {
      const std::string ep = path;
      if (!c.check_expr_vars(a.expr, ep, "R8.unknown")) return;
      if (!c.eval_at(a.expr, At::Min, ep, "R8.range")) return;
      if (auto v = c.eval_at(a.expr, At::Max, ep, "R8.range")) check_scalar_range(c, p, *v, path, "expression");
      return;
    }
    case CallArg::Kind::Literal:
      if (literal_param_kind(a.literal.kind) != p.kind)
        c.add(path, "R8.arg_kind",
              std::string(literal_name(a.literal.kind)) + " literal passed to a '" + p.to_string() + "' param");
      return;
    case CallArg::Kind::Rank:
      if (!c.has_group(a.name)) c.add(path, "R11.group", "undeclared topology group '" + a.name + "'");
      if (p.kind != ParamType::Kind::I32 && p.kind != ParamType::Kind::I64)
        c.add(path, "R11.rank", "a rank arg only goes to i32/i64 params");
      return;
  }
}

}  // namespace

void check_calls(Context& c) {
  for (const auto& [pname, prog] : c.m.programs) {
    const std::string cp = key(key("programs", pname), "calls");
    for (std::size_t i = 0; i < prog.calls.size(); ++i) {
      const Call& call = prog.calls[i];
      const std::string path = idx(cp, i);
      auto it = c.m.ops.find(call.op);
      if (it == c.m.ops.end()) {
        c.add(key(path, "op"), "R8.op", "undeclared op '" + call.op + "'");
        continue;
      }
      const Op& op = it->second;
      auto f = c.ops.find(call.op);
      const OpFacts* facts = f == c.ops.end() ? nullptr : &f->second;
      if (call.args.size() != op.params.size())
        c.add(key(path, "args"), "R8.arity",
              std::to_string(call.args.size()) + " args for op '" + call.op + "' with " +
                  std::to_string(op.params.size()) + " params");
      const std::size_t n = std::min(call.args.size(), op.params.size());
      for (std::size_t j = 0; j < n; ++j) check_arg(c, op, facts, j, call.args[j], ArgPath{path, j});
    }
  }
}

}  // namespace kern::core::verifier
