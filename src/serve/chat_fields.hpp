// The chat-specific parts of a request (/v1/chat/completions and /tokenize with messages):
// messages, tools, tool_choice, chat_template_kwargs. Private to the serve layer; faults throw
// detail::Rejected naming the field by its path (messages[2].content[0].type).
#pragma once

#include <cstddef>

#include "kern/serve/openai_request.hpp"

namespace kern::serve::detail {

// A non-empty array (at most `max_messages`) of objects with a string `role`; `content` is a
// string, null or absent, or an array of {"type": "text", "text": "..."} parts, joined with "\n"
// into a string in the copy returned. Other keys (name, tool_calls, tool_call_id,
// reasoning_content, ...) pass through for the chat template; `tool_calls`, when given, must be
// an array of objects.
RequestJson read_messages(const RequestJson& value, std::size_t max_messages);

// An array of {"type": "function", "function": {"name": string, ...}} objects.
RequestJson read_tools(const RequestJson& value);

// "none" | "auto" | "required" | {"type": "function", "function": {"name": one of the tools}}.
RequestJson read_tool_choice(const RequestJson& value, const RequestJson& tools);

// An object.
RequestJson read_chat_template_kwargs(const RequestJson& value);

}  // namespace kern::serve::detail
