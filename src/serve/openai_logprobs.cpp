// The log-prob parts of openai_response.hpp: chat's per-token objects and completions' four
// parallel lists.
#include <cmath>
#include <cstdint>

#include "kern/serve/openai_response.hpp"

namespace kern::serve {

namespace {

// OpenAI writes the log-prob of an impossible token as -9999.0; JSON has no -inf.
double finite_logprob(double x) {
  constexpr double kFloor = -9999.0;
  if (std::isnan(x) || x < kFloor) return kFloor;
  if (x > 0.0) return 0.0;  // a log-prob is never positive; rounding can make it 1e-8
  return x;
}

ResponseJson byte_values(const std::string& text) {
  ResponseJson bytes = ResponseJson::array();
  for (char c : text) bytes.push_back(static_cast<std::uint8_t>(c));
  return bytes;
}

ResponseJson chat_token_entry(const std::string& token, double logprob) {
  ResponseJson e = ResponseJson::object();
  e["token"] = token;
  e["logprob"] = finite_logprob(logprob);
  e["bytes"] = byte_values(token);
  return e;
}

}  // namespace

std::size_t code_points(std::string_view text) {
  std::size_t n = 0;
  for (char c : text)
    if ((static_cast<unsigned char>(c) & 0xC0u) != 0x80u) ++n;
  return n;
}

ResponseJson chat_logprobs_json(std::span<const TokenLogprob> tokens) {
  ResponseJson content = ResponseJson::array();
  for (const TokenLogprob& t : tokens) {
    ResponseJson e = chat_token_entry(t.token, t.logprob.value_or(0.0));
    ResponseJson top = ResponseJson::array();
    for (const TopLogprob& alt : t.top) top.push_back(chat_token_entry(alt.token, alt.logprob));
    e["top_logprobs"] = std::move(top);
    content.push_back(std::move(e));
  }
  ResponseJson j = ResponseJson::object();
  j["content"] = std::move(content);
  return j;
}

ResponseJson completion_logprobs_json(std::span<const TokenLogprob> tokens, std::size_t first_offset) {
  ResponseJson texts = ResponseJson::array();
  ResponseJson logprobs = ResponseJson::array();
  ResponseJson tops = ResponseJson::array();
  ResponseJson offsets = ResponseJson::array();
  std::size_t offset = first_offset;
  for (const TokenLogprob& t : tokens) {
    texts.push_back(t.token);
    offsets.push_back(offset);
    offset += code_points(t.token);
    if (!t.logprob) {
      logprobs.push_back(nullptr);
      tops.push_back(nullptr);
      continue;
    }
    logprobs.push_back(finite_logprob(*t.logprob));
    ResponseJson top = ResponseJson::object();
    // Two ids can decode to the same text (pieces of one character): keep the first, the best.
    for (const TopLogprob& alt : t.top) top.emplace(alt.token, finite_logprob(alt.logprob));
    tops.push_back(std::move(top));
  }
  ResponseJson j = ResponseJson::object();
  j["tokens"] = std::move(texts);
  j["token_logprobs"] = std::move(logprobs);
  j["top_logprobs"] = std::move(tops);
  j["text_offset"] = std::move(offsets);
  return j;
}

}  // namespace kern::serve
