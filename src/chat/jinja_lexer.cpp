#include "chat/jinja_lexer.hpp"

#include <fmt/format.h>

#include <charconv>

#include "chat/jinja_unicode.hpp"

namespace kern::chat::jinja {

std::string normalize_source(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

namespace {

[[noreturn]] void lex_fail(std::size_t offset, std::string message) { throw LexError{offset, std::move(message)}; }

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python's \s at `i` (a Unicode whitespace code point): its byte length, or 0.
std::size_t space_at(std::string_view s, std::size_t i) {
  if (i >= s.size()) return 0;
  std::size_t j = i;
  return py_isspace(next_code_point(s, j)) ? j - i : 0;
}

std::size_t skip_spaces(std::string_view s, std::size_t i) {
  while (std::size_t n = space_at(s, i)) i += n;
  return i;
}

class Lexer {
 public:
  Lexer(std::string_view s, const LexOptions& o) : s_(s), opt_(o) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) {
      const std::size_t tag = find_tag(pos_);
      if (tag == std::string_view::npos) {
        push(Tok::Text, std::string(s_.substr(pos_)), pos_);
        break;
      }
      const char kind = s_[tag + 1];
      const char sign = tag + 2 < s_.size() && (s_[tag + 2] == '-' || s_[tag + 2] == '+') ? s_[tag + 2] : 0;
      std::size_t raw_end = 0;
      const bool raw = kind == '%' && match_tag_word(tag, "raw", false, raw_end);
      emit_text(s_.substr(pos_, tag - pos_), pos_, kind, sign);
      if (raw)
        lex_raw(tag, raw_end);
      else if (kind == '#')
        lex_comment(tag, sign);
      else
        lex_tag(tag, kind, sign);
    }
    out_.push_back(Token{Tok::End, {}, s_.size()});
    return std::move(out_);
  }

 private:
  std::string_view s_;
  LexOptions opt_;
  std::size_t pos_ = 0;
  bool line_starting_ = true;
  std::vector<Token> out_;

  void push(Tok t, std::string text, std::size_t offset) { out_.push_back(Token{t, std::move(text), offset}); }

  std::size_t find_tag(std::size_t from) const {
    for (std::size_t i = s_.find('{', from); i != std::string_view::npos; i = s_.find('{', i + 1)) {
      if (i + 1 < s_.size() && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
    }
    return std::string_view::npos;
  }

  // Whitespace the tag that follows `text` asks to remove: `-` strips all of it, lstrip_blocks
  // strips the spaces and tabs that start the tag's line.
  void emit_text(std::string_view text, std::size_t offset, char kind, char sign) {
    if (sign == '-') {
      text = str_strip(text, nullptr, false, true);
    } else if (sign != '+' && kind != '{' && opt_.lstrip_blocks) {
      const std::size_t nl = text.rfind('\n');
      const std::size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting_) {
        if (text.find_first_not_of(" \t", l_pos) == std::string_view::npos) text = text.substr(0, l_pos);
      }
    }
    if (!text.empty()) push(Tok::Text, std::string(text), offset);
  }

  // `{%[-+]? word [-]?%}` at `tag` (raw / endraw); `end` receives the offset past it, after
  // the whitespace a `-%}` removes, and (for endraw) the newline trim_blocks removes.
  bool match_tag_word(std::size_t tag, std::string_view word, bool trim, std::size_t& end) const {
    std::size_t i = tag + 2;
    if (i < s_.size() && (s_[i] == '-' || s_[i] == '+')) ++i;
    i = skip_spaces(s_, i);
    if (s_.substr(i, word.size()) != word) return false;
    i = skip_spaces(s_, i + word.size());
    if (s_.substr(i, 3) == "-%}") {
      end = skip_spaces(s_, i + 3);
    } else if (trim && s_.substr(i, 3) == "+%}") {
      end = i + 3;
    } else if (s_.substr(i, 2) == "%}") {
      end = i + 2;
      if (trim && opt_.trim_blocks && end < s_.size() && s_[end] == '\n') ++end;
    } else {
      return false;
    }
    return true;
  }

  void lex_raw(std::size_t tag, std::size_t body) {
    line_starting_ = s_[body - 1] == '\n';
    for (std::size_t at = s_.find("{%", body); at != std::string_view::npos; at = s_.find("{%", at + 1)) {
      std::size_t end = 0;
      if (!match_tag_word(at, "endraw", true, end)) continue;
      const char sign = at + 2 < s_.size() && (s_[at + 2] == '-' || s_[at + 2] == '+') ? s_[at + 2] : 0;
      emit_text(s_.substr(body, at - body), body, '%', sign);
      pos_ = end;
      line_starting_ = s_[end - 1] == '\n';
      return;
    }
    lex_fail(tag, "missing {% endraw %} for this {% raw %}");
  }

  void lex_comment(std::size_t tag, char sign) {
    const std::size_t content = tag + 2 + (sign ? 1 : 0);
    const std::size_t close = s_.find("#}", content);
    if (close == std::string_view::npos) lex_fail(tag, "missing end of comment tag '#}'");
    const char end_sign = close > content && (s_[close - 1] == '-' || s_[close - 1] == '+') ? s_[close - 1] : 0;
    after_end(close + 2, end_sign, true);
  }

  void after_end(std::size_t end, char sign, bool block) {
    if (sign == '-') {
      end = skip_spaces(s_, end);
    } else if (block && sign != '+' && opt_.trim_blocks && end < s_.size() && s_[end] == '\n') {
      ++end;
    }
    pos_ = end;
    line_starting_ = end > 0 && s_[end - 1] == '\n';
  }

  void lex_tag(std::size_t tag, char kind, char sign) {
    push(kind == '{' ? Tok::VarBegin : Tok::BlockBegin, {}, tag);
    std::size_t i = tag + 2 + (sign ? 1 : 0);
    int depth = 0;
    const char close = kind == '{' ? '}' : '%';
    while (true) {
      i = skip_spaces(s_, i);
      if (i >= s_.size()) lex_fail(tag, fmt::format("unexpected end of template: this tag has no '{}}}'", close));
      if (depth == 0) {
        std::size_t end = 0;
        char end_sign = 0;
        if ((s_[i] == '-' || (kind == '%' && s_[i] == '+')) && s_.substr(i + 1, 2) == std::string{close, '}'}) {
          end_sign = s_[i];
          end = i + 3;
        } else if (s_.substr(i, 2) == std::string{close, '}'}) {
          end = i + 2;
        }
        if (end) {
          push(kind == '{' ? Tok::VarEnd : Tok::BlockEnd, {}, i);
          after_end(end, end_sign, kind == '%');
          return;
        }
      }
      i = lex_one(i, depth);
    }
  }

  std::size_t lex_one(std::size_t i, int& depth) {
    const char c = s_[i];
    if (is_name_start(c)) {
      std::size_t j = i + 1;
      while (j < s_.size() && (is_name_start(s_[j]) || is_digit(s_[j]))) ++j;
      push(Tok::Name, std::string(s_.substr(i, j - i)), i);
      return j;
    }
    if (is_digit(c)) return lex_number(i);
    if (c == '\'' || c == '"') return lex_string(i);
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwo) {
      if (s_.substr(i, 2) == op) {
        push(Tok::Op, std::string(op), i);
        return i + 2;
      }
    }
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos)
      lex_fail(i, fmt::format("unexpected character '{}' in a tag",
                              s_.substr(i, std::max<std::size_t>(1, space_at(s_, i)))));
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    push(Tok::Op, std::string(1, c), i);
    return i + 1;
  }

  std::size_t lex_number(std::size_t i) {
    std::size_t j = i;
    std::string digits;
    auto take_digits = [&] {
      while (j < s_.size() && (is_digit(s_[j]) || (s_[j] == '_' && j + 1 < s_.size() && is_digit(s_[j + 1])))) {
        if (s_[j] != '_') digits += s_[j];
        ++j;
      }
    };
    take_digits();
    bool is_float = false;
    if (j + 1 < s_.size() && s_[j] == '.' && is_digit(s_[j + 1])) {
      is_float = true;
      digits += s_[j++];
      take_digits();
    }
    if (j < s_.size() && (s_[j] == 'e' || s_[j] == 'E')) {
      std::size_t k = j + 1;
      if (k < s_.size() && (s_[k] == '+' || s_[k] == '-')) ++k;
      if (k < s_.size() && is_digit(s_[k])) {
        is_float = true;
        digits += 'e';
        digits.append(s_.substr(j + 1, k - j - 1));
        j = k;
        take_digits();
      }
    }
    Token t{is_float ? Tok::Float : Tok::Int, std::string(s_.substr(i, j - i)), i};
    const char* b = digits.data();
    const char* e = digits.data() + digits.size();
    const auto r = is_float ? std::from_chars(b, e, t.float_value) : std::from_chars(b, e, t.int_value);
    if (r.ec != std::errc() || r.ptr != e) lex_fail(i, fmt::format("number {} is out of range", t.text));
    out_.push_back(std::move(t));
    return j;
  }

  std::size_t lex_string(std::size_t i) {
    const char quote = s_[i];
    std::string value;
    std::size_t j = i + 1;
    while (true) {
      if (j >= s_.size()) lex_fail(i, "unterminated string literal");
      const char c = s_[j];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        ++j;
        continue;
      }
      j = decode_escape(j, value);
    }
    push(Tok::String, std::move(value), i);
    return j + 1;
  }

  // Python's unicode-escape decoding, which Jinja applies to string literals.
  std::size_t decode_escape(std::size_t j, std::string& value) {
    if (j + 1 >= s_.size()) lex_fail(j, "unterminated string literal");
    const char e = s_[j + 1];
    switch (e) {
      case '\n': return j + 2;
      case '\\': value += '\\'; return j + 2;
      case '\'': value += '\''; return j + 2;
      case '"': value += '"'; return j + 2;
      case 'a': value += '\a'; return j + 2;
      case 'b': value += '\b'; return j + 2;
      case 'f': value += '\f'; return j + 2;
      case 'n': value += '\n'; return j + 2;
      case 'r': value += '\r'; return j + 2;
      case 't': value += '\t'; return j + 2;
      case 'v': value += '\v'; return j + 2;
      case 'x':
      case 'u':
      case 'U': {
        const std::size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        char32_t cp = 0;
        for (std::size_t k = 0; k < n; ++k) {
          const int h = j + 2 + k < s_.size() ? hex_value(s_[j + 2 + k]) : -1;
          if (h < 0) lex_fail(j, fmt::format("truncated \\{} escape in a string literal", e));
          cp = cp * 16 + static_cast<char32_t>(h);
        }
        if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
          lex_fail(j, fmt::format("\\{} escape names no Unicode scalar value", e));
        append_utf8(value, cp);
        return j + 2 + n;
      }
      case 'N': lex_fail(j, "\\N{...} escapes are not supported");
      default:
        if (e >= '0' && e <= '7') {
          char32_t cp = 0;
          std::size_t k = j + 1;
          for (int n = 0; n < 3 && k < s_.size() && s_[k] >= '0' && s_[k] <= '7'; ++n, ++k) cp = cp * 8 + (s_[k] - '0');
          append_utf8(value, cp);
          return k;
        }
        value += '\\';  // unknown escapes keep their backslash, as in Python
        return j + 1;
    }
  }
};

}  // namespace

std::vector<Token> lex(std::string_view source, const LexOptions& options) { return Lexer(source, options).run(); }

}  // namespace kern::chat::jinja
