// The JSON inside one <tool_call> block (private to the chat layer).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <variant>

namespace kern::chat {

// Deepest nesting of objects and arrays a block's JSON may have.
inline constexpr std::size_t kMaxToolCallDepth = 64;

struct ToolCallBody {
  std::string name;
  std::string arguments;  // JSON text
};

// The call in `body` (the text between the tags), or why it is not one. Never throws.
std::variant<ToolCallBody, std::string> decode_tool_call_body(std::string_view body);

}  // namespace kern::chat
