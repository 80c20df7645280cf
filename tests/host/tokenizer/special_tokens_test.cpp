// Added and special tokens of the real Qwen3 file.
#include <gtest/gtest.h>

#include "qwen3_fixture.hpp"

namespace kern::test {
namespace {

std::vector<tokenizer::TokenId> concat(std::initializer_list<std::vector<tokenizer::TokenId>> parts) {
  std::vector<tokenizer::TokenId> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(TokenizerSpecial, LookupByContent) {
  KERN_REQUIRE_QWEN3(tok);
  EXPECT_EQ(tok->token_id("<|endoftext|>"), 151643);
  EXPECT_EQ(tok->token_id("<|im_start|>"), 151644);
  EXPECT_EQ(tok->require_token_id("<|im_end|>"), 151645);
  EXPECT_TRUE(tok->is_special(151645));
  const tokenizer::TokenId tool = tok->require_token_id("<tool_call>");
  EXPECT_FALSE(tok->is_special(tool));  // added but not special
  EXPECT_TRUE(tok->contains(tool));
  EXPECT_EQ(tok->token_id("hello"), tok->encode("hello").front());  // model tokens by their bytes
  EXPECT_FALSE(tok->token_id("<|no_such_token|>").has_value());
  try {
    tok->require_token_id("<|no_such_token|>");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Api);
    EXPECT_NE(std::string(e.what()).find("<|no_such_token|>"), std::string::npos);
  }
  EXPECT_EQ(tok->model_vocab_size(), 151643u);
  EXPECT_EQ(tok->vocab_size(), 151669u);
  EXPECT_EQ(tok->token_bytes(151645), "<|im_end|>");
}

TEST(TokenizerSpecial, MatchedBeforeSplittingAnywhereInText) {
  KERN_REQUIRE_QWEN3(tok);
  const tokenizer::TokenId start = 151644, end = 151645, eot = 151643;
  EXPECT_EQ(tok->encode("<|im_start|>user\nhi<|im_end|>"), concat({{start}, tok->encode("user\nhi"), {end}}));
  EXPECT_EQ(tok->encode("abc<|endoftext|>def"), concat({tok->encode("abc"), {eot}, tok->encode("def")}));
  EXPECT_EQ(tok->encode("<|im_end|><|im_end|>"), (std::vector<tokenizer::TokenId>{end, end}));
  EXPECT_EQ(tok->encode(" <|im_end|> "), concat({tok->encode(" "), {end}, tok->encode(" ")}));  // no stripping
  const tokenizer::TokenId tool = tok->require_token_id("<tool_call>");
  EXPECT_EQ(tok->encode("x<tool_call>y"), concat({tok->encode("x"), {tool}, tok->encode("y")}));
}

TEST(TokenizerSpecial, NearMissesAreOrdinaryText) {
  KERN_REQUIRE_QWEN3(tok);
  for (const char* text : {"<|im_end|", "<|im_end |>", "<|IM_END|>", "< |im_end|>", "|im_end|>"}) {
    for (tokenizer::TokenId id : tok->encode(text)) EXPECT_LT(id, 151643) << text;
  }
}

TEST(TokenizerSpecial, DecodeCanSkipSpecialButNotOtherAddedTokens) {
  KERN_REQUIRE_QWEN3(tok);
  const std::string text = "<|im_start|>assistant\n<tool_call>{}</tool_call><|im_end|>";
  const std::vector<tokenizer::TokenId> ids = tok->encode(text);
  EXPECT_EQ(tok->decode(ids), text);
  EXPECT_EQ(tok->decode(ids, {.skip_special_tokens = true}), "assistant\n<tool_call>{}</tool_call>");
}

TEST(TokenizerSpecial, BadCallerInputIsAnApiError) {
  KERN_REQUIRE_QWEN3(tok);
  const std::vector<tokenizer::TokenId> unknown{1, static_cast<tokenizer::TokenId>(tok->vocab_size())};
  EXPECT_THROW(tok->decode(unknown), Error);
  const std::vector<tokenizer::TokenId> negative{-1};
  try {
    tok->decode(negative);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Api);
    EXPECT_NE(std::string(e.what()).find("-1"), std::string::npos);
  }
  try {
    tok->encode("ok \xC3\x28 bad");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Api);
    EXPECT_NE(std::string(e.what()).find("byte 3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kern::test
