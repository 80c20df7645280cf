// Filters on strings and numbers, and the filter table. `tojson` is transformers' own (plain
// json.dumps, no HTML escaping), not Jinja's.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <utility>

#include "chat/jinja_builtins.hpp"
#include "chat/jinja_render.hpp"
#include "chat/jinja_unicode.hpp"

namespace kern::chat::jinja {

FilterFn find_sequence_filter(std::string_view name);  // jinja_filters_seq.cpp

std::string html_escape(std::string_view s) {
  // markupsafe's replacements
  static constexpr std::pair<char, std::string_view> kEntities[] = {
      {'&', "&amp;"}, {'<', "&lt;"}, {'>', "&gt;"}, {'"', "&#34;"}, {'\'', "&#39;"}};
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    const auto* e =
        std::find_if(std::begin(kEntities), std::end(kEntities), [c](const auto& x) { return x.first == c; });
    if (e != std::end(kEntities))
      out += e->second;
    else
      out += c;
  }
  return out;
}

namespace {

// Python's int(str) for base 10: surrounding whitespace, a sign, digits with single underscores.
bool parse_py_int(std::string_view text, std::int64_t& out) {
  const std::string_view s = str_strip(text, nullptr, true, true);
  std::string digits;
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) digits += s[i++] == '-' ? "-" : "";
  if (i == s.size()) return false;
  for (; i < s.size(); ++i) {
    if (s[i] >= '0' && s[i] <= '9')
      digits += s[i];
    else if (s[i] == '_' && i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9' && i + 1 < s.size() && s[i + 1] >= '0' &&
             s[i + 1] <= '9')
      continue;
    else
      return false;
  }
  const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), out);
  if (r.ec == std::errc::result_out_of_range) fault(fmt::format("integer '{}' does not fit in 64 bits", s));
  return r.ec == std::errc() && r.ptr == digits.data() + digits.size();
}

// Python's float(str).
bool parse_py_float(std::string_view text, double& out) {
  const std::string_view s = str_strip(text, nullptr, true, true);
  std::string t;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      const bool between = i > 0 && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
                           std::isdigit(static_cast<unsigned char>(s[i + 1]));
      if (!between) return false;
      continue;
    }
    t += s[i];
  }
  bool negative = false;
  std::size_t at = 0;
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) negative = t[at++] == '-';
  if (at == t.size()) return false;
  const auto r = std::from_chars(t.data() + at, t.data() + t.size(), out, std::chars_format::general);
  if (r.ptr != t.data() + t.size()) return false;
  if (r.ec == std::errc::result_out_of_range)
    out = std::strtod(t.c_str() + at, nullptr);  // inf or 0, as Python
  else if (r.ec != std::errc())
    return false;
  if (negative) out = -out;
  return true;
}

std::int64_t float_to_int(double d) {
  if (!std::isfinite(d))
    fault(std::isnan(d) ? "cannot convert float NaN to integer" : "cannot convert float infinity to integer");
  const double t = std::trunc(d);
  if (t < -9.2233720368547758e18 || t >= 9.2233720368547758e18) fault("integer does not fit in 64 bits");
  return static_cast<std::int64_t>(t);
}

Value f_int(Interp&, const Value& v, const CallArgs& a) {
  Bound b("int", a, {"default", "base"});
  const Value fallback = b.get(0, Value::integer(0));
  if (b.get_int(1, 10) != 10) fault("int(): only base 10 is supported");
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.kind() == Value::Kind::Float) return Value::integer(float_to_int(v.as_float()));
  if (v.is_string()) {
    std::int64_t i = 0;
    if (parse_py_int(v.str(), i)) return Value::integer(i);
    double d = 0;
    if (parse_py_float(v.str(), d)) return Value::integer(float_to_int(d));
  }
  return fallback;
}

Value f_float(Interp&, const Value& v, const CallArgs& a) {
  Bound b("float", a, {"default"});
  if (v.is_number()) return Value::real(v.as_float());
  double d = 0;
  if (v.is_string() && parse_py_float(v.str(), d)) return Value::real(d);
  return b.get(0, Value::real(0.0));
}

Value f_abs(Interp&, const Value& v, const CallArgs& a) {
  Bound("abs", a, {});
  if (v.kind() == Value::Kind::Float) return Value::real(std::fabs(v.as_float()));
  if (!v.is_integral()) fault(fmt::format("bad operand type for abs(): '{}'", type_name(v)));
  if (v.as_int() == std::numeric_limits<std::int64_t>::min()) fault("integer does not fit in 64 bits");
  return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
}

double round_digits(double x, std::int64_t digits) {
  if (!std::isfinite(x)) return x;
  if (digits == 0) return std::nearbyint(x);  // ties to even, as Python's round
  if (digits < 0 || digits > 300) {
    const double scale = std::pow(10.0, static_cast<double>(-digits));
    return digits < 0 ? std::nearbyint(x / scale) * scale : x;
  }
  char buf[400];
  std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(digits), x);  // correctly rounded, like Python
  return std::strtod(buf, nullptr);
}

Value f_round(Interp&, const Value& v, const CallArgs& a) {
  Bound b("round", a, {"precision", "method"});
  const std::int64_t p = b.get_int(0, 0);
  const std::string method = b.has(1) ? to_str(b[1]) : "common";
  if (method != "common" && method != "ceil" && method != "floor") fault("method must be common, ceil or floor");
  if (!v.is_number()) fault(fmt::format("type {} doesn't define __round__ method", type_name(v)));
  if (method == "common") {
    if (v.is_integral() && p >= 0) return Value::integer(v.as_int());
    return Value::real(round_digits(v.as_float(), p));
  }
  const double scale = std::pow(10.0, static_cast<double>(p));
  const double x = v.as_float() * scale;
  return Value::real((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value f_default(Interp&, const Value& v, const CallArgs& a) {
  Bound b("default", a, {"default_value", "boolean"});
  if (v.is_undefined() || (b.get_bool(1, false) && !truthy(v))) return b.get(0, Value::string(""));
  return v;
}

Value f_length(Interp&, const Value& v, const CallArgs& a) {
  Bound("length", a, {});
  return Value::integer(static_cast<std::int64_t>(length(v)));
}

Value f_string(Interp&, const Value& v, const CallArgs& a) { return Bound("string", a, {}), Value::string(to_str(v)); }
Value f_safe(Interp&, const Value& v, const CallArgs& a) { return Bound("safe", a, {}), Value::string(to_str(v)); }
Value f_escape(Interp&, const Value& v, const CallArgs& a) {
  return Bound("escape", a, {}), Value::string(html_escape(to_str(v)));
}
Value f_lower(Interp&, const Value& v, const CallArgs& a) {
  return Bound("lower", a, {}), Value::string(str_lower(to_str(v)));
}
Value f_upper(Interp&, const Value& v, const CallArgs& a) {
  return Bound("upper", a, {}), Value::string(str_upper(to_str(v)));
}
Value f_capitalize(Interp&, const Value& v, const CallArgs& a) {
  return Bound("capitalize", a, {}), Value::string(str_capitalize(to_str(v)));
}

// Jinja's title filter (not str.title): a word starts after '-', whitespace or an opening bracket.
Value f_title(Interp&, const Value& v, const CallArgs& a) {
  Bound("title", a, {});
  const std::string s = to_str(v);
  std::string out;
  bool word_start = true;
  for (std::size_t i = 0; i < s.size();) {
    const char32_t c = next_code_point(s, i);
    const bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c);
    append_utf8(out, sep ? c : word_start ? py_upper(c) : py_lower(c));
    word_start = sep;
  }
  return Value::string(std::move(out));
}

Value f_trim(Interp&, const Value& v, const CallArgs& a) {
  Bound b("trim", a, {"chars"});
  const std::string s = to_str(v);
  if (!b.has(0) || b[0].is_none()) return Value::string(std::string(str_strip(s, nullptr, true, true)));
  const std::u32string chars = to_u32(to_str(b[0]));
  return Value::string(std::string(str_strip(s, &chars, true, true)));
}

Value f_replace(Interp& in, const Value& v, const CallArgs& a) {
  Bound b("replace", a, {"old", "new", "count"});
  if (!b.has(1)) fault("replace() takes old and new");
  const std::string s = to_str(v);
  in.charge(1 + s.size() / 64);
  return str_replace(in, s, to_str(b[0]), to_str(b[1]), b.get_int(2, -1));
}

Value f_indent(Interp& in, const Value& v, const CallArgs& a) {
  Bound b("indent", a, {"width", "first", "blank"});
  const Value width = b.get(0, Value::integer(4));
  const std::string pad =
      width.is_string() ? width.str()
                        : std::string(static_cast<std::size_t>(std::clamp<std::int64_t>(b.get_int(0, 4), 0, 256)), ' ');
  const std::string s = to_str(v);
  in.charge(1 + s.size() / 64);
  const Value lines = str_splitlines(s + "\n", false);
  const ValueList& l = lines.items();
  std::string out;
  for (std::size_t i = 0; i < l.size(); ++i) {
    if (i) out += '\n';
    if (i && (b.get_bool(2, false) || !l[i].str().empty())) out += pad;
    out += l[i].str();
    in.charge_size(out.size());
  }
  if (b.get_bool(1, false)) out = pad + out;
  return Value::string(std::move(out));
}

// transformers: json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=False).
Value f_tojson(Interp& in, const Value& v, const CallArgs& a) {
  Bound b("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonStyle st;
  st.ensure_ascii = b.get_bool(0, false);
  st.sort_keys = b.get_bool(3, false);
  if (b.has(1) && !b[1].is_none()) {
    st.has_indent = true;
    st.item_sep.assign(
        1, ',');  // json.dumps drops the space before newlines; assign() dodges a g++-12 -Wrestrict false positive
    if (b[1].is_string())
      st.indent = b[1].str();
    else
      st.indent = std::string(static_cast<std::size_t>(std::clamp<std::int64_t>(b.get_int(1, 0), 0, 256)), ' ');
  }
  if (b.has(2) && !b[2].is_none()) {
    const Value& sep = b[2];
    if (!sep.is_sequence() || sep.items().size() != 2 || !sep.items()[0].is_string() || !sep.items()[1].is_string())
      fault("tojson(): separators must be a pair of strings");
    st.item_sep = sep.items()[0].str();
    st.key_sep = sep.items()[1].str();
  }
  std::string out = to_json(v, st);
  in.charge_size(out.size());
  in.charge(1 + out.size() / 64);
  return Value::string(std::move(out));
}

constexpr Named<FilterFn> kFilters[] = {
    {"abs", f_abs},         {"capitalize", f_capitalize}, {"count", f_length},
    {"d", f_default},       {"default", f_default},       {"e", f_escape},
    {"escape", f_escape},   {"float", f_float},           {"indent", f_indent},
    {"int", f_int},         {"length", f_length},         {"lower", f_lower},
    {"replace", f_replace}, {"round", f_round},           {"safe", f_safe},
    {"string", f_string},   {"title", f_title},           {"tojson", f_tojson},
    {"trim", f_trim},       {"upper", f_upper},
};

}  // namespace

FilterFn find_filter(std::string_view name) {
  const FilterFn f = find_named(kFilters, name);
  return f ? f : find_sequence_filter(name);
}

Value str_split(std::string_view s, const Value& sep, std::int64_t maxsplit) {
  ValueList out;
  if (sep.is_none() || sep.is_undefined()) {
    std::size_t i = 0;
    auto skip_space = [&] {
      while (i < s.size()) {
        std::size_t j = i;
        if (!py_isspace(next_code_point(s, j))) break;
        i = j;
      }
    };
    skip_space();
    while (i < s.size()) {
      if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) {
        out.push_back(Value::string(std::string(str_strip(s.substr(i), nullptr, false, true))));
        break;
      }
      const std::size_t start = i;
      while (i < s.size()) {
        std::size_t j = i;
        if (py_isspace(next_code_point(s, j))) break;
        i = j;
      }
      out.push_back(Value::string(std::string(s.substr(start, i - start))));
      skip_space();
    }
    return Value::list(std::move(out));
  }
  if (!sep.is_string()) fault(fmt::format("must be str or None, not {}", type_name(sep)));
  const std::string& d = sep.str();
  if (d.empty()) fault("empty separator");
  std::size_t start = 0;
  while (true) {
    const std::size_t at = s.find(d, start);
    if (at == std::string_view::npos || (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit)) break;
    out.push_back(Value::string(std::string(s.substr(start, at - start))));
    start = at + d.size();
  }
  out.push_back(Value::string(std::string(s.substr(start))));
  return Value::list(std::move(out));
}

Value str_replace(Interp& in, std::string_view s, std::string_view old, std::string_view repl, std::int64_t count) {
  std::string out;
  std::int64_t done = 0;
  auto may = [&] { return count < 0 || done < count; };
  if (old.empty()) {
    for (std::size_t i = 0; i < s.size();) {
      if (may()) out += repl, ++done, in.charge_size(out.size());
      const std::size_t start = i;
      next_code_point(s, i);
      out.append(s.substr(start, i - start));
    }
    if (may()) out += repl;
    return Value::string(std::move(out));
  }
  std::size_t start = 0;
  while (may()) {
    const std::size_t at = s.find(old, start);
    if (at == std::string_view::npos) break;
    out.append(s.substr(start, at - start));
    out += repl;
    in.charge_size(out.size());
    start = at + old.size();
    ++done;
  }
  out.append(s.substr(start));
  return Value::string(std::move(out));
}

}  // namespace kern::chat::jinja
