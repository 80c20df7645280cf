// Recursive-descent parser from tokens to the AST, with Jinja's operator precedence. Nesting
// is bounded; filters, tests, tags and called functions the interpreter lacks are load errors.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_ast.hpp"
#include "chat/jinja_lexer.hpp"

namespace kern::chat::jinja {

constexpr int kMaxExprHeight = 400;
struct ExprTooDeep {};

// Throws Error(Template) "NAME line L column C: ...".
std::shared_ptr<const Program> parse_program(std::string_view source, std::string name);

class Parser {
 public:
  Parser(std::string name, std::string source);
  std::shared_ptr<const Program> run();

 private:
  friend class DepthGuard;
  std::string name_;
  std::string source_;
  std::vector<std::size_t> line_starts_;
  std::vector<Token> toks_;
  std::size_t at_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  int macro_depth_ = 0;
  std::set<std::string, std::less<>> assigned_;  // every name a set / for / macro / with binds
  struct PendingCall {
    Pos pos;
    std::string name;
    bool method;
  };
  std::vector<PendingCall> pending_;

  // tokens
  const Token& cur() const { return toks_[at_]; }
  const Token& peek(std::size_t n = 1) const { return toks_[std::min(at_ + n, toks_.size() - 1)]; }
  bool is_op(std::string_view op) const { return cur().type == Tok::Op && cur().text == op; }
  bool is_name(std::string_view n) const { return cur().type == Tok::Name && cur().text == n; }
  bool skip_op(std::string_view op);
  bool skip_name(std::string_view n);
  void expect_op(std::string_view op);
  std::string expect_name(std::string_view what);
  void expect_block_end(std::string_view tag);
  Pos pos_of(const Token& t) const;
  Pos pos() const { return pos_of(cur()); }
  std::string describe(const Token& t) const;
  [[noreturn]] void fail_at(const Token& t, const std::string& message) const;
  [[noreturn]] void fail(const std::string& message) const { fail_at(cur(), message); }

  // statements (jinja_parse_stmt.cpp)
  Body parse_body(std::initializer_list<std::string_view> ends, std::string& ended);
  StmtPtr parse_statement();
  StmtPtr parse_if(Pos p);
  StmtPtr parse_for(Pos p);
  StmtPtr parse_set(Pos p);
  StmtPtr parse_macro(Pos p);
  StmtPtr parse_with(Pos p);
  std::vector<std::string> parse_targets(std::string_view tag);
  void check_pending() const;

  // expressions (jinja_parse_expr.cpp)
 public:
  ExprPtr parse_tuple(bool with_cond);
  ExprPtr parse_expression(bool with_cond = true);

 private:
  template <class Next>
  ExprPtr fold_binary(std::initializer_list<std::string_view> ops, Next next);
  ExprPtr parse_left_fold(std::string_view word, ExprKind kind, ExprPtr (Parser::*next)());
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_sequence(ExprKind kind, Pos p, std::string_view close);
  ExprPtr parse_dict(Pos p);
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_filter(ExprPtr node);
  ExprPtr parse_test(ExprPtr node);
  ExprPtr parse_call(ExprPtr callee);
  void parse_call_args(Expr& into);
  void check_literal_names(const Expr& call) const;
};

// Counts parser recursion: a template nesting deeper than kMaxDepth fails to load instead of
// overflowing the stack (the renderer walks the same tree, so it is bounded too).
class DepthGuard {
 public:
  static constexpr int kMaxDepth = 100;
  explicit DepthGuard(Parser& p) : p_(p) {
    if (++p_.depth_ > kMaxDepth) p_.fail(fmt::format("nesting deeper than {} levels", kMaxDepth));
  }
  ~DepthGuard() { --p_.depth_; }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;

 private:
  Parser& p_;
};

}  // namespace kern::chat::jinja
