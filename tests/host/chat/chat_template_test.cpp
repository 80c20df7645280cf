// ChatTemplate: where a model's template and special tokens come from, and the request shape.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/chat/chat_template.hpp"

namespace kern::chat {
namespace {

namespace fs = std::filesystem;
using OJson = nlohmann::ordered_json;

class ModelDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() / ("kern_chat_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                     "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) { write_file((dir_ / name).string(), text); }
  std::string path() const { return dir_.string(); }

  fs::path dir_;
};

const char* kTokens = R"("bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>")";

std::string render(const ChatTemplate& t, const char* request) { return t.render(OJson::parse(request)); }

TEST_F(ModelDir, TemplateStringFromTokenizerConfig) {
  write(
      "tokenizer_config.json",
      std::string(R"({"chat_template": "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}", )") + kTokens + "}");
  for (const std::string& p : {path(), path() + "/tokenizer_config.json"}) {
    const ChatTemplate t = ChatTemplate::load(p);
    EXPECT_EQ(t.bos_token(), "<s>");
    EXPECT_EQ(t.eos_token(), "</s>");
    EXPECT_EQ(render(t, R"({"messages": [{"role": "user", "content": "hi"}]})"), "<s>hi</s>");
  }
}

TEST_F(ModelDir, NamedTemplateListUsesDefault) {
  write("tokenizer_config.json",
        R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})");
  EXPECT_EQ(render(ChatTemplate::load(path()), R"({"messages": []})"), "D");
  write("tokenizer_config.json", R"({"chat_template": [{"name": "tool_use", "template": "T"}]})");
  EXPECT_THROW(ChatTemplate::load(path()), Error);
}

TEST_F(ModelDir, ChatTemplateJinjaWins) {
  write("tokenizer_config.json", std::string(R"({"chat_template": "config", )") + kTokens + "}");
  write("chat_template.jinja", "file {{ eos_token }}\n");
  EXPECT_EQ(render(ChatTemplate::load(path()), R"({"messages": []})"), "file </s>");
  fs::remove(dir_ / "tokenizer_config.json");
  EXPECT_EQ(render(ChatTemplate::load(path()), R"({"messages": []})"), "file ");
}

TEST_F(ModelDir, MissingTemplateIsAnError) {
  write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  try {
    ChatTemplate::load(path());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Template);
    EXPECT_NE(std::string(e.what()).find("has no chat_template"), std::string::npos) << e.what();
  }
  fs::remove(dir_ / "tokenizer_config.json");
  EXPECT_THROW(ChatTemplate::load(path()), Error);
}

TEST(ChatRequest, GlobalsAndKwargs) {
  const ChatTemplate t = ChatTemplate::from_source(
      "{{ tools }} {{ documents }} {{ add_generation_prompt }} {{ bos_token is defined }} {{ enable_thinking }} "
      "{{ messages | length }}",
      std::nullopt, "</s>");
  EXPECT_EQ(render(t, R"({"messages": [{"role": "user", "content": "x"}], "enable_thinking": false})"),
            "None None False False False 1");
  EXPECT_EQ(render(t, R"({"messages": [], "tools": [], "add_generation_prompt": true})"), "[] None True False  0");
}

TEST(ChatRequest, MalformedRequestsAreApiErrors) {
  const ChatTemplate t = ChatTemplate::from_source("x", std::nullopt, std::nullopt);
  for (const char* bad :
       {R"([])", R"({})", R"({"messages": {}})", R"({"messages": [1]})", R"({"messages": [], "tools": {}})",
        R"({"messages": [], "tools": [1]})", R"({"messages": [{"n": 18446744073709551615}]})"}) {
    try {
      render(t, bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Api) << e.what();
    }
  }
}

TEST(ChatRequest, KeyOrderIsKept) {
  const ChatTemplate t =
      ChatTemplate::from_source("{{ messages[0] }}|{{ messages[0] | tojson }}", std::nullopt, std::nullopt);
  EXPECT_EQ(render(t, R"({"messages": [{"role": "user", "content": "c", "a": 1}]})"),
            "{'role': 'user', 'content': 'c', 'a': 1}|{\"role\": \"user\", \"content\": \"c\", \"a\": 1}");
}

}  // namespace
}  // namespace kern::chat
