// vLLM's POST /tokenize and POST /detokenize: their request bodies and response bodies.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kern/serve/openai_request.hpp"

namespace kern::serve {

struct TokenizeRequest {
  std::string model;  // "" when not given (the server's one model)
  bool is_chat = false;
  std::string prompt;  // !is_chat: the text to tokenize
  // is_chat: rendered with the chat template first (validated as for /v1/chat/completions).
  RequestJson messages = RequestJson::array();
  RequestJson tools;  // null when absent
  RequestJson chat_template_kwargs = RequestJson::object();
  bool add_generation_prompt = true;
  // Default true for a prompt and false for messages, as vLLM: a chat template writes its own
  // special tokens.
  bool add_special_tokens = true;
};

struct DetokenizeRequest {
  std::string model;  // "" when not given
  std::vector<std::int32_t> tokens;
};

// {"model"?, "prompt": string, "add_special_tokens"?} or
// {"model"?, "messages": [...], "tools"?, "add_generation_prompt"?, "chat_template_kwargs"?,
//  "add_special_tokens"?}; exactly one of prompt and messages. Never throws.
ParseResult<TokenizeRequest> parse_tokenize_request(std::string_view body, const ParseLimits& limits = {});
// {"model"?, "tokens": [ints]}. Never throws.
ParseResult<DetokenizeRequest> parse_detokenize_request(std::string_view body, const ParseLimits& limits = {});

// {"tokens": [...], "count": n, "max_model_len": m}
std::string tokenize_body(std::span<const std::int32_t> tokens, std::int64_t max_model_len);
// {"prompt": "..."}
std::string detokenize_body(std::string_view text);

}  // namespace kern::serve
