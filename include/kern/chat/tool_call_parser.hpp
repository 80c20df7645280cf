// Tool calls in what Qwen3 (and other models of the Hermes format) write back:
//
//   Let me look that up.
//   <tool_call>
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
//   </tool_call>
//
// extracted into OpenAI-style calls, for a whole reply at once (parse_tool_calls) or streamed
// piece by piece (ToolCallParser). Feed these parsers the content of a reply, after
// ReasoningParser took the reasoning out: a tool call written inside the reasoning is thought,
// not a call, and is not parsed. (In Qwen3's vocabulary `<tool_call>` and `</tool_call>` are
// added tokens that are not special: the decoder emits them even with skip_special_tokens.)
//
// Rules:
// - A block runs from a start tag to the first end tag after it. Its body, trimmed of JSON
//   whitespace, must be a JSON object (nested at most 64 deep) with a non-empty string "name";
//   "arguments" may be an object (serialized compactly, keys in the model's order, non-ASCII
//   characters as UTF-8, not \u-escaped), a string (kept as the model wrote it), or absent or
//   null ("{}"). Other members are ignored; of a key written twice, the last value counts.
// - A block that breaks these rules (malformed JSON, no name, arguments of another type) stays
//   in the content as text, and so does a start tag that no end tag follows; each logs a
//   warning (kern::log()). Nothing here throws on any input.
// - Calls are numbered in order from 0 per reply; the id of call i is `call_<id_prefix>_<i>`
//   (`call_<i>` with an empty prefix): deterministic, unique within the reply, and unique across
//   replies when the caller passes a prefix unique per request.
// - The content is the text outside the parsed blocks, less the whitespace that only lays the
//   blocks out: a whitespace run (JSON's: space, tab, CR, LF) that touches a parsed block is
//   dropped, except a run after a block that separates content on both sides of it. Qwen3's
//   template writes a turn with calls as content + "\n<tool_call>…</tool_call>\n<tool_call>…",
//   so this gives back exactly the content; "A <tool_call>…</tool_call> B" gives "A B". Text
//   after or between blocks is kept (vLLM's Hermes parser returns the text before the first
//   block, untrimmed, and drops the rest).
//
// Streaming: push() releases text as soon as it cannot belong to a block or to the whitespace
// before one; from a (possible) start tag on, text is held until the block closes, and then the
// parsed call (or, for a malformed block, the block as text) is released. Text is never emitted
// twice nor lost. finish() releases what is still held (an unterminated block is text) and
// resets the parser. For every way of cutting a reply into pieces, the concatenated contents
// and the calls in order equal parse_tool_calls of it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "kern/base/json.hpp"

namespace kern::chat {

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON text (OpenAI's `function.arguments`)
  bool operator==(const ToolCall&) const = default;
};

// {"id": ..., "type": "function", "function": {"name": ..., "arguments": ...}}
Json tool_call_json(const ToolCall& call);
// `call_<prefix>_<index>`, or `call_<index>` for an empty prefix.
std::string tool_call_id(std::string_view prefix, std::size_t index);

struct ToolCallOptions {
  std::string start_tag = "<tool_call>";
  std::string end_tag = "</tool_call>";
  std::string id_prefix;  // per request, e.g. its id
};

// What one push() released (or, from parse_tool_calls, the whole reply): content text and the
// calls completed, in the order they were written.
struct ToolCallDelta {
  std::string content;
  std::vector<ToolCall> calls;
  bool operator==(const ToolCallDelta&) const = default;
};

// The calls and content of a whole reply. Error(Api) for an empty tag.
ToolCallDelta parse_tool_calls(std::string_view text, const ToolCallOptions& options = {});

class ToolCallParser {
 public:
  // Error(Api) for an empty tag.
  explicit ToolCallParser(ToolCallOptions options = {});

  // The text and calls that `piece` made certain.
  ToolCallDelta push(std::string_view piece);
  // Releases what is still held back and resets the parser for a new reply.
  ToolCallDelta finish();

  // True while a block has begun and not yet closed.
  bool in_block() const { return in_block_; }
  // Bytes held back, waiting for a later piece to decide what they are.
  std::size_t pending_bytes() const { return held_.size() + space_.size(); }

 private:
  bool step_text(ToolCallDelta& out);
  bool step_block(ToolCallDelta& out);
  void emit_text(std::string_view text, std::string& out);

  ToolCallOptions options_;
  bool in_block_ = false;
  std::string held_;             // outside a block: a tail that may begin the start tag; inside: the block so far
  std::size_t search_from_ = 0;  // inside a block: where the search for the end tag resumes
  std::string space_;            // whitespace after the last text released, not yet known to be content
  bool after_call_ = false;      // space_ follows a parsed block
  bool released_ = false;        // some content has been released in this reply
  std::size_t calls_ = 0;        // calls parsed so far in this reply
};

}  // namespace kern::chat
