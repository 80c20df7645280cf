// `is` tests, with Python's types: bool counts as a number, Undefined is iterable and a
// sequence (it has __iter__, __len__ and __getitem__), a dict is a sequence too.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "chat/jinja_builtins.hpp"
#include "chat/jinja_unicode.hpp"

namespace kern::chat::jinja {

namespace {

using K = Value::Kind;

const Value& one_arg(std::string_view test, const CallArgs& a) {
  if (a.positional.size() != 1 || !a.keyword.empty()) fault(fmt::format("test '{}' takes one argument", test));
  return a.positional[0];
}
void no_args(std::string_view test, const CallArgs& a) {
  if (!a.positional.empty() || !a.keyword.empty()) fault(fmt::format("test '{}' takes no arguments", test));
}

#define KERN_SIMPLE_TEST(fname, label, expr)               \
  bool fname(Interp&, const Value& v, const CallArgs& a) { \
    no_args(label, a);                                     \
    return expr;                                           \
  }

KERN_SIMPLE_TEST(t_defined, "defined", !v.is_undefined())
KERN_SIMPLE_TEST(t_undefined, "undefined", v.is_undefined())
KERN_SIMPLE_TEST(t_none, "none", v.is_none())
KERN_SIMPLE_TEST(t_string, "string", v.is_string())
KERN_SIMPLE_TEST(t_number, "number", v.is_number())
KERN_SIMPLE_TEST(t_integer, "integer", v.kind() == K::Int)
KERN_SIMPLE_TEST(t_float, "float", v.kind() == K::Float)
KERN_SIMPLE_TEST(t_boolean, "boolean", v.kind() == K::Bool)
KERN_SIMPLE_TEST(t_true, "true", v.kind() == K::Bool && v.as_bool())
KERN_SIMPLE_TEST(t_false, "false", v.kind() == K::Bool && !v.as_bool())
KERN_SIMPLE_TEST(t_mapping, "mapping", v.is_dict())
KERN_SIMPLE_TEST(t_callable, "callable", v.kind() == K::Callable)
KERN_SIMPLE_TEST(t_iterable, "iterable", v.is_undefined() || v.is_string() || v.is_sequence() || v.is_dict())
KERN_SIMPLE_TEST(t_sequence, "sequence", v.is_undefined() || v.is_string() || v.is_sequence() || v.is_dict())
KERN_SIMPLE_TEST(t_lower, "lower", v.is_string() && str_lower(v.str()) == v.str())
KERN_SIMPLE_TEST(t_upper, "upper", v.is_string() && str_upper(v.str()) == v.str())
#undef KERN_SIMPLE_TEST

std::int64_t integer_of(std::string_view test, const Value& v) {
  if (!v.is_integral()) fault(fmt::format("test '{}' needs an integer, not {}", test, type_name(v)));
  return v.as_int();
}
bool t_odd(Interp&, const Value& v, const CallArgs& a) { return no_args("odd", a), integer_of("odd", v) % 2 != 0; }
bool t_even(Interp&, const Value& v, const CallArgs& a) { return no_args("even", a), integer_of("even", v) % 2 == 0; }
bool t_divisibleby(Interp&, const Value& v, const CallArgs& a) {
  const std::int64_t d = integer_of("divisibleby", one_arg("divisibleby", a));
  if (d == 0) fault("integer division or modulo by zero");
  return d == -1 || integer_of("divisibleby", v) % d == 0;
}

bool t_eq(Interp&, const Value& v, const CallArgs& a) { return equals(v, one_arg("eq", a)); }
bool t_ne(Interp&, const Value& v, const CallArgs& a) { return !equals(v, one_arg("ne", a)); }
bool t_lt(Interp&, const Value& v, const CallArgs& a) { return less(v, one_arg("lt", a)); }
bool t_gt(Interp&, const Value& v, const CallArgs& a) { return less(one_arg("gt", a), v); }
bool t_le(Interp&, const Value& v, const CallArgs& a) {
  const Value& o = one_arg("le", a);
  return less(v, o) || equals(v, o);
}
bool t_ge(Interp&, const Value& v, const CallArgs& a) {
  const Value& o = one_arg("ge", a);
  return less(o, v) || equals(v, o);
}
bool t_in(Interp&, const Value& v, const CallArgs& a) { return contains(one_arg("in", a), v); }
bool t_sameas(Interp&, const Value& v, const CallArgs& a) {
  const Value& o = one_arg("sameas", a);
  if (v.kind() != o.kind()) return false;
  switch (v.kind()) {
    case K::Undefined:
    case K::None: return true;
    case K::Bool: return v.as_bool() == o.as_bool();
    case K::Int: return v.as_int() == o.as_int();  // CPython caches small ints; templates compare those
    case K::Float: return false;
    default: return v.identity() == o.identity();
  }
}

constexpr Named<TestFn> kTests[] = {
    {"!=", t_ne},
    {"<", t_lt},
    {"<=", t_le},
    {"==", t_eq},
    {">", t_gt},
    {">=", t_ge},
    {"boolean", t_boolean},
    {"callable", t_callable},
    {"defined", t_defined},
    {"divisibleby", t_divisibleby},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"even", t_even},
    {"false", t_false},
    {"float", t_float},
    {"ge", t_ge},
    {"greaterthan", t_gt},
    {"gt", t_gt},
    {"in", t_in},
    {"integer", t_integer},
    {"iterable", t_iterable},
    {"le", t_le},
    {"lessthan", t_lt},
    {"lower", t_lower},
    {"lt", t_lt},
    {"mapping", t_mapping},
    {"ne", t_ne},
    {"none", t_none},
    {"number", t_number},
    {"odd", t_odd},
    {"sameas", t_sameas},
    {"sequence", t_sequence},
    {"string", t_string},
    {"true", t_true},
    {"undefined", t_undefined},
    {"upper", t_upper},
};

}  // namespace

TestFn find_test(std::string_view name) { return find_named(kTests, name); }

}  // namespace kern::chat::jinja
