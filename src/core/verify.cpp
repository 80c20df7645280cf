// check(): runs every rule family over the manifest and collects all violations;
// verify(): the only way to obtain a Verified.
#include "kern/core/verify.hpp"

#include <limits>

#include "core/verify_context.hpp"
#include "kern/base/error.hpp"
#include "kern/base/json.hpp"

namespace kern::core {
namespace verifier {

std::string key(std::string_view parent, std::string_view k) { return json_path_key(parent, k); }
std::string idx(std::string_view parent, std::size_t i) { return json_path_index(parent, i); }

Context::Context(const Manifest& manifest) : m(manifest) {
  at_min_ = [this](std::string_view n) -> std::optional<std::uint64_t> {
    if (!has_var(n)) return std::nullopt;
    return std::uint64_t{1};
  };
  at_max_ = [this](std::string_view n) -> std::optional<std::uint64_t> {
    if (!has_var(n)) return std::nullopt;
    return var_at(n, At::Max);
  };
}

void Context::add(std::string path, std::string rule, std::string message) {
  violations.push_back(Violation{std::move(path), std::move(rule), std::move(message)});
}

std::uint64_t Context::var_at(std::string_view name, At b) const {
  if (b == At::Min) return 1;
  auto it = m.vars.find(std::string(name));
  if (it == m.vars.end() || it->second.max < 1) return 1;
  return it->second.max;
}

bool Context::check_expr_vars(const Expr& e, const std::string& path, const std::string& rule) {
  std::vector<std::string> vars;
  e.collect_vars(vars);
  bool ok = true;
  for (const auto& v : vars) {
    if (!has_var(v)) {
      add(path, rule, "expression reads undeclared var '" + v + "'");
      ok = false;
    }
  }
  return ok;
}

std::optional<std::uint64_t> Context::eval_at(const Expr& e, At b, const std::string& path, const std::string& rule) {
  auto r = try_eval(e, lookup(b));
  if (auto* v = std::get_if<std::uint64_t>(&r)) return *v;
  const auto& err = std::get<EvalError>(r);
  if (err.kind != EvalError::Kind::UnknownVar) {
    add(path, rule,
        std::string("expression ") + e.to_string() + " at var " + (b == At::Min ? "min" : "max") + ": " +
            err.message());
  }
  return std::nullopt;
}

std::optional<std::uint64_t> Context::shape_bytes_at_max(DType dt, const std::vector<Dim>& shape) const {
  std::uint64_t n = dtype_size(dt);
  for (const auto& d : shape) {
    std::uint64_t v = d.value;
    if (d.is_var()) {
      if (!has_var(d.var)) return std::nullopt;
      v = var_at(d.var, At::Max);
    }
    if (v != 0 && n > std::numeric_limits<std::uint64_t>::max() / v) return std::nullopt;
    n *= v;
  }
  return n;
}

std::uint64_t scalar_max(ParamType::Kind k) {
  switch (k) {
    case ParamType::Kind::I32: return 0x7fffffffULL;
    case ParamType::Kind::I64: return 0x7fffffffffffffffULL;
    case ParamType::Kind::U8: return 255;
    case ParamType::Kind::F32: return 1ULL << 24;
    default: return 0;
  }
}

std::string_view scalar_name(ParamType::Kind k) {
  switch (k) {
    case ParamType::Kind::I32: return "i32";
    case ParamType::Kind::I64: return "i64";
    case ParamType::Kind::F32: return "f32";
    case ParamType::Kind::U8: return "u8";
    case ParamType::Kind::Bytes: return "bytes";
    case ParamType::Kind::State: return "state";
    case ParamType::Kind::Buffer: return "buffer";
  }
  return "?";
}

std::string_view literal_name(Literal::Kind k) {
  switch (k) {
    case Literal::Kind::I32: return "i32";
    case Literal::Kind::I64: return "i64";
    case Literal::Kind::F32: return "f32";
    case Literal::Kind::U8: return "u8";
  }
  return "?";
}

std::optional<ParamType::Kind> literal_param_kind(Literal::Kind k) {
  switch (k) {
    case Literal::Kind::I32: return ParamType::Kind::I32;
    case Literal::Kind::I64: return ParamType::Kind::I64;
    case Literal::Kind::F32: return ParamType::Kind::F32;
    case Literal::Kind::U8: return ParamType::Kind::U8;
  }
  return std::nullopt;
}

}  // namespace verifier

std::vector<Violation> check(const Manifest& m) {
  verifier::Context c(m);
  verifier::check_header(c);
  verifier::check_states(c);
  verifier::check_buffers(c);
  verifier::check_modules(c);
  verifier::check_ops(c);
  verifier::check_calls(c);
  verifier::check_programs(c);
  verifier::check_usage(c);
  return std::move(c.violations);
}

Verified verify(Manifest m) {
  auto violations = check(m);
  if (!violations.empty()) {
    std::vector<std::string> lines;
    lines.reserve(violations.size());
    for (const auto& v : violations) lines.push_back(v.line());
    throw Error(ErrorKind::ManifestVerify,
                std::to_string(violations.size()) + (violations.size() == 1 ? " violation" : " violations"),
                std::move(lines));
  }
  return Verified(std::make_shared<const Manifest>(std::move(m)));
}

}  // namespace kern::core
