// kern::chat::ReasoningParser and parse_reasoning: the rules are in the header. The two are
// written independently (a state machine over held-back text; a single pass with find) so that
// the property tests comparing them check something.
#include "kern/chat/reasoning_parser.hpp"

#include <utility>

#include "chat/text_scan.hpp"
#include "kern/base/error.hpp"

namespace kern::chat {
namespace {

void check_tag(std::string_view tag, std::string_view which) {
  if (tag.empty()) fail(ErrorKind::Api, "reasoning parser: the {} tag is empty", which);
  if (tag.front() == '\n') fail(ErrorKind::Api, "reasoning parser: the {} tag {:?} begins with a newline", which, tag);
}

void check_options(const ReasoningOptions& options) {
  check_tag(options.start_tag, "start");
  check_tag(options.end_tag, "end");
}

}  // namespace

ReasoningDelta parse_reasoning(std::string_view text, const ReasoningOptions& options) {
  check_options(options);
  ReasoningDelta out;
  std::size_t at = skip_newlines(text, 0);
  bool reasoning = options.starts_in_reasoning;
  if (text.substr(at).starts_with(options.start_tag)) {
    reasoning = true;
    at = skip_newlines(text, at + options.start_tag.size());
  }
  if (!reasoning) {
    out.content = text.substr(at);
    return out;
  }
  const std::size_t end = text.find(options.end_tag, at);
  if (end == std::string_view::npos) {
    out.reasoning = text.substr(at);
    return out;
  }
  out.reasoning = strip_trailing_newlines(text.substr(at, end - at));
  out.content = text.substr(skip_newlines(text, end + options.end_tag.size()));
  return out;
}

ReasoningParser::ReasoningParser(ReasoningOptions options) : options_(std::move(options)) { check_options(options_); }

bool ReasoningParser::in_reasoning() const {
  return state_ == State::Reasoning || (state_ == State::Opening && options_.starts_in_reasoning);
}

// Drops the newlines that open the current state's text; false while nothing else has come.
bool ReasoningParser::skip_leading_newlines() {
  if (!at_start_) return true;
  held_.erase(0, skip_newlines(held_, 0));
  if (held_.empty()) return false;
  at_start_ = false;
  return true;
}

// The opening of the reply: the start tag, or anything that rules it out.
bool ReasoningParser::step_opening() {
  if (!skip_leading_newlines()) return false;
  const std::string& tag = options_.start_tag;
  if (held_.starts_with(tag)) {
    held_.erase(0, tag.size());
    state_ = State::Reasoning;
    at_start_ = true;
    return true;
  }
  if (held_.size() < tag.size() && tag.starts_with(held_)) return false;  // may still become the tag
  state_ = options_.starts_in_reasoning ? State::Reasoning : State::Content;
  return true;
}

bool ReasoningParser::step_reasoning(ReasoningDelta& out) {
  if (!skip_leading_newlines()) return false;
  const std::string& tag = options_.end_tag;
  const std::size_t end = held_.find(tag, search_from_);
  if (end != std::string::npos) {
    out.reasoning += strip_trailing_newlines(std::string_view(held_).substr(0, end));
    held_.erase(0, end + tag.size());
    state_ = State::Content;
    at_start_ = true;
    search_from_ = 0;
    return true;
  }
  // Hold back a tail that may grow into the end tag, and the newlines just before it (which
  // cannot begin the tag: the next search starts after them).
  const std::size_t partial = partial_tag_suffix(held_, tag);
  std::size_t keep_from = held_.size() - partial;
  while (keep_from > 0 && held_[keep_from - 1] == '\n') --keep_from;
  out.reasoning.append(held_, 0, keep_from);
  held_.erase(0, keep_from);
  search_from_ = held_.size() - partial;
  return false;
}

void ReasoningParser::step_content(ReasoningDelta& out) {
  if (!skip_leading_newlines()) return;
  out.content += held_;
  held_.clear();
}

ReasoningDelta ReasoningParser::push(std::string_view piece) {
  held_ += piece;
  ReasoningDelta out;
  bool again = true;
  while (again) {
    switch (state_) {
      case State::Opening: again = step_opening(); break;
      case State::Reasoning: again = step_reasoning(out); break;
      case State::Content:
        step_content(out);
        again = false;
        break;
    }
  }
  return out;
}

ReasoningDelta ReasoningParser::finish() {
  ReasoningDelta out;
  // What is held is text: an unfinished tag, or newlines that no end tag followed.
  if (in_reasoning()) {
    out.reasoning = std::move(held_);
  } else {
    out.content = std::move(held_);
  }
  held_.clear();
  search_from_ = 0;
  state_ = State::Opening;
  at_start_ = true;
  return out;
}

bool opens_reasoning(std::string_view prompt, const ReasoningOptions& tags) {
  const std::size_t open = prompt.rfind(tags.start_tag);
  if (open == std::string_view::npos) return false;
  const std::size_t close = prompt.rfind(tags.end_tag);
  return close == std::string_view::npos || close < open;
}

}  // namespace kern::chat
