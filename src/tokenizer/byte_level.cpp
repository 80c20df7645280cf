#include "tokenizer/byte_level.hpp"

#include "tokenizer/utf8.hpp"

namespace kern::tokenizer {
namespace {

bool printable_byte(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

std::array<char32_t, 256> make_table() {
  std::array<char32_t, 256> t{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) t[b] = printable_byte(b) ? static_cast<char32_t>(b) : next++;
  return t;
}

}  // namespace

const std::array<char32_t, 256>& byte_level_chars() {
  static const std::array<char32_t, 256> table = make_table();
  return table;
}

std::optional<unsigned char> byte_level_byte(char32_t c) {
  // Every mapped character is below 256 + 68 (68 bytes are not printable).
  static const std::array<short, 256 + 68> inverse = [] {
    std::array<short, 256 + 68> inv{};
    inv.fill(-1);
    const auto& table = byte_level_chars();
    for (int b = 0; b < 256; ++b) inv[table[b]] = static_cast<short>(b);
    return inv;
  }();
  if (c >= inverse.size() || inverse[c] < 0) return std::nullopt;
  return static_cast<unsigned char>(inverse[c]);
}

std::string to_byte_level(std::string_view bytes) {
  const auto& table = byte_level_chars();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char ch : bytes) append_utf8(table[static_cast<unsigned char>(ch)], out);
  return out;
}

std::string from_byte_level(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  std::size_t i = 0;
  while (i < token.size()) {
    const std::optional<unsigned char> b = byte_level_byte(next_code_point(token, i));
    if (!b) return std::string(token);
    out.push_back(static_cast<char>(*b));
  }
  return out;
}

}  // namespace kern::tokenizer
