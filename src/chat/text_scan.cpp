#include "chat/text_scan.hpp"

#include <algorithm>

namespace kern::chat {

std::size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  if (tag.empty()) return 0;
  for (std::size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

std::size_t skip_newlines(std::string_view text, std::size_t from) {
  while (from < text.size() && text[from] == '\n') ++from;
  return from;
}

std::string_view strip_trailing_newlines(std::string_view text) {
  while (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  return text;
}

bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trim_json_space(std::string_view text) {
  while (!text.empty() && is_json_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_json_space(text.back())) text.remove_suffix(1);
  return text;
}

}  // namespace kern::chat
