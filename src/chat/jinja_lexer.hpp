// Splits template source into text and tag tokens, applying Jinja's whitespace rules as it goes
// (trim_blocks, lstrip_blocks, `-`/`+` markers, comments, {% raw %}), the way transformers
// configures its environment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kern::chat::jinja {

enum class Tok : std::uint8_t { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, End };

struct Token {
  Token(Tok t, std::string s, std::size_t at) : type(t), text(std::move(s)), offset(at) {}
  Tok type;
  std::string text;  // Text / Name / Op spelling, String value (escapes decoded)
  std::size_t offset = 0;
  std::int64_t int_value = 0;
  double float_value = 0;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// The source with newlines normalised and the one trailing newline dropped (Jinja's
// keep_trailing_newline=False). Token offsets refer to this text.
std::string normalize_source(std::string_view source);

// Throws Fault{"offset N: message"}-style errors through `error(offset, message)`.
struct LexError {
  std::size_t offset;
  std::string message;
};
std::vector<Token> lex(std::string_view source, const LexOptions& options = {});

}  // namespace kern::chat::jinja
