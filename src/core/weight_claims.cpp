#include "kern/core/weight_claims.hpp"

#include <fmt/format.h>

#include <optional>

namespace kern::core {

namespace {

bool bind_equal(const TensorRef& a, const TensorRef& b) {
  return a.name == b.name && a.group == b.group && a.per_rank == b.per_rank;
}
bool bind_equal(const Range& a, const Range& b) { return a.from == b.from && a.to == b.to; }
bool bind_equal(const RangeRef& a, const RangeRef& b) {
  if (!bind_equal(a.single, b.single) || a.group != b.group || a.per_rank.size() != b.per_rank.size()) return false;
  for (std::size_t i = 0; i < a.per_rank.size(); ++i)
    if (!bind_equal(a.per_rank[i], b.per_rank[i])) return false;
  return true;
}
bool bind_equal(const Interleave& a, const Interleave& b) { return bind_equal(a.with, b.with) && a.rows == b.rows; }
template <class T>
bool bind_equal(const std::optional<T>& a, const std::optional<T>& b) {
  return a.has_value() == b.has_value() && (!a || bind_equal(*a, *b));
}
bool bind_equal(const BindSegment& a, const BindSegment& b) {
  return bind_equal(a.tensor, b.tensor) && bind_equal(a.rows, b.rows) && bind_equal(a.cols, b.cols) && bind_equal(a.interleave, b.interleave);
}

// What keeps a weight from being shared, or empty.
std::string unshareable(const Manifest& m, const std::string& name, const Buffer& b) {
  if (b.bind.empty()) return "it has no bind (not bound from the checkpoint)";
  for (const Dim& d : b.shape)
    if (d.is_var()) return fmt::format("its shape is not constant (extent `{}`)", d.var);
  if (b.fill || b.domain) return "it has a fill or a domain";
  const std::string w = weight_writer(m, name);
  if (!w.empty()) return w + " (a derived weight)";
  return {};
}

bool same_declaration(const Buffer& a, const Buffer& b) {
  if (a.dtype != b.dtype || a.placement != b.placement || a.shape.size() != b.shape.size() ||
      a.bind.size() != b.bind.size())
    return false;
  for (std::size_t i = 0; i < a.shape.size(); ++i)
    if (a.shape[i].value != b.shape[i].value) return false;
  for (std::size_t i = 0; i < a.bind.size(); ++i)
    if (!bind_equal(a.bind[i], b.bind[i])) return false;
  return true;
}

}  // namespace

std::string weight_writer(const Manifest& m, const std::string& buffer) {
  for (const auto& [pname, p] : m.programs) {
    for (std::size_t i = 0; i < p.calls.size(); ++i) {
      const Call& c = p.calls[i];
      const auto op = m.ops.find(c.op);
      if (op == m.ops.end()) continue;
      for (std::size_t j = 0; j < c.args.size() && j < op->second.params.size(); ++j) {
        const CallArg& a = c.args[j];
        if (a.kind == CallArg::Kind::Buf && a.name == buffer && op->second.params[j].writes())
          return fmt::format("program {} call {}{} writes it", pname, i, c.label.empty() ? "" : " (" + c.label + ")");
      }
    }
  }
  return {};
}

WeightClaims weight_claims(const Manifest& candidate, const Manifest& reference) {
  WeightClaims out;
  for (const auto& [name, t] : candidate.buffers) {
    if (t.kind != BufferKind::Weight) continue;
    if (const std::string why = unshareable(candidate, name, t); !why.empty()) {
      out.not_claimed.push_back({name, why});
      continue;
    }
    std::optional<std::string> found;
    std::string near;  // a reference buffer of the same declaration that cannot be shared
    for (const auto& [rname, r] : reference.buffers) {
      if (r.kind != BufferKind::Weight || !same_declaration(t, r)) continue;
      if (const std::string why = unshareable(reference, rname, r); !why.empty()) {
        if (near.empty()) near = fmt::format("the reference's `{}` has the same declaration, but {}", rname, why);
        continue;
      }
      found = rname;
      break;
    }
    if (found) {
      out.claimed.push_back({name, *found});
    } else {
      out.not_claimed.push_back(
          {name, near.empty() ? "no weight of the reference has the same declaration and binding" : near});
    }
  }
  return out;
}

}  // namespace kern::core
