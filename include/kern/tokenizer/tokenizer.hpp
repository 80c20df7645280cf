// Byte-level BPE tokenizer loaded from a Hugging Face `tokenizer.json` (GPT-2 / Qwen2 / Qwen3
// family): added tokens matched first, NFC normalisation, the file's split regex (PCRE2, UTF +
// UCP), byte-to-unicode mapping, merges by rank; decoding through the byte-level decoder, with
// a streaming decoder that only ever emits whole UTF-8 characters.
//
// Errors: a tokenizer.json that is malformed or asks for something this implementation cannot
// honour exactly -> Error(WeightArtifact) naming the JSON path; misuse by the caller (text that
// is not UTF-8, an id outside the vocabulary) -> Error(Api).
//
// A Tokenizer is immutable after loading and safe to use from several threads at once (its
// per-word merge cache is internally locked). Copies share the loaded tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kern::tokenizer {

using TokenId = std::int32_t;

// One entry of tokenizer.json's `added_tokens`.
struct AddedToken {
  TokenId id = 0;
  std::string content;       // raw text matched in the input (UTF-8)
  bool special = false;      // dropped by decode when DecodeOptions::skip_special_tokens
  bool lstrip = false;       // the match swallows whitespace on its left
  bool rstrip = false;       // the match swallows whitespace on its right
  bool normalized = false;   // matched in the normalised text instead of the raw text
  bool single_word = false;  // matched only when not glued to a word character on either side
};

struct DecodeOptions {
  bool skip_special_tokens = false;  // like HF decode(..., skip_special_tokens=True)
};

class Tokenizer {
 public:
  // Parses the text of a tokenizer.json; `what` names it in error messages.
  static Tokenizer from_json(std::string_view json_text, std::string_view what = "tokenizer.json");
  // Reads `path` (a tokenizer.json, or a directory holding one).
  static Tokenizer from_file(const std::string& path);

  // Ids for UTF-8 `text` (no BOS/EOS added). Error(Api) if `text` is not valid UTF-8.
  std::vector<TokenId> encode(std::string_view text) const;

  // Text for `ids`; byte sequences that are not valid UTF-8 become U+FFFD (maximal subparts,
  // as HF's String::from_utf8_lossy). Error(Api) for an id outside the vocabulary.
  std::string decode(std::span<const TokenId> ids, const DecodeOptions& options = {}) const;
  // The raw bytes `ids` stand for (no UTF-8 repair); Error(Api) for an unknown id.
  std::string decode_bytes(std::span<const TokenId> ids, const DecodeOptions& options = {}) const;

  // Id of the added token whose content is `content` (e.g. "<|im_end|>"), else of the model
  // token spelling exactly these bytes; nullopt when there is none.
  std::optional<TokenId> token_id(std::string_view content) const;
  // Like token_id but Error(Api) naming `content` when absent.
  TokenId require_token_id(std::string_view content) const;
  // The text an id stands for (added token content, or the model token's bytes, possibly
  // not UTF-8 on their own); Error(Api) for an unknown id.
  std::string token_bytes(TokenId id) const;

  bool contains(TokenId id) const;    // the id names a model or added token
  bool is_special(TokenId id) const;  // an added token marked special
  // One past the largest id (model or added).
  std::size_t vocab_size() const;
  // Number of model (BPE) tokens, without added tokens.
  std::size_t model_vocab_size() const;
  const std::vector<AddedToken>& added_tokens() const;
  // Whether the file asks for NFC normalisation (decode(encode(s)) == NFC(s) then).
  bool normalizes_nfc() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
  friend class StreamingDecoder;
};

// Incremental decoding for generated tokens: push ids as they arrive, get back only whole
// UTF-8 characters; bytes of an unfinished character are held until it completes (or turns out
// invalid, which yields U+FFFD). The concatenation of every push() and finish() equals
// Tokenizer::decode of all ids pushed.
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer, DecodeOptions options = {});

  // Text that became complete with `id` (possibly empty). Error(Api) for an unknown id; the
  // decoder is unchanged then.
  std::string push(TokenId id);
  std::string push(std::span<const TokenId> ids);
  // Emits what is still held (an unfinished character becomes U+FFFD) and resets.
  std::string finish();
  // Bytes held back, waiting for the rest of a character.
  std::size_t pending_bytes() const { return pending_.size(); }

 private:
  std::string take_complete();
  Tokenizer tokenizer_;
  DecodeOptions options_;
  std::string pending_;
};

}  // namespace kern::tokenizer
