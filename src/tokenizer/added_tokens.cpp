#include "tokenizer/added_tokens.hpp"

#include <algorithm>
#include <utf8proc.h>

#include "tokenizer/utf8.hpp"

namespace kern::tokenizer {
namespace {

// What HF's `\w` (Rust regex, Unicode) calls a word character: letters, marks, decimal and
// letter digits, connector punctuation (`_`), ZWNJ / ZWJ.
bool is_word_char(char32_t cp) {
  if (cp == 0x200C || cp == 0x200D) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC: return true;
    default: return false;
  }
}

// The character ending just before byte `end` (> 0) of valid UTF-8 `s`, and where it starts.
char32_t code_point_before(std::string_view s, std::size_t end, std::size_t& start) {
  start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  std::size_t i = start;
  return next_code_point(s, i);
}

}  // namespace

void AddedTokenMatcher::add(const AddedToken& token, std::string content) {
  const auto index = static_cast<std::uint32_t>(entries_.size());
  const auto first = static_cast<unsigned char>(content[0]);
  entries_.push_back(Entry{std::move(content), token.id, token.lstrip, token.rstrip, token.single_word});
  auto& bucket = by_first_byte_[first];
  bucket.push_back(index);
  std::stable_sort(bucket.begin(), bucket.end(), [this](std::uint32_t a, std::uint32_t b) {
    return entries_[a].content.size() > entries_[b].content.size();
  });
}

std::vector<AddedMatch> AddedTokenMatcher::find(std::string_view text) const {
  std::vector<AddedMatch> matches;
  if (entries_.empty()) return matches;
  std::size_t prev_end = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    const auto& bucket = by_first_byte_[static_cast<unsigned char>(text[i])];
    const Entry* hit = nullptr;
    for (std::uint32_t index : bucket) {
      if (text.substr(i).starts_with(entries_[index].content)) {
        hit = &entries_[index];
        break;
      }
    }
    if (!hit) {
      ++i;
      continue;
    }
    std::size_t start = i, end = i + hit->content.size();
    if (hit->single_word) {
      std::size_t before_start = 0;
      std::size_t after = end;
      const bool glued_left = start > 0 && is_word_char(code_point_before(text, start, before_start));
      const bool glued_right = end < text.size() && is_word_char(next_code_point(text, after));
      if (glued_left || glued_right) {
        i = end;
        continue;
      }
    }
    if (hit->lstrip) {
      while (start > prev_end) {
        std::size_t cp_start = 0;
        if (!is_unicode_whitespace(code_point_before(text, start, cp_start)) || cp_start < prev_end) break;
        start = cp_start;
      }
    }
    if (hit->rstrip) {
      while (end < text.size()) {
        std::size_t next = end;
        if (!is_unicode_whitespace(next_code_point(text, next))) break;
        end = next;
      }
    }
    matches.push_back(AddedMatch{start, end, hit->id});
    prev_end = i = end;
  }
  return matches;
}

}  // namespace kern::tokenizer
