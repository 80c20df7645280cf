// The OpenAI wire protocol's response bodies: chat completions and completions, whole and as
// server-sent-event chunks, their log-probs and usage, and the model list. Key order is fixed
// (ordered_json) and output is UTF-8 (bytes that are not UTF-8 become U+FFFD, never an
// exception).
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kern/serve/openai_request.hpp"

namespace kern::serve {

using ResponseJson = nlohmann::ordered_json;

// dump() without indentation, UTF-8 out, ill-formed bytes replaced by U+FFFD.
std::string to_body(const ResponseJson& json);
// "data: " + to_body(json) + "\n\n"
std::string sse_event(const ResponseJson& json);
// "data: [DONE]\n\n"
std::string sse_done();

enum class FinishReason { Stop, Length, ToolCalls };
std::string_view finish_reason_name(FinishReason reason);  // "stop" | "length" | "tool_calls"

// "cmpl-" / "chatcmpl-" followed by 32 lowercase hex digits of (hi, lo): the server draws them.
std::string response_id(RequestKind kind, std::uint64_t hi, std::uint64_t lo);

// Common to every response and chunk of one request.
struct ResponseHeader {
  std::string id;
  std::int64_t created = 0;  // unix seconds
  std::string model;
};

struct Usage {
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  std::int64_t cached_tokens = 0;  // prompt tokens served from the prefix cache
};
// {prompt_tokens, completion_tokens, total_tokens, prompt_tokens_details: {cached_tokens}}
ResponseJson usage_json(const Usage& usage);

// Log-probs of one position: the token there and the most likely tokens.
struct TopLogprob {
  std::string token;  // the token's text (its bytes; may be part of a character)
  double logprob = 0.0;
};
struct TokenLogprob {
  std::string token;              // the chosen (or, with echo, the prompt) token's text, as bytes
  std::optional<double> logprob;  // nullopt only for the first prompt token of an echo
  std::vector<TopLogprob> top;    // best first, as many as the request's top_logprobs
};
// Log-probs below -9999 (and -inf) are written as -9999.0, as OpenAI does.

// {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]}
// `bytes` are the token text's byte values (the token may hold part of a character).
ResponseJson chat_logprobs_json(std::span<const TokenLogprob> tokens);

// {"tokens", "token_logprobs", "top_logprobs": [{text: logprob}...], "text_offset"}: offsets in
// code points of the choice's text, the first one `first_offset` (non-zero for a later chunk
// of a stream). A position without a logprob has null token_logprobs and top_logprobs entries;
// of top tokens with the same text, the first is kept.
ResponseJson completion_logprobs_json(std::span<const TokenLogprob> tokens, std::size_t first_offset = 0);

// Code points in `text` (bytes that do not continue a character): what text_offset counts.
std::size_t code_points(std::string_view text);

struct ToolCall {
  std::string id;         // "call_..."
  std::string name;
  std::string arguments;  // a JSON text, written as a string
};

struct ChatChoice {
  std::string content;            // null in the message when empty and there are tool calls
  std::string reasoning_content;  // written only when non-empty
  std::vector<ToolCall> tool_calls;
  FinishReason finish_reason = FinishReason::Stop;
  std::optional<std::vector<TokenLogprob>> logprobs;  // nullopt: "logprobs": null
};

struct CompletionChoice {
  std::string text;  // with echo, the prompt's text first
  FinishReason finish_reason = FinishReason::Stop;
  std::optional<std::vector<TokenLogprob>> logprobs;  // with echo, the prompt's tokens first
};

// {"id", "object": "chat.completion", "created", "model", "choices": [{"index", "message":
//  {"role": "assistant", "content", "reasoning_content"?, "tool_calls"?}, "logprobs",
//  "finish_reason"}], "usage"}; choices are indexed by their position.
ResponseJson chat_completion_json(const ResponseHeader& header, std::span<const ChatChoice> choices,
                                  const Usage& usage);
// {"id", "object": "text_completion", "created", "model", "choices": [{"index", "text",
//  "logprobs", "finish_reason"}], "usage"}
ResponseJson completion_json(const ResponseHeader& header, std::span<const CompletionChoice> choices,
                             const Usage& usage);

// Streaming. With stream_options.include_usage every chunk carries "usage": null and the last
// one, before [DONE], is usage_chunk_json's {"choices": [], "usage": {...}}.
struct StreamHeader {
  ResponseHeader header;
  RequestKind kind = RequestKind::Chat;
  bool include_usage = false;
};

// A tool call's piece: the first piece of a call carries its id and name, the later ones only
// more of the arguments text.
struct ToolCallDelta {
  int index = 0;  // which call of the choice
  std::string id;    // "" after the first piece
  std::string name;  // "" after the first piece
  std::string arguments;
};

struct ChatChunkChoice {
  int index = 0;
  bool first = false;  // the choice's first delta: carries "role": "assistant" (and "content": "" if no content)
  std::optional<std::string> content;
  std::optional<std::string> reasoning_content;
  std::vector<ToolCallDelta> tool_calls;
  std::optional<std::vector<TokenLogprob>> logprobs;
  std::optional<FinishReason> finish_reason;  // set on the choice's last chunk only
};

struct CompletionChunkChoice {
  int index = 0;
  std::string text;
  std::optional<std::vector<TokenLogprob>> logprobs;
  std::size_t text_offset = 0;  // code points of this choice's text sent before this chunk
  std::optional<FinishReason> finish_reason;
};

// {"id", "object": "chat.completion.chunk", "created", "model", "choices": [{"index", "delta",
//  "logprobs", "finish_reason"}] (, "usage": null)}
ResponseJson chat_chunk_json(const StreamHeader& stream, std::span<const ChatChunkChoice> choices);
// {"id", "object": "text_completion", "created", "model", "choices": [{"index", "text",
//  "logprobs", "finish_reason"}] (, "usage": null)}
ResponseJson completion_chunk_json(const StreamHeader& stream, std::span<const CompletionChunkChoice> choices);
// The final usage chunk: the kind's object, "choices": [] and "usage".
ResponseJson usage_chunk_json(const StreamHeader& stream, const Usage& usage);

// GET /v1/models
struct ModelCard {
  std::string id;
  std::int64_t created = 0;
  std::int64_t max_model_len = 0;
};
// {"object": "list", "data": [{"id", "object": "model", "created", "owned_by": "kern", "max_model_len"}]}
ResponseJson models_json(std::span<const ModelCard> models);

}  // namespace kern::serve
