// fuzz-deps: kern_tokenizer kern_base
// libFuzzer target: bytes -> Tokenizer::from_json. Any input must load or end in a kern::Error,
// never a crash, hang or sanitizer report. The input is the file up to its first NUL byte (which
// JSON text cannot hold) and, after it, a text to encode, so that mutations of the text keep the
// file loadable. A tokenizer that loads then encodes that text, a few fixed ones and its added
// tokens inside text, and what it promises is checked: every id is in the
// vocabulary, streaming decode equals decode, and without added tokens encoding loses nothing
// (decode_bytes(encode(s)) == s, or, with NFC, decode(encode(t)) == t for t = decode(encode(s))).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "kern/base/error.hpp"
#include "kern/tokenizer/tokenizer.hpp"

namespace {

using kern::tokenizer::StreamingDecoder;
using kern::tokenizer::TokenId;
using kern::tokenizer::Tokenizer;

void check_text(const Tokenizer& tok, const std::string& text) {
  const std::vector<TokenId> ids = tok.encode(text);
  for (TokenId id : ids) {
    if (!tok.contains(id)) std::abort();
  }
  const std::string decoded = tok.decode(ids);
  StreamingDecoder stream(tok);
  std::string streamed;
  for (TokenId id : ids) streamed += stream.push(id);
  streamed += stream.finish();
  if (streamed != decoded) std::abort();
  if (!tok.added_tokens().empty()) return;
  if (!tok.normalizes_nfc()) {
    if (tok.decode_bytes(ids) != text) std::abort();
  } else if (tok.decode(tok.encode(decoded)) != decoded) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  const std::string_view json = input.substr(0, nul);
  try {
    const Tokenizer tok = Tokenizer::from_json(json, "fuzz tokenizer.json");
    std::vector<std::string> texts = {"Hello, world!", " 12 345\t\n\n  x  ", "naïve café 北京 😀 e\xCC\x81",
                                      "<|im_end|><think>\n", ""};
    for (std::size_t i = 0; i < tok.added_tokens().size() && i < 8; ++i) {
      texts.push_back("a " + tok.added_tokens()[i].content + " b" + tok.added_tokens()[i].content);
    }
    if (nul != std::string_view::npos) texts.emplace_back(input.substr(nul + 1));
    for (const std::string& t : texts) {
      try {
        check_text(tok, t);
      } catch (const kern::Error& e) {
        if (e.kind() != kern::ErrorKind::Api) std::abort();  // only text that is not UTF-8 may be refused
      }
    }
  } catch (const kern::Error&) {
  }
  return 0;
}
