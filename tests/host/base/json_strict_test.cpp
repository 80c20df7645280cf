#include <gtest/gtest.h>

#include "kern/base/json.hpp"

using namespace kern;

static std::string message_of(std::string_view text) {
  try {
    parse_json_strict(text, {ErrorKind::ManifestParse, "m.json"});
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::ManifestParse);
    return e.message();
  }
  return "no error";
}

TEST(JsonStrict, ParsesNestedValues) {
  Json j = parse_json_strict(R"({"a": [1, {"b": -2, "c": 18446744073709551615}], "d": "x"})");
  EXPECT_EQ(j["a"][0].get<int>(), 1);
  EXPECT_EQ(j["a"][1]["b"].get<int>(), -2);
  EXPECT_TRUE(j["a"][1]["c"].is_number_unsigned());
  EXPECT_EQ(j["a"][1]["c"].get<std::uint64_t>(), 18446744073709551615ull);
  EXPECT_EQ(j["d"], "x");
}

TEST(JsonStrict, DuplicateKeyNamesItsPath) {
  EXPECT_EQ(message_of(R"({"ops": {"attn": {"impl": {"launches": [{"x": 1, "x": 2}]}}}})"),
            "m.json: duplicate key \"x\" at ops.attn.impl.launches[0].x");
  EXPECT_EQ(message_of(R"({"a": 1, "a": 1})"), "m.json: duplicate key \"a\" at a");
}

TEST(JsonStrict, SyntaxErrorHasLineAndColumn) {
  std::string m = message_of("{\n  \"a\": 1,\n  \"b\": ]\n}");
  EXPECT_NE(m.find("line 3, column 8"), std::string::npos) << m;
}

TEST(JsonStrict, TruncatedInput) {
  std::string m = message_of("{\"a\": [1, 2");
  EXPECT_NE(m.find("syntax error at line 1"), std::string::npos) << m;
}

TEST(JsonStrict, DepthIsBounded) {
  std::string deep(1000, '[');
  std::string m = message_of(deep);
  EXPECT_NE(m.find("nesting deeper than 128"), std::string::npos) << m;
}

TEST(JsonStrict, Paths) {
  EXPECT_EQ(json_path_index(json_path_key(json_path_key("", "ops"), "attn"), 2), "ops.attn[2]");
}
