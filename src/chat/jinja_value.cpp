#include "kern/chat/jinja_value.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "chat/jinja_unicode.hpp"

namespace kern::chat::jinja {

namespace {
// Values nest only as deep as a template or the request builds them, but a namespace can be
// made to hold itself; walks stop here instead of overflowing the stack.
constexpr int kMaxValueDepth = Value::kMaxDepth;

void check_value_depth(int depth) {
  if (depth > kMaxValueDepth)
    fault(fmt::format("value nesting deeper than {} (a cycle through a namespace?)", kMaxValueDepth));
}
}  // namespace

void fault(std::string message) { throw Fault{std::move(message)}; }

const Value* Dict::find(std::string_view key) const {
  if (items_.size() <= 8) {
    for (const auto& kv : items_)
      if (kv.first == key) return &kv.second;
    return nullptr;
  }
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

void Dict::set(std::string key, Value value) {
  for (std::size_t i = 0; i < items_.size() && items_.size() <= 8; ++i) {
    if (items_[i].first == key) {
      items_[i].second = std::move(value);
      return;
    }
  }
  if (items_.size() > 8) {
    auto it = index_.find(std::string_view(key));
    if (it != index_.end()) {
      items_[it->second].second = std::move(value);
      return;
    }
  }
  items_.emplace_back(std::move(key), std::move(value));
  if (items_.size() == 9) {
    for (std::size_t i = 0; i < items_.size(); ++i) index_.emplace(items_[i].first, i);
  } else if (items_.size() > 9) {
    index_.emplace(items_.back().first, items_.size() - 1);
  }
}

void Dict::clear() {
  items_.clear();
  index_.clear();
}

Value Value::undefined(std::string name) {
  Value v;
  if (!name.empty()) v.data_ = std::make_shared<const std::string>(std::move(name));
  return v;
}
template <class T>
Value Value::of(Kind kind, T data) {
  Value v;
  v.kind_ = kind;
  v.data_ = std::move(data);
  return v;
}
Value Value::none() { return of(Kind::None, std::monostate{}); }
Value Value::boolean(bool b) { return of(Kind::Bool, b); }
Value Value::integer(std::int64_t i) { return of(Kind::Int, i); }
Value Value::real(double d) { return of(Kind::Float, d); }
Value Value::string(std::string s) { return of(Kind::String, std::make_shared<const std::string>(std::move(s))); }
Value Value::list(ValueList items) {
  Value v;
  v.kind_ = Kind::List;
  for (const Value& x : items) v.depth_ = std::max(v.depth_, x.depth_);
  if (++v.depth_ > kMaxDepth) fault(fmt::format("lists and dicts nested deeper than {}", kMaxDepth));
  v.data_ = std::make_shared<const ValueList>(std::move(items));
  return v;
}
Value Value::tuple(ValueList items) {
  Value v = list(std::move(items));
  v.kind_ = Kind::Tuple;
  return v;
}
Value Value::dict(Dict d) { return dict(std::make_shared<const Dict>(std::move(d))); }
Value Value::dict(std::shared_ptr<const Dict> d) {
  Value v;
  v.kind_ = Kind::Dict;
  for (const auto& kv : d->items()) v.depth_ = std::max(v.depth_, kv.second.depth_);
  if (++v.depth_ > kMaxDepth) fault(fmt::format("lists and dicts nested deeper than {}", kMaxDepth));
  v.data_ = std::move(d);
  return v;
}
Value Value::namespace_object(std::shared_ptr<Dict> attrs) {
  Value v;
  v.kind_ = Kind::Namespace;
  v.depth_ = 1;
  v.data_ = std::move(attrs);
  return v;
}
Value Value::callable(std::shared_ptr<const Callable> fn) { return of(Kind::Callable, std::move(fn)); }

std::int64_t Value::as_int() const {
  return kind_ == Kind::Bool ? std::get<bool>(data_) : std::get<std::int64_t>(data_);
}

double Value::as_float() const {
  if (kind_ == Kind::Float) return std::get<double>(data_);
  return static_cast<double>(as_int());
}

std::string Value::undefined_name() const {
  if (const auto* s = std::get_if<std::shared_ptr<const std::string>>(&data_)) return **s;
  return {};
}

const void* Value::identity() const {
  return std::visit(
      [](const auto& x) -> const void* {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate> || std::is_same_v<T, bool> || std::is_same_v<T, std::int64_t> ||
                      std::is_same_v<T, double>) {
          return nullptr;
        } else {
          return x.get();
        }
      },
      data_);
}

std::string_view type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "Undefined";
    case Value::Kind::None: return "NoneType";
    case Value::Kind::Bool: return "bool";
    case Value::Kind::Int: return "int";
    case Value::Kind::Float: return "float";
    case Value::Kind::String: return "str";
    case Value::Kind::List: return "list";
    case Value::Kind::Tuple: return "tuple";
    case Value::Kind::Dict: return "dict";
    case Value::Kind::Namespace: return "Namespace";
    case Value::Kind::Callable: return "function";
  }
  return "object";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return false;
    case Value::Kind::Bool: return v.as_bool();
    case Value::Kind::Int: return v.as_int() != 0;
    case Value::Kind::Float: return v.as_float() != 0.0;
    case Value::Kind::String: return !v.str().empty();
    case Value::Kind::List:
    case Value::Kind::Tuple: return !v.items().empty();
    case Value::Kind::Dict: return v.dict().size() != 0;
    case Value::Kind::Namespace:
    case Value::Kind::Callable: return true;
  }
  return true;
}

namespace {

bool equals_at(const Value& a, const Value& b, int depth) {
  check_value_depth(depth);
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
    return a.as_float() == b.as_float();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return true;
    case Value::Kind::String: return a.str() == b.str();
    case Value::Kind::List:
    case Value::Kind::Tuple: {
      const auto &x = a.items(), &y = b.items();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i)
        if (!equals_at(x[i], y[i], depth + 1)) return false;
      return true;
    }
    case Value::Kind::Dict: {
      const Dict &x = a.dict(), &y = b.dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.items()) {
        const Value* w = y.find(k);
        if (!w || !equals_at(v, *w, depth + 1)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

bool less_at(const Value& a, const Value& b, int depth) {
  check_value_depth(depth);
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() < b.as_int();
    return a.as_float() < b.as_float();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 byte order is code point order
  if (a.kind() == b.kind() && a.is_sequence()) {
    const auto &x = a.items(), &y = b.items();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals_at(x[i], y[i], depth + 1)) return less_at(x[i], y[i], depth + 1);
    }
    return x.size() < y.size();
  }
  if (a.is_undefined() || b.is_undefined())
    fault(fmt::format("'{}' is undefined", (a.is_undefined() ? a : b).undefined_name()));
  fault(fmt::format("'<' not supported between instances of '{}' and '{}'", type_name(a), type_name(b)));
}

Value from_json_at(const nlohmann::ordered_json& j, int depth) {
  check_value_depth(depth);
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<std::int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = j.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        fault(fmt::format("integer {} does not fit in 64 bits", u));
      return Value::integer(static_cast<std::int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::real(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(from_json_at(x, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (const auto& [k, x] : j.items()) d.set(k, from_json_at(x, depth + 1));
      return Value::dict(std::move(d));
    }
    default: fault("unsupported JSON value (binary)");
  }
}

}  // namespace

bool equals(const Value& a, const Value& b) { return equals_at(a, b, 0); }
bool less(const Value& a, const Value& b) { return less_at(a, b, 0); }

std::size_t length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return 0;
    case Value::Kind::String: return code_point_count(v.str());
    case Value::Kind::List:
    case Value::Kind::Tuple: return v.items().size();
    case Value::Kind::Dict: return v.dict().size();
    default: fault(fmt::format("object of type '{}' has no len()", type_name(v)));
  }
}

ValueList iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::String: {
      ValueList out;
      const std::string& s = v.str();
      for (std::size_t i = 0; i < s.size();) {
        const std::size_t start = i;
        next_code_point(s, i);
        out.push_back(Value::string(s.substr(start, i - start)));
      }
      return out;
    }
    case Value::Kind::List:
    case Value::Kind::Tuple: return v.items();
    case Value::Kind::Dict: {
      ValueList out;
      out.reserve(v.dict().size());
      for (const auto& kv : v.dict().items()) out.push_back(Value::string(kv.first));
      return out;
    }
    default: fault(fmt::format("'{}' object is not iterable", type_name(v)));
  }
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::Undefined: return false;
    case Value::Kind::String:
      if (!item.is_string())
        fault(fmt::format("'in <string>' requires string as left operand, not {}", type_name(item)));
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::List:
    case Value::Kind::Tuple:
      for (const auto& x : container.items())
        if (equals(x, item)) return true;
      return false;
    case Value::Kind::Dict: return item.is_string() && container.dict().find(item.str()) != nullptr;
    default: fault(fmt::format("argument of type '{}' is not iterable", type_name(container)));
  }
}

Value from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 0); }

}  // namespace kern::chat::jinja
