#include "kern/serve/openai_request.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "kern/base/json.hpp"
#include "serve/chat_fields.hpp"
#include "serve/request_fields.hpp"

namespace kern::serve {

namespace {

using detail::field;
using detail::reject;

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kInt64Min = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();

std::vector<std::string> read_stop(const RequestJson& body, const ParseLimits& limits) {
  std::vector<std::string> stops;
  const RequestJson* v = field(body, "stop");
  if (!v) return stops;
  auto take = [&](const RequestJson& s, const std::string& at) {
    if (!s.is_string()) reject(at, fmt::format("'{}' must be a string", at));
    const std::string& text = s.get_ref<const std::string&>();
    if (text.empty()) reject(at, fmt::format("'{}' must not be an empty string", at));
    if (text.size() > limits.max_stop_bytes)
      reject(at, fmt::format("'{}' is {} bytes long, more than the limit of {}", at, text.size(), limits.max_stop_bytes));
    stops.push_back(text);
  };
  if (v->is_string()) {
    take(*v, "stop");
  } else if (v->is_array()) {
    if (v->size() > limits.max_stop_strings)
      reject("stop", fmt::format("'stop' has {} strings, more than the limit of {}", v->size(), limits.max_stop_strings));
    for (std::size_t i = 0; i < v->size(); ++i) take((*v)[i], base::json_path_index("stop", i));
  } else {
    reject("stop", "'stop' must be a string or an array of strings");
  }
  return stops;
}

// `logit_bias`: an object from token ids (decimal strings, as OpenAI's clients write them) to values
// in [-100, 100]; the result by ascending id.
std::vector<std::pair<std::int32_t, float>> read_logit_bias(const RequestJson& body, const ParseLimits& limits) {
  std::vector<std::pair<std::int32_t, float>> out;
  const RequestJson* v = field(body, "logit_bias");
  if (!v) return out;
  if (!v->is_object()) reject("logit_bias", "'logit_bias' must be an object from token ids to numbers");
  if (v->size() > limits.max_logit_bias)
    reject("logit_bias",
           fmt::format("'logit_bias' has {} entries, more than the limit of {}", v->size(), limits.max_logit_bias));
  const std::int64_t ids = limits.vocab_size > 0 ? limits.vocab_size : kInt32Max;
  for (auto it = v->begin(); it != v->end(); ++it) {
    const std::string& key = it.key();
    const std::string at = "logit_bias." + key.substr(0, 32);
    std::int64_t id = 0;
    const bool digits = !key.empty() && key.size() <= 10 &&
                        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) id = std::stoll(key);
    if (!digits || id >= ids)
      reject(at, fmt::format("'logit_bias' keys must be token ids in [0, {}); got \"{}\"", ids, key.substr(0, 32)));
    if (!it->is_number()) reject(at, fmt::format("'{}' must be a number", at));
    const double b = it->get<double>();
    if (!(b >= -100.0 && b <= 100.0)) reject(at, fmt::format("'{}' must be in [-100, 100], got {}", at, b));
    out.emplace_back(static_cast<std::int32_t>(id), static_cast<float>(b));
  }
  std::sort(out.begin(), out.end());
  for (std::size_t i = 1; i < out.size(); ++i)
    if (out[i].first == out[i - 1].first)
      reject("logit_bias", fmt::format("'logit_bias' names token id {} twice", out[i].first));
  return out;
}

// Fields OpenAI defines that kern does not implement, refused where ignoring them would change
// the answer the client asked for.
void refuse_unsupported(const RequestJson& body, int n) {
  if (const RequestJson* v = field(body, "best_of")) {
    if (detail::as_integer(*v, "best_of", 1, kInt32Max) != n)
      reject("best_of", "'best_of' is not supported (it may only equal 'n')");
  }
  if (const RequestJson* v = field(body, "suffix")) {
    if (!v->is_string()) reject("suffix", "'suffix' must be a string");
    if (!v->get_ref<const std::string&>().empty()) reject("suffix", "'suffix' is not supported");
  }
  if (const RequestJson* v = field(body, "response_format")) {
    auto type = v->is_object() ? v->find("type") : v->end();
    if (!v->is_object() || type == v->end() || !type->is_string())
      reject("response_format", "'response_format' must be an object with a string 'type'");
    if (type->get_ref<const std::string&>() != "text")
      reject("response_format", fmt::format("'response_format' of type \"{}\" is not supported (only \"text\")",
                                            type->get_ref<const std::string&>()));
  }
}

// Everything both endpoints share.
void read_common(const RequestJson& body, const ParseLimits& limits, GenerationRequest& r) {
  const RequestJson* model = field(body, "model");
  if (!model) reject("model", "'model' is required");
  if (!model->is_string()) reject("model", "'model' must be a string");
  r.model = model->get<std::string>();
  if (r.model.empty()) reject("model", "'model' must not be empty");

  // 0 only scores a prompt (completions with echo; checked by the caller, which knows the route).
  const auto max_tokens = detail::get_integer(body, "max_tokens", 0, kInt64Max);
  const auto max_completion_tokens = detail::get_integer(body, "max_completion_tokens", 0, kInt64Max);
  if (max_tokens && max_completion_tokens && *max_tokens != *max_completion_tokens)
    reject("max_completion_tokens",
           fmt::format("'max_tokens' ({}) and 'max_completion_tokens' ({}) disagree: give one", *max_tokens,
                       *max_completion_tokens));
  r.max_tokens = max_completion_tokens ? max_completion_tokens : max_tokens;
  r.max_tokens_field = max_completion_tokens ? "max_completion_tokens" : "max_tokens";

  r.stop = read_stop(body, limits);
  if (const RequestJson* v = field(body, "stop_token_ids"))
    r.stop_token_ids = detail::as_token_ids(*v, "stop_token_ids", limits.max_stop_token_ids, limits.vocab_size);

  r.temperature = detail::get_number(body, "temperature", {0.0, 2.0});
  r.top_p = detail::get_number(body, "top_p", {0.0, 1.0, true, false});
  if (auto k = detail::get_integer(body, "top_k", -1, kInt32Max)) r.top_k = static_cast<std::int32_t>(std::max<std::int64_t>(*k, 0));
  r.min_p = detail::get_number(body, "min_p", {0.0, 1.0});
  r.presence_penalty = detail::get_number(body, "presence_penalty", {-2.0, 2.0});
  r.frequency_penalty = detail::get_number(body, "frequency_penalty", {-2.0, 2.0});
  r.repetition_penalty = detail::get_number(body, "repetition_penalty", {0.0, 10.0, true, false});
  r.seed = detail::get_integer(body, "seed", kInt64Min, kInt64Max);
  r.n = static_cast<int>(detail::get_integer(body, "n", 1, limits.max_n).value_or(1));
  r.logit_bias = read_logit_bias(body, limits);

  r.stream = detail::get_bool(body, "stream").value_or(false);
  if (const RequestJson* so = field(body, "stream_options")) {
    if (!so->is_object()) reject("stream_options", "'stream_options' must be an object");
    if (!r.stream) reject("stream_options", "'stream_options' is only allowed when 'stream' is true");
    if (auto u = so->find("include_usage"); u != so->end() && !u->is_null()) {
      if (!u->is_boolean()) reject("stream_options.include_usage", "'stream_options.include_usage' must be a boolean");
      r.include_usage = u->get<bool>();
    }
  }
  r.ignore_eos = detail::get_bool(body, "ignore_eos").value_or(false);
  r.skip_special_tokens = detail::get_bool(body, "skip_special_tokens").value_or(true);
  r.user = detail::get_string(body, "user").value_or(std::string());
  refuse_unsupported(body, r.n);
}

// `prompt`: a string, an array of token ids, or a batch: an array of strings or of token-id arrays
// (one kind throughout, as OpenAI's API takes them), at most limits.max_prompts.
void read_prompt(const RequestJson& body, const ParseLimits& limits, GenerationRequest& r) {
  const RequestJson* p = field(body, "prompt");
  if (!p) reject("prompt", "'prompt' is required");
  auto text = [](const RequestJson& v, const std::string& where) {
    CompletionPrompt c;
    c.text = v.get<std::string>();
    if (c.text.empty()) reject("prompt", fmt::format("'{}' must not be empty", where));
    return c;
  };
  if (p->is_string()) {
    r.prompts.push_back(text(*p, "prompt"));
    return;
  }
  if (!p->is_array())
    reject("prompt", "'prompt' must be a string, an array of token ids, or an array of strings or of token-id arrays");
  if (p->empty()) reject("prompt", "'prompt' must not be empty");
  const RequestJson& first = p->front();
  if (!first.is_string() && !first.is_array()) {  // one prompt of token ids
    CompletionPrompt c;
    c.tokens = detail::as_token_ids(*p, "prompt", limits.max_prompt_tokens, limits.vocab_size);
    c.is_tokens = true;
    r.prompts.push_back(std::move(c));
    return;
  }
  if (p->size() > limits.max_prompts)
    reject("prompt", fmt::format("'prompt' holds {} prompts; at most {} per request", p->size(), limits.max_prompts));
  for (std::size_t i = 0; i < p->size(); ++i) {
    const RequestJson& e = (*p)[i];
    const std::string where = fmt::format("prompt[{}]", i);
    if (first.is_string()) {
      if (!e.is_string()) reject("prompt", fmt::format("'{}' must be a string, as 'prompt[0]' is", where));
      r.prompts.push_back(text(e, where));
    } else {
      if (!e.is_array()) reject("prompt", fmt::format("'{}' must be an array of token ids, as 'prompt[0]' is", where));
      if (e.empty()) reject("prompt", fmt::format("'{}' must not be empty", where));
      CompletionPrompt c;
      c.tokens = detail::as_token_ids(e, where, limits.max_prompt_tokens, limits.vocab_size);
      c.is_tokens = true;
      r.prompts.push_back(std::move(c));
    }
  }
}

GenerationRequest read_completion(std::string_view text, const ParseLimits& limits) {
  const RequestJson body = detail::read_body(text, limits.max_json_depth);
  GenerationRequest r;
  r.kind = RequestKind::Completion;
  read_common(body, limits, r);
  read_prompt(body, limits, r);
  if (auto k = detail::get_integer(body, "logprobs", 0, limits.max_logprobs)) {
    r.logprobs = true;
    r.top_logprobs = static_cast<int>(*k);
  }
  r.echo = detail::get_bool(body, "echo").value_or(false);
  if (r.max_tokens == 0 && !r.echo)
    reject(r.max_tokens_field, fmt::format("'{}' 0 generates nothing: it is for scoring a prompt, with 'echo'",
                                           r.max_tokens_field));
  return r;
}

GenerationRequest read_chat(std::string_view text, const ParseLimits& limits) {
  const RequestJson body = detail::read_body(text, limits.max_json_depth);
  GenerationRequest r;
  r.kind = RequestKind::Chat;
  read_common(body, limits, r);
  if (r.max_tokens == 0) reject(r.max_tokens_field, fmt::format("'{}' must be at least 1", r.max_tokens_field));
  const RequestJson* messages = field(body, "messages");
  if (!messages) reject("messages", "'messages' is required");
  r.messages = detail::read_messages(*messages, limits.max_messages);
  if (const RequestJson* t = field(body, "tools")) r.tools = detail::read_tools(*t);
  if (const RequestJson* c = field(body, "tool_choice")) r.tool_choice = detail::read_tool_choice(*c, r.tools);
  if (const RequestJson* k = field(body, "chat_template_kwargs"))
    r.chat_template_kwargs = detail::read_chat_template_kwargs(*k);
  r.add_generation_prompt = detail::get_bool(body, "add_generation_prompt").value_or(true);
  r.logprobs = detail::get_bool(body, "logprobs").value_or(false);
  if (auto k = detail::get_integer(body, "top_logprobs", 0, limits.max_logprobs)) {
    if (!r.logprobs) reject("top_logprobs", "'top_logprobs' requires 'logprobs' to be true");
    r.top_logprobs = static_cast<int>(*k);
  }
  return r;
}

}  // namespace

ParseResult<GenerationRequest> parse_completion_request(std::string_view body, const ParseLimits& limits) {
  return detail::guarded<GenerationRequest>([&] { return read_completion(body, limits); });
}

ParseResult<GenerationRequest> parse_chat_request(std::string_view body, const ParseLimits& limits) {
  return detail::guarded<GenerationRequest>([&] { return read_chat(body, limits); });
}

std::optional<ApiError> check_model_served(std::string_view model, std::span<const std::string> served) {
  if (std::find(served.begin(), served.end(), model) != served.end()) return std::nullopt;
  return model_not_found(model);
}

}  // namespace kern::serve
