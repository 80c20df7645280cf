// The OpenAI wire protocol's generation requests: POST /v1/completions and
// POST /v1/chat/completions bodies read into one typed GenerationRequest, or an ApiError (400)
// naming the offending field. Pure: no I/O, no model; whether `model` is served, whether the
// prompt fits the context and the model's generation_config defaults are the server's.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <utility>
#include <vector>

#include "kern/serve/api_error.hpp"

namespace kern::serve {

// Request JSON keeps the client's key order (chat templates print tools with tojson).
using RequestJson = nlohmann::ordered_json;

struct ParseLimits {
  std::size_t max_prompt_tokens = std::size_t{1} << 20;  // token ids in a prompt or /detokenize
  std::int64_t vocab_size = 0;        // token ids must be < this (0: only checked to be >= 0 and < 2^31)
  std::size_t max_stop_strings = 16;  // entries of `stop`
  std::size_t max_stop_bytes = 512;   // bytes of one stop string
  std::size_t max_stop_token_ids = 64;
  std::size_t max_logit_bias = 255;   // entries of logit_bias (the sampling op's bound, core::kMaxLogitBias)
  int max_n = 8;
  std::size_t max_prompts = 256;      // prompts of one completions request (a batch)
  int max_logprobs = 20;              // top_logprobs (chat) / logprobs (completions)
  std::size_t max_messages = 4096;
  std::size_t max_json_depth = 64;    // nesting of the body (tools, chat_template_kwargs)
};

enum class RequestKind { Completion, Chat };

// One prompt of a completions request: text, or token ids (is_tokens).
struct CompletionPrompt {
  std::string text;
  std::vector<std::int32_t> tokens;
  bool is_tokens = false;
};

struct GenerationRequest {
  RequestKind kind = RequestKind::Completion;
  std::string model;

  // Completions: `prompt` as one text, one array of token ids, or a batch of either (an array of
  // strings or of token-id arrays): every prompt gets n choices, prompt p's at indices p·n .. p·n + n − 1.
  std::vector<CompletionPrompt> prompts;

  // Chat: `messages` validated, every `content` a string or null (text parts joined with "\n").
  RequestJson messages = RequestJson::array();
  RequestJson tools;                 // array of {"type": "function", "function": {...}}; null when absent
  RequestJson tool_choice;           // "none" | "auto" | "required" | {"type":"function",...}; null when absent
  RequestJson chat_template_kwargs = RequestJson::object();
  bool add_generation_prompt = true;

  // max_tokens or max_completion_tokens (named by max_tokens_field); absent: up to the context. 0 only
  // on completions with echo: the prompt is scored (its log-probs), nothing is generated.
  std::optional<std::int64_t> max_tokens;
  std::string max_tokens_field = "max_tokens";
  std::vector<std::string> stop;           // non-empty strings
  std::vector<std::int32_t> stop_token_ids;

  // Sampling: absent means "the model's generation_config default, else the server's".
  std::optional<double> temperature;        // [0, 2]
  std::optional<double> top_p;              // (0, 1]
  std::optional<std::int32_t> top_k;        // 0 = off (the request's -1 or 0), else >= 1
  std::optional<double> min_p;              // [0, 1]
  std::optional<double> presence_penalty;   // [-2, 2]
  std::optional<double> frequency_penalty;  // [-2, 2]
  std::optional<double> repetition_penalty; // (0, 10]
  std::optional<std::int64_t> seed;
  int n = 1;                                // 1..ParseLimits::max_n
  // logit_bias: {"token id": value in [-100, 100]} as (id, value), ids ascending (each once), at most
  // ParseLimits::max_logit_bias; added to the logits before the penalties.
  std::vector<std::pair<std::int32_t, float>> logit_bias;

  // Log-probs of the chosen tokens and of the `top_logprobs` most likely ones at each position.
  // Chat: `logprobs: true` + `top_logprobs` (0..20); completions: `logprobs: k` sets both.
  bool logprobs = false;
  int top_logprobs = 0;
  bool echo = false;  // completions: the prompt is repeated before the generated text

  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool ignore_eos = false;
  bool skip_special_tokens = true;
  std::string user;
};

template <class T>
using ParseResult = std::variant<T, ApiError>;

// Never throw: any bytes give a request or an error (400 for every fault of the body; 500 only
// if kern itself fails, e.g. out of memory).
ParseResult<GenerationRequest> parse_completion_request(std::string_view body, const ParseLimits& limits = {});
ParseResult<GenerationRequest> parse_chat_request(std::string_view body, const ParseLimits& limits = {});

// 404 model_not_found unless `model` is one of `served`.
std::optional<ApiError> check_model_served(std::string_view model, std::span<const std::string> served);

}  // namespace kern::serve
