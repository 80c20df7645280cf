// kern::StreamingDecoder: emits whole UTF-8 characters only, holding an unfinished one.
#include "kern/tokenizer/tokenizer.hpp"
#include "tokenizer/utf8.hpp"

namespace kern::tokenizer {

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, DecodeOptions options)
    : tokenizer_(tokenizer), options_(options) {}

std::string StreamingDecoder::take_complete() {
  const std::size_t n = tokenizer::complete_utf8_prefix(pending_);
  std::string out;
  tokenizer::append_utf8_lossy(std::string_view(pending_).substr(0, n), out);
  pending_.erase(0, n);
  return out;
}

std::string StreamingDecoder::push(TokenId id) {
  pending_ += tokenizer_.decode_bytes(std::span<const TokenId>(&id, 1), options_);
  return take_complete();
}

std::string StreamingDecoder::push(std::span<const TokenId> ids) {
  pending_ += tokenizer_.decode_bytes(ids, options_);  // throws before changing anything
  return take_complete();
}

std::string StreamingDecoder::finish() {
  std::string out;
  tokenizer::append_utf8_lossy(pending_, out);
  pending_.clear();
  return out;
}

}  // namespace kern::tokenizer
