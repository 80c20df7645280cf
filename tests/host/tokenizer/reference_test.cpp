// Exact agreement with HF tokenizers on the committed corpus (ids and decoded text).
#include <gtest/gtest.h>

#include <sstream>

#include "qwen3_fixture.hpp"
#include "tokenizer/nfc.hpp"
#include "tokenizer/utf8.hpp"

namespace kern::test {
namespace {

std::string show_ids(const std::vector<tokenizer::TokenId>& ids) {
  std::ostringstream s;
  s << "[";
  for (std::size_t i = 0; i < ids.size(); ++i) s << (i ? " " : "") << ids[i];
  s << "]";
  return s.str();
}

TEST(TokenizerReference, CorpusIsLargeAndVaried) {
  const Json& cases = qwen3_reference()["cases"];
  ASSERT_GE(cases.size(), 2000u);
  std::size_t with_cjk = 0, with_special = 0, long_ones = 0;
  for (const Json& c : cases) {
    const std::string& t = c["text"].get_ref<const std::string&>();
    if (t.find("\xE4\xBD\xA0") != std::string::npos) ++with_cjk;  // 你
    if (t.find("<|im_start|>") != std::string::npos) ++with_special;
    if (t.size() > 1000) ++long_ones;
  }
  EXPECT_GT(with_cjk, 20u);
  EXPECT_GT(with_special, 20u);
  EXPECT_GT(long_ones, 5u);
}

TEST(TokenizerReference, IdsMatchHuggingFaceExactly) {
  KERN_REQUIRE_QWEN3(tok);
  const Json& cases = qwen3_reference()["cases"];
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string& text = cases[i]["text"].get_ref<const std::string&>();
    const std::vector<tokenizer::TokenId> want = ids_of(cases[i]["ids"]);
    const std::vector<tokenizer::TokenId> got = tok->encode(text);
    if (got != want && ++mismatches <= 20) {
      ADD_FAILURE() << "case " << i << " text " << testing::PrintToString(text) << "\n  HF:   " << show_ids(want)
                    << "\n  kern: " << show_ids(got);
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << cases.size() << " strings";
}

TEST(TokenizerReference, DecodeOfEncodeGivesNfcText) {
  KERN_REQUIRE_QWEN3(tok);
  ASSERT_TRUE(tok->normalizes_nfc());
  const Json& cases = qwen3_reference()["cases"];
  std::size_t changed_by_nfc = 0, bad = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string& text = cases[i]["text"].get_ref<const std::string&>();
    const std::string want = tokenizer::nfc(text);
    if (want != text) ++changed_by_nfc;
    const std::string got = tok->decode(tok->encode(text));
    if (got != want && ++bad <= 10) ADD_FAILURE() << "case " << i << ": " << testing::PrintToString(text);
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_GT(changed_by_nfc, 10u) << "the corpus should contain NFD text";
}

TEST(TokenizerReference, DecodeMatchesHuggingFaceIncludingBrokenUtf8) {
  KERN_REQUIRE_QWEN3(tok);
  const Json& decodes = qwen3_reference()["decodes"];
  ASSERT_GE(decodes.size(), 500u);
  std::size_t with_replacement = 0, bad = 0;
  for (std::size_t i = 0; i < decodes.size(); ++i) {
    const std::vector<tokenizer::TokenId> ids = ids_of(decodes[i]["ids"]);
    const std::string& want = decodes[i]["text"].get_ref<const std::string&>();
    const std::string& want_skip = decodes[i]["text_skip_special"].get_ref<const std::string&>();
    if (want.find("\xEF\xBF\xBD") != std::string::npos) ++with_replacement;
    const std::string got = tok->decode(ids);
    const std::string got_skip = tok->decode(ids, {.skip_special_tokens = true});
    if ((got != want || got_skip != want_skip) && ++bad <= 10) {
      ADD_FAILURE() << "decode " << i << " ids " << show_ids(ids) << "\n  HF:   " << testing::PrintToString(want)
                    << " / " << testing::PrintToString(want_skip) << "\n  kern: " << testing::PrintToString(got)
                    << " / " << testing::PrintToString(got_skip);
    }
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_GT(with_replacement, 50u);
}

}  // namespace
}  // namespace kern::test
