// What templates can call: filters, tests, methods of str and dict, attribute and item access
// as the sandbox does them, and the globals (range, namespace, dict, raise_exception, ...).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string_view>
#include <vector>

#include "chat/jinja_ast.hpp"
#include "kern/chat/jinja_value.hpp"

namespace kern::chat::jinja {

FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);

// A builtin's name and function, in the tables the lookups scan.
template <class Fn>
struct Named {
  std::string_view name;
  Fn fn;
};
template <class Fn, std::size_t N>
Fn find_named(const Named<Fn> (&table)[N], std::string_view name) {
  for (const Named<Fn>& e : table)
    if (e.name == name) return e.fn;
  return nullptr;
}
bool is_supported_method(std::string_view name);
bool is_global_function(std::string_view name);
Value global_function(std::string_view name);  // Undefined when not a global

// Jinja's sandboxed getattr / getitem: methods first for `.name` on str and dict, then keys;
// missing keys are Undefined; Undefined itself cannot be looked into.
Value get_attr(const Value& obj, std::string_view name);
Value get_item(const Value& obj, const Value& key);
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// `attribute='a.b.0'` as map / selectattr / sort take it.
Value get_path(const Value& obj, std::string_view path);

// Python-style argument binding for builtins: positional then keyword, by the names given.
class Bound {
 public:
  Bound(std::string_view fn, const CallArgs& args, std::initializer_list<std::string_view> names);
  bool has(std::size_t i) const { return present_[i]; }
  const Value& operator[](std::size_t i) const { return values_[i]; }
  const Value& get(std::size_t i, const Value& fallback) const { return present_[i] ? values_[i] : fallback; }
  std::int64_t get_int(std::size_t i, std::int64_t fallback) const;
  bool get_bool(std::size_t i, bool fallback) const;

 private:
  std::string_view fn_;
  std::vector<Value> values_;
  std::vector<bool> present_;
};

// Helpers the builtins share.
Value str_split(std::string_view s, const Value& sep, std::int64_t maxsplit);
Value str_replace(Interp& in, std::string_view s, std::string_view old, std::string_view repl, std::int64_t count);
std::string html_escape(std::string_view s);
Value str_splitlines(std::string_view s, bool keepends);  // Python's str.splitlines

}  // namespace kern::chat::jinja
