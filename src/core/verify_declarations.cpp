// Declaration rules: schema version (R1), vars (R2), states (R3), buffers incl. fills,
// domains and bind (R4), modules (R5), topology, cut and peer buffers (R11).
#include <cmath>

#include "core/verify_context.hpp"

namespace kern::core::verifier {

void check_header(Context& c) {
  const Manifest& m = c.m;
  if (m.schema_version != kSchemaVersion)
    c.add("schema_version", "R1.schema_version",
          "schema_version is " + std::to_string(m.schema_version) + ", this reader accepts only 5");
  for (const auto& [name, v] : m.vars)
    if (v.max < 1) c.add(key(key("vars", name), "max"), "R2.var_max", "var max must be at least 1");
  for (const auto& [g, size] : m.topology)
    if (size == 0) c.add(key("topology.groups", g), "R11.group_size", "group size must be greater than 0");
  if (m.cut) {
    if (m.cut->id.empty()) c.add("cut.id", "R11.cut", "cut id must not be empty");
    if (m.cut->stages < 2)
      c.add("cut.stages", "R11.cut", "cut stages must be at least 2");
    else if (m.cut->stage >= m.cut->stages)
      c.add("cut.stage", "R11.cut",
            "cut stage " + std::to_string(m.cut->stage) + " is not below stages " + std::to_string(m.cut->stages));
  }
}

void check_states(Context& c) {
  for (const auto& [name, s] : c.m.states) {
    const std::string path = key("states", name);
    const int sizes = (s.bytes_per_token != 0) + (s.bytes_per_seq != 0) + (s.bytes != 0);
    if (s.host) {
      if (sizes != 0) {
        c.add(path, "R3.state_size", "a host state declares none of bytes_per_token, bytes_per_seq, bytes");
        continue;
      }
      const HostState& h = *s.host;
      if (h.shape.empty()) c.add(key(key(path, "host"), "shape"), "R3.host_state", "host state shape is empty");
      if (h.strides.size() != h.shape.size())
        c.add(key(key(path, "host"), "strides"), "R3.host_state",
              "host state has " + std::to_string(h.strides.size()) + " strides for " + std::to_string(h.shape.size()) +
                  " dims");
      for (std::size_t i = 1; i < h.shape.size(); ++i)
        if (h.shape[i] == 0)
          c.add(idx(key(key(path, "host"), "shape"), i), "R3.host_state", "only the outermost extent may be 0");
      continue;
    }
    if (sizes != 1)
      c.add(path, "R3.state_size",
            "a state has exactly one of bytes_per_token, bytes_per_seq, bytes non-zero (or host alone); it has " +
                std::to_string(sizes));
  }
}

namespace {

bool is_hex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char ch : s)
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
  return true;
}

// Source forms: local file name | https://host/path | hf:<org>/<repo>/<path>[@rev].
std::optional<std::string> source_problem(const std::string& s) {
  if (s.empty()) return "module source is empty";
  if (s.rfind("hf:", 0) == 0) {
    std::string rest = s.substr(3);
    auto at = rest.find('@');
    if (at != std::string::npos) {
      if (at + 1 == rest.size()) return "hf: source has an empty revision";
      rest = rest.substr(0, at);
    }
    std::vector<std::string> segs;
    std::size_t start = 0;
    while (true) {
      auto slash = rest.find('/', start);
      segs.push_back(rest.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    if (segs.size() < 3) return "hf: source must be hf:<org>/<repo>/<path>[@rev]";
    for (const auto& seg : segs)
      if (seg.empty() || seg == "." || seg == "..") return "hf: source has an empty, '.' or '..' path segment";
    return std::nullopt;
  }
  auto scheme = s.find("://");
  if (scheme != std::string::npos) {
    if (s.rfind("https://", 0) != 0)
      return "module source scheme must be https:// or hf: (got '" + s.substr(0, scheme) + "')";
    std::string rest = s.substr(8);
    auto slash = rest.find('/');
    if (slash == 0 || slash == std::string::npos || slash + 1 == rest.size())
      return "https source must be https://host/path";
  }
  return std::nullopt;
}

bool is_output_fill(Fill f) { return !is_input_fill(f); }

void check_bound(Context& c, const Buffer& b, const Bound& bound, const std::string& path) {
  if (bound.kind == Bound::Kind::Float && is_integer(b.dtype))
    c.add(path, "R4.domain", "float bound on an integer buffer");
  if (bound.kind == Bound::Kind::Float && std::isnan(bound.f)) c.add(path, "R4.domain", "NaN bound");
  if (bound.kind == Bound::Kind::Expr) {
    if (c.check_expr_vars(bound.expr, path, "R4.domain")) {
      if (c.eval_at(bound.expr, At::Min, path, "R4.domain")) c.eval_at(bound.expr, At::Max, path, "R4.domain");
    }
  }
}

std::optional<double> bound_value(Context& c, const Bound& b, At at) {
  switch (b.kind) {
    case Bound::Kind::Int: return static_cast<double>(b.i);
    case Bound::Kind::Float: return b.f;
    case Bound::Kind::Expr: {
      auto r = try_eval(b.expr, c.lookup(at));
      if (auto* v = std::get_if<std::uint64_t>(&r)) return static_cast<double>(*v);
      return std::nullopt;
    }
  }
  return std::nullopt;
}

void check_domain(Context& c, const std::string& name, const Buffer& b, const std::string& path) {
  const Domain& d = *b.domain;
  if (d.index_into) {
    if (d.min || d.max) c.add(path, "R4.domain", "index_into is exclusive with min/max");
    const std::string& t = d.index_into->target;
    const bool is_buf = c.m.buffers.count(t) != 0, is_state = c.m.states.count(t) != 0;
    if (!is_buf && !is_state)
      c.add(key(path, "index_into"), "R4.domain", "index_into names no buffer or state '" + t + "'");
    if (d.index_into->stride == 0) c.add(key(path, "stride"), "R4.domain", "index_into stride must be at least 1");
    if (!is_integer(b.dtype)) c.add(path, "R4.domain", "index_into on a non-integer buffer");
  }
  if (d.min) check_bound(c, b, *d.min, key(path, "min"));
  if (d.max) check_bound(c, b, *d.max, key(path, "max"));
  if (d.min && d.max) {
    for (auto at : {At::Min, At::Max}) {
      auto lo = bound_value(c, *d.min, at), hi = bound_value(c, *d.max, at);
      if (lo && hi && *lo > *hi) {
        c.add(path, "R4.domain", std::string("domain min exceeds max at var ") + (at == At::Min ? "min" : "max"));
        break;
      }
    }
  }
  if (d.monotone && b.shape.size() != 1) c.add(key(path, "monotone"), "R4.domain", "monotone only on 1-D buffers");
  (void)name;
}

// A rank-selected bind field: not on host weights, a declared group, one entry per rank of it
// (the table at path.<table>).
void check_rank_table(Context& c, const std::string& group, std::size_t entries, const std::string& path,
                      const char* table, bool host) {
  if (host) c.add(path, "R4.bind", "host-placed weights cannot be rank-selected");
  auto g = c.m.topology.find(group);
  if (g == c.m.topology.end()) {
    c.add(key(path, "group"), "R11.group", "undeclared topology group '" + group + "'");
  } else if (entries != g->second) {
    c.add(key(path, table), "R4.bind",
          "per-rank table has " + std::to_string(entries) + " entries for group size " + std::to_string(g->second));
  }
}

void check_tensor_ref(Context& c, const TensorRef& t, const std::string& path, bool host) {
  if (!t.rank_selected()) {
    if (t.name.empty()) c.add(path, "R4.bind", "bind tensor name is empty");
    return;
  }
  check_rank_table(c, t.group, t.per_rank.size(), path, "tensors", host);
  for (std::size_t i = 0; i < t.per_rank.size(); ++i)
    if (t.per_rank[i].empty()) c.add(idx(key(path, "tensors"), i), "R4.bind", "bind tensor name is empty");
}

void check_range_ref(Context& c, const RangeRef& r, const std::string& path, bool host) {
  auto one = [&](const Range& x, const std::string& p) {
    if (x.from >= x.to)
      c.add(p, "R4.bind", "bind range [" + std::to_string(x.from) + ", " + std::to_string(x.to) + ") is empty");
  };
  if (!r.rank_selected()) {
    one(r.single, path);
    return;
  }
  check_rank_table(c, r.group, r.per_rank.size(), path, "ranges", host);
  for (std::size_t i = 0; i < r.per_rank.size(); ++i) one(r.per_rank[i], idx(key(path, "ranges"), i));
}

void check_bind(Context& c, const Buffer& b, const std::string& path) {
  const bool bindable = b.kind == BufferKind::Weight || b.kind == BufferKind::Source;
  if (!bindable) {
    if (!b.bind.empty()) c.add(key(path, "bind"), "R4.bind", "bind only on weight and source buffers");
    return;
  }
  if (b.bind.empty()) {
    c.add(key(path, "bind"), "R4.bind", "a weight or source buffer needs a non-empty bind");
    return;
  }
  const bool host = b.placement == Placement::Host;
  for (std::size_t i = 0; i < b.bind.size(); ++i) {
    const BindSegment& s = b.bind[i];
    const std::string sp = idx(key(path, "bind"), i);
    check_tensor_ref(c, s.tensor, key(sp, "tensor"), host);
    if (s.rows) check_range_ref(c, *s.rows, key(sp, "rows"), host);
    if (s.cols) check_range_ref(c, *s.cols, key(sp, "cols"), host);
    if (s.interleave) {
      if (s.rows || s.cols) c.add(key(sp, "interleave"), "R4.bind", "interleave excludes rows and cols");
      if (s.interleave->rows == 0)
        c.add(key(key(sp, "interleave"), "rows"), "R4.bind", "interleave rows must be at least 1");
      check_tensor_ref(c, s.interleave->with, key(key(sp, "interleave"), "with"), host);
    }
  }
}

void check_peer(Context& c, const std::string& name, const Buffer& b, const std::string& path) {
  if (b.dtype != DType::U64) c.add(key(path, "dtype"), "R11.peer", "a peer buffer is u64");
  auto g = c.m.topology.find(b.group);
  if (g == c.m.topology.end()) {
    c.add(key(path, "group"), "R11.group", "undeclared topology group '" + b.group + "'");
  } else if (b.shape.size() != 1 || b.shape[0].is_var() || b.shape[0].value != g->second) {
    c.add(key(path, "shape"), "R11.peer",
          "a peer buffer's shape is exactly [" + std::to_string(g->second) + "] (the group size)");
  }
  if (b.of == name) {
    c.add(key(path, "of"), "R11.peer", "a peer buffer cannot be 'of' itself");
  } else if (auto it = c.m.buffers.find(b.of); it != c.m.buffers.end()) {
    if (it->second.kind == BufferKind::Peer)
      c.add(key(path, "of"), "R11.peer", "a peer buffer cannot be 'of' another peer");
    else if (!it->second.exported)
      c.add(key(path, "of"), "R11.peer", "'of' buffer '" + b.of + "' is not exported");
  } else if (c.m.states.count(b.of) == 0) {
    c.add(key(path, "of"), "R11.peer", "'of' names no buffer or state '" + b.of + "'");
  }
  if (b.domain) c.add(key(path, "domain"), "R11.peer", "a peer buffer has no domain");
  if (b.exported) c.add(key(path, "export"), "R11.peer", "a peer buffer cannot be exported");
  if (b.fill) c.add(key(path, "fill"), "R4.fill", "fill only on input and output buffers");
}

}  // namespace

bool check_dims(Context& c, const std::vector<Dim>& shape, const std::string& path, const std::string& rule) {
  bool ok = true;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const Dim& d = shape[i];
    if (d.is_var() && !c.has_var(d.var)) {
      c.add(idx(path, i), rule, "undeclared var '" + d.var + "'");
      ok = false;
    } else if (!d.is_var() && d.value == 0) {
      c.add(idx(path, i), rule, "extent 0");
      ok = false;
    }
  }
  return ok;
}

void check_buffers(Context& c) {
  for (const auto& [name, b] : c.m.buffers) {
    const std::string path = key("buffers", name);
    if (!is_manifest_dtype(b.dtype)) c.add(key(path, "dtype"), "R4.shape", "not a manifest dtype");
    if (check_dims(c, b.shape, key(path, "shape"), "R4.shape") && !c.buffer_bytes_at_max(b))
      c.add(key(path, "shape"), "R4.size", "byte size overflows u64 at var max");

    if (b.kind == BufferKind::Peer) {
      check_peer(c, name, b, path);
      continue;
    }
    if (!b.of.empty()) c.add(key(path, "of"), "R11.peer", "'of' only on peer buffers");
    if (!b.group.empty()) c.add(key(path, "group"), "R11.peer", "'group' only on peer buffers");
    if (b.placement == Placement::Host && b.kind != BufferKind::Weight)
      c.add(key(path, "placement"), "R4.placement", "host placement only for weight buffers");
    if (b.fill) {
      const std::string fp = key(path, "fill");
      if (b.kind != BufferKind::Input && b.kind != BufferKind::Output)
        c.add(fp, "R4.fill", "fill only on input and output buffers");
      else if (!fill_admits(*b.fill, b.dtype))
        c.add(fp, "R4.fill",
              "fill '" + std::string(to_string(*b.fill)) + "' on a " + std::string(manifest_name(b.dtype)) +
                  " buffer (the protocol's roles are i32/i64; sampling and logprobs f32, sampling_keys i64, "
                  "history and logprob_ids i32)");
      else if (b.kind == BufferKind::Input && !is_input_fill(*b.fill))
        c.add(fp, "R4.fill", "output role '" + std::string(to_string(*b.fill)) + "' on an input buffer");
      else if (b.kind == BufferKind::Output && !is_output_fill(*b.fill))
        c.add(fp, "R4.fill", "input role '" + std::string(to_string(*b.fill)) + "' on an output buffer");
    }
    if (b.domain) check_domain(c, name, b, key(path, "domain"));
    check_bind(c, b, path);
  }
}

void check_modules(Context& c) {
  for (const auto& [name, mod] : c.m.modules) {
    const std::string path = key("modules", name);
    if (!is_hex64(mod.sha256)) c.add(key(path, "sha256"), "R5.sha256", "sha256 must be 64 lowercase hex digits");
    if (auto p = source_problem(mod.source)) c.add(key(path, "source"), "R5.source", *p);
  }
}

}  // namespace kern::core::verifier
