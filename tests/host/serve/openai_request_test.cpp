#include "kern/serve/openai_request.hpp"

#include <gtest/gtest.h>

#include <string>
#include <variant>

namespace {

using namespace kern::serve;

GenerationRequest completion_ok(const std::string& body, const ParseLimits& limits = {}) {
  auto r = parse_completion_request(body, limits);
  if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << "unexpected error for " << body << ": " << e->message;
  return std::holds_alternative<GenerationRequest>(r) ? std::get<GenerationRequest>(r) : GenerationRequest{};
}

GenerationRequest chat_ok(const std::string& body, const ParseLimits& limits = {}) {
  auto r = parse_chat_request(body, limits);
  if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << "unexpected error for " << body << ": " << e->message;
  return std::holds_alternative<GenerationRequest>(r) ? std::get<GenerationRequest>(r) : GenerationRequest{};
}

ApiError completion_err(const std::string& body, const ParseLimits& limits = {}) {
  auto r = parse_completion_request(body, limits);
  if (std::holds_alternative<GenerationRequest>(r)) ADD_FAILURE() << "accepted: " << body;
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

ApiError chat_err(const std::string& body, const ParseLimits& limits = {}) {
  auto r = parse_chat_request(body, limits);
  if (std::holds_alternative<GenerationRequest>(r)) ADD_FAILURE() << "accepted: " << body;
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

// A completion request with `extra` fields after model and prompt.
std::string cmpl(const std::string& extra) {
  return R"({"model": "m", "prompt": "hi")" + (extra.empty() ? "" : ", " + extra) + "}";
}
std::string chat(const std::string& extra) {
  return R"({"model": "m", "messages": [{"role": "user", "content": "hi"}])" + (extra.empty() ? "" : ", " + extra) + "}";
}

void expect_bad_field(const std::string& extra, const std::string& param) {
  for (bool is_chat : {false, true}) {
    const ApiError e = is_chat ? chat_err(chat(extra)) : completion_err(cmpl(extra));
    EXPECT_EQ(e.status, 400) << extra;
    EXPECT_EQ(e.type, "invalid_request_error") << extra;
    EXPECT_EQ(e.param, param) << extra << " -> " << e.message;
    EXPECT_FALSE(e.message.empty());
  }
}

TEST(ApiErrorBody, NullParamAndCodeWhenEmpty) {
  EXPECT_EQ(error_body(bad_request("bad", "temperature")),
            R"({"error":{"message":"bad","type":"invalid_request_error","param":"temperature","code":null}})");
  EXPECT_EQ(error_body(server_error("boom")), R"({"error":{"message":"boom","type":"server_error","param":null,"code":null}})");
  const ApiError nf = model_not_found("gpt-x");
  EXPECT_EQ(nf.status, 404);
  EXPECT_EQ(error_body(nf),
            R"({"error":{"message":"The model 'gpt-x' does not exist","type":"not_found_error","param":"model","code":"model_not_found"}})");
  EXPECT_EQ(unauthorized("no").status, 401);
  EXPECT_EQ(unauthorized("no").type, "authentication_error");
  EXPECT_EQ(rate_limited("slow").status, 429);
  EXPECT_EQ(rate_limited("slow").type, "rate_limit_error");
  EXPECT_EQ(service_unavailable("busy").status, 503);
  EXPECT_EQ(service_unavailable("busy").type, "service_unavailable");
  // A message quoting bytes that are not UTF-8 still makes a body.
  EXPECT_EQ(error_body(bad_request("x\xff")), R"({"error":{"message":"x)" "\xEF\xBF\xBD" R"(","type":"invalid_request_error","param":null,"code":null}})");
}

TEST(ParseCompletion, Defaults) {
  const GenerationRequest r = completion_ok(cmpl(""));
  EXPECT_EQ(r.kind, RequestKind::Completion);
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "hi");
  EXPECT_FALSE(r.prompts[0].is_tokens);
  EXPECT_FALSE(r.max_tokens);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_FALSE(r.temperature);
  EXPECT_FALSE(r.top_p);
  EXPECT_FALSE(r.top_k);
  EXPECT_FALSE(r.min_p);
  EXPECT_FALSE(r.presence_penalty);
  EXPECT_FALSE(r.frequency_penalty);
  EXPECT_FALSE(r.repetition_penalty);
  EXPECT_FALSE(r.seed);
  EXPECT_EQ(r.n, 1);
  EXPECT_FALSE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 0);
  EXPECT_FALSE(r.echo);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_FALSE(r.ignore_eos);
  EXPECT_TRUE(r.skip_special_tokens);
  EXPECT_TRUE(r.user.empty());
}

TEST(ParseCompletion, AllFieldsRead) {
  const GenerationRequest r = completion_ok(cmpl(
      R"("max_tokens": 7, "stop": ["a", "bc"], "stop_token_ids": [5, 6], "temperature": 0.5, "top_p": 0.9,
         "top_k": 40, "min_p": 0.05, "presence_penalty": -1.5, "frequency_penalty": 2, "repetition_penalty": 1.1,
         "seed": -3, "n": 3, "logprobs": 4, "echo": true, "stream": true, "stream_options": {"include_usage": true},
         "ignore_eos": true, "skip_special_tokens": false, "user": "u1", "some_extension": {"x": 1})"));
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(r.stop_token_ids, (std::vector<std::int32_t>{5, 6}));
  EXPECT_EQ(r.temperature, 0.5);
  EXPECT_EQ(r.top_p, 0.9);
  EXPECT_EQ(r.top_k, 40);
  EXPECT_EQ(r.min_p, 0.05);
  EXPECT_EQ(r.presence_penalty, -1.5);
  EXPECT_EQ(r.frequency_penalty, 2.0);
  EXPECT_EQ(r.repetition_penalty, 1.1);
  EXPECT_EQ(r.seed, -3);
  EXPECT_EQ(r.n, 3);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 4);
  EXPECT_TRUE(r.echo);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.ignore_eos);
  EXPECT_FALSE(r.skip_special_tokens);
  EXPECT_EQ(r.user, "u1");
}

TEST(ParseCompletion, NullMeansAbsent) {
  const GenerationRequest r = completion_ok(cmpl(R"("temperature": null, "max_tokens": null, "stop": null, "n": null, "logprobs": null, "stream_options": null)"));
  EXPECT_FALSE(r.temperature);
  EXPECT_FALSE(r.max_tokens);
  EXPECT_EQ(r.n, 1);
  EXPECT_FALSE(r.logprobs);
}

TEST(ParseCompletion, PromptForms) {
  EXPECT_EQ(completion_ok(R"({"model": "m", "prompt": ["one string"]})").prompts.at(0).text, "one string");
  const GenerationRequest ids = completion_ok(R"({"model": "m", "prompt": [1, 2.0, 151643]})");
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_TRUE(ids.prompts[0].is_tokens);
  EXPECT_EQ(ids.prompts[0].tokens, (std::vector<std::int32_t>{1, 2, 151643}));
  EXPECT_TRUE(ids.prompts[0].text.empty());

  EXPECT_EQ(completion_err(R"({"model": "m"})").param, "prompt");
  EXPECT_EQ(completion_err(R"({"model": "m", "prompt": null})").param, "prompt");
  EXPECT_EQ(completion_err(R"({"model": "m", "prompt": ""})").param, "prompt");
  EXPECT_EQ(completion_err(R"({"model": "m", "prompt": []})").param, "prompt");
  EXPECT_EQ(completion_err(R"({"model": "m", "prompt": [""]})").param, "prompt");
  EXPECT_EQ(completion_err(R"({"model": "m", "prompt": 5})").param, "prompt");
  EXPECT_EQ(completion_err(R"({"model": "m", "prompt": {"a": 1}})").param, "prompt");
  // A batch: strings, or token-id arrays, one kind throughout, each prompt non-empty.
  const GenerationRequest texts = completion_ok(R"({"model": "m", "prompt": ["a", "b", "c"]})");
  ASSERT_EQ(texts.prompts.size(), 3u);
  EXPECT_EQ(texts.prompts[2].text, "c");
  EXPECT_FALSE(texts.prompts[1].is_tokens);
  const GenerationRequest lists = completion_ok(R"({"model": "m", "prompt": [[1, 2], [3]]})");
  ASSERT_EQ(lists.prompts.size(), 2u);
  EXPECT_TRUE(lists.prompts[1].is_tokens);
  EXPECT_EQ(lists.prompts[0].tokens, (std::vector<std::int32_t>{1, 2}));
  EXPECT_EQ(lists.prompts[1].tokens, (std::vector<std::int32_t>{3}));
  const ApiError mixed = completion_err(R"({"model": "m", "prompt": ["a", [1]]})");
  EXPECT_EQ(mixed.param, "prompt");
  EXPECT_NE(mixed.message.find("prompt[1]"), std::string::npos) << mixed.message;
  EXPECT_EQ(completion_err(R"({"model": "m", "prompt": [[1], "a"]})").param, "prompt");
  EXPECT_EQ(completion_err(R"({"model": "m", "prompt": [[1], 2]})").param, "prompt");
  EXPECT_EQ(completion_err(R"({"model": "m", "prompt": ["a", ""]})").param, "prompt");
  EXPECT_EQ(completion_err(R"({"model": "m", "prompt": [[1], []]})").param, "prompt");
  EXPECT_EQ(completion_err(R"({"model": "m", "prompt": [[1], [2, -1]]})").param, "prompt[1][1]");
  EXPECT_EQ(completion_err(R"({"model": "m", "prompt": [[[1]]]})").param, "prompt[0][0]");
  EXPECT_EQ(completion_err(R"({"model": "m", "prompt": [1, "a"]})").param, "prompt[1]");
  EXPECT_EQ(completion_err(R"({"model": "m", "prompt": [1, -1]})").param, "prompt[1]");
  EXPECT_EQ(completion_err(R"({"model": "m", "prompt": [1.5]})").param, "prompt[0]");
  EXPECT_EQ(completion_err(R"({"model": "m", "prompt": [2147483648]})").param, "prompt[0]");
  EXPECT_EQ(completion_err(R"({"model": "m", "prompt": [1, true]})").param, "prompt[1]");

  ParseLimits small;
  small.max_prompt_tokens = 3;
  small.vocab_size = 100;
  completion_ok(R"({"model": "m", "prompt": [0, 99, 5]})", small);
  EXPECT_EQ(completion_err(R"({"model": "m", "prompt": [0, 100]})", small).param, "prompt[1]");
  EXPECT_EQ(completion_err(R"({"model": "m", "prompt": [1, 2, 3, 4]})", small).param, "prompt");
  EXPECT_EQ(completion_err(R"({"model": "m", "prompt": [[1], [1, 2, 3, 4]]})", small).param, "prompt[1]");
  EXPECT_EQ(completion_err(R"({"model": "m", "prompt": [[1], [100]]})", small).param, "prompt[1][0]");
  small.max_prompts = 2;
  completion_ok(R"({"model": "m", "prompt": ["a", "b"]})", small);
  const ApiError many = completion_err(R"({"model": "m", "prompt": ["a", "b", "c"]})", small);
  EXPECT_EQ(many.param, "prompt");
  EXPECT_NE(many.message.find("at most 2"), std::string::npos) << many.message;
}

TEST(ParseRequest, ModelRequired) {
  EXPECT_EQ(completion_err(R"({"prompt": "x"})").param, "model");
  EXPECT_EQ(completion_err(R"({"model": null, "prompt": "x"})").param, "model");
  EXPECT_EQ(completion_err(R"({"model": 3, "prompt": "x"})").param, "model");
  EXPECT_EQ(completion_err(R"({"model": "", "prompt": "x"})").param, "model");
  EXPECT_EQ(chat_err(R"({"messages": [{"role": "user", "content": "x"}]})").param, "model");
  const std::vector<std::string> served = {"a", "b"};
  EXPECT_FALSE(check_model_served("b", served));
  auto e = check_model_served("c", served);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 404);
  EXPECT_EQ(e->code, "model_not_found");
}

TEST(ParseRequest, BodyErrors) {
  for (const char* body : {"", "{", "[]", "3", "\"x\"", "null", "{\"model\": \"m\",}", "{\"a\":1}{}", "{'a': 1}"}) {
    const ApiError e = completion_err(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.type, "invalid_request_error");
  }
  // Syntax errors carry where.
  EXPECT_NE(completion_err("{\n\"model\": x}").message.find("line 2"), std::string::npos);
  // Duplicate keys are refused, even of unknown fields.
  const ApiError dup = completion_err(R"({"model": "m", "prompt": "a", "prompt": "b"})");
  EXPECT_NE(dup.message.find("duplicate key"), std::string::npos) << dup.message;
  EXPECT_EQ(completion_err(R"({"model": "m", "prompt": "a", "x": {"k": 1, "k": 2}})").status, 400);
  // Nesting is bounded.
  ParseLimits shallow;
  shallow.max_json_depth = 4;
  EXPECT_EQ(completion_err(cmpl(R"("x": [[[[[1]]]]])"), shallow).status, 400);
}

TEST(ParseRequest, InvalidUtf8Refused) {
  // Each of these is ill-formed UTF-8 inside a string: a stray continuation byte, a truncated
  // sequence, an overlong encoding, an encoded surrogate, a code point above U+10FFFF, 0xFF.
  for (const std::string bad : {"\x80", "\xC3", "\xC0\xAF", "\xE0\x80\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xFF",
                                "a\xE2\x82"}) {
    const ApiError e = completion_err(R"({"model": "m", "prompt": ")" + bad + R"("})");
    EXPECT_EQ(e.status, 400);
    const ApiError k = completion_err(R"({"model": "m", "prompt": "x", ")" + bad + R"(": 1})");
    EXPECT_EQ(k.status, 400);
  }
  // Lone surrogates written as escapes are refused too.
  EXPECT_EQ(completion_err(R"({"model": "m", "prompt": "\ud800"})").status, 400);
  EXPECT_EQ(completion_err(R"({"model": "m", "prompt": "\udc00x"})").status, 400);
  // Well-formed multi-byte text and a surrogate pair are fine.
  EXPECT_EQ(completion_ok(R"({"model": "m", "prompt": "é€😀\ud83d\ude00"})").prompts.at(0).text, "é€😀😀");
}

TEST(ParseRequest, TypeErrorsNameTheField) {
  expect_bad_field(R"("max_tokens": "5")", "max_tokens");
  expect_bad_field(R"("max_tokens": true)", "max_tokens");
  expect_bad_field(R"("max_completion_tokens": [1])", "max_completion_tokens");
  expect_bad_field(R"("stop": 3)", "stop");
  expect_bad_field(R"("stop": {"a": 1})", "stop");
  expect_bad_field(R"("stop": ["a", 1])", "stop[1]");
  expect_bad_field(R"("stop_token_ids": 3)", "stop_token_ids");
  expect_bad_field(R"("stop_token_ids": ["a"])", "stop_token_ids[0]");
  expect_bad_field(R"("temperature": "0.5")", "temperature");
  expect_bad_field(R"("temperature": false)", "temperature");
  expect_bad_field(R"("top_p": [])", "top_p");
  expect_bad_field(R"("top_k": 1.5)", "top_k");
  expect_bad_field(R"("top_k": "5")", "top_k");
  expect_bad_field(R"("min_p": {})", "min_p");
  expect_bad_field(R"("presence_penalty": "1")", "presence_penalty");
  expect_bad_field(R"("frequency_penalty": true)", "frequency_penalty");
  expect_bad_field(R"("repetition_penalty": "1")", "repetition_penalty");
  expect_bad_field(R"("seed": 1.5)", "seed");
  expect_bad_field(R"("seed": "1")", "seed");
  expect_bad_field(R"("n": 2.5)", "n");
  expect_bad_field(R"("n": "2")", "n");
  expect_bad_field(R"("stream": 1)", "stream");
  expect_bad_field(R"("stream": "true")", "stream");
  expect_bad_field(R"("stream": true, "stream_options": true)", "stream_options");
  expect_bad_field(R"("stream": true, "stream_options": {"include_usage": 1})", "stream_options.include_usage");
  expect_bad_field(R"("ignore_eos": "no")", "ignore_eos");
  expect_bad_field(R"("skip_special_tokens": 0)", "skip_special_tokens");
  expect_bad_field(R"("user": 5)", "user");
  EXPECT_EQ(completion_err(cmpl(R"("logprobs": true)")).param, "logprobs");
  EXPECT_EQ(completion_err(cmpl(R"("logprobs": 1.5)")).param, "logprobs");
  EXPECT_EQ(completion_err(cmpl(R"("echo": 1)")).param, "echo");
  EXPECT_EQ(chat_err(chat(R"("logprobs": 1)")).param, "logprobs");
  EXPECT_EQ(chat_err(chat(R"("logprobs": true, "top_logprobs": "3")")).param, "top_logprobs");
  EXPECT_EQ(chat_err(chat(R"("add_generation_prompt": "yes")")).param, "add_generation_prompt");
  EXPECT_EQ(chat_err(chat(R"("chat_template_kwargs": [])")).param, "chat_template_kwargs");
}

// max_tokens 0 scores a prompt: completions with echo only.
TEST(ParseRequest, MaxTokensZeroOnlyWithEcho) {
  EXPECT_EQ(completion_ok(cmpl(R"("max_tokens": 0, "echo": true, "logprobs": 2)")).max_tokens, 0);
  EXPECT_EQ(completion_ok(cmpl(R"("max_completion_tokens": 0, "echo": true)")).max_tokens, 0);
  const ApiError no_echo = completion_err(cmpl(R"("max_tokens": 0, "echo": false)"));
  EXPECT_EQ(no_echo.param, "max_tokens");
  EXPECT_NE(no_echo.message.find("echo"), std::string::npos) << no_echo.message;
  EXPECT_EQ(completion_err(cmpl(R"("max_completion_tokens": 0)")).param, "max_completion_tokens");
  EXPECT_EQ(chat_err(chat(R"("max_tokens": 0, "echo": true)")).param, "max_tokens");
}

TEST(ParseRequest, RangeErrors) {
  expect_bad_field(R"("max_tokens": 0)", "max_tokens");  // 0 only with echo on completions (below)
  expect_bad_field(R"("max_tokens": -1)", "max_tokens");
  expect_bad_field(R"("max_tokens": 1e300)", "max_tokens");
  expect_bad_field(R"("max_tokens": 18446744073709551615)", "max_tokens");
  expect_bad_field(R"("max_completion_tokens": 0)", "max_completion_tokens");
  expect_bad_field(R"("max_tokens": 5, "max_completion_tokens": 6)", "max_completion_tokens");
  expect_bad_field(R"("temperature": -0.01)", "temperature");
  expect_bad_field(R"("temperature": 2.01)", "temperature");
  expect_bad_field(R"("top_p": 0)", "top_p");
  expect_bad_field(R"("top_p": 1.0001)", "top_p");
  expect_bad_field(R"("top_k": -2)", "top_k");
  expect_bad_field(R"("top_k": 2147483648)", "top_k");
  expect_bad_field(R"("min_p": -0.1)", "min_p");
  expect_bad_field(R"("min_p": 1.1)", "min_p");
  expect_bad_field(R"("presence_penalty": -2.5)", "presence_penalty");
  expect_bad_field(R"("frequency_penalty": 2.5)", "frequency_penalty");
  expect_bad_field(R"("repetition_penalty": 0)", "repetition_penalty");
  expect_bad_field(R"("repetition_penalty": 10.5)", "repetition_penalty");
  expect_bad_field(R"("seed": 9223372036854775808)", "seed");
  expect_bad_field(R"("seed": 1e19)", "seed");
  expect_bad_field(R"("n": 0)", "n");
  expect_bad_field(R"("n": 9)", "n");
  expect_bad_field(R"("stop": [""])", "stop[0]");
  expect_bad_field(R"("stop": "")", "stop");
  expect_bad_field(R"("stop_token_ids": [-1])", "stop_token_ids[0]");
  EXPECT_EQ(completion_err(cmpl(R"("logprobs": 21)")).param, "logprobs");
  EXPECT_EQ(completion_err(cmpl(R"("logprobs": -1)")).param, "logprobs");
  EXPECT_EQ(chat_err(chat(R"("logprobs": true, "top_logprobs": 21)")).param, "top_logprobs");
  EXPECT_EQ(chat_err(chat(R"("logprobs": true, "top_logprobs": -1)")).param, "top_logprobs");
}

TEST(ParseRequest, Bounds) {
  const GenerationRequest r = completion_ok(cmpl(
      R"("temperature": 0, "top_p": 1, "min_p": 0, "presence_penalty": -2, "frequency_penalty": 2,
         "repetition_penalty": 10, "n": 8, "max_tokens": 1.0, "seed": 9223372036854775807)"));
  EXPECT_EQ(r.temperature, 0.0);
  EXPECT_EQ(r.top_p, 1.0);
  EXPECT_EQ(r.n, 8);
  EXPECT_EQ(r.max_tokens, 1);
  EXPECT_EQ(r.seed, INT64_MAX);
  EXPECT_EQ(completion_ok(cmpl(R"("temperature": 2)")).temperature, 2.0);
  EXPECT_EQ(completion_ok(cmpl(R"("seed": -9223372036854775808)")).seed, INT64_MIN);
  // top_k: -1 and 0 both mean off.
  EXPECT_EQ(completion_ok(cmpl(R"("top_k": -1)")).top_k, 0);
  EXPECT_EQ(completion_ok(cmpl(R"("top_k": 0)")).top_k, 0);
  EXPECT_EQ(completion_ok(cmpl(R"("top_k": 1)")).top_k, 1);
  // The n limit is the server's to set.
  ParseLimits four;
  four.max_n = 4;
  EXPECT_EQ(completion_ok(cmpl(R"("n": 4)"), four).n, 4);
  EXPECT_EQ(completion_err(cmpl(R"("n": 5)"), four).param, "n");
  // Equal max_tokens and max_completion_tokens are fine; either alone sets the limit.
  EXPECT_EQ(chat_ok(chat(R"("max_tokens": 5, "max_completion_tokens": 5)")).max_tokens, 5);
  EXPECT_EQ(chat_ok(chat(R"("max_completion_tokens": 9)")).max_tokens, 9);
  EXPECT_EQ(completion_ok(cmpl(R"("max_completion_tokens": 9)")).max_tokens, 9);
  EXPECT_EQ(completion_ok(cmpl(R"("logprobs": 0)")).logprobs, true);
  EXPECT_EQ(completion_ok(cmpl(R"("logprobs": 20)")).top_logprobs, 20);
}

TEST(ParseRequest, StopLimits) {
  std::string sixteen = "[";
  for (int i = 0; i < 16; ++i) sixteen += (i ? ",\"s" : "\"s") + std::to_string(i) + "\"";
  EXPECT_EQ(completion_ok(cmpl("\"stop\": " + sixteen + "]")).stop.size(), 16u);
  EXPECT_EQ(completion_err(cmpl("\"stop\": " + sixteen + ", \"x\"]")).param, "stop");
  EXPECT_EQ(completion_ok(cmpl(R"("stop": "\n\n")")).stop, (std::vector<std::string>{"\n\n"}));
  EXPECT_TRUE(completion_ok(cmpl(R"("stop": [])")).stop.empty());
  ParseLimits tiny;
  tiny.max_stop_bytes = 3;
  tiny.max_stop_token_ids = 2;
  completion_ok(cmpl(R"("stop": "abc")"), tiny);
  EXPECT_EQ(completion_err(cmpl(R"("stop": "abcd")"), tiny).param, "stop");
  EXPECT_EQ(completion_err(cmpl(R"("stop_token_ids": [1, 2, 3])"), tiny).param, "stop_token_ids");
}

TEST(ParseRequest, StreamOptionsNeedStream) {
  EXPECT_EQ(completion_err(cmpl(R"("stream_options": {"include_usage": true})")).param, "stream_options");
  EXPECT_EQ(chat_err(chat(R"("stream": false, "stream_options": {"include_usage": true})")).param, "stream_options");
  const GenerationRequest r = chat_ok(chat(R"("stream": true, "stream_options": {"include_usage": false})"));
  EXPECT_TRUE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_TRUE(chat_ok(chat(R"("stream": true, "stream_options": {"include_usage": true, "continuous_usage_stats": true})")).include_usage);
}

TEST(ParseRequest, UnsupportedFieldsThatChangeTheAnswer) {
  expect_bad_field(R"("best_of": 3)", "best_of");
  completion_ok(cmpl(R"("best_of": 1)"));
  completion_ok(cmpl(R"("best_of": 2, "n": 2)"));
  completion_ok(cmpl(R"("logit_bias": {})"));
  expect_bad_field(R"("suffix": "end")", "suffix");
  completion_ok(cmpl(R"("suffix": "")"));
  expect_bad_field(R"("response_format": {"type": "json_object"})", "response_format");
  expect_bad_field(R"("response_format": "json")", "response_format");
  chat_ok(chat(R"("response_format": {"type": "text"})"));
}

TEST(ParseRequest, LogitBias) {
  // ids ascending whatever the client's key order; values as floats
  const GenerationRequest r = completion_ok(cmpl(R"("logit_bias": {"151643": -100, "5": 10, "0": 0.5})"));
  EXPECT_EQ(r.logit_bias, (std::vector<std::pair<std::int32_t, float>>{{0, 0.5f}, {5, 10.0f}, {151643, -100.0f}}));
  EXPECT_EQ(chat_ok(chat(R"("logit_bias": {"7": 100})")).logit_bias.size(), 1u);
  EXPECT_TRUE(completion_ok(cmpl(R"("logit_bias": null)")).logit_bias.empty());
  expect_bad_field(R"("logit_bias": [1, 2])", "logit_bias");
  expect_bad_field(R"("logit_bias": {"-1": 5})", "logit_bias.-1");
  expect_bad_field(R"("logit_bias": {"abc": 5})", "logit_bias.abc");
  expect_bad_field(R"("logit_bias": {"1.5": 5})", "logit_bias.1.5");
  expect_bad_field(R"("logit_bias": {"": 5})", "logit_bias.");
  expect_bad_field(R"("logit_bias": {"99999999999": 5})", "logit_bias.99999999999");
  expect_bad_field(R"("logit_bias": {"5": 100.5})", "logit_bias.5");
  expect_bad_field(R"("logit_bias": {"5": -101})", "logit_bias.5");
  expect_bad_field(R"("logit_bias": {"5": "10"})", "logit_bias.5");
  expect_bad_field(R"("logit_bias": {"5": null})", "logit_bias.5");
  expect_bad_field(R"("logit_bias": {"5": 1, "05": 2})", "logit_bias");  // one id, two keys
  ParseLimits limits;
  limits.vocab_size = 100;
  completion_ok(cmpl(R"("logit_bias": {"99": 1})"), limits);
  EXPECT_EQ(completion_err(cmpl(R"("logit_bias": {"100": 1})"), limits).param, "logit_bias.100");
  limits.max_logit_bias = 2;
  EXPECT_EQ(completion_err(cmpl(R"("logit_bias": {"1": 1, "2": 1, "3": 1})"), limits).param, "logit_bias");
}

TEST(ParseChat, Defaults) {
  const GenerationRequest r = chat_ok(chat(""));
  EXPECT_EQ(r.kind, RequestKind::Chat);
  EXPECT_TRUE(r.add_generation_prompt);
  EXPECT_TRUE(r.tools.is_null());
  EXPECT_TRUE(r.tool_choice.is_null());
  EXPECT_TRUE(r.chat_template_kwargs.is_object());
  EXPECT_TRUE(r.chat_template_kwargs.empty());
  EXPECT_FALSE(r.logprobs);
  EXPECT_EQ(r.messages.dump(), R"([{"role":"user","content":"hi"}])");
}

TEST(ParseChat, Logprobs) {
  const GenerationRequest r = chat_ok(chat(R"("logprobs": true, "top_logprobs": 5)"));
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 5);
  EXPECT_TRUE(chat_ok(chat(R"("logprobs": true)")).logprobs);
  EXPECT_EQ(chat_err(chat(R"("top_logprobs": 2)")).param, "top_logprobs");
  EXPECT_EQ(chat_err(chat(R"("logprobs": false, "top_logprobs": 0)")).param, "top_logprobs");
  chat_ok(chat(R"("logprobs": false, "top_logprobs": null)"));
}

TEST(ParseChat, MessagesValidated) {
  EXPECT_EQ(chat_err(R"({"model": "m"})").param, "messages");
  EXPECT_EQ(chat_err(R"({"model": "m", "messages": []})").param, "messages");
  EXPECT_EQ(chat_err(R"({"model": "m", "messages": {"role": "user"}})").param, "messages");
  EXPECT_EQ(chat_err(R"({"model": "m", "messages": ["hi"]})").param, "messages[0]");
  EXPECT_EQ(chat_err(R"({"model": "m", "messages": [{"content": "hi"}]})").param, "messages[0].role");
  EXPECT_EQ(chat_err(R"({"model": "m", "messages": [{"role": 1, "content": "hi"}]})").param, "messages[0].role");
  EXPECT_EQ(chat_err(R"({"model": "m", "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": 5}]})").param,
            "messages[1].content");
  EXPECT_EQ(chat_err(R"({"model": "m", "messages": [{"role": "assistant", "tool_calls": {}}]})").param, "messages[0].tool_calls");
  EXPECT_EQ(chat_err(R"({"model": "m", "messages": [{"role": "assistant", "tool_calls": [1]}]})").param,
            "messages[0].tool_calls[0]");
  ParseLimits two;
  two.max_messages = 2;
  EXPECT_EQ(chat_err(R"({"model": "m", "messages": [{"role": "user"}, {"role": "user"}, {"role": "user"}]})", two).param,
            "messages");
}

TEST(ParseChat, ContentForms) {
  const GenerationRequest r = chat_ok(R"({"model": "m", "messages": [
      {"role": "system", "content": "s", "name": "sys"},
      {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
      {"role": "tool", "content": "42", "tool_call_id": "c1"},
      {"role": "assistant", "reasoning_content": "hm"},
      {"role": "user", "content": []}]})");
  ASSERT_EQ(r.messages.size(), 6u);
  EXPECT_EQ(r.messages[0].dump(), R"({"role":"system","content":"s","name":"sys"})");
  EXPECT_EQ(r.messages[1]["content"], "one\ntwo");
  EXPECT_TRUE(r.messages[2]["content"].is_null());
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(r.messages[3]["tool_call_id"], "c1");
  EXPECT_FALSE(r.messages[4].contains("content"));
  EXPECT_EQ(r.messages[5]["content"], "");

  const std::string head = R"({"model": "m", "messages": [{"role": "user", "content": )";
  const ApiError image = chat_err(head + R"([{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "x"}}]}]})");
  EXPECT_EQ(image.param, "messages[0].content[1].type");
  EXPECT_NE(image.message.find("image_url"), std::string::npos);
  EXPECT_EQ(chat_err(head + R"([{"text": "a"}]}]})").param, "messages[0].content[0].type");
  EXPECT_EQ(chat_err(head + R"([{"type": "text"}]}]})").param, "messages[0].content[0].text");
  EXPECT_EQ(chat_err(head + R"([{"type": "text", "text": 3}]}]})").param, "messages[0].content[0].text");
  EXPECT_EQ(chat_err(head + R"(["plain"]}]})").param, "messages[0].content[0]");
}

TEST(ParseChat, KeyOrderKept) {
  // Chat templates print tools with tojson: the client's key order must survive.
  const GenerationRequest r = chat_ok(chat(
      R"("tools": [{"type": "function", "function": {"name": "get", "parameters": {"type": "object", "properties": {"z": {}, "a": {}}}, "description": "d"}}],
         "chat_template_kwargs": {"enable_thinking": false, "b": 1, "a": 2})"));
  EXPECT_EQ(r.tools.dump(),
            R"([{"type":"function","function":{"name":"get","parameters":{"type":"object","properties":{"z":{},"a":{}}},"description":"d"}}])");
  EXPECT_EQ(r.chat_template_kwargs.dump(), R"({"enable_thinking":false,"b":1,"a":2})");
}

TEST(ParseChat, ToolsAndToolChoice) {
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "get"}}, {"type": "function", "function": {"name": "put", "parameters": {}}}])";
  EXPECT_EQ(chat_ok(chat(tools + R"(, "tool_choice": "auto")")).tool_choice, "auto");
  EXPECT_EQ(chat_ok(chat(tools + R"(, "tool_choice": "required")")).tool_choice, "required");
  EXPECT_EQ(chat_ok(chat(R"("tool_choice": "none")")).tool_choice, "none");
  EXPECT_EQ(chat_ok(chat(tools + R"(, "tool_choice": {"type": "function", "function": {"name": "put"}})")).tool_choice["function"]["name"],
            "put");
  EXPECT_EQ(chat_err(chat(tools + R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}})")).param,
            "tool_choice.function.name");
  EXPECT_EQ(chat_err(chat(R"("tool_choice": "required")")).param, "tool_choice");
  EXPECT_EQ(chat_err(chat(tools + R"(, "tool_choice": "always")")).param, "tool_choice");
  EXPECT_EQ(chat_err(chat(tools + R"(, "tool_choice": 1)")).param, "tool_choice");
  EXPECT_EQ(chat_err(chat(tools + R"(, "tool_choice": {"type": "x", "function": {"name": "get"}})")).param, "tool_choice.type");
  EXPECT_EQ(chat_err(chat(tools + R"(, "tool_choice": {"type": "function"})")).param, "tool_choice.function");
  EXPECT_EQ(chat_err(chat(R"("tools": {})")).param, "tools");
  EXPECT_EQ(chat_err(chat(R"("tools": [1])")).param, "tools[0]");
  EXPECT_EQ(chat_err(chat(R"("tools": [{"type": "retrieval"}])")).param, "tools[0].type");
  EXPECT_EQ(chat_err(chat(R"("tools": [{"type": "function"}])")).param, "tools[0].function");
  EXPECT_EQ(chat_err(chat(R"("tools": [{"type": "function", "function": {"name": ""}}])")).param, "tools[0].function.name");
  EXPECT_EQ(chat_err(chat(R"("tools": [{"type": "function", "function": {"name": "f", "parameters": []}}])")).param,
            "tools[0].function.parameters");
  EXPECT_TRUE(chat_ok(chat(R"("tools": [])")).tools.empty());
}

TEST(ParseChat, AddGenerationPrompt) {
  EXPECT_FALSE(chat_ok(chat(R"("add_generation_prompt": false)")).add_generation_prompt);
}

}  // namespace
