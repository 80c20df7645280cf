// The evaluator: walks a Program with Jinja's scoping (a for body or macro gets its own scope,
// if does not) and the render limits. Builtins reach it to charge work and to call macros.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_ast.hpp"
#include "kern/chat/jinja.hpp"

namespace kern::chat::jinja {

struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* find(std::string_view name) const;
  void set(const std::string& name, Value v);
};

class Interp {
 public:
  Interp(const Program& program, const RenderLimits& limits);
  ~Interp();
  Interp(const Interp&) = delete;
  Interp& operator=(const Interp&) = delete;

  std::string render(const Value& globals);

  // Charges work against max_steps; a string or list of `size` elements is also checked against max_output.
  void charge(std::uint64_t steps);
  void charge_size(std::size_t size);
  std::shared_ptr<Dict> new_namespace();
  Value call_macro(const Stmt& macro, const std::weak_ptr<Scope>& defined_in, const CallArgs& args);

 private:
  enum class Flow { Normal, Break, Continue };

  const Program& program_;
  const RenderLimits& limits_;
  std::uint64_t steps_ = 0;
  int call_depth_ = 0;
  std::shared_ptr<Scope> scope_;
  std::vector<std::shared_ptr<Dict>> namespaces_;  // cleared at the end: they may reference each other

  Flow exec_body(const Body& body, std::string& out);
  Flow exec(const Stmt& s, std::string& out);
  Flow exec_for(const Stmt& s, std::string& out);
  void exec_set(const Stmt& s);
  void emit(std::string& out, std::string_view text);
  void assign(const std::vector<std::string>& targets, const Value& v);

  Value eval(const Expr& e);
  Value eval_inner(const Expr& e);
  Value eval_name(const Expr& e);
  Value eval_call(const Expr& e);
  Value eval_compare(const Expr& e);
  Value eval_literal_container(const Expr& e);
  CallArgs eval_args(const Expr& e, std::size_t first);
  [[noreturn]] void fail_at(Pos p, const std::string& message) const;
};

// Python's binary operators on values (+ - * / // % ** ~), charging `interp` for what they build.
Value binary_op(Interp& interp, std::string_view op, const Value& a, const Value& b);

}  // namespace kern::chat::jinja
