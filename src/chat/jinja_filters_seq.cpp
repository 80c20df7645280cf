// Filters over sequences and mappings: first, last, join, sort, map, select, unique, ...
#include <fmt/format.h>

#include <algorithm>

#include "chat/jinja_builtins.hpp"
#include "chat/jinja_render.hpp"
#include "chat/jinja_unicode.hpp"

namespace kern::chat::jinja {

namespace {

ValueList walk(Interp& in, const Value& v) {
  ValueList items = iterate(v);
  in.charge(1 + items.size());
  return items;
}

Value f_first(Interp& in, const Value& v, const CallArgs& a) {
  Bound("first", a, {});
  const ValueList items = walk(in, v);
  return items.empty() ? Value::undefined("first item") : items.front();
}

Value f_last(Interp& in, const Value& v, const CallArgs& a) {
  Bound("last", a, {});
  const ValueList items = walk(in, v);
  return items.empty() ? Value::undefined("last item") : items.back();
}

Value f_list(Interp& in, const Value& v, const CallArgs& a) { return Bound("list", a, {}), Value::list(walk(in, v)); }

Value f_reverse(Interp& in, const Value& v, const CallArgs& a) {
  Bound("reverse", a, {});
  if (v.is_string()) {
    std::u32string w = to_u32(v.str());
    std::reverse(w.begin(), w.end());
    return Value::string(to_utf8(w));
  }
  ValueList items = walk(in, v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value f_items(Interp& in, const Value& v, const CallArgs& a) {
  Bound("items", a, {});
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) fault("Can only get item pairs from a mapping.");
  in.charge(1 + v.dict().size());
  ValueList out;
  for (const auto& [k, x] : v.dict().items()) out.push_back(Value::tuple({Value::string(k), x}));
  return Value::list(std::move(out));
}

Value f_join(Interp& in, const Value& v, const CallArgs& a) {
  Bound b("join", a, {"d", "attribute"});
  const std::string sep = b.has(0) ? to_str(b[0]) : "";
  std::string out;
  bool first = true;
  for (const Value& x : walk(in, v)) {
    if (!first) out += sep;
    first = false;
    out += to_str(b.has(1) && !b[1].is_none() ? get_path(x, to_str(b[1])) : x);
    in.charge_size(out.size());
  }
  in.charge(1 + out.size() / 64);
  return Value::string(std::move(out));
}

// The key sort / unique / min / max compare by: an attribute, lower-cased unless case_sensitive.
Value sort_key(const Value& x, const Bound& b, std::size_t case_at, std::size_t attr_at) {
  Value k = b.has(attr_at) && !b[attr_at].is_none() ? get_path(x, to_str(b[attr_at])) : x;
  if (!b.get_bool(case_at, false) && k.is_string()) return Value::string(str_lower(k.str()));
  return k;
}

Value f_sort(Interp& in, const Value& v, const CallArgs& a) {
  Bound b("sort", a, {"reverse", "case_sensitive", "attribute"});
  ValueList items = walk(in, v);
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& x : items) keyed.emplace_back(sort_key(x, b, 1, 2), std::move(x));
  in.charge(keyed.size() * 8);
  const bool rev = b.get_bool(0, false);
  std::stable_sort(keyed.begin(), keyed.end(),
                   [&](const auto& x, const auto& y) { return rev ? less(y.first, x.first) : less(x.first, y.first); });
  ValueList out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return Value::list(std::move(out));
}

Value f_dictsort(Interp& in, const Value& v, const CallArgs& a) {
  Bound b("dictsort", a, {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) fault("dictsort: you can only sort a mapping");
  const std::string by = b.has(1) ? to_str(b[1]) : "key";
  if (by != "key" && by != "value") fault("You can only sort by either 'key' or 'value'");
  const bool rev = b.get_bool(2, false), cs = b.get_bool(0, false);
  ValueList pairs = f_items(in, v, {}).items();
  auto key = [&](const Value& p) {
    const Value& k = p.items()[by == "key" ? 0 : 1];
    return !cs && k.is_string() ? Value::string(str_lower(k.str())) : k;
  };
  std::stable_sort(pairs.begin(), pairs.end(),
                   [&](const Value& x, const Value& y) { return rev ? less(key(y), key(x)) : less(key(x), key(y)); });
  return Value::list(std::move(pairs));
}

Value f_unique(Interp& in, const Value& v, const CallArgs& a) {
  Bound b("unique", a, {"case_sensitive", "attribute"});
  ValueList out, seen;
  for (const Value& x : walk(in, v)) {
    Value k = sort_key(x, b, 0, 1);
    in.charge(1 + seen.size() / 16);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) continue;
    seen.push_back(std::move(k));
    out.push_back(x);
  }
  return Value::list(std::move(out));
}

Value min_max(Interp& in, const Value& v, const CallArgs& a, bool want_max) {
  Bound b(want_max ? "max" : "min", a, {"case_sensitive", "attribute"});
  const ValueList items = walk(in, v);
  if (items.empty()) return Value::undefined("empty sequence");
  std::size_t best = 0;
  Value best_key = sort_key(items[0], b, 0, 1);
  for (std::size_t i = 1; i < items.size(); ++i) {
    Value k = sort_key(items[i], b, 0, 1);
    if (want_max ? less(best_key, k) : less(k, best_key)) best = i, best_key = std::move(k);
  }
  return items[best];
}
Value f_min(Interp& in, const Value& v, const CallArgs& a) { return min_max(in, v, a, false); }
Value f_max(Interp& in, const Value& v, const CallArgs& a) { return min_max(in, v, a, true); }

Value f_sum(Interp& in, const Value& v, const CallArgs& a) {
  Bound b("sum", a, {"attribute", "start"});
  Value total = b.get(1, Value::integer(0));
  for (const Value& x : walk(in, v))
    total = binary_op(in, "+", total, b.has(0) && !b[0].is_none() ? get_path(x, to_str(b[0])) : x);
  return total;
}

// Splits `name, args...` off the front of positional args (map('f', ...), select('t', ...)).
CallArgs rest_args(const CallArgs& a, std::size_t skip) {
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(std::min(skip, a.positional.size())),
                         a.positional.end());
  rest.keyword = a.keyword;
  return rest;
}

Value f_map(Interp& in, const Value& v, const CallArgs& a) {
  ValueList out;
  if (a.positional.empty()) {
    Bound b("map", a, {"attribute", "default"});
    if (!b.has(0)) fault("map() needs a filter name or attribute=");
    for (const Value& x : walk(in, v)) {
      Value y = get_path(x, to_str(b[0]));
      out.push_back(y.is_undefined() && b.has(1) ? b[1] : y);
    }
    return Value::list(std::move(out));
  }
  const std::string name = to_str(a.positional[0]);
  const FilterFn f = find_filter(name);
  if (!f) fault(fmt::format("unknown filter '{}'", name));
  const CallArgs rest = rest_args(a, 1);
  for (const Value& x : walk(in, v)) out.push_back(f(in, x, rest));
  return Value::list(std::move(out));
}

Value select_items(Interp& in, const Value& v, const CallArgs& a, bool keep, bool by_attr) {
  const std::size_t name_at = by_attr ? 1 : 0;
  if (by_attr && a.positional.empty()) fault("selectattr / rejectattr need an attribute name");
  TestFn test = nullptr;
  if (a.positional.size() > name_at) {
    const std::string name = to_str(a.positional[name_at]);
    test = find_test(name);
    if (!test) fault(fmt::format("unknown test '{}'", name));
  }
  const CallArgs rest = rest_args(a, name_at + 1);
  ValueList out;
  for (const Value& x : walk(in, v)) {
    const Value subject = by_attr ? get_path(x, to_str(a.positional[0])) : x;
    if ((test ? test(in, subject, rest) : truthy(subject)) == keep) out.push_back(x);
  }
  return Value::list(std::move(out));
}
Value f_select(Interp& in, const Value& v, const CallArgs& a) { return select_items(in, v, a, true, false); }
Value f_reject(Interp& in, const Value& v, const CallArgs& a) { return select_items(in, v, a, false, false); }
Value f_selectattr(Interp& in, const Value& v, const CallArgs& a) { return select_items(in, v, a, true, true); }
Value f_rejectattr(Interp& in, const Value& v, const CallArgs& a) { return select_items(in, v, a, false, true); }

constexpr Named<FilterFn> kFilters[] = {
    {"dictsort", f_dictsort},
    {"first", f_first},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"list", f_list},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"reverse", f_reverse},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"sort", f_sort},
    {"sum", f_sum},
    {"unique", f_unique},
};

}  // namespace

FilterFn find_sequence_filter(std::string_view name) { return find_named(kFilters, name); }

}  // namespace kern::chat::jinja
