// Small text scans the output parsers share (private to the chat layer).
#pragma once

#include <cstddef>
#include <string_view>

namespace kern::chat {

// Length of the longest suffix of `text` that is a proper prefix of `tag` (a tag that may
// still be completed by the next piece); 0 when none.
std::size_t partial_tag_suffix(std::string_view text, std::string_view tag);

// Index of the first byte of `text` at or after `from` that is not '\n' (text.size() if none).
std::size_t skip_newlines(std::string_view text, std::size_t from);
// `text` without its trailing '\n's.
std::string_view strip_trailing_newlines(std::string_view text);

// The whitespace the tool-call parser trims around blocks: JSON's (space, tab, CR, LF).
bool is_json_space(char c);
// `text` without leading / trailing JSON whitespace.
std::string_view trim_json_space(std::string_view text);

}  // namespace kern::chat
