// kern::chat::ToolCallParser and parse_tool_calls: the rules are in the header. The two are
// written independently (a streaming state machine; a pass over the whole text that lists text
// runs and calls, then lays out the content) so that the property tests comparing them check
// something.
#include "kern/chat/tool_call_parser.hpp"

#include <algorithm>
#include <optional>
#include <utility>
#include <variant>

#include "chat/text_scan.hpp"
#include "chat/tool_call_body.hpp"
#include "kern/base/error.hpp"
#include "kern/base/log.hpp"

namespace kern::chat {
namespace {

void check_options(const ToolCallOptions& options) {
  if (options.start_tag.empty() || options.end_tag.empty()) fail(ErrorKind::Api, "tool-call parser: a tag is empty");
}

// The start of `text` for a log line: at most 80 bytes, on one line.
std::string excerpt(std::string_view text) {
  std::string out(text.substr(0, 80));
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text.size() > 80 ? out + "..." : out;
}

// Decodes the block `block` (start tag to end tag); logs why, and returns nullopt, when it holds no call.
std::optional<ToolCall> decode_block(std::string_view block, const ToolCallOptions& options, std::size_t index) {
  const std::string_view body =
      block.substr(options.start_tag.size(), block.size() - options.start_tag.size() - options.end_tag.size());
  auto decoded = decode_tool_call_body(body);
  if (auto* why = std::get_if<std::string>(&decoded)) {
    log().warn("tool call: a {} block is not a call ({}); it stays in the content as text: {}", options.start_tag, *why,
               excerpt(block));
    return std::nullopt;
  }
  auto& call = std::get<ToolCallBody>(decoded);
  return ToolCall{tool_call_id(options.id_prefix, index), std::move(call.name), std::move(call.arguments)};
}

void warn_unterminated(std::string_view block, const ToolCallOptions& options) {
  log().warn("tool call: a {} block is not closed by {}; it stays in the content as text: {}", options.start_tag,
             options.end_tag, excerpt(block));
}

}  // namespace

Json tool_call_json(const ToolCall& call) {
  return Json{
      {"id", call.id}, {"type", "function"}, {"function", Json{{"name", call.name}, {"arguments", call.arguments}}}};
}

std::string tool_call_id(std::string_view prefix, std::size_t index) {
  std::string id = "call_";
  if (!prefix.empty()) {
    id += prefix;
    id += '_';
  }
  return id + std::to_string(index);
}

// --- the whole reply ---------------------------------------------------------------------

namespace {

// The reply as alternating text runs and calls (consecutive texts merged).
struct Item {
  bool is_call = false;
  std::string text;
};

void add_text(std::vector<Item>& items, std::string_view text) {
  if (text.empty()) return;
  if (items.empty() || items.back().is_call) items.push_back(Item{});
  items.back().text += text;
}

// The content: the text runs, less the whitespace that touches a call, except where it separates
// content after a call from content before it.
std::string lay_out(const std::vector<Item>& items) {
  std::string content;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (items[i].is_call) continue;
    std::string_view text = items[i].text;
    const bool before_call = i + 1 < items.size(), after_call = i > 0;
    if (before_call) {
      while (!text.empty() && is_json_space(text.back())) text.remove_suffix(1);
    }
    if (after_call && content.empty()) {
      while (!text.empty() && is_json_space(text.front())) text.remove_prefix(1);
    }
    if (after_call && !before_call && trim_json_space(text).empty()) text = {};
    content += text;
  }
  return content;
}

}  // namespace

ToolCallDelta parse_tool_calls(std::string_view text, const ToolCallOptions& options) {
  check_options(options);
  ToolCallDelta out;
  std::vector<Item> items;
  std::size_t at = 0;
  for (;;) {
    const std::size_t start = text.find(options.start_tag, at);
    if (start == std::string_view::npos) break;
    const std::size_t end = text.find(options.end_tag, start + options.start_tag.size());
    if (end == std::string_view::npos) {
      warn_unterminated(text.substr(start), options);
      break;
    }
    const std::size_t after = end + options.end_tag.size();
    if (auto call = decode_block(text.substr(start, after - start), options, out.calls.size())) {
      add_text(items, text.substr(at, start - at));
      items.push_back(Item{true, {}});
      out.calls.push_back(std::move(*call));
    } else {
      add_text(items, text.substr(at, after - at));
    }
    at = after;
  }
  add_text(items, text.substr(at));
  out.content = lay_out(items);
  return out;
}

// --- streaming ---------------------------------------------------------------------------

ToolCallParser::ToolCallParser(ToolCallOptions options) : options_(std::move(options)) { check_options(options_); }

// Releases text known to lie outside blocks, holding back its trailing whitespace (dropped if a
// parsed block follows, or if the reply ends after a parsed block).
void ToolCallParser::emit_text(std::string_view text, std::string& out) {
  std::size_t end = text.size();
  while (end > 0 && is_json_space(text[end - 1])) --end;
  if (end == 0) {
    space_ += text;
    return;
  }
  std::size_t begin = 0;
  if (after_call_ && !released_) {
    // The whitespace after a parsed block that opens the content is dropped.
    while (is_json_space(text[begin])) ++begin;
  } else {
    out += space_;
  }
  out += text.substr(begin, end - begin);
  space_.assign(text.substr(end));
  after_call_ = false;
  released_ = true;
}

bool ToolCallParser::step_text(ToolCallDelta& out) {
  const std::size_t start = held_.find(options_.start_tag);
  if (start == std::string::npos) {
    const std::size_t keep = partial_tag_suffix(held_, options_.start_tag);
    emit_text(std::string_view(held_).substr(0, held_.size() - keep), out.content);
    held_.erase(0, held_.size() - keep);
    return false;
  }
  emit_text(std::string_view(held_).substr(0, start), out.content);
  held_.erase(0, start);
  in_block_ = true;
  search_from_ = options_.start_tag.size();
  return true;
}

bool ToolCallParser::step_block(ToolCallDelta& out) {
  const std::string& tag = options_.end_tag;
  const std::size_t end = held_.find(tag, search_from_);
  if (end == std::string::npos) {
    // The next search need not look again where no end tag can begin.
    if (held_.size() >= tag.size()) search_from_ = std::max(search_from_, held_.size() - tag.size() + 1);
    return false;
  }
  const std::size_t after = end + tag.size();
  const std::string_view block = std::string_view(held_).substr(0, after);
  if (auto call = decode_block(block, options_, calls_)) {
    space_.clear();
    after_call_ = true;
    ++calls_;
    out.calls.push_back(std::move(*call));
  } else {
    emit_text(block, out.content);
  }
  held_.erase(0, after);
  in_block_ = false;
  return true;
}

ToolCallDelta ToolCallParser::push(std::string_view piece) {
  held_ += piece;
  ToolCallDelta out;
  while (in_block_ ? step_block(out) : step_text(out)) {
  }
  return out;
}

ToolCallDelta ToolCallParser::finish() {
  ToolCallDelta out;
  if (in_block_) warn_unterminated(held_, options_);
  emit_text(held_, out.content);
  if (!after_call_) out.content += space_;
  held_.clear();
  space_.clear();
  in_block_ = false;
  after_call_ = false;
  released_ = false;
  search_from_ = 0;
  calls_ = 0;
  return out;
}

}  // namespace kern::chat
