// GPT-2's byte <-> unicode table: every byte gets a printable character (bytes that are already
// printable Latin-1 map to themselves, the rest to U+0100..U+0143), so BPE vocabularies can
// spell arbitrary bytes as text.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace kern::tokenizer {

// The character standing for each byte.
const std::array<char32_t, 256>& byte_level_chars();

// The byte a character stands for, or nullopt for a character outside the table.
std::optional<unsigned char> byte_level_byte(char32_t c);

// `bytes` spelled with the table (UTF-8 of the mapped characters).
std::string to_byte_level(std::string_view bytes);

// What HF's ByteLevel decoder makes of one token (valid UTF-8): the bytes its characters stand
// for, or, if any character is outside the table, the token's own UTF-8 unchanged.
std::string from_byte_level(std::string_view token);

}  // namespace kern::tokenizer
