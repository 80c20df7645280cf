// kern serve's OpenAI-compatible HTTP API: routes on kern::http::Server, requests read by the
// wire-protocol layer (openai_request.hpp), prompts made by the tokenizer and the model's chat
// template, generation by the Engine, answers written as whole JSON or as server-sent events
// (openai_response.hpp) with stop strings, reasoning and tool calls split out on the way.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kern/chat/chat_template.hpp"
#include "kern/http/server.hpp"
#include "kern/serve/engine.hpp"
#include "kern/serve/metrics.hpp"
#include "kern/tokenizer/tokenizer.hpp"

namespace kern::serve {

// The model as the API presents it.
struct ServedModel {
  std::string name;                 // what clients put in "model"
  std::uint64_t max_model_len = 0;  // prompt + generated positions one request may reach
  std::vector<std::int64_t> eos;    // generation_config.json eos ids (end unless ignore_eos)
  // generation_config.json sampling defaults for fields a request leaves out; unset fields fall
  // back to OpenAI's (temperature 1, top_p 1, no top_k / min_p).
  std::optional<double> temperature, top_p, min_p;
  std::optional<std::int64_t> top_k;
};

struct ApiConfig {
  http::Config http;
  std::string api_key;  // non-empty: /v1/* and /tokenize, /detokenize need "Authorization: Bearer <key>"
};

class ApiServer {
 public:
  // `chat_template` may be null (then /v1/chat/completions answers 400). The server starts
  // accepting at once; /health answers 503 until set_ready(true).
  ApiServer(ApiConfig config, Engine& engine, const tokenizer::Tokenizer& tokenizer,
            const chat::ChatTemplate* chat_template, ServedModel model);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  std::uint16_t port() const;
  void set_ready(bool ready);
  // Draining: new requests get 503, the listener closes; open ones go on.
  void drain();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The generation_config.json beside `weights` (a checkpoint folder or a file in one): eos ids and
// sampling defaults into `model` (fields it does not name are left as they are).
void read_generation_defaults(const std::string& weights, ServedModel& model);

}  // namespace kern::serve
