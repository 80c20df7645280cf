// kern template: renders a chat request (JSON on stdin) with a model's chat template, printing
// the prompt exactly as transformers' apply_chat_template(..., tokenize=False) would.
//   kern template --config DIR|tokenizer_config.json < request.json
// The request: {"messages": [...], "tools": [...]?, "add_generation_prompt": bool?, other keys
// passed to the template (enable_thinking, ...)}.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "command.hpp"
#include "kern/base/error.hpp"
#include "kern/chat/chat_template.hpp"

namespace kern::cli::cmd_template {
namespace {

struct Options {
  std::string config;
};

int run(const Options& o) {
  const chat::ChatTemplate tmpl = chat::ChatTemplate::load(o.config);
  const std::string input{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  if (std::cin.bad()) fail(ErrorKind::Io, "cannot read standard input");
  nlohmann::ordered_json request;
  try {
    request = nlohmann::ordered_json::parse(input);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::Api, "stdin: not a JSON request: {}", e.what());
  }
  const std::string prompt = tmpl.render(request);
  if (std::fwrite(prompt.data(), 1, prompt.size(), stdout) != prompt.size() || std::fflush(stdout) != 0)
    fail(ErrorKind::Io, "cannot write standard output");
  return 0;
}

Runner setup(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("template", "Render a chat request (JSON on stdin) with a model's chat template");
  sub->add_option("--config", opts->config, "model directory, or its tokenizer_config.json")->required();
  return [opts] { return run(*opts); };
}

Registrar reg("template", setup);

}  // namespace
}  // namespace kern::cli::cmd_template
