// Decodes a tool-call block's JSON with nlohmann::ordered_json, so that arguments serialize with
// their keys in the model's order. (parse_json_strict does not fit: it refuses duplicate keys,
// which Python's json.loads and so the Hermes parsers accept, and it sorts keys.) Nesting is
// bounded by a scan before parsing, so that neither the parser nor dump() recurses deeply.
#include "chat/tool_call_body.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>

#include "chat/text_scan.hpp"

namespace kern::chat {
namespace {

using Ordered = nlohmann::ordered_json;

// Deepest nesting of `[` / `{` in `text` outside strings (a lexical scan: the parser still
// judges the syntax).
std::size_t nesting_depth(std::string_view text) {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

// The arguments as JSON text; nullopt when they have a type a call's arguments cannot have.
std::optional<std::string> arguments_text(const Ordered& call) {
  const auto it = call.find("arguments");
  if (it == call.end() || it->is_null()) return std::string("{}");
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) return it->dump(-1, ' ', false, Ordered::error_handler_t::replace);
  return std::nullopt;
}

}  // namespace

std::variant<ToolCallBody, std::string> decode_tool_call_body(std::string_view body) {
  body = trim_json_space(body);
  if (nesting_depth(body) > kMaxToolCallDepth) {
    return "its JSON nests deeper than " + std::to_string(kMaxToolCallDepth) + " levels";
  }
  Ordered call;
  try {
    call = Ordered::parse(body, nullptr, /*allow_exceptions=*/false);
  } catch (const nlohmann::json::exception& e) {
    return std::string("its JSON does not parse: ") + e.what();
  }
  if (call.is_discarded()) return std::string("its text is not valid JSON");
  if (!call.is_object()) return std::string("its JSON is ") + call.type_name() + ", not an object";
  const auto name = call.find("name");
  if (name == call.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return std::string("it has no \"name\" string");
  }
  std::optional<std::string> arguments = arguments_text(call);
  if (!arguments) return std::string("its \"arguments\" is ") + call.at("arguments").type_name();
  return ToolCallBody{name->get<std::string>(), std::move(*arguments)};
}

}  // namespace kern::chat
