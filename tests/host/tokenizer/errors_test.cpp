// tokenizer.json files kern cannot honour are refused with a precise WeightArtifact error.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kern/tokenizer/tokenizer.hpp"
#include "tiny_tokenizer.hpp"

namespace kern::test {
namespace {

// Loading `text` must fail with WeightArtifact and a message containing every `needles`.
void expect_refused(const std::string& text, const std::vector<std::string>& needles) {
  try {
    tokenizer::Tokenizer::from_json(text, "bad.json");
    ADD_FAILURE() << "accepted: " << text.substr(0, 200);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::WeightArtifact) << e.what();
    for (const std::string& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what() << " lacks " << n;
  }
}

void expect_refused(const Json& doc, const std::vector<std::string>& needles) { expect_refused(doc.dump(), needles); }

TEST(TokenizerErrors, BaselineLoads) {
  EXPECT_NO_THROW(tokenizer::Tokenizer::from_json(tiny_tokenizer({{"a", "b"}}).dump()));
}

TEST(TokenizerErrors, MalformedJson) {
  expect_refused(std::string("{\"model\": "), {"bad.json"});
  expect_refused(std::string("{\"a\": 1, \"a\": 2}"), {"duplicate", "a"});
  expect_refused(std::string("[]"), {"object"});
}

TEST(TokenizerErrors, UnsupportedModelsAndStages) {
  Json doc = tiny_tokenizer({});
  doc["model"]["type"] = "WordPiece";
  expect_refused(doc, {"model.type", "WordPiece"});
  expect_refused(std::string(R"({"model": {"type": "Unigram"}})"), {"model.type", "Unigram"});

  doc = tiny_tokenizer({});
  doc["pre_tokenizer"]["pretokenizers"].erase(1);
  expect_refused(doc, {"ByteLevel"});

  // One field set per case, on an otherwise loadable document.
  struct Case {
    std::string pointer;
    Json value;
    std::vector<std::string> needles;
  };
  for (const Case& c : std::vector<Case>{
           {"/normalizer", {{"type", "NFKC"}}, {"normalizer", "NFKC"}},
           {"/pre_tokenizer", {{"type", "Metaspace"}}, {"pre_tokenizer", "Metaspace"}},
           {"/pre_tokenizer/pretokenizers/0/behavior",
            "MergedWithPrevious",
            {"pretokenizers[0].behavior", "MergedWithPrevious"}},
           {"/pre_tokenizer/pretokenizers/0/pattern", {{"String", " "}}, {"pretokenizers[0].pattern"}},
           {"/pre_tokenizer/pretokenizers/0/pattern/Regex", "(unclosed", {"does not compile"}},
           {"/pre_tokenizer/pretokenizers/1/add_prefix_space", true, {"add_prefix_space"}},
           {"/decoder", {{"type", "WordPiece"}}, {"decoder", "WordPiece"}},
           {"/post_processor", {{"type", "TemplateProcessing"}}, {"post_processor", "TemplateProcessing"}},
           {"/truncation", {{"max_length", 8}}, {"truncation"}},
           {"/model/dropout", 0.1, {"dropout"}},
       }) {
    doc = tiny_tokenizer({});
    doc[Json::json_pointer(c.pointer)] = c.value;
    expect_refused(doc, c.needles);
  }
}

TEST(TokenizerErrors, BrokenVocabularyOrMerges) {
  Json doc = tiny_tokenizer({});
  doc["model"]["vocab"].erase(tokenizer::to_byte_level("q"));
  expect_refused(doc, {"byte 0x71"});

  doc = tiny_tokenizer({});
  doc["model"]["vocab"][tokenizer::to_byte_level("q")] = 7;  // id of byte 7 too
  expect_refused(doc, {"token id 7 is used twice"});

  doc = tiny_tokenizer({{"a", "b"}});
  doc["model"]["merges"].push_back(Json::array({"x", "yz"}));
  expect_refused(doc, {"model.merges[1]", "yz"});

  doc = tiny_tokenizer({{"a", "b"}});
  doc["model"]["merges"].push_back("a b c");
  expect_refused(doc, {"model.merges[1]"});

  doc = tiny_tokenizer({});
  doc["model"]["vocab"]["a"] = -3;
  expect_refused(doc, {"model.vocab.a"});

  // Ids far beyond the number of tokens (found by fuzz_tokenizer_json: the loader sized its
  // by-id tables to the largest id, gigabytes for one entry).
  doc = tiny_tokenizer({});
  doc["model"]["vocab"]["extra"] = 2147483000;
  expect_refused(doc, {"model.vocab.extra", "token id 2147483000 is out of range", "ids below 65793"});
}

TEST(TokenizerErrors, IdsWithGapsLoad) {
  Json doc = tiny_tokenizer({});
  doc["model"]["vocab"]["extra"] = 60000;
  const auto tok = tokenizer::Tokenizer::from_json(tiny_tokenizer({}, {{65000, "<|end|>"}}).dump());
  EXPECT_EQ(tok.vocab_size(), 65001u);
  EXPECT_NO_THROW(tokenizer::Tokenizer::from_json(doc.dump()));
}

TEST(TokenizerErrors, BrokenAddedTokens) {
  expect_refused(tiny_tokenizer({}, {{300, ""}}), {"added_tokens[0].content", "empty"});
  expect_refused(tiny_tokenizer({}, {{300, "<a>"}, {301, "<a>"}}), {"added_tokens[1].content"});
  expect_refused(tiny_tokenizer({}, {{300, "<a>"}, {300, "<b>"}}), {"added_tokens[1].id"});
  expect_refused(tiny_tokenizer({}, {{1 << 30, "<a>"}}), {"added_tokens[0].id", "out of range"});
}

TEST(TokenizerErrors, MissingFileIsAnIoError) {
  try {
    tokenizer::Tokenizer::from_file("/nonexistent/kern/tokenizer.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
  }
}

}  // namespace
}  // namespace kern::test
