// kern::Tokenizer: loading, encoding (added tokens -> NFC -> regex split -> BPE), decoding.
#include "kern/tokenizer/tokenizer.hpp"

#include <filesystem>

#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/base/json.hpp"
#include "tokenizer/nfc.hpp"
#include "tokenizer/tokenizer_impl.hpp"
#include "tokenizer/utf8.hpp"

namespace kern::tokenizer {

Tokenizer::Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Tokenizer Tokenizer::from_json(std::string_view json_text, std::string_view what) {
  const Json doc = parse_json_strict(json_text, {ErrorKind::WeightArtifact, what, 64});
  auto impl = std::make_shared<Impl>();
  impl->what = std::string(what);
  load_tokenizer_json(doc, *impl);
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_file(const std::string& path) {
  std::string file = path;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) file = (std::filesystem::path(path) / "tokenizer.json").string();
  return from_json(read_file(file), file);
}

namespace {

void encode_plain(const Tokenizer::Impl& impl, std::string_view text, std::vector<TokenId>& ids,
                  std::vector<std::string_view>& pieces, std::vector<std::string_view>& scratch) {
  if (text.empty()) return;
  pieces.clear();
  pieces.push_back(text);
  for (const auto& splitter : impl.splitters) {
    scratch.clear();
    for (std::string_view p : pieces) splitter.split(p, scratch);
    pieces.swap(scratch);
  }
  for (std::string_view p : pieces) impl.bpe->encode_word(p, ids);
}

}  // namespace

std::vector<TokenId> Tokenizer::encode(std::string_view text) const {
  if (auto bad = tokenizer::first_invalid_utf8(text)) {
    fail(ErrorKind::Api, "text to encode is not valid UTF-8 (byte {} of {})", *bad, text.size());
  }
  const Impl& impl = *impl_;
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 1);
  std::vector<std::string_view> pieces, scratch;

  auto encode_gap = [&](std::string_view raw) {
    if (raw.empty()) return;
    const std::string normalized = impl.nfc ? tokenizer::nfc(raw) : std::string(raw);
    std::size_t at = 0;
    for (const auto& m : impl.normalized_matcher.find(normalized)) {
      encode_plain(impl, std::string_view(normalized).substr(at, m.start - at), ids, pieces, scratch);
      ids.push_back(m.id);
      at = m.end;
    }
    encode_plain(impl, std::string_view(normalized).substr(at), ids, pieces, scratch);
  };

  std::size_t at = 0;
  for (const auto& m : impl.raw_matcher.find(text)) {
    encode_gap(text.substr(at, m.start - at));
    ids.push_back(m.id);
    at = m.end;
  }
  encode_gap(text.substr(at));
  return ids;
}

bool Tokenizer::contains(TokenId id) const {
  return id >= 0 && static_cast<std::size_t>(id) < impl_->id_slot.size() &&
         impl_->id_slot[static_cast<std::size_t>(id)] != Impl::Slot::None;
}

bool Tokenizer::is_special(TokenId id) const {
  return contains(id) && impl_->id_slot[static_cast<std::size_t>(id)] == Impl::Slot::Special;
}

std::string Tokenizer::token_bytes(TokenId id) const {
  if (!contains(id)) fail(ErrorKind::Api, "token id {} is not in the vocabulary of {} ids", id, vocab_size());
  return impl_->id_bytes[static_cast<std::size_t>(id)];
}

std::string Tokenizer::decode_bytes(std::span<const TokenId> ids, const DecodeOptions& options) const {
  std::string out;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const TokenId id = ids[i];
    if (!contains(id)) {
      fail(ErrorKind::Api, "cannot decode id {} (position {}): not in the vocabulary of {} ids", id, i, vocab_size());
    }
    if (options.skip_special_tokens && is_special(id)) continue;
    out += impl_->id_bytes[static_cast<std::size_t>(id)];
  }
  return out;
}

std::string Tokenizer::decode(std::span<const TokenId> ids, const DecodeOptions& options) const {
  const std::string bytes = decode_bytes(ids, options);
  std::string out;
  out.reserve(bytes.size());
  tokenizer::append_utf8_lossy(bytes, out);
  return out;
}

std::optional<TokenId> Tokenizer::token_id(std::string_view content) const {
  const std::string key(content);
  if (auto it = impl_->added_by_content.find(key); it != impl_->added_by_content.end()) return it->second;
  if (auto it = impl_->model_by_bytes.find(key); it != impl_->model_by_bytes.end()) return it->second;
  return std::nullopt;
}

TokenId Tokenizer::require_token_id(std::string_view content) const {
  if (auto id = token_id(content)) return *id;
  fail(ErrorKind::Api, "{} has no token \"{}\"", impl_->what, content);
}

std::size_t Tokenizer::vocab_size() const { return impl_->id_slot.size(); }
std::size_t Tokenizer::model_vocab_size() const { return impl_->model_vocab_size; }
const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added; }
bool Tokenizer::normalizes_nfc() const { return impl_->nfc; }

}  // namespace kern::tokenizer
