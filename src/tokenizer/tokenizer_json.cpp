// Reads a HF tokenizer.json into Tokenizer::Impl, refusing every setting whose effect kern
// would not reproduce exactly (other models, normalizers, pre-tokenizers, post-processors,
// truncation, padding).
#include <limits>
#include <string>
#include <string_view>

#include "kern/base/error.hpp"
#include "tokenizer/byte_level.hpp"
#include "tokenizer/nfc.hpp"
#include "tokenizer/tokenizer_impl.hpp"
#include "tokenizer/utf8.hpp"

namespace kern::tokenizer {
namespace {

// GPT-2's split, used by a ByteLevel pre-tokenizer with use_regex = true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Tokens are stored by id (one slot per id up to the largest), so ids are bounded by the number
// of tokens the file has, plus room for gaps: a small file cannot make the loader allocate
// gigabytes (id 2,000,000,000 among 300 tokens is no real tokenizer).
constexpr std::size_t kIdGapAllowance = 65536;

std::size_t id_limit(const Json& doc) {
  std::size_t tokens = 0;
  if (doc.is_object()) {
    auto m = doc.find("model");
    if (m != doc.end() && m->is_object()) {
      auto v = m->find("vocab");
      if (v != m->end() && v->is_object()) tokens += v->size();
    }
    auto a = doc.find("added_tokens");
    if (a != doc.end() && a->is_array()) tokens += a->size();
  }
  return tokens + kIdGapAllowance;
}

class Reader {
 public:
  Reader(std::string_view what, std::size_t id_limit) : what_(what), id_limit_(id_limit) {}

  [[noreturn]] void bad(std::string_view path, std::string_view message) const {
    fail(ErrorKind::WeightArtifact, "{}: {}: {}", what_, path, message);
  }
  const Json& object(const Json& j, std::string_view path) const {
    if (!j.is_object()) bad(path, "expected an object");
    return j;
  }
  const Json& array(const Json& j, std::string_view path) const {
    if (!j.is_array()) bad(path, "expected an array");
    return j;
  }
  const std::string& string(const Json& j, std::string_view path) const {
    if (!j.is_string()) bad(path, "expected a string");
    return j.get_ref<const std::string&>();
  }
  bool boolean(const Json& obj, std::string_view key, std::string_view parent, bool fallback) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) bad(json_path_key(parent, key), "expected true or false");
    return it->get<bool>();
  }
  TokenId id(const Json& j, std::string_view path) const {
    if (!j.is_number_integer()) bad(path, "expected a non-negative integer token id");
    const auto v = j.get<std::int64_t>();
    if (v < 0 || v >= std::numeric_limits<TokenId>::max()) bad(path, fmt::format("token id {} is out of range", v));
    if (static_cast<std::uint64_t>(v) >= id_limit_) {
      bad(path, fmt::format("token id {} is out of range: the file has {} tokens, so kern accepts ids below {}", v,
                            id_limit_ - kIdGapAllowance, id_limit_));
    }
    return static_cast<TokenId>(v);
  }
  // A member that must be present (it may be null).
  const Json& member(const Json& obj, std::string_view key, std::string_view parent) const {
    auto it = obj.find(key);
    if (it == obj.end()) bad(json_path_key(parent, key), "missing");
    return *it;
  }
  std::string type_of(const Json& obj, std::string_view path) const {
    object(obj, path);
    return string(member(obj, "type", path), json_path_key(path, "type"));
  }

 private:
  std::string what_;
  std::size_t id_limit_;
};

bool absent_or_null(const Json& obj, std::string_view key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null();
}

void read_normalizer(const Reader& r, const Json& doc, Tokenizer::Impl& impl) {
  if (absent_or_null(doc, "normalizer")) return;
  const Json& n = doc["normalizer"];
  const std::string type = r.type_of(n, "normalizer");
  if (type == "NFC") {
    impl.nfc = true;
    return;
  }
  if (type == "Sequence") {
    const Json& list = r.array(r.member(n, "normalizers", "normalizer"), "normalizer.normalizers");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string path = json_path_index("normalizer.normalizers", i);
      const std::string t = r.type_of(list[i], path);
      if (t != "NFC") r.bad(path, fmt::format("normalizer type \"{}\" is not supported (kern implements NFC only)", t));
      impl.nfc = true;
    }
    return;
  }
  r.bad("normalizer.type", fmt::format("normalizer type \"{}\" is not supported (kern implements NFC only)", type));
}

void read_byte_level(const Reader& r, const Json& j, std::string_view path, Tokenizer::Impl& impl) {
  auto it = j.find("add_prefix_space");
  if (it == j.end() || !it->is_boolean() || it->get<bool>()) {
    r.bad(json_path_key(path, "add_prefix_space"), "must be false (a prefix space, HF's default, is not supported)");
  }
  if (r.boolean(j, "use_regex", path, true))
    impl.splitters.emplace_back(kGpt2Pattern, json_path_key(path, "use_regex"));
}

void read_split(const Reader& r, const Json& j, std::string_view path, Tokenizer::Impl& impl) {
  const std::string pattern_path = json_path_key(path, "pattern");
  const Json& pattern = r.object(r.member(j, "pattern", path), pattern_path);
  if (!pattern.contains("Regex")) {
    r.bad(pattern_path, "only {\"Regex\": ...} split patterns are supported");
  }
  const std::string& regex = r.string(pattern["Regex"], json_path_key(pattern_path, "Regex"));
  const std::string behavior = r.string(r.member(j, "behavior", path), json_path_key(path, "behavior"));
  if (behavior != "Isolated") {
    r.bad(json_path_key(path, "behavior"),
          fmt::format("split behavior \"{}\" is not supported (only Isolated)", behavior));
  }
  if (r.boolean(j, "invert", path, false)) r.bad(json_path_key(path, "invert"), "inverted splits are not supported");
  impl.splitters.emplace_back(regex, pattern_path);
}

void read_pre_tokenizer(const Reader& r, const Json& doc, Tokenizer::Impl& impl) {
  if (absent_or_null(doc, "pre_tokenizer")) {
    r.bad("pre_tokenizer", "missing: a byte-level BPE needs the ByteLevel pre-tokenizer");
  }
  const Json& p = doc["pre_tokenizer"];
  const std::string type = r.type_of(p, "pre_tokenizer");
  if (type == "ByteLevel") {
    read_byte_level(r, p, "pre_tokenizer", impl);
    return;
  }
  if (type != "Sequence") {
    r.bad("pre_tokenizer.type",
          fmt::format("pre-tokenizer type \"{}\" is not supported (ByteLevel, or a Sequence of Split then ByteLevel)",
                      type));
  }
  const Json& list = r.array(r.member(p, "pretokenizers", "pre_tokenizer"), "pre_tokenizer.pretokenizers");
  bool byte_level = false;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string path = json_path_index("pre_tokenizer.pretokenizers", i);
    const std::string t = r.type_of(list[i], path);
    if (byte_level) r.bad(path, "nothing may follow the ByteLevel pre-tokenizer");
    if (t == "Split") {
      read_split(r, list[i], path, impl);
    } else if (t == "ByteLevel") {
      read_byte_level(r, list[i], path, impl);
      byte_level = true;
    } else {
      r.bad(path, fmt::format("pre-tokenizer type \"{}\" is not supported (Split and ByteLevel only)", t));
    }
  }
  if (!byte_level)
    r.bad("pre_tokenizer.pretokenizers", "no ByteLevel pre-tokenizer: kern only reads byte-level BPE tokenizers");
}

// The model first: "not a BPE" is the most useful thing to say about a foreign file.
const Json& check_model_type(const Reader& r, const Json& doc) {
  const Json& m = r.object(r.member(doc, "model", ""), "model");
  auto it = m.find("type");
  if (it == m.end()) r.bad("model.type", "missing (kern reads BPE models only)");
  const std::string& type = r.string(*it, "model.type");
  if (type != "BPE") r.bad("model.type", fmt::format("model type \"{}\" is not supported (BPE only)", type));
  return m;
}

void read_model(const Reader& r, const Json& doc, Tokenizer::Impl& impl) {
  const Json& m = check_model_type(r, doc);
  if (!absent_or_null(m, "dropout")) r.bad("model.dropout", "BPE dropout is not supported (it makes encoding random)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (!absent_or_null(m, key) && !r.string(m[key], json_path_key("model", key)).empty()) {
      r.bad(json_path_key("model", key), "must be empty for a byte-level BPE");
    }
  }
  if (r.boolean(m, "byte_fallback", "model", false)) r.bad("model.byte_fallback", "byte fallback is not supported");
  const bool ignore_merges = r.boolean(m, "ignore_merges", "model", false);

  // Vocabulary: byte-level spelling -> id.
  const Json& vocab = r.object(r.member(m, "vocab", "model"), "model.vocab");
  std::unordered_map<std::string, TokenId> by_spelling;  // lookup only
  by_spelling.reserve(vocab.size());
  impl.model_by_bytes.reserve(vocab.size());
  for (auto v = vocab.begin(); v != vocab.end(); ++v) {
    const std::string path = json_path_key("model.vocab", v.key());
    const TokenId id = r.id(v.value(), path);
    if (static_cast<std::size_t>(id) >= impl.id_slot.size()) {
      impl.id_slot.resize(static_cast<std::size_t>(id) + 1, Tokenizer::Impl::Slot::None);
      impl.id_bytes.resize(static_cast<std::size_t>(id) + 1);
    }
    if (impl.id_slot[id] != Tokenizer::Impl::Slot::None) r.bad(path, fmt::format("token id {} is used twice", id));
    impl.id_slot[id] = Tokenizer::Impl::Slot::Model;
    impl.id_bytes[id] = tokenizer::from_byte_level(v.key());
    impl.model_by_bytes.emplace(impl.id_bytes[id], id);
    by_spelling.emplace(v.key(), id);
  }
  impl.model_vocab_size = vocab.size();

  std::vector<TokenId> byte_ids(256);
  for (int b = 0; b < 256; ++b) {
    const std::string spelling = tokenizer::to_byte_level(std::string(1, static_cast<char>(b)));
    auto f = by_spelling.find(spelling);
    if (f == by_spelling.end()) {
      r.bad("model.vocab",
            fmt::format("no token for byte 0x{:02X} (\"{}\"): not a byte-level vocabulary", b, spelling));
    }
    byte_ids[b] = f->second;
  }
  impl.bpe = std::make_unique<tokenizer::BpeModel>(std::move(byte_ids), ignore_merges ? &impl.model_by_bytes : nullptr);

  const Json& merges = r.array(r.member(m, "merges", "model"), "model.merges");
  auto lookup = [&](const std::string& spelling, const std::string& path) {
    auto f = by_spelling.find(spelling);
    if (f == by_spelling.end()) r.bad(path, fmt::format("\"{}\" is not in the vocabulary", spelling));
    return f->second;
  };
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const std::string path = json_path_index("model.merges", i);
    std::string left, right;
    if (merges[i].is_string()) {
      const std::string& s = merges[i].get_ref<const std::string&>();
      const auto space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        r.bad(path, "a merge string must be two tokens separated by one space");
      }
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (merges[i].is_array() && merges[i].size() == 2) {
      left = r.string(merges[i][0], json_path_index(path, 0));
      right = r.string(merges[i][1], json_path_index(path, 1));
    } else {
      r.bad(path, "expected \"left right\" or [\"left\", \"right\"]");
    }
    impl.bpe->add_merge(lookup(left, path), lookup(right, path), static_cast<std::uint32_t>(i),
                        lookup(left + right, path));
  }
}

void read_added_tokens(const Reader& r, const Json& doc, Tokenizer::Impl& impl) {
  if (absent_or_null(doc, "added_tokens")) return;
  const Json& list = r.array(doc["added_tokens"], "added_tokens");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string path = json_path_index("added_tokens", i);
    const Json& t = r.object(list[i], path);
    AddedToken token;
    token.id = r.id(r.member(t, "id", path), json_path_key(path, "id"));
    token.content = r.string(r.member(t, "content", path), json_path_key(path, "content"));
    if (token.content.empty()) r.bad(json_path_key(path, "content"), "an added token cannot be empty");
    token.special = r.boolean(t, "special", path, false);
    token.lstrip = r.boolean(t, "lstrip", path, false);
    token.rstrip = r.boolean(t, "rstrip", path, false);
    token.normalized = r.boolean(t, "normalized", path, !token.special);
    token.single_word = r.boolean(t, "single_word", path, false);
    if (!impl.added_by_content.emplace(token.content, token.id).second) {
      r.bad(json_path_key(path, "content"), fmt::format("\"{}\" is added twice", token.content));
    }
    const auto id = static_cast<std::size_t>(token.id);
    if (id >= impl.id_slot.size()) {
      impl.id_slot.resize(id + 1, Tokenizer::Impl::Slot::None);
      impl.id_bytes.resize(id + 1);
    }
    if (impl.id_slot[id] == Tokenizer::Impl::Slot::Added || impl.id_slot[id] == Tokenizer::Impl::Slot::Special) {
      r.bad(json_path_key(path, "id"), fmt::format("token id {} is added twice", token.id));
    }
    impl.id_slot[id] = token.special ? Tokenizer::Impl::Slot::Special : Tokenizer::Impl::Slot::Added;
    impl.id_bytes[id] = tokenizer::from_byte_level(token.content);  // HF decodes added tokens the same way
    if (token.normalized) {
      impl.normalized_matcher.add(token, impl.nfc ? tokenizer::nfc(token.content) : token.content);
    } else {
      impl.raw_matcher.add(token, token.content);
    }
    impl.added.push_back(std::move(token));
  }
}

void read_decoding(const Reader& r, const Json& doc) {
  if (absent_or_null(doc, "decoder")) r.bad("decoder", "missing: a byte-level BPE needs the ByteLevel decoder");
  const std::string type = r.type_of(doc["decoder"], "decoder");
  if (type != "ByteLevel")
    r.bad("decoder.type", fmt::format("decoder type \"{}\" is not supported (ByteLevel only)", type));
  if (!absent_or_null(doc, "post_processor")) {
    const std::string pp = r.type_of(doc["post_processor"], "post_processor");
    if (pp != "ByteLevel") {
      r.bad("post_processor.type",
            fmt::format("post-processor type \"{}\" is not supported (it would add tokens kern does not add)", pp));
    }
  }
  for (const char* key : {"truncation", "padding"}) {
    if (!absent_or_null(doc, key)) r.bad(key, "must be null: kern neither truncates nor pads");
  }
}

}  // namespace

void load_tokenizer_json(const Json& doc, Tokenizer::Impl& impl) {
  const Reader r(impl.what, id_limit(doc));
  r.object(doc, "(top level)");
  check_model_type(r, doc);
  read_decoding(r, doc);
  read_normalizer(r, doc, impl);
  read_pre_tokenizer(r, doc, impl);
  read_model(r, doc, impl);
  read_added_tokens(r, doc, impl);
}

}  // namespace kern::tokenizer
