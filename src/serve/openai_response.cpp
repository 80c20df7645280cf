#include "kern/serve/openai_response.hpp"

#include <fmt/format.h>

#include <utility>

namespace kern::serve {

namespace {

ResponseJson header_json(const ResponseHeader& h, std::string_view object) {
  ResponseJson j = ResponseJson::object();
  j["id"] = h.id;
  j["object"] = object;
  j["created"] = h.created;
  j["model"] = h.model;
  return j;
}

ResponseJson reason_json(const std::optional<FinishReason>& reason) {
  return reason ? ResponseJson(finish_reason_name(*reason)) : ResponseJson(nullptr);
}

ResponseJson chat_message_json(const ChatChoice& c) {
  ResponseJson m = ResponseJson::object();
  m["role"] = "assistant";
  m["content"] = c.content.empty() && !c.tool_calls.empty() ? ResponseJson(nullptr) : ResponseJson(c.content);
  if (!c.reasoning_content.empty()) m["reasoning_content"] = c.reasoning_content;
  if (!c.tool_calls.empty()) {
    ResponseJson calls = ResponseJson::array();
    for (const ToolCall& t : c.tool_calls) {
      ResponseJson fn = ResponseJson::object();
      fn["name"] = t.name;
      fn["arguments"] = t.arguments;
      ResponseJson call = ResponseJson::object();
      call["id"] = t.id;
      call["type"] = "function";
      call["function"] = std::move(fn);
      calls.push_back(std::move(call));
    }
    m["tool_calls"] = std::move(calls);
  }
  return m;
}

ResponseJson chat_delta_json(const ChatChunkChoice& c) {
  ResponseJson d = ResponseJson::object();
  if (c.first) d["role"] = "assistant";
  if (c.content) {
    d["content"] = *c.content;
  } else if (c.first) {
    d["content"] = "";
  }
  if (c.reasoning_content) d["reasoning_content"] = *c.reasoning_content;
  if (!c.tool_calls.empty()) {
    ResponseJson calls = ResponseJson::array();
    for (const ToolCallDelta& t : c.tool_calls) {
      ResponseJson call = ResponseJson::object();
      call["index"] = t.index;
      ResponseJson fn = ResponseJson::object();
      if (!t.id.empty()) {
        call["id"] = t.id;
        call["type"] = "function";
      }
      if (!t.name.empty()) fn["name"] = t.name;
      fn["arguments"] = t.arguments;
      call["function"] = std::move(fn);
      calls.push_back(std::move(call));
    }
    d["tool_calls"] = std::move(calls);
  }
  return d;
}

std::string_view chunk_object(RequestKind kind) {
  return kind == RequestKind::Chat ? "chat.completion.chunk" : "text_completion";
}

}  // namespace

std::string to_body(const ResponseJson& json) { return json.dump(-1, ' ', false, ResponseJson::error_handler_t::replace); }

std::string sse_event(const ResponseJson& json) {
  std::string out = "data: ";
  out += to_body(json);
  out += "\n\n";
  return out;
}

std::string sse_done() { return "data: [DONE]\n\n"; }

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::Stop:
      return "stop";
    case FinishReason::Length:
      return "length";
    case FinishReason::ToolCalls:
      return "tool_calls";
  }
  return "stop";
}

std::string response_id(RequestKind kind, std::uint64_t hi, std::uint64_t lo) {
  return fmt::format("{}{:016x}{:016x}", kind == RequestKind::Chat ? "chatcmpl-" : "cmpl-", hi, lo);
}

ResponseJson usage_json(const Usage& u) {
  ResponseJson j = ResponseJson::object();
  j["prompt_tokens"] = u.prompt_tokens;
  j["completion_tokens"] = u.completion_tokens;
  j["total_tokens"] = u.prompt_tokens + u.completion_tokens;
  ResponseJson details = ResponseJson::object();
  details["cached_tokens"] = u.cached_tokens;
  j["prompt_tokens_details"] = std::move(details);
  return j;
}

ResponseJson chat_completion_json(const ResponseHeader& header, std::span<const ChatChoice> choices,
                                  const Usage& usage) {
  ResponseJson j = header_json(header, "chat.completion");
  ResponseJson list = ResponseJson::array();
  for (std::size_t i = 0; i < choices.size(); ++i) {
    const ChatChoice& c = choices[i];
    ResponseJson choice = ResponseJson::object();
    choice["index"] = i;
    choice["message"] = chat_message_json(c);
    choice["logprobs"] = c.logprobs ? chat_logprobs_json(*c.logprobs) : ResponseJson(nullptr);
    choice["finish_reason"] = finish_reason_name(c.finish_reason);
    list.push_back(std::move(choice));
  }
  j["choices"] = std::move(list);
  j["usage"] = usage_json(usage);
  return j;
}

ResponseJson completion_json(const ResponseHeader& header, std::span<const CompletionChoice> choices,
                             const Usage& usage) {
  ResponseJson j = header_json(header, "text_completion");
  ResponseJson list = ResponseJson::array();
  for (std::size_t i = 0; i < choices.size(); ++i) {
    const CompletionChoice& c = choices[i];
    ResponseJson choice = ResponseJson::object();
    choice["index"] = i;
    choice["text"] = c.text;
    choice["logprobs"] = c.logprobs ? completion_logprobs_json(*c.logprobs) : ResponseJson(nullptr);
    choice["finish_reason"] = finish_reason_name(c.finish_reason);
    list.push_back(std::move(choice));
  }
  j["choices"] = std::move(list);
  j["usage"] = usage_json(usage);
  return j;
}

ResponseJson chat_chunk_json(const StreamHeader& stream, std::span<const ChatChunkChoice> choices) {
  ResponseJson j = header_json(stream.header, "chat.completion.chunk");
  ResponseJson list = ResponseJson::array();
  for (const ChatChunkChoice& c : choices) {
    ResponseJson choice = ResponseJson::object();
    choice["index"] = c.index;
    choice["delta"] = chat_delta_json(c);
    choice["logprobs"] = c.logprobs ? chat_logprobs_json(*c.logprobs) : ResponseJson(nullptr);
    choice["finish_reason"] = reason_json(c.finish_reason);
    list.push_back(std::move(choice));
  }
  j["choices"] = std::move(list);
  if (stream.include_usage) j["usage"] = nullptr;
  return j;
}

ResponseJson completion_chunk_json(const StreamHeader& stream, std::span<const CompletionChunkChoice> choices) {
  ResponseJson j = header_json(stream.header, "text_completion");
  ResponseJson list = ResponseJson::array();
  for (const CompletionChunkChoice& c : choices) {
    ResponseJson choice = ResponseJson::object();
    choice["index"] = c.index;
    choice["text"] = c.text;
    choice["logprobs"] = c.logprobs ? completion_logprobs_json(*c.logprobs, c.text_offset) : ResponseJson(nullptr);
    choice["finish_reason"] = reason_json(c.finish_reason);
    list.push_back(std::move(choice));
  }
  j["choices"] = std::move(list);
  if (stream.include_usage) j["usage"] = nullptr;
  return j;
}

ResponseJson usage_chunk_json(const StreamHeader& stream, const Usage& usage) {
  ResponseJson j = header_json(stream.header, chunk_object(stream.kind));
  j["choices"] = ResponseJson::array();
  j["usage"] = usage_json(usage);
  return j;
}

ResponseJson models_json(std::span<const ModelCard> models) {
  ResponseJson data = ResponseJson::array();
  for (const ModelCard& m : models) {
    ResponseJson card = ResponseJson::object();
    card["id"] = m.id;
    card["object"] = "model";
    card["created"] = m.created;
    card["owned_by"] = "kern";
    card["max_model_len"] = m.max_model_len;
    data.push_back(std::move(card));
  }
  ResponseJson j = ResponseJson::object();
  j["object"] = "list";
  j["data"] = std::move(data);
  return j;
}

}  // namespace kern::serve
