// The parsed template: expressions and statements, with the source position of each for errors.
// Filters and tests are resolved to their implementations at parse time, so a template that
// names one the interpreter lacks fails to load.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kern/chat/jinja_value.hpp"

namespace kern::chat::jinja {

struct Pos {
  std::uint32_t line = 1;
  std::uint32_t column = 1;
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// input, positional args, keyword args -> result
using FilterFn = Value (*)(Interp&, const Value&, const CallArgs&);
using TestFn = bool (*)(Interp&, const Value&, const CallArgs&);

enum class ExprKind : std::uint8_t {
  Literal,  // value
  Name,     // name
  GetAttr,  // args[0] . name
  GetItem,  // args[0] [ args[1] ]
  Slice,    // args[0] [ args[1] : args[2] : args[3] ] (missing parts are null)
  Call,     // args[0] ( args[1..], kwargs )
  Filter,   // args[0] | name ( args[1..], kwargs )
  Test,     // args[0] is [not] name ( args[1..] )
  Not,      // not args[0]
  Neg,      // - args[0]
  Pos,      // + args[0]
  Binary,   // args[0] op args[1]: + - * / // % ** ~
  Compare,  // args[0] ops[0] args[1] ops[1] args[2] ...
  And,
  Or,
  CondExpr,  // args[1] if args[0] else args[2] (args[2] null: Undefined)
  ListLit,
  TupleLit,
  DictLit,  // args: key0, value0, key1, value1, ...
};

struct Expr {
  Expr(ExprKind k, Pos p) : kind(k), pos(p) {}
  ExprKind kind;
  Pos pos;
  std::string name;  // Name, GetAttr attribute, Filter / Test name, Binary operator
  Value literal;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // Compare: == != < <= > >= in notin
  bool negated = false;          // Test: `is not`
  std::uint16_t height = 1;      // of the tree below, bounded by the parser
  FilterFn filter = nullptr;
  TestFn test = nullptr;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class StmtKind : std::uint8_t {
  Text,      // text
  Output,    // {{ expr }}
  If,        // branches (condition, body), else_body
  For,       // targets in expr [if cond]: body, else_body
  Set,       // targets = expr, or ns.attr = expr (attr non-empty)
  SetBlock,  // {% set x %}body{% endset %}
  Macro,     // name(params) body
  Break,
  Continue,
  Scoped,  // {% with %} (assignments in targets/values) and {% generation %}: body in a child scope
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: Undefined when not passed
};

struct Stmt {
  Stmt(StmtKind k, Pos p) : kind(k), pos(p) {}
  StmtKind kind;
  Pos pos;
  std::string text;                                // Text; Macro name; Set attr for `set ns.attr`
  ExprPtr expr;                                    // Output value, For iterable, Set value
  ExprPtr cond;                                    // For filter
  std::vector<std::string> targets;                // For / Set / SetBlock / Scoped names
  std::vector<ExprPtr> values;                     // Scoped (with) values, one per target
  std::vector<std::pair<ExprPtr, Body>> branches;  // If
  Body body;
  Body else_body;
  std::vector<MacroParam> params;  // Macro
};

struct Program {
  std::string name;  // for messages ("chat template")
  Body body;
};

}  // namespace kern::chat::jinja
