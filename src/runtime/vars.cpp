#include "kern/runtime/vars.hpp"

#include <algorithm>

#include "kern/base/error.hpp"

namespace kern::runtime {

VarTable::VarTable(const core::Manifest& m) {
  for (const auto& [name, v] : m.vars) {
    names_.push_back(name);
    max_.push_back(v.max);
  }
}

std::optional<std::uint32_t> VarTable::index(std::string_view name) const {
  auto it = std::lower_bound(names_.begin(), names_.end(), name);
  if (it == names_.end() || *it != name) return std::nullopt;
  return static_cast<std::uint32_t>(it - names_.begin());
}

void VarTable::assign(const Vars& given, std::span<std::uint64_t> out, std::string_view program) const {
  std::fill(out.begin(), out.end(), 0);
  for (const auto& [name, value] : given) {
    auto i = index(name);
    if (!i) fail(ErrorKind::Api, "program {}: unknown var '{}'", program, name);
    if (value < 1 || value > max_[*i])
      fail(ErrorKind::Api, "program {}: var {} = {} is outside its bounds [1, {}]", program, name, value, max_[*i]);
    out[*i] = value;
  }
}

CompiledExpr CompiledExpr::constant(std::uint64_t v) {
  CompiledExpr c;
  c.steps_.push_back({Op::Push, v});
  c.text = std::to_string(v);
  return c;
}

void CompiledExpr::emit(const core::Expr& e, const VarTable& vars, std::vector<Step>& out, std::size_t depth,
                        std::size_t& max_depth) {
  if (depth > kMaxDepth) fail(ErrorKind::Manifest, "expression nested deeper than {}", kMaxDepth);
  max_depth = std::max(max_depth, depth);
  using K = core::Expr::Kind;
  switch (e.kind) {
    case K::Const: out.push_back({Op::Push, e.value}); return;
    case K::Var: {
      auto i = vars.index(e.var);
      if (!i) fail(ErrorKind::Manifest, "expression reads undeclared var '{}'", e.var);
      out.push_back({Op::Var, *i});
      return;
    }
    case K::CeilDiv:
    case K::Mul:
      if (e.args.size() != 1) fail(ErrorKind::Manifest, "malformed expression {}", e.to_string());
      emit(e.args[0], vars, out, depth + 1, max_depth);
      out.push_back({e.kind == K::CeilDiv ? Op::CeilDiv : Op::Mul, e.value});
      return;
    case K::Add:
      if (e.args.size() != 2) fail(ErrorKind::Manifest, "malformed expression {}", e.to_string());
      emit(e.args[0], vars, out, depth + 1, max_depth);
      emit(e.args[1], vars, out, depth + 2, max_depth);
      out.push_back({Op::Add, 0});
      return;
  }
}

CompiledExpr CompiledExpr::compile(const core::Expr& e, const VarTable& vars) {
  CompiledExpr c;
  std::size_t depth = 0;
  emit(e, vars, c.steps_, 1, depth);
  c.text = e.to_string();
  return c;
}

std::optional<std::uint64_t> CompiledExpr::eval(const std::uint64_t* vars) const {
  std::uint64_t stack[kMaxDepth + 2];
  std::size_t sp = 0;
  for (const Step& s : steps_) {
    switch (s.op) {
      case Op::Push: stack[sp++] = s.value; break;
      case Op::Var: stack[sp++] = vars[s.value]; break;
      case Op::CeilDiv:
        if (s.value == 0) return std::nullopt;
        stack[sp - 1] = stack[sp - 1] / s.value + (stack[sp - 1] % s.value != 0);
        break;
      case Op::Mul:
        if (__builtin_mul_overflow(stack[sp - 1], s.value, &stack[sp - 1])) return std::nullopt;
        break;
      case Op::Add:
        if (__builtin_add_overflow(stack[sp - 2], stack[sp - 1], &stack[sp - 2])) return std::nullopt;
        --sp;
        break;
    }
  }
  return sp == 1 ? std::optional(stack[0]) : std::nullopt;
}

void CompiledExpr::collect_vars(std::vector<std::uint32_t>& out) const {
  for (const Step& s : steps_)
    if (s.op == Op::Var) out.push_back(static_cast<std::uint32_t>(s.value));
}

}  // namespace kern::runtime
