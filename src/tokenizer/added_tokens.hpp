// Finds added tokens in text before anything else sees it: leftmost match first, the longest
// token on a tie (HF's leftmost-longest), honouring each token's lstrip / rstrip / single_word.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kern/tokenizer/tokenizer.hpp"

namespace kern::tokenizer {

struct AddedMatch {
  std::size_t start;  // byte range of the text the token replaces (stripped whitespace included)
  std::size_t end;
  TokenId id;
};

class AddedTokenMatcher {
 public:
  // `content` is what to look for (already normalised for normalized tokens); non-empty.
  void add(const AddedToken& token, std::string content);
  bool empty() const { return entries_.empty(); }
  // Non-overlapping matches in `text` (valid UTF-8), in order.
  std::vector<AddedMatch> find(std::string_view text) const;

 private:
  struct Entry {
    std::string content;
    TokenId id;
    bool lstrip, rstrip, single_word;
  };
  std::vector<Entry> entries_;
  std::array<std::vector<std::uint32_t>, 256> by_first_byte_;  // longest content first
};

}  // namespace kern::tokenizer
