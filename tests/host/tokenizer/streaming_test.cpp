// StreamingDecoder: whole characters only, and the pieces add up to decode().
#include <gtest/gtest.h>

#include <random>

#include "qwen3_fixture.hpp"
#include "tokenizer/utf8.hpp"

namespace kern::test {
namespace {

TEST(TokenizerStreaming, RandomSplitsEmitValidUtf8AndConcatenateToDecode) {
  KERN_REQUIRE_QWEN3(tok);
  const Json& ref = qwen3_reference();
  std::mt19937 rng(0x5eed);
  std::size_t held_somewhere = 0, runs = 0;
  auto check = [&](const std::vector<tokenizer::TokenId>& ids, std::size_t index) {
    const std::string want = tok->decode(ids);
    for (int trial = 0; trial < 3; ++trial) {
      tokenizer::StreamingDecoder stream(*tok);
      std::string got;
      std::size_t at = 0;
      while (at < ids.size()) {
        const std::size_t n = std::min<std::size_t>(ids.size() - at, 1 + rng() % (trial == 0 ? 1 : 5));
        const std::string piece = stream.push(std::span<const tokenizer::TokenId>(ids.data() + at, n));
        at += n;
        ASSERT_FALSE(tokenizer::first_invalid_utf8(piece).has_value()) << "case " << index;
        if (stream.pending_bytes() > 0) ++held_somewhere;
        got += piece;
      }
      const std::string tail = stream.finish();
      ASSERT_FALSE(tokenizer::first_invalid_utf8(tail).has_value());
      got += tail;
      ASSERT_EQ(got, want) << "case " << index << " trial " << trial;
      EXPECT_EQ(stream.pending_bytes(), 0u);
      ++runs;
    }
  };
  const Json& cases = ref["cases"];
  for (std::size_t i = 0; i < cases.size(); ++i) check(ids_of(cases[i]["ids"]), i);
  const Json& decodes = ref["decodes"];  // random and broken byte sequences too
  for (std::size_t i = 0; i < decodes.size(); ++i) check(ids_of(decodes[i]["ids"]), i);
  EXPECT_GT(runs, 6000u);
  EXPECT_GT(held_somewhere, 100u) << "the corpus should split characters across tokens";
}

TEST(TokenizerStreaming, HoldsAnEmojiUntilItsLastByte) {
  KERN_REQUIRE_QWEN3(tok);
  const std::string emoji = "\xF0\x9F\xA6\x80";  // 🦀, four bytes
  tokenizer::StreamingDecoder stream(*tok);
  std::string out;
  for (int i = 0; i < 3; ++i) {
    const tokenizer::TokenId byte_token = tok->require_token_id(emoji.substr(static_cast<std::size_t>(i), 1));
    EXPECT_EQ(stream.push(byte_token), "");
    EXPECT_EQ(stream.pending_bytes(), static_cast<std::size_t>(i + 1));
  }
  EXPECT_EQ(stream.push(tok->require_token_id(emoji.substr(3, 1))), emoji);
  EXPECT_EQ(stream.pending_bytes(), 0u);
  // An unfinished character at the end becomes one U+FFFD.
  EXPECT_EQ(stream.push(tok->require_token_id(emoji.substr(0, 1))), "");
  EXPECT_EQ(stream.finish(), "\xEF\xBF\xBD");
}

TEST(TokenizerStreaming, UnknownIdThrowsAndKeepsState) {
  KERN_REQUIRE_QWEN3(tok);
  tokenizer::StreamingDecoder stream(*tok);
  EXPECT_EQ(stream.push(tok->require_token_id("\xE4")), "");
  EXPECT_THROW(stream.push(static_cast<tokenizer::TokenId>(tok->vocab_size())), Error);
  EXPECT_EQ(stream.pending_bytes(), 1u);
  EXPECT_EQ(stream.push(tok->require_token_id("\xBD")), "");
  EXPECT_EQ(stream.push(tok->require_token_id("\xA0")), "\xE4\xBD\xA0");  // 你
}

}  // namespace
}  // namespace kern::test
