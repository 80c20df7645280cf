#include "run_chat.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "kern/base/error.hpp"

namespace kern::cli {

namespace fs = std::filesystem;

chat::ChatTemplate find_chat_template(const std::string& explicit_path, const std::string& tokenizer,
                                      const std::string& weights) {
  if (!explicit_path.empty()) return chat::ChatTemplate::load(explicit_path);
  std::error_code ec;
  auto holds_template = [&](const fs::path& dir) {
    return fs::exists(dir / "tokenizer_config.json", ec) || fs::exists(dir / "chat_template.jinja", ec);
  };
  if (!tokenizer.empty()) {
    const fs::path dir = fs::is_directory(tokenizer, ec) ? fs::path(tokenizer) : fs::path(tokenizer).parent_path();
    if (holds_template(dir)) return chat::ChatTemplate::load(dir.string());
  }
  const fs::path wdir = fs::is_directory(weights, ec) ? fs::path(weights) : fs::path(weights).parent_path();
  if (holds_template(wdir)) return chat::ChatTemplate::load(wdir.string());
  fail(ErrorKind::Io, "--chat: no tokenizer_config.json or chat_template.jinja beside the tokenizer or the weights; "
                      "name one with --chat-template");
}

std::string render_chat(const chat::ChatTemplate& t, const ChatRequest& r) {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!r.system.empty()) messages.push_back({{"role", "system"}, {"content", r.system}});
  messages.push_back({{"role", "user"}, {"content", r.user}});
  nlohmann::ordered_json request = {{"messages", messages}, {"add_generation_prompt", true}};
  if (r.enable_thinking) request["enable_thinking"] = *r.enable_thinking;
  return t.render(request);
}

ReplyPrinter::ReplyPrinter(chat::ReasoningOptions options)
    : parser_(std::move(options)), dim_(isatty(fileno(stderr)) != 0) {}

void ReplyPrinter::push(const std::string& text) { write(parser_.push(text)); }

void ReplyPrinter::finish() { write(parser_.finish()); }

void ReplyPrinter::write(const chat::ReasoningDelta& d) {
  if (!d.reasoning.empty()) {
    if (dim_) std::fputs("\x1b[2m", stderr);
    std::fwrite(d.reasoning.data(), 1, d.reasoning.size(), stderr);
    if (dim_) std::fputs("\x1b[0m", stderr);
    std::fflush(stderr);
  }
  if (!d.content.empty()) {
    std::fwrite(d.content.data(), 1, d.content.size(), stdout);
    std::fflush(stdout);
  }
}

}  // namespace kern::cli
