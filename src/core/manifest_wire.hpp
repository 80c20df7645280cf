// Internal to the manifest parser: a JSON value with its position in the document, the
// manifest's named constants, and the typed readers every part of the walk shares.
// Paths are a chain of parent links, rendered only when an error is thrown, so the walk over
// a 1 MB manifest builds no strings on the success path.
#pragma once

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kern/base/error.hpp"
#include "kern/base/json.hpp"
#include "kern/core/manifest.hpp"

namespace kern::core::wire {

// A numeric literal as written (or as a constant holds it).
struct Number {
  enum class Kind : std::uint8_t { Unsigned, Negative, Float };
  Kind kind = Kind::Unsigned;
  std::uint64_t u = 0;  // Unsigned
  std::int64_t i = 0;   // Negative
  double f = 0;         // Float
  std::string to_string() const;
};

class Node;

// `constants`: name -> numeric literal (see constants.cpp for where names may stand in).
class Constants {
 public:
  // Reads the top-level `constants` object (`node` is it).
  static Constants read(const Node& node);
  const Number* find(std::string_view name) const;
  bool empty() const { return values_.empty(); }
  const std::map<std::string, Number, std::less<>>& values() const { return values_; }

 private:
  std::map<std::string, Number, std::less<>> values_;
};

class Node {
 public:
  static Node root(const Json& j, const Constants& constants) { return Node(j, nullptr, {}, 0, false, &constants); }
  Node member(std::string_view key, const Json& j) const { return Node(j, this, key, 0, false, constants_); }
  Node element(std::size_t index, const Json& j) const { return Node(j, this, {}, index, true, constants_); }

  const Json& json() const { return *j_; }
  const Constants& constants() const { return *constants_; }
  std::string path() const;

  // Throws Error(ManifestParse, "<path>: <message>").
  [[noreturn]] void fail_here(std::string message) const;
  template <typename... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) const {
    fail_here(fmt::format(f, std::forward<Args>(args)...));
  }

 private:
  Node(const Json& j, const Node* parent, std::string_view key, std::size_t index, bool is_index, const Constants* c)
      : j_(&j), parent_(parent), key_(key), index_(index), is_index_(is_index), constants_(c) {}
  const Json* j_;
  const Node* parent_;
  std::string_view key_;
  std::size_t index_;
  bool is_index_;
  const Constants* constants_;
};

// An object whose keys are all in `allowed` (else: unknown field error naming the key's path).
// `what` names the object kind in messages ("buffer", "launch arg").
class Object {
 public:
  Object(const Node& node, std::string_view what, std::span<const std::string_view> allowed);
  Object(const Node& node, std::string_view what, std::initializer_list<std::string_view> allowed)
      : Object(node, what, std::span<const std::string_view>(allowed.begin(), allowed.size())) {}
  Node required(std::string_view key) const;
  std::optional<Node> optional(std::string_view key) const;
  bool has(std::string_view key) const { return node_.json().contains(key); }
  const Node& node() const { return node_; }

 private:
  const Node& node_;
  std::string_view what_;
};

// The one-line name of a JSON value's type, for messages: "a string", "an array", ...
std::string_view json_type_name(const Json& j);

// Scalars. Every numeric reader accepts a constant's name in place of a literal.
std::string read_string(const Node& n);
std::string read_var_name(const Node& n);  // non-empty string
bool read_bool(const Node& n);
Number read_number(const Node& n, std::string_view expected);
std::uint64_t read_u64(const Node& n);
std::uint32_t read_u32(const Node& n);
std::int64_t read_i64(const Node& n);
Literal read_literal(Literal::Kind kind, const Node& n);
Expr read_expr(const Node& n);
Dim read_dim(const Node& n);
std::vector<Dim> read_shape(const Node& n);
std::vector<std::uint64_t> read_u64_list(const Node& n);
std::array<std::uint32_t, 3> read_u32x3(const Node& n);
DType read_dtype(const Node& n);

void expect_array(const Node& n);
void expect_object(const Node& n, std::string_view what);

template <typename F>
auto read_array(const Node& n, F&& read_one) {
  expect_array(n);
  using T = decltype(read_one(n));
  std::vector<T> out;
  const Json& a = n.json();
  out.reserve(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out.push_back(read_one(n.element(i, a[i])));
  return out;
}

// A string `from_string` knows (it returns an optional value), or Error naming the string as an
// unknown `what` ("buffer kind"), then `expected` in parentheses.
template <typename F>
auto read_named(const Node& n, F&& from_string, std::string_view what, std::string_view expected) {
  std::string s = read_string(n);
  auto v = from_string(s);
  if (!v) n.fail("unknown {} \"{}\" ({})", what, s, expected);
  return *v;
}

// name -> value maps (`what`: "buffers map" for messages).
template <typename F>
auto read_map(const Node& n, std::string_view what, F&& read_one) {
  expect_object(n, what);
  using T = decltype(read_one(n));
  std::map<std::string, T> out;
  const Json& o = n.json();
  for (auto it = o.begin(); it != o.end(); ++it) {
    const std::string& key = it.key();  // a reference into the document: outlives the walk
    out.emplace_hint(out.end(), key, read_one(n.member(key, it.value())));
  }
  return out;
}

}  // namespace kern::core::wire

namespace kern::core::wire {

// The one tag key of an untagged object ("buf", "i32", "ceil_div", ...): exactly one of `tags`
// must be present, else a message naming the object kind (`what`) and the keys found.
std::string_view untagged_form(const Node& n, std::string_view what, std::initializer_list<std::string_view> tags);

// The forms call args, launch args and pack fields share, each where its Kind has it: param,
// scratch, var, expr, rank and the literals (T: CallArg, LaunchArg or PackField; the tag is one
// untagged_form allowed). False for a form of T's own, `out` untouched.
template <class T>
bool read_shared_form(T& out, std::string_view tag, const Node& src) {
  using K = typename T::Kind;
  auto named = [&](K kind, std::string name) {
    out.kind = kind;
    out.name = std::move(name);
    return true;
  };
  if constexpr (requires { K::Param; })
    if (tag == "param") {
      out.kind = K::Param;
      out.param = read_u32(src);
      return true;
    }
  if constexpr (requires { K::Scratch; })
    if (tag == "scratch") return named(K::Scratch, read_string(src));
  if constexpr (requires { K::Var; })
    if (tag == "var") return named(K::Var, read_var_name(src));
  if constexpr (requires { K::Expr; })
    if (tag == "expr") {
      out.kind = K::Expr;
      out.expr = read_expr(src);
      return true;
    }
  if (tag == "rank") return named(K::Rank, read_string(src));
  auto lit = literal_kind_from_string(tag);
  if (!lit) return false;
  out.kind = K::Literal;
  out.literal = read_literal(*lit, src);
  return true;
}

// Why `s` is not a param type (for messages); called only when parse_param_type(s) failed.
std::string param_type_problem(std::string_view s);
ParamType read_param_type(const Node& n);

// The parts of the walk, one per top-level section (files manifest_parse_*.cpp).
Buffer read_buffer(const Node& n);
Op read_op(const Node& n);
Program read_program(const Node& n);

}  // namespace kern::core::wire
