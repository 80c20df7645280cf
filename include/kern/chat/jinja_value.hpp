// The values a chat template computes with, modelled on the Python objects Jinja2 hands around:
// None and Undefined are distinct, bool is a kind of int, dicts keep insertion order, strings
// index by code point, and printing follows str()/repr(). Lists and dicts are immutable once
// built (transformers renders in an immutable sandbox), so values share them freely; the one
// mutable object is a namespace().
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace kern::chat::jinja {

class Value;
class Dict;
class Callable;
class Interp;
using ValueList = std::vector<Value>;

// Raised by value operations (a Python TypeError, ValueError, ...); the evaluator adds the
// template position and turns it into a kern::Error.
struct Fault {
  std::string message;
};
[[noreturn]] void fault(std::string message);

class Value {
 public:
  enum class Kind : std::uint8_t { Undefined, None, Bool, Int, Float, String, List, Tuple, Dict, Namespace, Callable };
  // Lists and dicts nest at most this deep (a Fault beyond), so walking or destroying one stays
  // within the stack; a namespace counts as one level (its attributes are cleared after a render).
  static constexpr int kMaxDepth = 200;

  Value() = default;  // Undefined
  static Value undefined(std::string name);
  static Value none();
  static Value boolean(bool b);
  static Value integer(std::int64_t i);
  static Value real(double d);
  static Value string(std::string s);
  static Value list(ValueList items);
  static Value tuple(ValueList items);
  static Value dict(Dict d);
  static Value dict(std::shared_ptr<const Dict> d);
  static Value namespace_object(std::shared_ptr<Dict> attrs);
  static Value callable(std::shared_ptr<const Callable> fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_sequence() const { return kind_ == Kind::List || kind_ == Kind::Tuple; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_number() const { return kind_ == Kind::Bool || kind_ == Kind::Int || kind_ == Kind::Float; }
  bool is_integral() const { return kind_ == Kind::Bool || kind_ == Kind::Int; }

  bool as_bool() const { return std::get<bool>(data_); }
  std::int64_t as_int() const;  // Bool or Int
  double as_float() const;      // any number
  const std::string& str() const { return *std::get<std::shared_ptr<const std::string>>(data_); }
  const ValueList& items() const { return *std::get<std::shared_ptr<const ValueList>>(data_); }
  const Dict& dict() const { return *std::get<std::shared_ptr<const Dict>>(data_); }
  Dict& attrs() const { return *std::get<std::shared_ptr<Dict>>(data_); }
  const Callable& fn() const { return *std::get<std::shared_ptr<const Callable>>(data_); }
  // The name an Undefined was looked up by, for messages ("'x' is undefined").
  std::string undefined_name() const;
  const void* identity() const;  // for `is sameas`

 private:
  template <class T>
  static Value of(Kind kind, T data);  // a leaf value (depth 0)

  Kind kind_ = Kind::Undefined;
  std::uint16_t depth_ = 0;
  std::variant<std::monostate, bool, std::int64_t, double, std::shared_ptr<const std::string>,
               std::shared_ptr<const ValueList>, std::shared_ptr<const Dict>, std::shared_ptr<Dict>,
               std::shared_ptr<const Callable>>
      data_;
};

// String-keyed mapping in insertion order (Python dicts with str keys, Jinja namespaces).
class Dict {
 public:
  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);  // replaces in place, or appends
  std::size_t size() const { return items_.size(); }
  const std::vector<std::pair<std::string, Value>>& items() const { return items_; }
  void clear();

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::pair<std::string, Value>> items_;
  std::unordered_map<std::string, std::size_t, Hash, std::equal_to<>> index_;
};

struct CallArgs {
  ValueList positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// Macros, globals (range, namespace, ...) and bound methods ('a'.upper, d.items).
class Callable {
 public:
  virtual ~Callable() = default;
  virtual std::string_view name() const = 0;
  virtual Value call(const CallArgs& args, Interp& interp) const = 0;
};

// Python's type name of a value, for messages ("NoneType", "str", "dict").
std::string_view type_name(const Value& v);

bool truthy(const Value& v);
bool equals(const Value& a, const Value& b);
bool less(const Value& a, const Value& b);  // Python's a < b; Fault when unorderable
// Python's len(); Undefined has length 0 as in Jinja.
std::size_t length(const Value& v);
// What `for x in v` walks: list items, string code points, dict keys; Undefined is empty.
ValueList iterate(const Value& v);
bool contains(const Value& container, const Value& item);  // Python's `item in container`

// str() as Jinja prints it ("" for Undefined), repr(), and Python float repr.
std::string to_str(const Value& v);
std::string repr(const Value& v);
std::string float_repr(double d);

struct JsonStyle {
  std::string indent;  // empty with has_indent: newlines only
  bool has_indent = false;
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool ensure_ascii = false;
  bool sort_keys = false;
};
// json.dumps(v, ...) with Python's float formatting.
std::string to_json(const Value& v, const JsonStyle& style);

// Request JSON to values, keeping key order; integers beyond int64 are refused.
Value from_json(const nlohmann::ordered_json& j);

}  // namespace kern::chat::jinja
