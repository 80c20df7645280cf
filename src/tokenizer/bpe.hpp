// The BPE model over bytes: a word (one pre-token's bytes) starts as one token per byte and
// the adjacent pair with the lowest merge rank is merged (leftmost first on a tie) until no
// pair has a merge, exactly as HF tokenizers' BPE without dropout. Results are cached per word.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kern/tokenizer/tokenizer.hpp"

namespace kern::tokenizer {

class BpeModel {
 public:
  struct Merge {
    std::uint32_t rank;
    TokenId result;
  };

  // `byte_ids[b]`: the token of byte b alone. `whole_words`: when non-null, a word that is a
  // token as a whole is taken as is (HF's ignore_merges); it must outlive the model.
  BpeModel(std::vector<TokenId> byte_ids, const std::unordered_map<std::string, TokenId>* whole_words);

  // Registers pair (left, right) -> result at `rank`; a later registration of the same pair
  // replaces the earlier one (as HF's loader does).
  void add_merge(TokenId left, TokenId right, std::uint32_t rank, TokenId result);
  std::size_t merge_count() const { return merges_.size(); }

  // Appends the ids of `word` (non-empty bytes) to `out`.
  void encode_word(std::string_view word, std::vector<TokenId>& out) const;

 private:
  static std::uint64_t key(TokenId l, TokenId r) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(l)) << 32) | static_cast<std::uint32_t>(r);
  }
  const Merge* find_merge(TokenId l, TokenId r) const;
  void merge_word(std::string_view word, std::vector<TokenId>& out) const;

  std::vector<TokenId> byte_ids_;
  const std::unordered_map<std::string, TokenId>* whole_words_;
  std::unordered_map<std::uint64_t, Merge> merges_;  // looked up only, never iterated

  static constexpr std::size_t kCacheMaxWordBytes = 256;
  static constexpr std::size_t kCacheMaxEntries = 1 << 18;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<TokenId>> cache_;  // looked up only
};

}  // namespace kern::tokenizer
