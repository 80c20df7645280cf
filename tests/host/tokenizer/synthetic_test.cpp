// Behaviour on small hand-made tokenizer.json files: merge order, added-token flags.
#include <gtest/gtest.h>

#include "kern/tokenizer/tokenizer.hpp"
#include "tiny_tokenizer.hpp"

namespace kern::test {
namespace {

using Ids = std::vector<tokenizer::TokenId>;

tokenizer::Tokenizer load(const Json& doc) {
  return tokenizer::Tokenizer::from_json(doc.dump(), "tiny tokenizer.json");
}

Ids cat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(TokenizerSynthetic, MergesApplyByRankNotByPosition) {
  // "abc": with (b,c) ranked first the result is a|bc; with (a,b) first it is ab|c.
  const tokenizer::Tokenizer bc_first = load(tiny_tokenizer({{"b", "c"}, {"a", "b"}}));
  EXPECT_EQ(bc_first.encode("abc"), (Ids{'a', 256}));
  const tokenizer::Tokenizer ab_first = load(tiny_tokenizer({{"a", "b"}, {"b", "c"}}));
  EXPECT_EQ(ab_first.encode("abc"), (Ids{256, 'c'}));
}

TEST(TokenizerSynthetic, EqualRanksMergeLeftmostFirstAndChain) {
  const tokenizer::Tokenizer tok = load(tiny_tokenizer({{"a", "a"}, {"aa", "aa"}}));
  EXPECT_EQ(tok.encode("aaa"), (Ids{256, 'a'}));
  EXPECT_EQ(tok.encode("aaaa"), (Ids{257}));
  EXPECT_EQ(tok.encode("aaaaa"), (Ids{257, 'a'}));
  EXPECT_EQ(tok.encode("aaaaaaa"), (Ids{257, 256, 'a'}));
  // A long run goes through the same rules (and is not cached): 4k 'a' = 1000 x "aaaa".
  const Ids long_run = tok.encode(std::string(4000, 'a'));
  EXPECT_EQ(long_run, Ids(1000, 257));
}

TEST(TokenizerSynthetic, MultiByteCharactersMergeFromTheirBytes) {
  const std::string ni = "\xE4\xBD\xA0";  // 你
  const tokenizer::Tokenizer tok = load(tiny_tokenizer({{"\xE4", "\xBD"}, {"\xE4\xBD", "\xA0"}}));
  EXPECT_EQ(tok.encode(ni), (Ids{257}));
  EXPECT_EQ(tok.decode(Ids{257}), ni);
  EXPECT_EQ(tok.decode(Ids{256}), "\xEF\xBF\xBD");  // half a character decodes to U+FFFD
  EXPECT_EQ(tok.decode_bytes(Ids{256}), "\xE4\xBD");
}

TEST(TokenizerSynthetic, RegexSplitsBeforeMerging) {
  // A merge across a split boundary (letters | digits) never applies.
  const tokenizer::Tokenizer tok = load(tiny_tokenizer({{"a", "1"}, {"1", "2"}}));
  EXPECT_EQ(tok.encode("a1"), (Ids{'a', '1'}));
  EXPECT_EQ(tok.encode("12"), (Ids{'1', '2'}));  // \p{N} takes one digit at a time
}

TEST(TokenizerSynthetic, NfcIsAppliedBeforeSplitting) {
  const std::string composed = "\xC3\xA9";  // é
  const tokenizer::Tokenizer tok = load(tiny_tokenizer({{"\xC3", "\xA9"}}));
  EXPECT_EQ(tok.encode("e\xCC\x81"), (Ids{256}));  // e + combining acute -> é
  EXPECT_EQ(tok.encode(composed), (Ids{256}));
}

TEST(TokenizerSynthetic, LstripAndRstripSwallowNeighbouringWhitespace) {
  const tokenizer::Tokenizer plain = load(tiny_tokenizer({}));
  const tokenizer::Tokenizer left = load(tiny_tokenizer({}, {{300, "<x>", true, true, false}}));
  const tokenizer::Tokenizer right = load(tiny_tokenizer({}, {{300, "<x>", true, false, true}}));
  const tokenizer::Tokenizer none = load(tiny_tokenizer({}, {{300, "<x>"}}));
  EXPECT_EQ(none.encode("a  <x>  b"), cat({plain.encode("a  "), {300}, plain.encode("  b")}));
  EXPECT_EQ(left.encode("a  <x>  b"), cat({plain.encode("a"), {300}, plain.encode("  b")}));
  EXPECT_EQ(right.encode("a  <x>  b"), cat({plain.encode("a  "), {300}, plain.encode("b")}));
  EXPECT_EQ(left.encode("a \n\t<x>"), cat({plain.encode("a"), {300}}));
  // lstrip stops at the previous match.
  EXPECT_EQ(left.encode("<x> <x>"), (Ids{300, 300}));
}

TEST(TokenizerSynthetic, SingleWordTokensOnlyMatchAlone) {
  const tokenizer::Tokenizer plain = load(tiny_tokenizer({}));
  const tokenizer::Tokenizer tok = load(tiny_tokenizer({}, {{300, "<x>", true, false, false, false, true}}));
  EXPECT_EQ(tok.encode("a<x>"), plain.encode("a<x>"));
  EXPECT_EQ(tok.encode("<x>_"), plain.encode("<x>_"));
  EXPECT_EQ(tok.encode("<x>"), (Ids{300}));
  EXPECT_EQ(tok.encode("a <x>!"), cat({plain.encode("a "), {300}, plain.encode("!")}));
  EXPECT_EQ(tok.encode("\xC3\xA9<x>"), plain.encode("\xC3\xA9<x>"));             // glued to é
  EXPECT_EQ(tok.encode("\xC2\xBD<x>"), cat({plain.encode("\xC2\xBD"), {300}}));  // ½ is no word character
}

TEST(TokenizerSynthetic, NormalizedTokensMatchAfterNfcRawOnesBefore) {
  const tokenizer::Tokenizer plain = load(tiny_tokenizer({}));
  const std::string decomposed = "e\xCC\x81";
  const tokenizer::Tokenizer normalized = load(tiny_tokenizer({}, {{300, "\xC3\xA9", false, false, false, true}}));
  const tokenizer::Tokenizer raw = load(tiny_tokenizer({}, {{300, "\xC3\xA9", false, false, false, false}}));
  EXPECT_EQ(normalized.encode("x" + decomposed), cat({plain.encode("x"), {300}}));
  EXPECT_EQ(raw.encode("x" + decomposed), plain.encode("x\xC3\xA9"));
  EXPECT_EQ(raw.encode("x\xC3\xA9"), cat({plain.encode("x"), {300}}));
}

TEST(TokenizerSynthetic, LongestAddedTokenWinsAtTheSameStart) {
  const tokenizer::Tokenizer tok = load(tiny_tokenizer({}, {{300, "<a>"}, {301, "<a><b>"}, {302, "<b>"}}));
  EXPECT_EQ(tok.encode("<a><b><b>"), (Ids{301, 302}));
  EXPECT_EQ(tok.encode("<a><a>"), (Ids{300, 300}));
}

TEST(TokenizerSynthetic, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  Json doc = tiny_tokenizer({{"b", "c"}, {"a", "b"}});
  const tokenizer::Tokenizer merged = load(doc);
  EXPECT_EQ(merged.encode("abc"), (Ids{'a', 256}));
  doc["model"]["vocab"][tokenizer::to_byte_level("abc")] = 400;
  doc["model"]["ignore_merges"] = true;
  const tokenizer::Tokenizer whole = load(doc);
  EXPECT_EQ(whole.encode("abc"), (Ids{400}));
  EXPECT_EQ(whole.encode("abcd"), (Ids{'a', 256, 'd'}));
}

TEST(TokenizerSynthetic, LegacyMergeStringsWork) {
  Json doc = tiny_tokenizer({{"a", "b"}});
  doc["model"]["merges"] = Json::array({"a b"});
  EXPECT_EQ(load(doc).encode("ab"), (Ids{256}));
}

}  // namespace
}  // namespace kern::test
