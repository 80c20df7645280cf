// UTF-8 scanning used by the tokenizer: validation, lossy repair with U+FFFD over maximal
// subparts (the rule Rust's String::from_utf8_lossy and Python's errors="replace" follow), and
// the split between complete characters and a trailing unfinished one for streaming.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace kern::tokenizer {

enum class Utf8Status { Valid, Invalid, Truncated };

// What starts at s[i]: Valid (length = the character's bytes), Invalid (length = bytes of the
// maximal subpart to replace by one U+FFFD, >= 1), or Truncated (length = bytes present, all
// a valid beginning of a character that the end of `s` cut off).
struct Utf8Step {
  Utf8Status status;
  std::size_t length;
};
Utf8Step scan_utf8(std::string_view s, std::size_t i);

// Offset of the first byte that does not begin a valid character, or nullopt.
std::optional<std::size_t> first_invalid_utf8(std::string_view s);

// Appends `bytes` to `out`, each invalid or truncated maximal subpart replaced by U+FFFD.
void append_utf8_lossy(std::string_view bytes, std::string& out);

// Length of the longest prefix of `bytes` that ends on a character boundary, counting invalid
// bytes as finished (they become U+FFFD): only a truncated last character is left out.
// `bytes` is scanned from its start, which must be a character boundary.
std::size_t complete_utf8_prefix(std::string_view bytes);

// Decodes the character of valid UTF-8 at s[i] and advances i.
char32_t next_code_point(std::string_view s, std::size_t& i);
void append_utf8(char32_t cp, std::string& out);

// Unicode White_Space (what Rust's char::is_whitespace tests).
bool is_unicode_whitespace(char32_t cp);

}  // namespace kern::tokenizer
