// The default model's own byte-level BPE (assets/default-model/tokenizer.json, trained with HF
// tokenizers by scripts/default-model/train.py): kern reads it like Qwen3's and gives exactly the
// ids HF tokenizers gave on the GPU machine (data/default_model_reference.json: test strings with
// non-ASCII, NFD, CRLF and special tokens, and 10 held-out Brown documents).
#include <gtest/gtest.h>

#include <string>

#include "kern/base/file.hpp"
#include "kern/base/json.hpp"
#include "kern/tokenizer/tokenizer.hpp"

namespace kern::test {
namespace {

TEST(DefaultModelTokenizer, IdsMatchHuggingFaceExactly) {
  const std::string root = KERN_SOURCE_DIR;
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_file(root + "/assets/default-model/tokenizer.json");
  const Json ref = parse_json_strict(read_file(root + "/tests/host/tokenizer/data/default_model_reference.json"));
  std::size_t cases = 0, ids = 0;
  for (const char* part : {"tests", "val_docs"}) {
    for (const Json& c : ref.at(part)) {
      const std::string& text = c.at("text").get_ref<const std::string&>();
      const std::vector<tokenizer::TokenId> want = c.at("ids").get<std::vector<tokenizer::TokenId>>();
      EXPECT_EQ(tok.encode(text), want) << part << ": " << text.substr(0, 80);
      ++cases;
      ids += want.size();
    }
  }
  EXPECT_EQ(cases, 15u);
  EXPECT_GT(ids, 30000u);
}

}  // namespace
}  // namespace kern::test
