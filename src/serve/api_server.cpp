// The OpenAI-compatible routes and the per-request sink that turns the engine's tokens into
// response bodies or server-sent events.
#include "kern/serve/api_server.hpp"

#include "kern/base/log.hpp"

#include <chrono>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>

#include "kern/base/json.hpp"
#include "kern/chat/reasoning_parser.hpp"
#include "kern/chat/tool_call_parser.hpp"
#include "kern/driver/generation_config.hpp"
#include "kern/serve/openai_request.hpp"
#include "kern/serve/openai_response.hpp"
#include "kern/serve/stop_matcher.hpp"
#include "kern/serve/tokenize_api.hpp"

namespace kern::serve {

namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kJson = "application/json";

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

void answer(http::Exchange& ex, const ApiError& e) { ex.respond(e.status, kJson, error_body(e)); }

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// One prompt of a request: what its choices echo and its token count (a completions request may
// carry a batch of prompts; chat and most completions requests one).
struct PromptShape {
  std::string echo_text;
  std::vector<std::int32_t> prompt_ids;  // echo with log-probs: the prompt's tokens, whose log-probs come first
  std::int64_t tokens = 0;
};

// What one request asked for beyond the engine's spec.
struct Shape {
  RequestKind kind = RequestKind::Completion;
  bool stream = false, include_usage = false, echo = false, tools = false, logprobs = false;
  int top_logprobs = 0;
  bool starts_in_reasoning = false;
  std::vector<std::string> stop;
  std::vector<PromptShape> prompts;  // at least one; prompt p's samples are choices p·n .. p·n + n − 1
  int n = 1;
};

// The engine's tokens -> OpenAI responses, for one HTTP request (all of its prompts' samples; each
// prompt is an engine request of its own, told through a PromptSink below). Called on the engine
// thread only; the Exchange is thread-safe.
class RequestSink {
 public:
  RequestSink(std::shared_ptr<http::Exchange> ex, Shape shape, ResponseHeader header, const tokenizer::Tokenizer& tok,
              bool skip_special, ServeMetrics& metrics, const std::atomic<bool>& draining)
      : ex_(std::move(ex)),
        shape_(std::move(shape)),
        stream_(std::make_shared<const StreamHeader>(StreamHeader{std::move(header), shape_.kind, shape_.include_usage})),
        tok_(tok),
        metrics_(metrics),
        draining_(draining),
        arrived_(Clock::now()) {
    for (std::size_t p = 0; p < shape_.prompts.size(); ++p)
      for (int i = 0; i < shape_.n; ++i)
        samples_.emplace_back(tok, skip_special, shape_, stream_->header.id,
                              static_cast<int>(p) * shape_.n + i, p);
    prompt_lps_.resize(shape_.prompts.size());
    cached_.resize(shape_.prompts.size(), 0);
  }

  void on_scheduled() {
    if (!scheduled_) scheduled_ = Clock::now();
  }

  // Prompt p's entries (echo with log-probs): its first token has no log-prob (null in the JSON).
  void on_prompt_logprobs(std::size_t p, const std::vector<driver::TokenLogprobs>& lps) {
    std::vector<TokenLogprob>& out = prompt_lps_.at(p);
    out.clear();
    const std::vector<std::int32_t>& ids = shape_.prompts.at(p).prompt_ids;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      TokenLogprob e;
      e.token = text_of(ids[i]);
      if (i > 0 && i - 1 < lps.size()) {
        e.logprob = lps[i - 1].chosen;
        for (const auto& [id, v] : lps[i - 1].top)
          if (static_cast<int>(e.top.size()) < shape_.top_logprobs) e.top.push_back({text_of(id), v});
      }
      out.push_back(std::move(e));
    }
  }
  bool cancelled() const { return ex_->closed(); }

  // Sample `index` (p·n + i) of the whole request. Once the request has failed (another prompt's
  // engine request did) or was answered, its samples are told to stop.
  bool on_token(std::uint64_t index, std::int64_t token, const driver::TokenLogprobs* lp) {
    if (answered_ || failed_) return false;
    Sample& s = samples_.at(index);
    if (!first_token_) first_token_ = Clock::now();
    if (index == 0) last_token_ = Clock::now();
    ++s.generated;
    std::optional<TokenLogprob> entry;
    if (shape_.logprobs && lp) {
      TokenLogprob e;
      e.token = text_of(token);
      e.logprob = lp->chosen;
      for (const auto& [id, v] : lp->top)
        if (static_cast<int>(e.top.size()) < shape_.top_logprobs) e.top.push_back({text_of(id), v});
      entry = std::move(e);
    }
    // An id the tokenizer does not know (a model's embedding may be wider than its vocabulary)
    // has no text.
    const bool known = tok_.contains(static_cast<tokenizer::TokenId>(token));
    const StopFeed f = s.stop.feed(known ? s.decoder.push(static_cast<tokenizer::TokenId>(token)) : std::string());
    emit(index, f.text, std::move(entry), std::nullopt);
    if (f.stopped) s.stop_string = true;
    return !f.stopped;
  }

  void on_end(std::uint64_t index, End why, std::uint64_t cached) {
    Sample& s = samples_.at(index);
    cached_.at(s.prompt) = std::max(cached_.at(s.prompt), cached);
    if (answered_) {
      s.ended = true;
      return;
    }
    if (why == End::Cancelled) {
      s.ended = true;
      done_if_all_ended(false);
      return;
    }
    if (why == End::TooLong) {
      failed_ = ApiError{400, "the request does not fit the KV cache even alone", "invalid_request_error", "", ""};
    }
    if (failed_) {  // the answer is the error: nothing more of any sample is sent
      s.ended = true;
      done_if_all_ended(true);
      return;
    }
    std::string rest;
    if (!s.stop.stopped()) {
      const StopFeed f = s.stop.feed(s.decoder.finish());
      rest = f.text;
      if (!f.stopped) rest += s.stop.finish();
    }
    emit(index, rest, std::nullopt, std::nullopt, true);
    FinishReason reason = why == End::Length ? FinishReason::Length : FinishReason::Stop;
    if (!s.calls.empty()) reason = FinishReason::ToolCalls;
    s.finish = reason;
    if (shape_.stream && !failed_) emit(index, "", std::nullopt, reason);
    s.ended = true;
    done_if_all_ended(true);
  }

  void on_error(const std::string& message) {
    if (answered_) return;
    failed_ = draining_.load() ? service_unavailable(message) : server_error(message);
    for (Sample& s : samples_) s.ended = true;
    done_if_all_ended(true);
  }

 private:
  struct Sample {
    Sample(const tokenizer::Tokenizer& tok, bool skip_special, const Shape& shape, const std::string& id, int index,
           std::size_t prompt_index)
        : prompt(prompt_index),
          decoder(tok, tokenizer::DecodeOptions{skip_special}),
          stop(shape.stop),
          reasoning(chat::ReasoningOptions{"<think>", "</think>", shape.starts_in_reasoning}),
          tools(chat::ToolCallOptions{"<tool_call>", "</tool_call>", id.substr(id.size() > 8 ? id.size() - 8 : 0) +
                                                                         std::to_string(index)}) {}
    std::size_t prompt;  // which of the request's prompts
    tokenizer::StreamingDecoder decoder;
    StopMatcher stop;
    chat::ReasoningParser reasoning;
    chat::ToolCallParser tools;
    std::string text, reasoning_text;
    std::vector<ToolCall> calls;
    std::vector<TokenLogprob> logprobs;
    std::optional<FinishReason> finish;
    std::uint64_t generated = 0;
    std::size_t offset = 0;  // code points sent (completions stream)
    bool started = false, ended = false, stop_string = false;
  };

  // Text (and a log-prob entry) of sample `index` on its way out: split into reasoning, content
  // and tool calls for chat, then appended (whole response) or sent as a chunk (stream).
  void emit(std::uint64_t index, const std::string& text, std::optional<TokenLogprob> lp,
            std::optional<FinishReason> finish, bool flush = false) {
    Sample& s = samples_.at(index);
    std::string content = text, reasoning;
    std::vector<ToolCall> calls;
    if (shape_.kind == RequestKind::Chat) {
      chat::ReasoningDelta d = s.reasoning.push(text);
      if (flush) {
        chat::ReasoningDelta e = s.reasoning.finish();
        d.reasoning += e.reasoning;
        d.content += e.content;
      }
      reasoning = std::move(d.reasoning);
      content = std::move(d.content);
      if (shape_.tools) {
        chat::ToolCallDelta t = s.tools.push(content);
        if (flush) {
          chat::ToolCallDelta e = s.tools.finish();
          t.content += e.content;
          t.calls.insert(t.calls.end(), e.calls.begin(), e.calls.end());
        }
        content = std::move(t.content);
        for (const chat::ToolCall& c : t.calls) calls.push_back({c.id, c.name, c.arguments});
      }
    }
    if (!shape_.stream) {
      s.text += content;
      s.reasoning_text += reasoning;
      s.calls.insert(s.calls.end(), calls.begin(), calls.end());
      if (lp) s.logprobs.push_back(std::move(*lp));
      return;
    }
    const bool first = !s.started;
    if (!first && content.empty() && reasoning.empty() && calls.empty() && !lp && !finish) return;
    if (!stream_open()) return;
    s.started = true;
    std::optional<std::vector<TokenLogprob>> lps;
    if (lp) lps = std::vector<TokenLogprob>{std::move(*lp)};
    else if (shape_.logprobs && finish) lps = std::vector<TokenLogprob>{};
    const std::vector<TokenLogprob>& prompt_lps = prompt_lps_[s.prompt];
    if (first && !prompt_lps.empty()) {  // completions' echo: the prompt's entries lead the first chunk
      std::vector<TokenLogprob> all = prompt_lps;
      if (lps) all.insert(all.end(), lps->begin(), lps->end());
      lps = std::move(all);
    }
    // The chunk's JSON is built and serialised on the connection's I/O thread, not here on the engine
    // thread (about two thirds of the engine's host time per token: docs/perf.md, session 34).
    if (shape_.kind == RequestKind::Chat) {
      ChatChunkChoice c;
      c.index = static_cast<int>(index);
      c.first = first;
      if (!content.empty()) c.content = content;
      if (!reasoning.empty()) c.reasoning_content = reasoning;
      for (const ToolCall& call : calls) c.tool_calls.push_back({static_cast<int>(s.calls.size() + c.tool_calls.size()),
                                                                 call.id, call.name, call.arguments});
      s.calls.insert(s.calls.end(), calls.begin(), calls.end());
      c.logprobs = std::move(lps);
      c.finish_reason = finish;
      const std::size_t reserve = chunk_reserve(content.size() + reasoning.size(), c.logprobs);
      ex_->send_made(reserve, [h = stream_, c = std::move(c)] { return sse_event(chat_chunk_json(*h, std::span(&c, 1))); });
    } else {
      CompletionChunkChoice c;
      c.index = static_cast<int>(index);
      c.text = first && shape_.echo ? shape_.prompts[s.prompt].echo_text + content : content;
      c.logprobs = std::move(lps);
      c.text_offset = s.offset;
      s.offset += code_points(c.text);
      c.finish_reason = finish;
      const std::size_t reserve = chunk_reserve(c.text.size(), c.logprobs);
      ex_->send_made(reserve,
                     [h = stream_, c = std::move(c)] { return sse_event(completion_chunk_json(*h, std::span(&c, 1))); });
    }
  }

  // About the bytes a chunk will take (its JSON and SSE framing around the text, each log-prob entry
  // and its alternatives): what the stream queue counts until the I/O thread has made it.
  static std::size_t chunk_reserve(std::size_t text, const std::optional<std::vector<TokenLogprob>>& lps) {
    std::size_t n = 256 + 2 * text;
    if (lps)
      for (const TokenLogprob& e : *lps) {
        n += 96 + 6 * e.token.size();
        for (const TopLogprob& t : e.top) n += 96 + 6 * t.token.size();
      }
    return n;
  }

  std::string text_of(std::int64_t id) const {
    const auto t = static_cast<tokenizer::TokenId>(id);
    return tok_.contains(t) ? tok_.token_bytes(t) : std::string();
  }

  bool stream_open() {
    if (!streaming_) {
      streaming_ = true;
      if (!ex_->start_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}})) return false;
    }
    return !ex_->closed();
  }

  void done_if_all_ended(bool tell) {
    for (const Sample& s : samples_)
      if (!s.ended) return;
    if (answered_) return;
    answered_ = true;
    const Clock::time_point now = Clock::now();
    Usage usage;
    for (const PromptShape& p : shape_.prompts) usage.prompt_tokens += p.tokens;
    for (const Sample& s : samples_) usage.completion_tokens += static_cast<std::int64_t>(s.generated);
    for (std::uint64_t c : cached_) usage.cached_tokens += static_cast<std::int64_t>(c);
    RequestTimes t;
    t.e2e_s = seconds(arrived_, now);
    t.ttft_s = first_token_ ? seconds(arrived_, *first_token_) : t.e2e_s;
    t.queue_s = scheduled_ ? seconds(arrived_, *scheduled_) : t.e2e_s;
    t.output_tokens = samples_.front().generated;
    t.decode_s = first_token_ && last_token_ ? seconds(*first_token_, *last_token_) : 0;
    const char* reason = failed_ ? "error" : (ex_->closed() ? "cancelled" : "done");
    log().info("request {}: {} prompt tokens ({} cached), {} generated, ttft {:.1f} ms, {:.1f} ms, {}",
                 stream_->header.id, usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens, t.ttft_s * 1e3,
                 t.e2e_s * 1e3, reason);
    if (!ex_->closed()) metrics_.count_request(!failed_);  // a client that left is neither
    if (!failed_ && !ex_->closed()) metrics_.observe(t);
    if (!tell || ex_->closed()) return;
    if (failed_) {
      if (streaming_) {
        ex_->send("data: " + error_body(*failed_) + "\n\n");
        ex_->send(sse_done());
        ex_->finish();
      } else {
        answer(*ex_, *failed_);
      }
      return;
    }
    if (shape_.stream) {
      if (!stream_open()) return;
      if (shape_.include_usage) ex_->send(sse_event(usage_chunk_json(*stream_, usage)));
      ex_->send(sse_done());
      ex_->finish();
      return;
    }
    ResponseJson body;
    if (shape_.kind == RequestKind::Chat) {
      std::vector<ChatChoice> choices;
      for (Sample& s : samples_) {
        ChatChoice c;
        c.content = std::move(s.text);
        c.reasoning_content = std::move(s.reasoning_text);
        c.tool_calls = std::move(s.calls);
        c.finish_reason = s.finish.value_or(FinishReason::Stop);
        if (shape_.logprobs) c.logprobs = std::move(s.logprobs);
        choices.push_back(std::move(c));
      }
      body = chat_completion_json(stream_->header, choices, usage);
    } else {
      std::vector<CompletionChoice> choices;
      for (Sample& s : samples_) {
        CompletionChoice c;
        c.text = shape_.echo ? shape_.prompts[s.prompt].echo_text + s.text : std::move(s.text);
        c.finish_reason = s.finish.value_or(FinishReason::Stop);
        if (shape_.logprobs) {
          std::vector<TokenLogprob> all = prompt_lps_[s.prompt];
          all.insert(all.end(), s.logprobs.begin(), s.logprobs.end());
          c.logprobs = std::move(all);
        }
        choices.push_back(std::move(c));
      }
      body = completion_json(stream_->header, choices, usage);
    }
    ex_->respond(200, kJson, to_body(body));
  }

  std::shared_ptr<http::Exchange> ex_;
  Shape shape_;
  std::shared_ptr<const StreamHeader> stream_;  // shared with the I/O threads that make the chunks
  const tokenizer::Tokenizer& tok_;
  ServeMetrics& metrics_;
  const std::atomic<bool>& draining_;
  std::vector<Sample> samples_;
  Clock::time_point arrived_;
  std::optional<Clock::time_point> scheduled_, first_token_, last_token_;
  std::optional<ApiError> failed_;
  std::vector<std::uint64_t> cached_;  // per prompt: the prefix index's hit (the largest over its samples)
  bool streaming_ = false, answered_ = false;
  std::vector<std::vector<TokenLogprob>> prompt_lps_;  // per prompt (echo with log-probs)
};

// Prompt p of a request as the engine sees it (one engine request): its samples 0 .. n − 1 are the
// request's p·n .. p·n + n − 1.
class PromptSink final : public TokenSink {
 public:
  PromptSink(std::shared_ptr<RequestSink> whole, std::size_t prompt, std::uint64_t n)
      : whole_(std::move(whole)), prompt_(prompt), base_(prompt * n) {}
  bool on_token(std::uint64_t sample, std::int64_t token, const driver::TokenLogprobs* logprobs) override {
    return whole_->on_token(base_ + sample, token, logprobs);
  }
  void on_end(std::uint64_t sample, End why, std::uint64_t cached) override { whole_->on_end(base_ + sample, why, cached); }
  void on_error(const std::string& message) override { whole_->on_error(message); }
  void on_scheduled() override { whole_->on_scheduled(); }
  void on_prompt_logprobs(const std::vector<driver::TokenLogprobs>& logprobs) override {
    whole_->on_prompt_logprobs(prompt_, logprobs);
  }
  bool cancelled() const override { return whole_->cancelled(); }

 private:
  std::shared_ptr<RequestSink> whole_;
  std::size_t prompt_;
  std::uint64_t base_;
};

}  // namespace

struct ApiServer::Impl {
  Impl(ApiConfig c, Engine& e, const tokenizer::Tokenizer& t, const chat::ChatTemplate* tm, ServedModel m)
      : config(std::move(c)), engine(e), tok(t), tmpl(tm), model(std::move(m)), rng(std::random_device{}()) {
    limits.vocab_size = static_cast<std::int64_t>(tok.vocab_size());
    if (tmpl && tmpl->eos_token())
      if (std::optional<tokenizer::TokenId> eos = tok.token_id(*tmpl->eos_token())) chat_eos = *eos;
  }

  void handle(const http::Request& req, const std::shared_ptr<http::Exchange>& ex) {
    try {
      route(req, ex);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::Api || e.kind() == ErrorKind::Template) {
        answer(*ex, bad_request(e.what()));
      } else {
        log().error("{} {}: {}", req.method, req.path, e.what());
        answer(*ex, server_error(e.what()));
      }
    } catch (const std::exception& e) {
      log().error("{} {}: {}", req.method, req.path, e.what());
      answer(*ex, server_error(e.what()));
    }
  }

  bool authorized(const http::Request& req, http::Exchange& ex) {
    if (config.api_key.empty()) return true;
    const std::optional<std::string> h = req.header("authorization");
    if (h && *h == "Bearer " + config.api_key) return true;
    answer(ex, unauthorized("a valid API key is needed: send it as 'Authorization: Bearer <key>'"));
    return false;
  }

  void route(const http::Request& req, const std::shared_ptr<http::Exchange>& ex) {
    const std::string& p = req.path;
    auto method = [&](const char* m) {
      if (req.method == m) return true;
      ex->respond(405, kJson,
                  error_body(ApiError{405, fmt::format("{} takes {}", p, m), "invalid_request_error", "", ""}),
                  {{"Allow", m}});
      return false;
    };
    if (p == "/health") {
      if (!method("GET")) return;
      if (ready && !draining) {
        ex->respond(200, kJson, "{}");
      } else {
        answer(*ex, service_unavailable(draining ? "the server is draining" : "the model is loading"));
      }
      return;
    }
    if (p == "/metrics") {
      if (!method("GET")) return;
      ex->respond(200, "text/plain; version=0.0.4", metrics.render(engine.metrics(), model.name));
      return;
    }
    const bool api = p == "/v1/models" || p == "/v1/completions" || p == "/v1/chat/completions" || p == "/tokenize" ||
                     p == "/detokenize";
    if (!api) {
      answer(*ex, not_found(fmt::format("no route {} {}", req.method, p)));
      return;
    }
    if (!authorized(req, *ex)) return;
    if (p == "/v1/models") {
      if (!method("GET")) return;
      const ModelCard card{model.name, created, static_cast<std::int64_t>(model.max_model_len)};
      ex->respond(200, kJson, to_body(models_json(std::span(&card, 1))));
      return;
    }
    if (!method("POST")) return;
    if (p == "/tokenize") return tokenize(req, *ex);
    if (p == "/detokenize") return detokenize(req, *ex);
    if (draining) return answer(*ex, service_unavailable("the server is draining"));
    if (!ready) return answer(*ex, service_unavailable("the model is loading"));
    const bool chat_route = p == "/v1/chat/completions";
    ParseResult<GenerationRequest> parsed =
        chat_route ? parse_chat_request(req.body, limits) : parse_completion_request(req.body, limits);
    if (auto* e = std::get_if<ApiError>(&parsed)) return answer(*ex, *e);
    generate(std::get<GenerationRequest>(std::move(parsed)), ex);
  }

  std::string render_chat(const RequestJson& messages, const RequestJson& tools, const RequestJson& kwargs,
                          bool add_generation_prompt) const {
    if (!tmpl) fail(ErrorKind::Api, "this model has no chat template: use /v1/completions");
    nlohmann::ordered_json r = kwargs.is_object() ? kwargs : nlohmann::ordered_json::object();
    r["messages"] = messages;
    if (!tools.is_null()) r["tools"] = tools;
    r["add_generation_prompt"] = add_generation_prompt;
    return tmpl->render(r);
  }

  void tokenize(const http::Request& req, http::Exchange& ex) {
    ParseResult<TokenizeRequest> parsed = parse_tokenize_request(req.body, limits);
    if (auto* e = std::get_if<ApiError>(&parsed)) return answer(ex, *e);
    const TokenizeRequest& t = std::get<TokenizeRequest>(parsed);
    if (auto e = model_check(t.model)) return answer(ex, *e);
    const std::string text =
        t.is_chat ? render_chat(t.messages, t.tools, t.chat_template_kwargs, t.add_generation_prompt) : t.prompt;
    const std::vector<tokenizer::TokenId> ids = tok.encode(text);
    std::vector<std::int32_t> out(ids.begin(), ids.end());
    ex.respond(200, kJson, tokenize_body(out, static_cast<std::int64_t>(model.max_model_len)));
  }

  void detokenize(const http::Request& req, http::Exchange& ex) {
    ParseResult<DetokenizeRequest> parsed = parse_detokenize_request(req.body, limits);
    if (auto* e = std::get_if<ApiError>(&parsed)) return answer(ex, *e);
    const DetokenizeRequest& d = std::get<DetokenizeRequest>(parsed);
    if (auto e = model_check(d.model)) return answer(ex, *e);
    std::vector<tokenizer::TokenId> ids(d.tokens.begin(), d.tokens.end());
    ex.respond(200, kJson, detokenize_body(tok.decode(ids)));
  }

  std::optional<ApiError> model_check(const std::string& name) const {
    if (name.empty()) return std::nullopt;
    const std::string served[1] = {model.name};
    return check_model_served(name, served);
  }

  void generate(GenerationRequest r, const std::shared_ptr<http::Exchange>& ex) {
    if (auto e = check_model_served(r.model, std::span(&model.name, 1))) return answer(*ex, *e);
    Shape shape;
    shape.kind = r.kind;
    shape.stream = r.stream;
    shape.include_usage = r.include_usage;
    shape.echo = r.echo;
    shape.tools = r.kind == RequestKind::Chat && !r.tools.is_null();
    shape.logprobs = r.logprobs;
    shape.top_logprobs = r.top_logprobs;
    shape.stop = r.stop;
    shape.n = r.n;
    // Every prompt's tokens (chat: the rendered messages), checked against the context first: a batch
    // is queued whole or not at all.
    std::vector<std::vector<std::int32_t>> prompts;
    std::vector<std::uint64_t> max_new;
    const bool batch = r.prompts.size() > 1;
    const bool prompt_logprobs = r.kind == RequestKind::Completion && r.echo && r.logprobs;
    const std::size_t count = r.kind == RequestKind::Chat ? 1 : r.prompts.size();
    for (std::size_t p = 0; p < count; ++p) {
      std::vector<std::int32_t> prompt;
      PromptShape ps;
      if (r.kind == RequestKind::Chat) {
        const std::string text = render_chat(r.messages, r.tools, r.chat_template_kwargs, r.add_generation_prompt);
        shape.starts_in_reasoning = chat::opens_reasoning(text);
        for (tokenizer::TokenId id : tok.encode(text)) prompt.push_back(id);
      } else if (r.prompts[p].is_tokens) {
        prompt = r.prompts[p].tokens;
        if (r.echo) ps.echo_text = tok.decode(std::vector<tokenizer::TokenId>(prompt.begin(), prompt.end()));
      } else {
        for (tokenizer::TokenId id : tok.encode(r.prompts[p].text)) prompt.push_back(id);
        ps.echo_text = r.prompts[p].text;
      }
      const std::string which = batch ? fmt::format("prompt[{}]", p) : "the prompt";
      const std::string param = r.kind == RequestKind::Chat ? "messages" : "prompt";
      if (prompt.empty()) return answer(*ex, bad_request(which + " is empty: it encodes to no tokens", param));
      const std::uint64_t n = prompt.size();
      if (n >= model.max_model_len)
        return answer(*ex, bad_request(fmt::format("this model's maximum context length is {} tokens; {} has {}",
                                                   model.max_model_len, which, n),
                                       param));
      const std::uint64_t room = model.max_model_len - n;
      const std::uint64_t want = r.max_tokens ? static_cast<std::uint64_t>(*r.max_tokens) : room;
      if (want > room)
        return answer(*ex, bad_request(fmt::format("this model's maximum context length is {} tokens; {} has {} and "
                                                   "max_tokens asks for {} more",
                                                   model.max_model_len, which, n, want),
                                       "max_tokens"));
      ps.tokens = static_cast<std::int64_t>(n);
      if (prompt_logprobs) ps.prompt_ids = prompt;
      shape.prompts.push_back(std::move(ps));
      prompts.push_back(std::move(prompt));
      max_new.push_back(want);
    }

    // A batch whose samples outnumber the waiting queue could never be queued: not a 429 but a 400.
    const std::uint64_t samples = prompts.size() * static_cast<std::uint64_t>(r.n);
    if (samples > engine.scheduler_config().max_waiting)
      return answer(*ex, bad_request(fmt::format("{} prompts x n = {} samples; the server queues at most {} at once",
                                                 prompts.size(), samples, engine.scheduler_config().max_waiting),
                                     "prompt"));

    driver::SamplingParams sp;
    sp.temperature = r.temperature.value_or(model.temperature.value_or(1.0));
    sp.top_p = r.top_p.value_or(model.top_p.value_or(1.0));
    sp.top_k = r.top_k ? *r.top_k : model.top_k.value_or(0);
    sp.min_p = r.min_p.value_or(model.min_p.value_or(0.0));
    sp.presence_penalty = r.presence_penalty.value_or(0.0);
    sp.frequency_penalty = r.frequency_penalty.value_or(0.0);
    sp.repetition_penalty = r.repetition_penalty.value_or(1.0);
    sp.logit_bias = r.logit_bias;
    {
      std::lock_guard<std::mutex> l(mu);
      sp.seed = r.seed ? static_cast<std::uint64_t>(*r.seed) : rng();
    }
    sp.chosen_logprob = r.logprobs;
    sp.logprobs = static_cast<std::uint32_t>(r.top_logprobs);
    ResponseHeader header;
    {
      std::lock_guard<std::mutex> l(mu);
      header.id = response_id(r.kind, rng(), rng());
    }
    header.created = unix_now();
    header.model = model.name;
    auto sink = std::make_shared<RequestSink>(ex, std::move(shape), std::move(header), tok, r.skip_special_tokens,
                                              metrics, draining);
    // One engine request per prompt, each with the request's sampling (its seed too: prompt p's sample
    // i draws as a one-prompt request's sample i would).
    std::vector<EngineRequest> ers;
    for (std::size_t p = 0; p < prompts.size(); ++p) {
      EngineRequest er;
      er.spec.prompt.assign(prompts[p].begin(), prompts[p].end());
      // max_tokens 0 (completions with echo, checked by the parser): score only, nothing is generated.
      er.score_only = max_new[p] == 0;
      er.spec.max_new = max_new[p];
      er.spec.n = static_cast<std::uint64_t>(r.n);
      if (!r.ignore_eos) {
        er.spec.stop_tokens = model.eos;
        if (r.kind == RequestKind::Chat && chat_eos) er.spec.stop_tokens.push_back(*chat_eos);
      }
      for (std::int32_t t : r.stop_token_ids) er.spec.stop_tokens.push_back(t);
      er.sampling = sp;
      er.sink = std::make_shared<PromptSink>(sink, p, static_cast<std::uint64_t>(r.n));
      er.prompt_logprobs = prompt_logprobs;
      ers.push_back(std::move(er));
    }
    switch (engine.submit_all(std::move(ers))) {
      case Engine::Submitted::Queued: return;
      case Engine::Submitted::QueueFull: return answer(*ex, rate_limited("the waiting queue is full; try again later"));
      case Engine::Submitted::Stopping: return answer(*ex, service_unavailable("the server is shutting down"));
    }
  }

  ApiConfig config;
  Engine& engine;
  const tokenizer::Tokenizer& tok;
  const chat::ChatTemplate* tmpl;
  ServedModel model;
  ParseLimits limits;
  std::optional<std::int64_t> chat_eos;
  ServeMetrics metrics;
  std::atomic<bool> ready{false}, draining{false};
  std::int64_t created = unix_now();
  std::mutex mu;
  std::mt19937_64 rng;
  std::unique_ptr<http::Server> server;  // last: stopped first
};

ApiServer::ApiServer(ApiConfig config, Engine& engine, const tokenizer::Tokenizer& tokenizer,
                     const chat::ChatTemplate* chat_template, ServedModel model)
    : impl_(std::make_unique<Impl>(std::move(config), engine, tokenizer, chat_template, std::move(model))) {
  Impl* impl = impl_.get();
  impl_->server = std::make_unique<http::Server>(
      impl_->config.http, [impl](http::Request req, std::shared_ptr<http::Exchange> ex) { impl->handle(req, ex); });
  impl_->server->run();
}

ApiServer::~ApiServer() { stop(); }

std::uint16_t ApiServer::port() const { return impl_->server->port(); }
void ApiServer::set_ready(bool ready) { impl_->ready = ready; }
void ApiServer::drain() {
  impl_->draining = true;
  impl_->server->stop_accepting();
}
void ApiServer::stop() {
  if (impl_ && impl_->server) impl_->server->stop();
}

void read_generation_defaults(const std::string& weights, ServedModel& model) {
  namespace fs = std::filesystem;
  fs::path dir(weights);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) dir = dir.parent_path();
  const fs::path path = dir / "generation_config.json";
  if (!fs::exists(path, ec)) return;
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  model.eos = driver::parse_eos_tokens(text, path.string());
  const Json j = parse_json_strict(text, {ErrorKind::WeightArtifact, path.string()});
  auto num = [&](const char* k) -> std::optional<double> {
    if (j.contains(k) && j[k].is_number()) return j[k].get<double>();
    return std::nullopt;
  };
  if (auto v = num("temperature")) model.temperature = *v;
  if (auto v = num("top_p")) model.top_p = *v;
  if (auto v = num("min_p")) model.min_p = *v;
  if (j.contains("top_k") && j["top_k"].is_number_integer()) model.top_k = j["top_k"].get<std::int64_t>();
  // do_sample false: greedy unless the request says otherwise.
  if (j.contains("do_sample") && j["do_sample"].is_boolean() && !j["do_sample"].get<bool>()) model.temperature = 0.0;
}

}  // namespace kern::serve
