// str(), repr() and json.dumps() exactly as Python prints them: prompts are compared byte for
// byte with transformers, so `True`, `None`, `['a', 'b']`, `2.0` and `1e+20` must come out alike.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "chat/jinja_unicode.hpp"
#include "kern/chat/jinja_value.hpp"

namespace kern::chat::jinja {

namespace {
constexpr int kMaxPrintDepth = 200;

void check_print_depth(int depth) {
  if (depth > kMaxPrintDepth) fault(fmt::format("value nesting deeper than {} while printing", kMaxPrintDepth));
}

void repr_string(std::string& out, std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  out += quote;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t start = i;
    const char32_t c = next_code_point(s, i);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (py_isprintable(c)) {
      out.append(s.substr(start, i - start));
    } else if (c < 0x100) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(c));
    } else if (c < 0x10000) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out += fmt::format("\\U{:08x}", static_cast<unsigned>(c));
    }
  }
  out += quote;
}

void repr_at(std::string& out, const Value& v, int depth);

void repr_items(std::string& out, const ValueList& items, int depth) {
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    repr_at(out, items[i], depth + 1);
  }
}

void repr_dict(std::string& out, const Dict& d, int depth) {
  out += '{';
  bool first = true;
  for (const auto& [k, v] : d.items()) {
    if (!first) out += ", ";
    first = false;
    repr_string(out, k);
    out += ": ";
    repr_at(out, v, depth + 1);
  }
  out += '}';
}

void repr_at(std::string& out, const Value& v, int depth) {
  check_print_depth(depth);
  switch (v.kind()) {
    case Value::Kind::Undefined: out += "Undefined"; return;  // Jinja's Undefined.__repr__
    case Value::Kind::String: repr_string(out, v.str()); return;
    case Value::Kind::List:
      out += '[';
      repr_items(out, v.items(), depth);
      out += ']';
      return;
    case Value::Kind::Tuple:
      out += '(';
      repr_items(out, v.items(), depth);
      if (v.items().size() == 1) out += ',';
      out += ')';
      return;
    case Value::Kind::Dict: repr_dict(out, v.dict(), depth); return;
    case Value::Kind::Namespace:
      out += "<Namespace ";
      repr_dict(out, v.attrs(), depth);
      out += '>';
      return;
    case Value::Kind::Callable: fault(fmt::format("cannot print {} (Python prints an object address)", v.fn().name()));
    default: out += to_str(v); return;
  }
}

}  // namespace

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<std::size_t>(r.ptr - buf));
  const bool negative = sci[0] == '-';
  const std::size_t e_at = sci.find('e');
  std::string digits;
  for (char c : sci.substr(negative, e_at - negative))
    if (c != '.') digits += c;
  int exp10 = 0;
  std::from_chars(sci.data() + e_at + 1 + (sci[e_at + 1] == '+'), sci.data() + sci.size(), exp10);
  const int decpt = exp10 + 1;  // value = 0.DIGITS * 10^decpt
  std::string out = negative ? "-" : "";
  const int n = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (n > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exp10 < 0 ? '-' : '+', std::abs(exp10));
  } else if (decpt <= 0) {
    out += "0." + std::string(static_cast<std::size_t>(-decpt), '0') + digits;
  } else if (decpt >= n) {
    out += digits + std::string(static_cast<std::size_t>(decpt - n), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<std::size_t>(decpt)) + "." + digits.substr(static_cast<std::size_t>(decpt));
  }
  return out;
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.as_bool() ? "True" : "False";
    case Value::Kind::Int: return std::to_string(v.as_int());
    case Value::Kind::Float: return float_repr(v.as_float());
    case Value::Kind::String: return v.str();
    default: {
      std::string out;
      repr_at(out, v, 0);
      return out;
    }
  }
}

std::string repr(const Value& v) {
  std::string out;
  repr_at(out, v, 0);
  return out;
}

namespace {

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t start = i;
    const char32_t c = next_code_point(s, i);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || (ensure_ascii && c >= 0x7f)) {
          if (c >= 0x10000) {
            const char32_t u = c - 0x10000;
            out += fmt::format("\\u{:04x}\\u{:04x}", 0xd800 + (u >> 10), 0xdc00 + (u & 0x3ff));
          } else {
            out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
          }
        } else {
          out.append(s.substr(start, i - start));
        }
    }
  }
  out += '"';
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return float_repr(d);
}

void json_at(std::string& out, const Value& v, const JsonStyle& st, int depth);

void json_newline(std::string& out, const JsonStyle& st, int level) {
  out += '\n';
  for (int i = 0; i < level; ++i) out += st.indent;
}

template <typename Each>
void json_container(std::string& out, const JsonStyle& st, int depth, std::size_t n, char open, char close, Each each) {
  out += open;
  if (n == 0) {
    out += close;
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (i) out += st.item_sep;
    if (st.has_indent) json_newline(out, st, depth + 1);
    each(i);
  }
  if (st.has_indent) json_newline(out, st, depth);
  out += close;
}

void json_at(std::string& out, const Value& v, const JsonStyle& st, int depth) {
  check_print_depth(depth);
  switch (v.kind()) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.as_int()); return;
    case Value::Kind::Float: out += json_float(v.as_float()); return;
    case Value::Kind::String: json_string(out, v.str(), st.ensure_ascii); return;
    case Value::Kind::List:
    case Value::Kind::Tuple: {
      const ValueList& items = v.items();
      json_container(out, st, depth, items.size(), '[', ']',
                     [&](std::size_t i) { json_at(out, items[i], st, depth + 1); });
      return;
    }
    case Value::Kind::Dict: {
      std::vector<const std::pair<std::string, Value>*> kv;
      for (const auto& p : v.dict().items()) kv.push_back(&p);
      if (st.sort_keys) std::stable_sort(kv.begin(), kv.end(), [](auto* a, auto* b) { return a->first < b->first; });
      json_container(out, st, depth, kv.size(), '{', '}', [&](std::size_t i) {
        json_string(out, kv[i]->first, st.ensure_ascii);
        out += st.key_sep;
        json_at(out, kv[i]->second, st, depth + 1);
      });
      return;
    }
    default: fault(fmt::format("Object of type {} is not JSON serializable", type_name(v)));
  }
}

}  // namespace

std::string to_json(const Value& v, const JsonStyle& style) {
  std::string out;
  json_at(out, v, style, 0);
  return out;
}

}  // namespace kern::chat::jinja
