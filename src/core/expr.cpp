// Expressions: factories, printing, var collection and checked u64 evaluation.
#include <fmt/format.h>

#include "kern/base/error.hpp"
#include "kern/core/manifest.hpp"

namespace kern::core {

namespace {

template <class... Operands>
Expr node(Expr::Kind kind, std::uint64_t value, Operands... operands) {
  Expr e;
  e.kind = kind;
  e.value = value;
  (e.args.push_back(std::move(operands)), ...);
  return e;
}

}  // namespace

Expr Expr::constant(std::uint64_t v) { return node(Kind::Const, v); }

Expr Expr::variable(std::string name) {
  Expr e = node(Kind::Var, 0);
  e.var = std::move(name);
  return e;
}

Expr Expr::ceil_div(Expr a, std::uint64_t d) { return node(Kind::CeilDiv, d, std::move(a)); }

Expr Expr::mul(Expr a, std::uint64_t f) { return node(Kind::Mul, f, std::move(a)); }

Expr Expr::add(Expr a, Expr b) { return node(Kind::Add, 0, std::move(a), std::move(b)); }

void Expr::collect_vars(std::vector<std::string>& out) const {
  if (kind == Kind::Var) {
    for (const auto& v : out)
      if (v == var) return;
    out.push_back(var);
    return;
  }
  for (const auto& a : args) a.collect_vars(out);
}

std::string Expr::to_string() const {
  switch (kind) {
    case Kind::Const: return fmt::format("{}", value);
    case Kind::Var: return var;
    case Kind::CeilDiv: return fmt::format("ceil_div({}, {})", args.at(0).to_string(), value);
    case Kind::Mul: return fmt::format("mul({}, {})", args.at(0).to_string(), value);
    case Kind::Add: return fmt::format("add({}, {})", args.at(0).to_string(), args.at(1).to_string());
  }
  return "?";
}

std::string EvalError::message() const {
  switch (kind) {
    case Kind::UnknownVar: return fmt::format("unknown var \"{}\"", detail);
    case Kind::Overflow: return fmt::format("u64 overflow in {}", detail);
    case Kind::DivByZero: return fmt::format("division by zero in {}", detail);
  }
  return detail;
}

namespace {

using Result = std::variant<std::uint64_t, EvalError>;

// Operands of a malformed node (wrong arity) are reported, never dereferenced out of range.
Result eval_node(const Expr& e, const VarLookup& vars) {
  auto operand = [&](std::size_t i) -> Result {
    if (i >= e.args.size())
      return EvalError{EvalError::Kind::Overflow, fmt::format("malformed expression node (missing operand {})", i)};
    return eval_node(e.args[i], vars);
  };
  switch (e.kind) {
    case Expr::Kind::Const: return e.value;
    case Expr::Kind::Var: {
      std::optional<std::uint64_t> v = vars ? vars(e.var) : std::nullopt;
      if (!v) return EvalError{EvalError::Kind::UnknownVar, e.var};
      return *v;
    }
    case Expr::Kind::CeilDiv: {
      Result a = operand(0);
      if (std::holds_alternative<EvalError>(a)) return a;
      if (e.value == 0) return EvalError{EvalError::Kind::DivByZero, e.to_string()};
      std::uint64_t x = std::get<std::uint64_t>(a);
      return x / e.value + (x % e.value != 0 ? 1 : 0);
    }
    case Expr::Kind::Mul: {
      Result a = operand(0);
      if (std::holds_alternative<EvalError>(a)) return a;
      std::uint64_t r = 0;
      if (__builtin_mul_overflow(std::get<std::uint64_t>(a), e.value, &r))
        return EvalError{EvalError::Kind::Overflow,
                         fmt::format("{} ({} * {})", e.to_string(), std::get<std::uint64_t>(a), e.value)};
      return r;
    }
    case Expr::Kind::Add: {
      Result a = operand(0);
      if (std::holds_alternative<EvalError>(a)) return a;
      Result b = operand(1);
      if (std::holds_alternative<EvalError>(b)) return b;
      std::uint64_t r = 0;
      if (__builtin_add_overflow(std::get<std::uint64_t>(a), std::get<std::uint64_t>(b), &r))
        return EvalError{
            EvalError::Kind::Overflow,
            fmt::format("{} ({} + {})", e.to_string(), std::get<std::uint64_t>(a), std::get<std::uint64_t>(b))};
      return r;
    }
  }
  return EvalError{EvalError::Kind::Overflow, "malformed expression node"};
}

}  // namespace

std::variant<std::uint64_t, EvalError> try_eval(const Expr& e, const VarLookup& vars) { return eval_node(e, vars); }

std::uint64_t eval(const Expr& e, const VarLookup& vars, std::string_view where) {
  Result r = eval_node(e, vars);
  if (auto* err = std::get_if<EvalError>(&r)) {
    if (where.empty()) fail(ErrorKind::Api, "{}", err->message());
    fail(ErrorKind::Api, "{}: {}", where, err->message());
  }
  return std::get<std::uint64_t>(r);
}

VarLookup lookup_in(const std::map<std::string, std::uint64_t>& values) {
  return [&values](std::string_view name) -> std::optional<std::uint64_t> {
    auto it = values.find(std::string(name));
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace kern::core
