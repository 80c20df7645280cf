#include "tokenizer/utf8.hpp"

namespace kern::tokenizer {

Utf8Step scan_utf8(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {Utf8Status::Valid, 1};
  std::size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 == 0xE0) {
    need = 3, lo = 0xA0;
  } else if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) {
    need = 3;
  } else if (b0 == 0xED) {
    need = 3, hi = 0x9F;  // no surrogates
  } else if (b0 == 0xF0) {
    need = 4, lo = 0x90;
  } else if (b0 >= 0xF1 && b0 <= 0xF3) {
    need = 4;
  } else if (b0 == 0xF4) {
    need = 4, hi = 0x8F;  // nothing past U+10FFFF
  } else {
    return {Utf8Status::Invalid, 1};
  }
  for (std::size_t j = 1; j < need; ++j) {
    if (i + j >= s.size()) return {Utf8Status::Truncated, j};
    const auto b = static_cast<unsigned char>(s[i + j]);
    const unsigned char l = j == 1 ? lo : 0x80, h = j == 1 ? hi : 0xBF;
    if (b < l || b > h) return {Utf8Status::Invalid, j};
  }
  return {Utf8Status::Valid, need};
}

std::optional<std::size_t> first_invalid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const Utf8Step step = scan_utf8(s, i);
    if (step.status != Utf8Status::Valid) return i;
    i += step.length;
  }
  return std::nullopt;
}

void append_utf8_lossy(std::string_view bytes, std::string& out) {
  std::size_t i = 0;
  while (i < bytes.size()) {
    const Utf8Step step = scan_utf8(bytes, i);
    if (step.status == Utf8Status::Valid) {
      out.append(bytes.substr(i, step.length));
    } else {
      out.append("\xEF\xBF\xBD");
    }
    i += step.length;
  }
}

std::size_t complete_utf8_prefix(std::string_view bytes) {
  std::size_t i = 0;
  while (i < bytes.size()) {
    const Utf8Step step = scan_utf8(bytes, i);
    if (step.status == Utf8Status::Truncated) return i;  // it runs to the end
    i += step.length;
  }
  return i;
}

char32_t next_code_point(std::string_view s, std::size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  const std::size_t n = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
  char32_t cp = b0 & (0x7F >> n);
  for (std::size_t j = 1; j < n; ++j) cp = (cp << 6) | (static_cast<unsigned char>(s[i + j]) & 0x3F);
  i += n;
  return cp;
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_unicode_whitespace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

}  // namespace kern::tokenizer
