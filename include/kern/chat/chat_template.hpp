// A model's chat template, loaded the way transformers finds it, rendering requests into the
// prompt text transformers' apply_chat_template(..., tokenize=False) would produce.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

#include "kern/chat/jinja.hpp"

namespace kern::chat {

class ChatTemplate {
 public:
  // `path`: a model directory or its tokenizer_config.json. A chat_template.jinja beside the
  // config wins over the config's `chat_template` (as in transformers 5); that field is a string
  // or a list of {name, template} where "default" is used. bos_token / eos_token come from the
  // config (strings or {content: ...} objects). Throws Error(Template) / Error(Io).
  static ChatTemplate load(const std::string& path);

  static ChatTemplate from_source(std::string_view source, std::optional<std::string> bos_token,
                                  std::optional<std::string> eos_token, std::string name = "chat template");

  // `request`: {messages, tools?, documents?, add_generation_prompt? (false)}, every other key a
  // template keyword argument (enable_thinking, ...). Throws Error(Api) for a malformed request,
  // Error(Template) when the template fails on it.
  std::string render(const nlohmann::ordered_json& request, const jinja::RenderLimits& limits = {}) const;

  const std::optional<std::string>& bos_token() const { return bos_; }
  const std::optional<std::string>& eos_token() const { return eos_; }
  const std::string& source() const { return source_; }

 private:
  jinja::Template template_;
  std::string source_;
  std::optional<std::string> bos_;
  std::optional<std::string> eos_;
};

}  // namespace kern::chat
