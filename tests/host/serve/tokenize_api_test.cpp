#include "kern/serve/tokenize_api.hpp"

#include <gtest/gtest.h>

#include <string>
#include <variant>

namespace {

using namespace kern::serve;

TokenizeRequest tokenize_ok(const std::string& body) {
  auto r = parse_tokenize_request(body);
  if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << body << ": " << e->message;
  return std::holds_alternative<TokenizeRequest>(r) ? std::get<TokenizeRequest>(r) : TokenizeRequest{};
}

ApiError tokenize_err(const std::string& body) {
  auto r = parse_tokenize_request(body);
  if (!std::holds_alternative<ApiError>(r)) {
    ADD_FAILURE() << "accepted: " << body;
    return {};
  }
  return std::get<ApiError>(r);
}

TEST(Tokenize, PromptForm) {
  const TokenizeRequest r = tokenize_ok(R"({"model": "m", "prompt": "hello"})");
  EXPECT_FALSE(r.is_chat);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt, "hello");
  EXPECT_TRUE(r.add_special_tokens);
  EXPECT_FALSE(tokenize_ok(R"({"prompt": "", "add_special_tokens": false})").add_special_tokens);
  EXPECT_EQ(tokenize_ok(R"({"prompt": "x"})").model, "");
}

TEST(Tokenize, MessagesForm) {
  const TokenizeRequest r = tokenize_ok(
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]}], "add_generation_prompt": false,
          "chat_template_kwargs": {"enable_thinking": true}, "tools": [{"type": "function", "function": {"name": "f"}}]})");
  EXPECT_TRUE(r.is_chat);
  EXPECT_EQ(r.messages[0]["content"], "a");
  EXPECT_FALSE(r.add_generation_prompt);
  EXPECT_FALSE(r.add_special_tokens);  // a chat template writes its own
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], true);
  EXPECT_EQ(r.tools.size(), 1u);
  EXPECT_TRUE(tokenize_ok(R"({"messages": [{"role": "user", "content": "a"}]})").add_generation_prompt);
  EXPECT_TRUE(tokenize_ok(R"({"messages": [{"role": "user", "content": "a"}], "add_special_tokens": true})").add_special_tokens);
}

TEST(Tokenize, Errors) {
  EXPECT_EQ(tokenize_err(R"({"model": "m"})").param, "prompt");
  EXPECT_EQ(tokenize_err(R"({"prompt": "a", "messages": [{"role": "user"}]})").param, "messages");
  EXPECT_EQ(tokenize_err(R"({"prompt": [1, 2]})").param, "prompt");
  EXPECT_EQ(tokenize_err(R"({"prompt": "a", "model": 1})").param, "model");
  EXPECT_EQ(tokenize_err(R"({"prompt": "a", "add_special_tokens": "yes"})").param, "add_special_tokens");
  EXPECT_EQ(tokenize_err(R"({"messages": []})").param, "messages");
  EXPECT_EQ(tokenize_err(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})").param,
            "messages[0].content[0].type");
  EXPECT_EQ(tokenize_err("{\"prompt\": \"\xC3\"}").status, 400);
}

TEST(Detokenize, Parse) {
  auto r = parse_detokenize_request(R"({"model": "m", "tokens": [1, 2, 3.0]})");
  ASSERT_TRUE(std::holds_alternative<DetokenizeRequest>(r));
  EXPECT_EQ(std::get<DetokenizeRequest>(r).tokens, (std::vector<std::int32_t>{1, 2, 3}));
  EXPECT_EQ(std::get<DetokenizeRequest>(r).model, "m");
  auto empty = parse_detokenize_request(R"({"tokens": []})");
  ASSERT_TRUE(std::holds_alternative<DetokenizeRequest>(empty));
  EXPECT_TRUE(std::get<DetokenizeRequest>(empty).tokens.empty());
  for (const auto& [body, param] : std::vector<std::pair<std::string, std::string>>{
           {R"({})", "tokens"},
           {R"({"tokens": "1 2"})", "tokens"},
           {R"({"tokens": [1, -2]})", "tokens[1]"},
           {R"({"tokens": [1, 0.5]})", "tokens[1]"},
           {R"({"tokens": [[1]]})", "tokens[0]"}}) {
    auto e = parse_detokenize_request(body);
    ASSERT_TRUE(std::holds_alternative<ApiError>(e)) << body;
    EXPECT_EQ(std::get<ApiError>(e).param, param) << body;
  }
  ParseLimits vocab;
  vocab.vocab_size = 10;
  auto big = parse_detokenize_request(R"({"tokens": [9, 10]})", vocab);
  ASSERT_TRUE(std::holds_alternative<ApiError>(big));
  EXPECT_EQ(std::get<ApiError>(big).param, "tokens[1]");
}

TEST(TokenizeBodies, Shapes) {
  const std::vector<std::int32_t> ids = {9707, 11, 1879};
  EXPECT_EQ(tokenize_body(ids, 40960), R"({"tokens":[9707,11,1879],"count":3,"max_model_len":40960})");
  EXPECT_EQ(tokenize_body({}, 8), R"({"tokens":[],"count":0,"max_model_len":8})");
  EXPECT_EQ(detokenize_body("héllo \"q\"\n"), R"({"prompt":"héllo \"q\"\n"})");
  // Ids may decode to part of a character.
  EXPECT_EQ(detokenize_body("a\xE2\x82"), "{\"prompt\":\"a\xEF\xBF\xBD\"}");
}

}  // namespace
