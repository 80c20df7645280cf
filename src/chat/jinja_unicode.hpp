// UTF-8 and the slice of Python's str semantics templates lean on: code-point indexing,
// str.isspace, case mapping (utf8proc's simple mappings) and str.isprintable for repr().
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kern::chat::jinja {

// Byte offset of the first malformed sequence (overlong, surrogate, truncated), or npos.
std::size_t find_invalid_utf8(std::string_view s);

// Decodes the code point at s[i] and advances i; `s` must be valid UTF-8.
char32_t next_code_point(std::string_view s, std::size_t& i);
void append_utf8(std::string& out, char32_t cp);

bool is_ascii(std::string_view s);
std::size_t code_point_count(std::string_view s);
std::u32string to_u32(std::string_view s);
std::string to_utf8(std::u32string_view s);

bool py_isspace(char32_t c);
bool py_isprintable(char32_t c);
bool py_iscased(char32_t c);  // an upper-, lower- or titlecase letter
char32_t py_upper(char32_t c);
char32_t py_lower(char32_t c);
char32_t py_title(char32_t c);

std::string str_upper(std::string_view s);
std::string str_lower(std::string_view s);
std::string str_title(std::string_view s);       // Python's str.title()
std::string str_capitalize(std::string_view s);  // Python's str.capitalize()

// Python's str.strip family: `chars` empty-optional means whitespace.
std::string_view str_strip(std::string_view s, const std::u32string* chars, bool left, bool right);

}  // namespace kern::chat::jinja
