// kern run --chat: the prompt as a conversation rendered by the model's own chat template, and the
// reply split into reasoning (to stderr, dimmed on a terminal) and answer (to stdout).
#pragma once

#include <optional>
#include <string>

#include "kern/chat/chat_template.hpp"
#include "kern/chat/reasoning_parser.hpp"

namespace kern::cli {

struct ChatRequest {
  std::string system;                    // empty: no system message
  std::string user;                      // the prompt
  std::optional<bool> enable_thinking;   // unset: the template's default
};

// The chat template for a run: `explicit_path` when given, else the tokenizer's directory when it
// holds tokenizer_config.json or chat_template.jinja, else the weights directory.
chat::ChatTemplate find_chat_template(const std::string& explicit_path, const std::string& tokenizer,
                                      const std::string& weights);

// The rendered prompt (with the generation prompt).
std::string render_chat(const chat::ChatTemplate& t, const ChatRequest& r);

using chat::opens_reasoning;  // kern/chat/reasoning_parser.hpp

// Writes reasoning to stderr and the answer to stdout as the reply streams.
class ReplyPrinter {
 public:
  explicit ReplyPrinter(chat::ReasoningOptions options);
  void push(const std::string& text);
  void finish();

 private:
  void write(const chat::ReasoningDelta& d);
  chat::ReasoningParser parser_;
  bool dim_ = false;
};

}  // namespace kern::cli
