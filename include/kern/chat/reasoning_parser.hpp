// Splits what a reasoning model writes back into its reasoning (`<think>…</think>`) and its
// answer (the content), for a whole reply at once (parse_reasoning) or streamed piece by piece
// as a StreamingDecoder emits the text of each generated token (ReasoningParser).
//
// The rules read Qwen3's chat template backwards. The template renders an assistant turn as
// `<think>\n` + reasoning.strip('\n') + `\n</think>\n\n` + content.lstrip('\n'), and recovers
// reasoning and content from a raw reply by splitting at `</think>` and dropping the newlines
// next to the tags; so does this parser:
//
// - The reply may open with the start tag, after nothing but newlines: the tag is dropped and
//   what follows is reasoning. A reply that does not open with it is reasoning when
//   `starts_in_reasoning` (the prompt already opened the block, as Qwen3-Thinking-2507's
//   template does with `<think>\n`) and content otherwise (Qwen3's template with
//   enable_thinking=false writes the whole empty block `<think>\n\n</think>\n\n` into the
//   prompt, and the model answers directly). A start tag written later is plain text.
// - Reasoning runs to the first end tag, which is dropped; everything after it is content, a
//   later start or end tag included (plain text). With no end tag everything to the end of the
//   reply is reasoning (a reply cut short by the token limit is still thinking).
// - Newlines next to a tag are dropped: those opening the reply (it begins right after a tag,
//   in the prompt or its own), those right after the start tag, those right before and right
//   after the end tag. Nothing else changes: the reasoning of a reply that ends without an end
//   tag keeps its trailing newlines, and content keeps its own.
// - In Qwen3's vocabulary `<think>` and `</think>` are added tokens that are not special, so
//   the decoder emits them even with skip_special_tokens.
//
// vLLM's Qwen3 reasoning parser splits at the same place but returns the text between the tags
// as it is (with the template's newlines); kern drops them so that rendering the parsed turn
// again with the template reproduces the reply.
//
// Streaming: push() returns only text whose role is certain. A tail that could still grow into
// a tag (`</thi`), newlines that could still turn out to precede the end tag, and the opening of
// the reply while it could still be the start tag are held back until a later piece decides;
// text that turns out not to be a tag is released. finish() releases what is still held (an
// unfinished tag at the end of the stream is text) and resets the parser. For every way of
// cutting a reply into pieces, the concatenation of the deltas equals parse_reasoning of it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kern::chat {

struct ReasoningOptions {
  std::string start_tag = "<think>";
  std::string end_tag = "</think>";
  bool starts_in_reasoning = false;  // the prompt opened the reasoning block
};

// What one push() released (or, from parse_reasoning, the whole split). Within one delta the
// reasoning comes first: once content has begun, no more reasoning follows.
struct ReasoningDelta {
  std::string reasoning;
  std::string content;
  bool operator==(const ReasoningDelta&) const = default;
};

// The split of a whole reply. Error(Api) for tags that are empty or begin with '\n'.
ReasoningDelta parse_reasoning(std::string_view text, const ReasoningOptions& options = {});

// Whether a rendered prompt leaves a reasoning block open (its last start tag after its last end
// tag): then the reply starts inside the reasoning (ReasoningOptions::starts_in_reasoning).
bool opens_reasoning(std::string_view prompt, const ReasoningOptions& tags = {});

class ReasoningParser {
 public:
  // Error(Api) for tags that are empty or begin with '\n'.
  explicit ReasoningParser(ReasoningOptions options = {});

  // The text that `piece` made certain (possibly nothing).
  ReasoningDelta push(std::string_view piece);
  // Releases what is still held back and resets the parser for a new reply.
  ReasoningDelta finish();

  // True while the parser is inside the reasoning (or, before the reply has begun, expects to be).
  bool in_reasoning() const;
  // Bytes held back, waiting for a later piece to decide what they are.
  std::size_t pending_bytes() const { return held_.size(); }

 private:
  enum class State { Opening, Reasoning, Content };

  bool step_opening();
  bool step_reasoning(ReasoningDelta& out);
  void step_content(ReasoningDelta& out);
  bool skip_leading_newlines();

  ReasoningOptions options_;
  State state_ = State::Opening;
  bool at_start_ = true;  // no text emitted yet in this state: leading newlines are dropped
  std::string held_;
  std::size_t search_from_ = 0;  // in the reasoning: held_ holds no end tag before this
};

}  // namespace kern::chat
