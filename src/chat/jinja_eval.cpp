// Expression evaluation, and the public Template entry points.
#include <fmt/format.h>

#include "chat/jinja_builtins.hpp"
#include "chat/jinja_parser.hpp"
#include "chat/jinja_render.hpp"
#include "kern/base/error.hpp"

namespace kern::chat::jinja {

Value Interp::eval(const Expr& e) {
  try {
    return eval_inner(e);
  } catch (const Fault& f) {
    fail_at(e.pos, f.message);  // the innermost expression names the position
  }
}

CallArgs Interp::eval_args(const Expr& e, std::size_t first) {
  CallArgs a;
  for (std::size_t i = first; i < e.args.size(); ++i) a.positional.push_back(eval(*e.args[i]));
  for (const auto& [k, x] : e.kwargs) a.keyword.emplace_back(k, eval(*x));
  return a;
}

Value Interp::eval_name(const Expr& e) {
  if (const Value* v = scope_->find(e.name)) return *v;
  if (is_global_function(e.name)) return global_function(e.name);
  return Value::undefined(e.name);
}

Value Interp::eval_call(const Expr& e) {
  const Value callee = eval(*e.args[0]);
  if (callee.kind() != Value::Kind::Callable) {
    if (callee.is_undefined()) fault(fmt::format("'{}' is undefined", callee.undefined_name()));
    fault(fmt::format("'{}' object is not callable", type_name(callee)));
  }
  const CallArgs args = eval_args(e, 1);
  charge(1);
  return callee.fn().call(args, *this);
}

Value Interp::eval_compare(const Expr& e) {
  Value left = eval(*e.args[0]);
  for (std::size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.args[i + 1]);
    const std::string& op = e.ops[i];
    bool r = false;
    if (op == "==")
      r = equals(left, right);
    else if (op == "!=")
      r = !equals(left, right);
    else if (op == "<")
      r = less(left, right);
    else if (op == ">")
      r = less(right, left);
    else if (op == "<=")
      r = less(left, right) || equals(left, right);
    else if (op == ">=")
      r = less(right, left) || equals(left, right);
    else if (op == "in")
      r = contains(right, left);
    else
      r = !contains(right, left);
    if (!r) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Interp::eval_literal_container(const Expr& e) {
  charge(1 + e.args.size());
  if (e.kind == ExprKind::DictLit) {
    Dict d;
    for (std::size_t i = 0; i + 1 < e.args.size(); i += 2) {
      const Value k = eval(*e.args[i]);
      if (!k.is_string()) fault(fmt::format("dict keys must be strings here, not {}", type_name(k)));
      d.set(k.str(), eval(*e.args[i + 1]));
    }
    return Value::dict(std::move(d));
  }
  ValueList items;
  for (const ExprPtr& a : e.args) items.push_back(eval(*a));
  return e.kind == ExprKind::TupleLit ? Value::tuple(std::move(items)) : Value::list(std::move(items));
}

Value Interp::eval_inner(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Literal: return e.literal;
    case ExprKind::Name: return eval_name(e);
    case ExprKind::GetAttr: return get_attr(eval(*e.args[0]), e.name);
    case ExprKind::GetItem: {
      const Value obj = eval(*e.args[0]);
      return get_item(obj, eval(*e.args[1]));
    }
    case ExprKind::Slice: {
      const Value obj = eval(*e.args[0]);
      Value parts[3];
      for (int i = 0; i < 3; ++i) parts[i] = e.args[i + 1] ? eval(*e.args[i + 1]) : Value::none();
      return get_slice(obj, parts[0], parts[1], parts[2]);
    }
    case ExprKind::Call: return eval_call(e);
    case ExprKind::Filter: {
      const Value input = eval(*e.args[0]);
      const CallArgs args = eval_args(e, 1);
      charge(1);
      return e.filter(*this, input, args);
    }
    case ExprKind::Test: {
      const Value v = eval(*e.args[0]);
      const CallArgs args = eval_args(e, 1);
      return Value::boolean(e.test(*this, v, args) != e.negated);
    }
    case ExprKind::Not: return Value::boolean(!truthy(eval(*e.args[0])));
    case ExprKind::Neg:
    case ExprKind::Pos: {
      const Value v = eval(*e.args[0]);
      if (!v.is_number()) {
        if (v.is_undefined()) fault(fmt::format("'{}' is undefined", v.undefined_name()));
        fault(fmt::format("bad operand type for unary {}: '{}'", e.kind == ExprKind::Neg ? '-' : '+', type_name(v)));
      }
      if (e.kind == ExprKind::Pos) return v.kind() == Value::Kind::Bool ? Value::integer(v.as_int()) : v;
      if (v.kind() == Value::Kind::Float) return Value::real(-v.as_float());
      if (v.as_int() == INT64_MIN) fault("integer result does not fit in 64 bits");
      return Value::integer(-v.as_int());
    }
    case ExprKind::Binary: {
      const Value a = eval(*e.args[0]);
      return binary_op(*this, e.name, a, eval(*e.args[1]));
    }
    case ExprKind::Compare: return eval_compare(e);
    case ExprKind::And: {
      Value a = eval(*e.args[0]);
      return truthy(a) ? eval(*e.args[1]) : a;
    }
    case ExprKind::Or: {
      Value a = eval(*e.args[0]);
      return truthy(a) ? a : eval(*e.args[1]);
    }
    case ExprKind::CondExpr:
      if (truthy(eval(*e.args[0]))) return eval(*e.args[1]);
      return e.args[2] ? eval(*e.args[2]) : Value::undefined("inline if");
    case ExprKind::ListLit:
    case ExprKind::TupleLit:
    case ExprKind::DictLit: return eval_literal_container(e);
  }
  fault("unknown expression");
}

Template Template::parse(std::string_view source, std::string name) {
  Template t;
  t.program_ = parse_program(source, std::move(name));
  return t;
}

std::string Template::render(const Value& globals, const RenderLimits& limits) const {
  Interp interp(*program_, limits);
  try {
    return interp.render(globals);
  } catch (const Fault& f) {
    throw Error(ErrorKind::Template, fmt::format("{}: {}", program_->name, f.message));
  }
}

}  // namespace kern::chat::jinja
