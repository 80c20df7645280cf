// Attribute, item and slice access as Jinja's sandbox performs them, argument binding, and the
// global functions templates may call.
#include <fmt/format.h>

#include <algorithm>
#include <ctime>

#include "chat/jinja_builtins.hpp"
#include "chat/jinja_render.hpp"
#include "chat/jinja_unicode.hpp"

namespace kern::chat::jinja {

Bound::Bound(std::string_view fn, const CallArgs& args, std::initializer_list<std::string_view> names)
    : fn_(fn), values_(names.size()), present_(names.size(), false) {
  if (args.positional.size() > names.size())
    fault(fmt::format("{}() takes at most {} arguments ({} given)", fn, names.size(), args.positional.size()));
  for (std::size_t i = 0; i < args.positional.size(); ++i) {
    values_[i] = args.positional[i];
    present_[i] = true;
  }
  for (const auto& [key, v] : args.keyword) {
    const auto it = std::find(names.begin(), names.end(), key);
    if (it == names.end()) fault(fmt::format("{}() got an unexpected keyword argument '{}'", fn, key));
    const auto i = static_cast<std::size_t>(it - names.begin());
    if (present_[i]) fault(fmt::format("{}() got multiple values for argument '{}'", fn, key));
    values_[i] = v;
    present_[i] = true;
  }
}

std::int64_t Bound::get_int(std::size_t i, std::int64_t fallback) const {
  if (!present_[i] || values_[i].is_none()) return fallback;
  if (!values_[i].is_integral()) fault(fmt::format("{}(): expected an integer, got {}", fn_, type_name(values_[i])));
  return values_[i].as_int();
}

bool Bound::get_bool(std::size_t i, bool fallback) const { return present_[i] ? truthy(values_[i]) : fallback; }

namespace {

constexpr std::string_view kDictMethods[] = {"items",      "keys",   "values", "get",  "pop",     "popitem",
                                             "setdefault", "update", "clear",  "copy", "fromkeys"};
constexpr std::string_view kStrMethods[] = {"startswith", "endswith", "strip",      "lstrip", "rstrip",
                                            "split",      "replace",  "upper",      "lower",  "title",
                                            "capitalize", "join",     "splitlines", "find"};

template <std::size_t N>
bool one_of(const std::string_view (&set)[N], std::string_view name) {
  return std::find(std::begin(set), std::end(set), name) != std::end(set);
}

[[noreturn]] void undefined_access(const Value& obj) {
  fault(fmt::format("'{}' is undefined", obj.undefined_name().empty() ? "value" : obj.undefined_name()));
}

std::u32string chars_arg(const Value& v, std::string_view fn) {
  if (!v.is_string()) fault(fmt::format("{} arg must be None or str", fn));
  return to_u32(v.str());
}

bool affix_matches(const std::string& s, const Value& affix, bool prefix, std::string_view fn) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) fault(fmt::format("{} first arg must be str or a tuple of str, not {}", fn, type_name(a)));
    const std::string& x = a.str();
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.kind() == Value::Kind::Tuple) return std::any_of(affix.items().begin(), affix.items().end(), one);
  return one(affix);
}

Value str_method(Interp& interp, const std::string& s, std::string_view name, const CallArgs& args) {
  interp.charge(1 + s.size() / 64);
  if (name == "startswith" || name == "endswith") {
    Bound b(name, args, {"prefix"});
    if (!b.has(0)) fault(fmt::format("{}() takes at least 1 argument", name));
    return Value::boolean(affix_matches(s, b[0], name == "startswith", name));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    Bound b(name, args, {"chars"});
    const bool given = b.has(0) && !b[0].is_none();
    const std::u32string chars = given ? chars_arg(b[0], name) : std::u32string();
    return Value::string(std::string(str_strip(s, given ? &chars : nullptr, name != "rstrip", name != "lstrip")));
  }
  if (name == "split") {
    Bound b(name, args, {"sep", "maxsplit"});
    return str_split(s, b.get(0, Value::none()), b.get_int(1, -1));
  }
  if (name == "replace") {
    Bound b(name, args, {"old", "new", "count"});
    if (!b.has(1) || !b[0].is_string() || !b[1].is_string()) fault("replace() takes two str arguments");
    return str_replace(interp, s, b[0].str(), b[1].str(), b.get_int(2, -1));
  }
  if (name == "upper") return Bound(name, args, {}), Value::string(str_upper(s));
  if (name == "lower") return Bound(name, args, {}), Value::string(str_lower(s));
  if (name == "title") return Bound(name, args, {}), Value::string(str_title(s));
  if (name == "capitalize") return Bound(name, args, {}), Value::string(str_capitalize(s));
  if (name == "splitlines") return str_splitlines(s, Bound(name, args, {"keepends"}).get_bool(0, false));
  if (name == "find") {
    Bound b(name, args, {"sub"});
    if (!b.has(0) || !b[0].is_string()) fault("find() takes a str argument");
    const std::size_t at = s.find(b[0].str());
    return Value::integer(
        at == std::string::npos ? -1 : static_cast<std::int64_t>(code_point_count(std::string_view(s).substr(0, at))));
  }
  if (name == "join") {
    Bound b(name, args, {"iterable"});
    const ValueList items = iterate(b[0]);
    std::string out;
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string())
        fault(fmt::format("sequence item {}: expected str instance, {} found", i, type_name(items[i])));
      if (i) out += s;
      out += items[i].str();
      interp.charge_size(out.size());
    }
    return Value::string(std::move(out));
  }
  fault(fmt::format("str.{} is not supported", name));
}

Value dict_method(Interp& interp, const Dict& d, std::string_view name, const CallArgs& args) {
  interp.charge(1 + d.size());
  if (name == "get") {
    Bound b(name, args, {"key", "default"});
    if (!b.has(0)) fault("get() takes at least 1 argument");
    const Value* v = b[0].is_string() ? d.find(b[0].str()) : nullptr;
    return v ? *v : b.get(1, Value::none());
  }
  Bound(name, args, {});
  ValueList out;
  for (const auto& [k, v] : d.items()) {
    if (name == "items")
      out.push_back(Value::tuple({Value::string(k), v}));
    else if (name == "keys")
      out.push_back(Value::string(k));
    else if (name == "values")
      out.push_back(v);
    else
      fault(fmt::format("dict.{} is not allowed: the template environment is immutable", name));
  }
  return Value::list(std::move(out));
}

class Method : public Callable {
 public:
  Method(Value self, std::string_view name) : self_(std::move(self)), name_(name) {}
  std::string_view name() const override { return name_; }
  Value call(const CallArgs& args, Interp& interp) const override {
    if (self_.is_string()) return str_method(interp, self_.str(), name_, args);
    return dict_method(interp, self_.dict(), name_, args);
  }

 private:
  Value self_;
  std::string name_;
};

std::int64_t clamp_index(std::int64_t v, std::int64_t n, bool negative_step) {
  if (v < 0) {
    v += n;
    if (v < 0) v = negative_step ? -1 : 0;
  } else if (v >= n) {
    v = negative_step ? n - 1 : n;
  }
  return v;
}

}  // namespace

Value str_splitlines(std::string_view s, bool keepends) {
  ValueList out;
  std::size_t start = 0;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t at = i;
    const char32_t c = next_code_point(s, i);
    const bool brk = c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || (c >= 0x1c && c <= 0x1e) || c == 0x85 ||
                     c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    if (c == '\r' && i < s.size() && s[i] == '\n') ++i;
    out.push_back(Value::string(std::string(s.substr(start, (keepends ? i : at) - start))));
    start = i;
  }
  if (start < s.size()) out.push_back(Value::string(std::string(s.substr(start))));
  return Value::list(std::move(out));
}

bool is_supported_method(std::string_view name) {
  return one_of(kStrMethods, name) || name == "items" || name == "keys" || name == "values" || name == "get" ||
         name == "cycle";
}

Value get_attr(const Value& obj, std::string_view name) {
  switch (obj.kind()) {
    case Value::Kind::Undefined: undefined_access(obj);
    case Value::Kind::Dict: {
      if (one_of(kDictMethods, name)) return Value::callable(std::make_shared<Method>(obj, name));
      const Value* v = obj.dict().find(name);
      return v ? *v : Value::undefined(std::string(name));
    }
    case Value::Kind::String:
      if (one_of(kStrMethods, name)) return Value::callable(std::make_shared<Method>(obj, name));
      return Value::undefined(std::string(name));
    case Value::Kind::Namespace: {
      const Value* v = obj.attrs().find(name);
      return v ? *v : Value::undefined(std::string(name));
    }
    default: return Value::undefined(std::string(name));
  }
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_access(obj);
  if (key.is_integral() && (obj.is_sequence() || obj.is_string())) {
    const std::int64_t n = static_cast<std::int64_t>(length(obj));
    std::int64_t i = key.as_int();
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined(to_str(key));
    if (obj.is_sequence()) return obj.items()[static_cast<std::size_t>(i)];
    const std::string& s = obj.str();
    if (is_ascii(s)) return Value::string(s.substr(static_cast<std::size_t>(i), 1));
    return Value::string(to_utf8(to_u32(s).substr(static_cast<std::size_t>(i), 1)));
  }
  if (obj.is_dict() && key.is_string()) {
    if (const Value* v = obj.dict().find(key.str())) return *v;
  }
  if (key.is_string()) return get_attr(obj, key.str());
  return Value::undefined(to_str(key));
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) undefined_access(obj);
  if (!(obj.is_sequence() || obj.is_string())) return Value::undefined("slice");
  for (const Value* v : {&start, &stop, &step})
    if (!(v->is_integral() || v->is_none() || v->is_undefined())) return Value::undefined("slice");
  auto given = [](const Value& v) { return v.is_integral(); };
  const std::int64_t st = given(step) ? step.as_int() : 1;
  if (st == 0) fault("slice step cannot be zero");
  const bool ascii = obj.is_string() && is_ascii(obj.str());
  const std::u32string wide = obj.is_string() && !ascii ? to_u32(obj.str()) : std::u32string();
  const std::int64_t n = static_cast<std::int64_t>(obj.is_sequence() ? obj.items().size()
                                                   : ascii           ? obj.str().size()
                                                                     : wide.size());
  std::int64_t a = given(start) ? clamp_index(start.as_int(), n, st < 0) : (st > 0 ? 0 : n - 1);
  const std::int64_t b = given(stop) ? clamp_index(stop.as_int(), n, st < 0) : (st > 0 ? n : -1);
  ValueList items;
  std::string s;
  std::u32string w;
  for (; st > 0 ? a < b : a > b; a += st) {
    const auto i = static_cast<std::size_t>(a);
    if (obj.is_sequence())
      items.push_back(obj.items()[i]);
    else if (ascii)
      s += obj.str()[i];
    else
      w += wide[i];
  }
  if (obj.is_sequence())
    return obj.kind() == Value::Kind::Tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
  return Value::string(ascii ? std::move(s) : to_utf8(w));
}

Value get_path(const Value& obj, std::string_view path) {
  Value v = obj;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = path.find('.', start);
    const std::string_view part = path.substr(start, dot == std::string_view::npos ? path.npos : dot - start);
    const bool numeric =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = numeric && part.size() < 18 ? get_item(v, Value::integer(std::stoll(std::string(part))))
                                    : get_item(v, Value::string(std::string(part)));
    if (dot == std::string_view::npos) return v;
    start = dot + 1;
  }
}

namespace {

using GlobalFn = Value (*)(const CallArgs&, Interp&);

class Global : public Callable {
 public:
  Global(std::string_view name, GlobalFn fn) : name_(name), fn_(fn) {}
  std::string_view name() const override { return name_; }
  Value call(const CallArgs& args, Interp& interp) const override { return fn_(args, interp); }

 private:
  std::string_view name_;
  GlobalFn fn_;
};

// Jinja's sandbox refuses ranges longer than this (MAX_RANGE), so templates cannot rely on more.
constexpr std::int64_t kMaxRange = 100000;

Value fn_range(const CallArgs& args, Interp& interp) {
  if (!args.keyword.empty()) fault("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) fault(fmt::format("range expected 1 to 3 arguments, got {}", p.size()));
  for (const Value& v : p)
    if (!v.is_integral()) fault(fmt::format("'{}' object cannot be interpreted as an integer", type_name(v)));
  const std::int64_t start = p.size() == 1 ? 0 : p[0].as_int();
  const std::int64_t stop = p.size() == 1 ? p[0].as_int() : p[1].as_int();
  const std::int64_t step = p.size() == 3 ? p[2].as_int() : 1;
  if (step == 0) fault("range() arg 3 must not be zero");
  const __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 absstep = step > 0 ? step : -static_cast<__int128>(step);
  const __int128 count = span <= 0 ? 0 : (span + absstep - 1) / absstep;
  if (count > kMaxRange) fault(fmt::format("range too big: the sandbox allows at most {} items", kMaxRange));
  interp.charge(static_cast<std::uint64_t>(count));
  ValueList out;
  for (__int128 i = 0; i < count; ++i) out.push_back(Value::integer(static_cast<std::int64_t>(start + i * step)));
  return Value::list(std::move(out));
}

void fill_dict(Dict& d, const CallArgs& args, std::string_view fn) {
  if (args.positional.size() > 1) fault(fmt::format("{}() takes at most 1 positional argument", fn));
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (!src.is_dict()) fault(fmt::format("{}(): positional argument must be a dict, not {}", fn, type_name(src)));
    for (const auto& [k, v] : src.dict().items()) d.set(k, v);
  }
  for (const auto& [k, v] : args.keyword) d.set(k, v);
}

Value fn_namespace(const CallArgs& args, Interp& interp) {
  auto attrs = interp.new_namespace();
  fill_dict(*attrs, args, "namespace");
  return Value::namespace_object(std::move(attrs));
}

Value fn_dict(const CallArgs& args, Interp&) {
  Dict d;
  fill_dict(d, args, "dict");
  return Value::dict(std::move(d));
}

Value fn_raise_exception(const CallArgs& args, Interp&) {
  Bound b("raise_exception", args, {"message"});
  fault(to_str(b[0]));
}

Value fn_strftime_now(const CallArgs& args, Interp&) {
  Bound b("strftime_now", args, {"format"});
  if (!b[0].is_string()) fault("strftime_now() takes a format string");
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[256];
  const std::size_t n = b[0].str().empty() ? 0 : std::strftime(buf, sizeof buf, b[0].str().c_str(), &tm);
  if (n == 0 && !b[0].str().empty()) fault("strftime_now(): the formatted date is empty or too long");
  return Value::string(std::string(buf, n));
}

struct GlobalEntry {
  std::string_view name;
  GlobalFn fn;
};
constexpr GlobalEntry kGlobals[] = {{"range", fn_range},
                                    {"namespace", fn_namespace},
                                    {"dict", fn_dict},
                                    {"raise_exception", fn_raise_exception},
                                    {"strftime_now", fn_strftime_now}};

}  // namespace

bool is_global_function(std::string_view name) {
  return std::any_of(std::begin(kGlobals), std::end(kGlobals), [&](const GlobalEntry& g) { return g.name == name; });
}

Value global_function(std::string_view name) {
  for (const GlobalEntry& g : kGlobals)
    if (g.name == name) return Value::callable(std::make_shared<Global>(g.name, g.fn));
  return Value::undefined(std::string(name));
}

}  // namespace kern::chat::jinja
