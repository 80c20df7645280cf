#include "chat/jinja_unicode.hpp"

#include <utf8proc.h>

namespace kern::chat::jinja {

std::size_t find_invalid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t n = 0;
    char32_t cp = 0, min = 0;
    if ((c & 0xe0) == 0xc0)
      n = 1, cp = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0)
      n = 2, cp = c & 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0)
      n = 3, cp = c & 0x07, min = 0x10000;
    else
      return i;
    for (std::size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return i;
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (d & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += n + 1;
  }
  return std::string_view::npos;
}

char32_t next_code_point(std::string_view s, std::size_t& i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    ++i;
    return c;
  }
  std::size_t n = (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : 3;
  char32_t cp = c & (n == 1 ? 0x1f : n == 2 ? 0x0f : 0x07);
  for (std::size_t k = 1; k <= n && i + k < s.size(); ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
  i += n + 1;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

std::size_t code_point_count(std::string_view s) {
  std::size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return n;
}

std::u32string to_u32(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) out += next_code_point(s, i);
  return out;
}

std::string to_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

bool py_isspace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f);
  return c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
         c == 0x202f || c == 0x205f || c == 0x3000;
}

bool py_isprintable(char32_t c) {
  if (c < 0x80) return c >= 0x20 && c < 0x7f;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: return false;
    default: return true;
  }
}

bool py_iscased(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

char32_t py_upper(char32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z' ? c - 32 : c;
  return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c)));
}
char32_t py_lower(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
}
char32_t py_title(char32_t c) {
  if (c < 0x80) return py_upper(c);
  return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c)));
}

namespace {
template <typename F>
std::string map_code_points(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) append_utf8(out, f(next_code_point(s, i)));
  return out;
}
}  // namespace

std::string str_upper(std::string_view s) { return map_code_points(s, py_upper); }
std::string str_lower(std::string_view s) { return map_code_points(s, py_lower); }

std::string str_title(std::string_view s) {
  bool previous_cased = false;
  return map_code_points(s, [&](char32_t c) {
    const bool cased = py_iscased(c);
    const char32_t r = cased ? (previous_cased ? py_lower(c) : py_title(c)) : c;
    previous_cased = cased;
    return r;
  });
}

std::string str_capitalize(std::string_view s) {
  bool first = true;
  return map_code_points(s, [&](char32_t c) {
    const char32_t r = first ? py_title(c) : py_lower(c);
    first = false;
    return r;
  });
}

std::string_view str_strip(std::string_view s, const std::u32string* chars, bool left, bool right) {
  auto strip_it = [&](char32_t c) { return chars ? chars->find(c) != std::u32string::npos : py_isspace(c); };
  std::size_t begin = 0, end = s.size();
  if (left) {
    while (begin < end) {
      std::size_t next = begin;
      if (!strip_it(next_code_point(s, next))) break;
      begin = next;
    }
  }
  if (right) {
    // Walk forward remembering where the last kept code point ends (UTF-8 has no cheap reverse decode here).
    std::size_t keep_end = begin;
    for (std::size_t i = begin; i < end;) {
      const char32_t c = next_code_point(s, i);
      if (!strip_it(c)) keep_end = i;
    }
    end = keep_end;
  }
  return s.substr(begin, end - begin);
}

}  // namespace kern::chat::jinja
