// Builds small byte-level BPE tokenizer.json documents for tests: one token per byte (id = the
// byte), then one token per merge (ids 256, 257, ... in order), Qwen's split regex, NFC.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kern/base/json.hpp"
#include "tokenizer/byte_level.hpp"

namespace kern::test {

struct TinyAdded {
  int id;
  std::string content;
  bool special = true, lstrip = false, rstrip = false, normalized = false, single_word = false;
};
// An added_tokens entry of tokenizer.json: the fields by their names.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TinyAdded, id, content, special, lstrip, rstrip, normalized, single_word)

inline Json tiny_tokenizer(const std::vector<std::pair<std::string, std::string>>& merges,
                           const std::vector<TinyAdded>& added = {}) {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[tokenizer::to_byte_level(std::string(1, static_cast<char>(b)))] = b;
  Json merge_list = Json::array();
  int next = 256;
  for (const auto& [l, r] : merges) {
    const std::string joined = tokenizer::to_byte_level(l + r);
    if (!vocab.contains(joined)) vocab[joined] = next++;
    merge_list.push_back(Json::array({tokenizer::to_byte_level(l), tokenizer::to_byte_level(r)}));
  }
  const std::string split =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  const Json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  return Json{
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         Json::array(
             {Json{{"type", "Split"}, {"pattern", {{"Regex", split}}}, {"behavior", "Isolated"}, {"invert", false}},
              byte_level})}}},
      {"post_processor", byte_level},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", merge_list}}},
  };
}

}  // namespace kern::test
