#include "kern/serve/tokenize_api.hpp"

#include "serve/chat_fields.hpp"
#include "serve/request_fields.hpp"

namespace kern::serve {

namespace {

using detail::field;
using detail::reject;

std::string read_optional_model(const RequestJson& body) { return detail::get_string(body, "model").value_or(std::string()); }

TokenizeRequest read_tokenize(std::string_view text, const ParseLimits& limits) {
  const RequestJson body = detail::read_body(text, limits.max_json_depth);
  TokenizeRequest r;
  r.model = read_optional_model(body);
  const RequestJson* prompt = field(body, "prompt");
  const RequestJson* messages = field(body, "messages");
  if (prompt && messages) reject("messages", "give either 'prompt' or 'messages', not both");
  if (!prompt && !messages) reject("prompt", "'prompt' or 'messages' is required");
  if (prompt) {
    if (!prompt->is_string()) reject("prompt", "'prompt' must be a string");
    r.prompt = prompt->get<std::string>();
  } else {
    r.is_chat = true;
    r.messages = detail::read_messages(*messages, limits.max_messages);
    if (const RequestJson* t = field(body, "tools")) r.tools = detail::read_tools(*t);
    if (const RequestJson* k = field(body, "chat_template_kwargs"))
      r.chat_template_kwargs = detail::read_chat_template_kwargs(*k);
    r.add_generation_prompt = detail::get_bool(body, "add_generation_prompt").value_or(true);
  }
  r.add_special_tokens = detail::get_bool(body, "add_special_tokens").value_or(!r.is_chat);
  return r;
}

DetokenizeRequest read_detokenize(std::string_view text, const ParseLimits& limits) {
  const RequestJson body = detail::read_body(text, limits.max_json_depth);
  DetokenizeRequest r;
  r.model = read_optional_model(body);
  const RequestJson* tokens = field(body, "tokens");
  if (!tokens) reject("tokens", "'tokens' is required");
  r.tokens = detail::as_token_ids(*tokens, "tokens", limits.max_prompt_tokens, limits.vocab_size);
  return r;
}

}  // namespace

ParseResult<TokenizeRequest> parse_tokenize_request(std::string_view body, const ParseLimits& limits) {
  return detail::guarded<TokenizeRequest>([&] { return read_tokenize(body, limits); });
}

ParseResult<DetokenizeRequest> parse_detokenize_request(std::string_view body, const ParseLimits& limits) {
  return detail::guarded<DetokenizeRequest>([&] { return read_detokenize(body, limits); });
}

std::string tokenize_body(std::span<const std::int32_t> tokens, std::int64_t max_model_len) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["tokens"] = std::vector<std::int32_t>(tokens.begin(), tokens.end());
  j["count"] = tokens.size();
  j["max_model_len"] = max_model_len;
  return j.dump();
}

std::string detokenize_body(std::string_view text) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["prompt"] = std::string(text);
  // Ids can decode to part of a character: such bytes become U+FFFD rather than throwing.
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace kern::serve
