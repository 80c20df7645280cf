// Expressions, with Jinja's precedence (loosest first): inline if, or, and, not, comparisons,
// + -, ~, * / // %, **, unary - +, then postfix . [] () and filters / tests.
#include <fmt/format.h>

#include <algorithm>

#include "chat/jinja_builtins.hpp"
#include "chat/jinja_parser.hpp"
#include "kern/base/error.hpp"

namespace kern::chat::jinja {

namespace {
ExprPtr make(ExprKind k, Pos p) { return std::make_unique<Expr>(k, p); }
ExprPtr make(ExprKind k, Pos p, ExprPtr a) {
  auto e = make(k, p);
  e->args.push_back(std::move(a));
  return e;
}
ExprPtr make(ExprKind k, Pos p, ExprPtr a, ExprPtr b) {
  auto e = make(k, p, std::move(a));
  e->args.push_back(std::move(b));
  return e;
}
// Chains (a.b.c..., a + b + c ..., x | f | g ...) deepen the tree without recursing in the
// parser; their height is bounded too, so evaluating and destroying the tree cannot overflow.
ExprPtr sealed(ExprPtr e) {
  int h = 0;
  for (const ExprPtr& a : e->args)
    if (a) h = std::max<int>(h, a->height);
  for (const auto& kv : e->kwargs) h = std::max<int>(h, kv.second->height);
  if (h >= kMaxExprHeight) throw ExprTooDeep{};
  e->height = static_cast<std::uint16_t>(h + 1);
  return e;
}

ExprPtr literal(Pos p, Value v) {
  auto e = make(ExprKind::Literal, p);
  e->literal = std::move(v);
  return e;
}
}  // namespace

ExprPtr Parser::parse_tuple(bool with_cond) {
  const Pos p = pos();
  ExprPtr first = parse_expression(with_cond);
  if (!is_op(",")) return first;
  auto t = make(ExprKind::TupleLit, p, std::move(first));
  while (skip_op(",")) {
    if (cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || is_op(")")) break;
    t->args.push_back(parse_expression(with_cond));
  }
  return sealed(std::move(t));
}

ExprPtr Parser::parse_expression(bool with_cond) {
  DepthGuard guard(*this);
  ExprPtr e = parse_or();
  if (!with_cond) return e;
  while (is_name("if")) {
    const Pos p = pos();
    ++at_;
    auto c = make(ExprKind::CondExpr, p, parse_or(), std::move(e));
    c->args.push_back(skip_name("else") ? parse_expression(true) : nullptr);
    e = sealed(std::move(c));
  }
  return e;
}

// `next (word next)*`, folded to the left: `a or b or c` is `(a or b) or c`.
ExprPtr Parser::parse_left_fold(std::string_view word, ExprKind kind, ExprPtr (Parser::*next)()) {
  ExprPtr e = (this->*next)();
  while (is_name(word)) {
    const Pos p = pos();
    ++at_;
    e = make(kind, p, std::move(e), (this->*next)());
  }
  return e;
}

ExprPtr Parser::parse_or() { return parse_left_fold("or", ExprKind::Or, &Parser::parse_and); }

ExprPtr Parser::parse_and() { return parse_left_fold("and", ExprKind::And, &Parser::parse_not); }

ExprPtr Parser::parse_not() {
  if (!is_name("not")) return parse_compare();
  DepthGuard guard(*this);
  const Pos p = pos();
  ++at_;
  return make(ExprKind::Not, p, parse_not());
}

ExprPtr Parser::parse_compare() {
  const Pos p = pos();
  ExprPtr first = parse_math1();
  ExprPtr cmp;
  while (true) {
    std::string op;
    if (cur().type == Tok::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
                                  cur().text == ">" || cur().text == ">=")) {
      op = cur().text;
      ++at_;
    } else if (is_name("in")) {
      op = "in";
      ++at_;
    } else if (is_name("not") && peek().type == Tok::Name && peek().text == "in") {
      op = "notin";
      at_ += 2;
    } else {
      break;
    }
    if (!cmp) cmp = make(ExprKind::Compare, p, std::move(first));
    cmp->ops.push_back(op);
    cmp->args.push_back(parse_math1());
  }
  return cmp ? sealed(std::move(cmp)) : std::move(first);
}

// `next (op next)*` over the binary operators `ops`, folded to the left; each node is named by its
// operator.
template <class Next>
ExprPtr Parser::fold_binary(std::initializer_list<std::string_view> ops, Next next) {
  ExprPtr e = next();
  while (std::any_of(ops.begin(), ops.end(), [&](std::string_view o) { return is_op(o); })) {
    const Token& op = toks_[at_];
    if (op.text == "%" && e->kind == ExprKind::Literal && e->literal.is_string())
      fail("printf-style string formatting ('...' % args) is not supported");
    auto b = make(ExprKind::Binary, pos_of(op));
    b->name = op.text;
    ++at_;
    b->args.push_back(std::move(e));
    b->args.push_back(next());
    e = sealed(std::move(b));
  }
  return e;
}

ExprPtr Parser::parse_math1() { return fold_binary({"+", "-"}, [this] { return parse_concat(); }); }

ExprPtr Parser::parse_concat() { return fold_binary({"~"}, [this] { return parse_math2(); }); }

ExprPtr Parser::parse_math2() { return fold_binary({"*", "/", "//", "%"}, [this] { return parse_pow(); }); }

ExprPtr Parser::parse_pow() { return fold_binary({"**"}, [this] { return parse_unary(true); }); }

ExprPtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  const Pos p = pos();
  ExprPtr node;
  if (skip_op("-"))
    node = sealed(make(ExprKind::Neg, p, parse_unary(false)));
  else if (skip_op("+"))
    node = sealed(make(ExprKind::Pos, p, parse_unary(false)));
  else
    node = parse_primary();
  node = parse_postfix(std::move(node));
  return with_filter ? parse_filter_expr(std::move(node)) : std::move(node);
}

ExprPtr Parser::parse_primary() {
  const Token& t = cur();
  const Pos p = pos();
  switch (t.type) {
    case Tok::Name: {
      ++at_;
      if (t.text == "true" || t.text == "True") return literal(p, Value::boolean(true));
      if (t.text == "false" || t.text == "False") return literal(p, Value::boolean(false));
      if (t.text == "none" || t.text == "None") return literal(p, Value::none());
      if (macro_depth_ > 0 && (t.text == "varargs" || t.text == "kwargs" || t.text == "caller"))
        fail_at(t, fmt::format("'{}' in macros is not supported", t.text));
      auto e = make(ExprKind::Name, p);
      e->name = t.text;
      return e;
    }
    case Tok::String: {
      std::string s;
      while (cur().type == Tok::String) s += toks_[at_++].text;
      return literal(p, Value::string(std::move(s)));
    }
    case Tok::Int: ++at_; return literal(p, Value::integer(t.int_value));
    case Tok::Float: ++at_; return literal(p, Value::real(t.float_value));
    case Tok::Op:
      if (t.text == "(") {
        ++at_;
        if (skip_op(")")) return make(ExprKind::TupleLit, p);
        ExprPtr e = parse_tuple(true);
        expect_op(")");
        return e;
      }
      if (t.text == "[") return ++at_, parse_sequence(ExprKind::ListLit, p, "]");
      if (t.text == "{") return ++at_, parse_dict(p);
      break;
    default: break;
  }
  fail(fmt::format("unexpected {}", describe(t)));
}

ExprPtr Parser::parse_sequence(ExprKind kind, Pos p, std::string_view close) {
  auto e = make(kind, p);
  while (!skip_op(close)) {
    if (!e->args.empty()) {
      expect_op(",");
      if (skip_op(close)) break;
    }
    e->args.push_back(parse_expression());
  }
  return sealed(std::move(e));
}

ExprPtr Parser::parse_dict(Pos p) {
  auto e = make(ExprKind::DictLit, p);
  while (!skip_op("}")) {
    if (!e->args.empty()) {
      expect_op(",");
      if (skip_op("}")) break;
    }
    e->args.push_back(parse_expression());
    expect_op(":");
    e->args.push_back(parse_expression());
  }
  return sealed(std::move(e));
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (is_op(".") || is_op("["))
      node = sealed(parse_subscript(std::move(node)));
    else if (is_op("("))
      node = sealed(parse_call(std::move(node)));
    else
      return node;
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  const Pos p = pos();
  if (skip_op(".")) {
    if (cur().type == Tok::Int)
      return make(ExprKind::GetItem, p, std::move(node), literal(pos(), Value::integer(toks_[at_++].int_value)));
    auto e = make(ExprKind::GetAttr, p, std::move(node));
    e->name = expect_name("an attribute name after '.'");
    return e;
  }
  expect_op("[");
  ExprPtr parts[3];
  int colons = 0;
  while (!is_op("]")) {
    if (skip_op(":")) {
      if (++colons > 2) fail("a slice takes at most start:stop:step");
      continue;
    }
    if (parts[colons]) fail(fmt::format("expected ']' or ':', found {}", describe(cur())));
    parts[colons] = parse_expression();
    if (is_op(",")) fail("tuple subscripts are not supported");
  }
  ++at_;
  if (colons == 0) {
    if (!parts[0]) fail("empty subscript");
    return make(ExprKind::GetItem, p, std::move(node), std::move(parts[0]));
  }
  auto e = make(ExprKind::Slice, p, std::move(node));
  for (auto& part : parts) e->args.push_back(std::move(part));
  return e;
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (is_op("|"))
      node = sealed(parse_filter(std::move(node)));
    else if (is_name("is"))
      node = sealed(parse_test(std::move(node)));
    else if (is_op("("))
      node = sealed(parse_call(std::move(node)));
    else
      return node;
  }
}

ExprPtr Parser::parse_filter(ExprPtr node) {
  ++at_;
  const Token& t = cur();
  auto e = make(ExprKind::Filter, pos(), std::move(node));
  e->name = expect_name("a filter name after '|'");
  while (is_op(".")) fail_at(t, "dotted filter names are not supported");
  e->filter = find_filter(e->name);
  if (!e->filter) fail_at(t, fmt::format("unknown filter '{}'", e->name));
  if (is_op("(")) parse_call_args(*e);
  check_literal_names(*e);
  return e;
}

ExprPtr Parser::parse_test(ExprPtr node) {
  const Pos p = pos();
  ++at_;
  auto e = make(ExprKind::Test, p, std::move(node));
  e->negated = skip_name("not");
  const Token& t = cur();
  e->name = expect_name("a test name after 'is'");
  e->test = find_test(e->name);
  if (!e->test) fail_at(t, fmt::format("unknown test '{}'", e->name));
  if (is_op("(")) {
    parse_call_args(*e);
  } else if ((cur().type == Tok::Name || cur().type == Tok::String || cur().type == Tok::Int ||
              cur().type == Tok::Float || is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and") && !is_name("if")) {
    if (is_name("is")) fail("tests cannot be chained with 'is'");
    e->args.push_back(parse_postfix(parse_primary()));
  }
  return e;
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  const Pos p = callee->pos;
  if (callee->kind == ExprKind::Name)
    pending_.push_back({callee->pos, callee->name, false});
  else if (callee->kind == ExprKind::GetAttr)
    pending_.push_back({callee->pos, callee->name, true});
  auto e = make(ExprKind::Call, p, std::move(callee));
  parse_call_args(*e);
  return e;
}

void Parser::parse_call_args(Expr& into) {
  expect_op("(");
  bool first = true;
  while (!skip_op(")")) {
    if (!first) {
      expect_op(",");
      if (skip_op(")")) break;
    }
    first = false;
    if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
    if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
      std::string key = toks_[at_].text;
      at_ += 2;
      into.kwargs.emplace_back(std::move(key), parse_expression());
    } else {
      if (!into.kwargs.empty()) fail("positional argument after a keyword argument");
      into.args.push_back(parse_expression());
    }
  }
}

// map('upper'), select('odd'), selectattr('x', 'equalto', 1): names given as literals are
// checked at load like any filter or test.
void Parser::check_literal_names(const Expr& call) const {
  const bool by_filter = call.name == "map";
  const bool by_test = call.name == "select" || call.name == "reject";
  const bool attr_test = call.name == "selectattr" || call.name == "rejectattr";
  const std::size_t at = attr_test ? 2 : 1;  // args[0] is the filtered value
  if (!(by_filter || by_test || attr_test) || call.args.size() <= at) return;
  const Expr& arg = *call.args[at];
  if (arg.kind != ExprKind::Literal || !arg.literal.is_string()) return;
  const std::string& n = arg.literal.str();
  if (by_filter ? find_filter(n) == nullptr : find_test(n) == nullptr)
    throw Error(ErrorKind::Template, fmt::format("{} line {} column {}: unknown {} '{}'", name_, arg.pos.line,
                                                 arg.pos.column, by_filter ? "filter" : "test", n));
}

}  // namespace kern::chat::jinja
