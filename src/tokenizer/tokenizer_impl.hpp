// The loaded state behind kern::Tokenizer (shared, immutable after loading).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kern/base/json.hpp"
#include "kern/tokenizer/tokenizer.hpp"
#include "tokenizer/added_tokens.hpp"
#include "tokenizer/bpe.hpp"
#include "tokenizer/regex_split.hpp"

namespace kern::tokenizer {

struct Tokenizer::Impl {
  enum class Slot : std::uint8_t { None, Model, Added, Special };

  std::string what;  // the file, for messages
  bool nfc = false;
  std::vector<tokenizer::RegexSplitter> splitters;          // applied in order, each to every piece
  std::unordered_map<std::string, TokenId> model_by_bytes;  // raw bytes -> model token (lookup only)
  std::unique_ptr<tokenizer::BpeModel> bpe;
  std::size_t model_vocab_size = 0;

  std::vector<AddedToken> added;
  std::unordered_map<std::string, TokenId> added_by_content;  // lookup only
  tokenizer::AddedTokenMatcher raw_matcher;                   // tokens with normalized = false
  tokenizer::AddedTokenMatcher normalized_matcher;            // tokens with normalized = true

  std::vector<std::string> id_bytes;  // what decoding each id yields
  std::vector<Slot> id_slot;
};

// Fills `impl` from a parsed tokenizer.json; Error(WeightArtifact) for anything it cannot honour.
void load_tokenizer_json(const Json& doc, Tokenizer::Impl& impl);

}  // namespace kern::tokenizer
