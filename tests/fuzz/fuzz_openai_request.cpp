// fuzz-deps: kern_serve kern_base
// libFuzzer target: arbitrary bytes as the body of /v1/completions, /v1/chat/completions,
// /tokenize or /detokenize (which one, and default or tiny limits, by a hash of the input), then
// through the response builders, and as streamed text through the stop matcher (stop strings
// cut from the input itself, the stream cut at points drawn from the hash). Parsers must answer
// a request or a 400, never throw; a parsed logit_bias must hold its invariants; every body built
// must parse back as JSON; the matcher's streamed output must equal a brute-force reference for the
// whole text. Any difference aborts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kern/serve/openai_request.hpp"
#include "kern/serve/openai_response.hpp"
#include "kern/serve/stop_matcher.hpp"
#include "kern/serve/tokenize_api.hpp"

namespace {

using namespace kern::serve;

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

struct Rng {
  std::uint64_t x;
  std::uint32_t next() {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return static_cast<std::uint32_t>(x >> 11);
  }
};

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (std::size_t k = 1; k < len; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = cp << 6 | (d & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += len;
  }
  return true;
}

void must_be_json(const std::string& body) {
  if (!ResponseJson::accept(body)) std::abort();
}

// The stop strings' first completion in `text` (longest at one end byte, then first listed).
std::optional<std::size_t> reference_stop_start(std::string_view text, const std::vector<std::string>& stops) {
  for (std::size_t e = 1; e <= text.size(); ++e) {
    std::optional<std::size_t> best;
    for (std::size_t i = 0; i < stops.size(); ++i) {
      const std::string& s = stops[i];
      if (s.empty() || s.size() > e || text.compare(e - s.size(), s.size(), s) != 0) continue;
      if (!best || s.size() > stops[*best].size()) best = i;
    }
    if (best) return e - stops[*best].size();
  }
  return std::nullopt;
}

void check_stop_matcher(std::string_view text, Rng rng) {
  std::vector<std::string> stops(rng.next() % 4);
  for (std::string& s : stops) {
    if (text.empty()) break;
    const std::size_t at = rng.next() % text.size();
    s = std::string(text.substr(at, 1 + rng.next() % 8));
    if (rng.next() % 4 == 0 && !s.empty()) s.back() ^= 1;  // sometimes a near miss
  }
  const bool utf8 = valid_utf8(text);
  bool stops_utf8 = true;
  for (const std::string& s : stops) stops_utf8 = stops_utf8 && valid_utf8(s);

  StopMatcher m(stops);
  std::string emitted;
  bool stopped = false;
  std::size_t at = 0;
  while (at < text.size() && !stopped) {
    const std::size_t n = std::min<std::size_t>(text.size() - at, rng.next() % 12);
    const StopFeed f = m.feed(text.substr(at, n));
    at += n;
    if (utf8 && stops_utf8 && !valid_utf8(f.text)) std::abort();  // a character was split
    emitted += f.text;
    if (emitted.size() > at) std::abort();
    if (text.compare(0, emitted.size(), emitted) != 0) std::abort();  // not a prefix of the text
    stopped = f.stopped;
    if (stopped != m.stopped()) std::abort();
  }
  if (!stopped) emitted += m.finish();
  const std::optional<std::size_t> start = reference_stop_start(text, stops);
  if (start) {
    if (!stopped || emitted != text.substr(0, *start)) std::abort();
  } else {
    if (stopped || emitted != text) std::abort();
  }
}

// Builds every response shape from fields of an accepted request: arbitrary client text reaches
// the dumper (it is UTF-8 here; the token pieces cut from it are not).
// A parsed logit_bias: at most the limit's entries, ids ascending and unique below the vocabulary (2^31
// without one), values in [-100, 100].
void check_logit_bias(const GenerationRequest& r, const ParseLimits& limits) {
  if (r.logit_bias.size() > limits.max_logit_bias) std::abort();
  const std::int64_t ids = limits.vocab_size > 0 ? limits.vocab_size : std::int64_t{1} << 31;
  for (std::size_t i = 0; i < r.logit_bias.size(); ++i) {
    const auto [id, value] = r.logit_bias[i];
    if (id < 0 || id >= ids || (i > 0 && id <= r.logit_bias[i - 1].first)) std::abort();
    if (!(value >= -100.0f && value <= 100.0f)) std::abort();
  }
}

void check_responses(const GenerationRequest& r, Rng rng) {
  const std::string& text = r.kind == RequestKind::Chat || r.prompts.empty() ? r.model : r.prompts.back().text;
  std::vector<TokenLogprob> pieces;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t n = 1 + rng.next() % 5;
    TokenLogprob t{text.substr(at, n), -static_cast<double>(rng.next() % 100) / 7.0, {}};
    t.top.push_back({t.token, *t.logprob});
    t.top.push_back({text.substr(0, n), -1.0});
    pieces.push_back(std::move(t));
    at += n;
  }
  if (!pieces.empty() && r.echo) pieces.front().logprob.reset();
  const ResponseHeader header{response_id(r.kind, rng.next(), rng.next()), 1, r.model};
  ChatChoice chat;
  chat.content = text;
  chat.reasoning_content = r.user;
  if (!r.stop.empty()) chat.tool_calls.push_back({"call_0", r.stop.front(), text});
  chat.logprobs = pieces;
  must_be_json(to_body(chat_completion_json(header, std::vector<ChatChoice>{chat}, Usage{1, 2, 3})));
  CompletionChoice cmpl{text, FinishReason::Length, pieces};
  must_be_json(to_body(completion_json(header, std::vector<CompletionChoice>{cmpl}, Usage{})));
  const StreamHeader stream{header, r.kind, r.include_usage};
  for (std::size_t i = 0; i < pieces.size() && i < 4; ++i) {
    const TokenLogprob& p = pieces[i];
    ChatChunkChoice c;
    c.content = p.token;
    c.tool_calls.push_back({0, "", p.token, p.token});
    c.logprobs = std::vector<TokenLogprob>{p};
    const std::string e = sse_event(chat_chunk_json(stream, std::vector<ChatChunkChoice>{c}));
    if (e.rfind("data: ", 0) != 0 || e.size() < 8 || e.compare(e.size() - 2, 2, "\n\n") != 0) std::abort();
    must_be_json(e.substr(6, e.size() - 8));
    CompletionChunkChoice k{0, p.token, std::vector<TokenLogprob>{p}, 3, std::nullopt};
    must_be_json(to_body(completion_chunk_json(stream, std::vector<CompletionChunkChoice>{k})));
  }
  must_be_json(to_body(usage_chunk_json(stream, Usage{})));
  must_be_json(to_body(models_json(std::vector<ModelCard>{{text, 0, 1}})));
  must_be_json(detokenize_body(text));
}

template <class T>
void check_result(const ParseResult<T>& r) {
  if (const ApiError* e = std::get_if<ApiError>(&r)) {
    if (e->status != 400) std::abort();  // every fault of a body is the client's
    if (e->message.empty()) std::abort();
    must_be_json(error_body(*e));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  Rng rng{fnv1a(body) | 1};
  ParseLimits tiny;
  tiny.max_prompt_tokens = 4;
  tiny.vocab_size = 1000;
  tiny.max_stop_strings = 2;
  tiny.max_stop_bytes = 4;
  tiny.max_messages = 2;
  tiny.max_json_depth = 6;
  tiny.max_n = 2;
  tiny.max_prompts = 2;
  tiny.max_logit_bias = 3;
  // One parser per input and default or tiny limits, both drawn from the input's hash: every
  // body reaches each parser as its hash changes, at a quarter of the cost of reading it 4 times.
  const ParseLimits limits = (rng.x & 8) != 0 ? tiny : ParseLimits{};
  switch (rng.x & 3) {
    case 0: {
      const auto completion = parse_completion_request(body, limits);
      check_result(completion);
      if (const auto* r = std::get_if<GenerationRequest>(&completion)) {
        // one prompt or a batch within the limit, none empty
        if (r->prompts.empty() || r->prompts.size() > limits.max_prompts) std::abort();
        for (const CompletionPrompt& p : r->prompts)
          if (p.is_tokens ? p.tokens.empty() || !p.text.empty() : p.text.empty()) std::abort();
        check_logit_bias(*r, limits);
        check_responses(*r, rng);
      }
      break;
    }
    case 1: {
      const auto chat = parse_chat_request(body, limits);
      check_result(chat);
      if (const auto* r = std::get_if<GenerationRequest>(&chat)) {
        if (r->messages.empty()) std::abort();
        for (const auto& m : r->messages)
          if (m.contains("content") && !m["content"].is_string() && !m["content"].is_null()) std::abort();
        check_logit_bias(*r, limits);
        check_responses(*r, rng);
      }
      break;
    }
    case 2:
      check_result(parse_tokenize_request(body, limits));
      break;
    default: {
      const auto detokenize = parse_detokenize_request(body, limits);
      check_result(detokenize);
      if (const auto* r = std::get_if<DetokenizeRequest>(&detokenize)) must_be_json(tokenize_body(r->tokens, 1));
      break;
    }
  }
  check_stop_matcher(body, rng);
  return 0;
}
