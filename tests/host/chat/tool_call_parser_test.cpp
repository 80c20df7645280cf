// ToolCallParser / parse_tool_calls: Qwen3 replies with calls, malformed blocks, and the property
// that the streamed deltas of any split of a reply add up to the whole-reply result.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kern/base/error.hpp"
#include "kern/chat/reasoning_parser.hpp"
#include "kern/chat/tool_call_parser.hpp"
#include "split_helpers.hpp"

namespace kern::chat {

void PrintTo(const ToolCall& c, std::ostream* os) { *os << tool_call_json(c).dump(); }
void PrintTo(const ToolCallDelta& d, std::ostream* os) {
  *os << "content " << testing::PrintToString(d.content) << " calls " << testing::PrintToString(d.calls);
}

namespace {

ToolCallDelta stream_tool_calls(const test::Pieces& pieces, const ToolCallOptions& options = {}) {
  ToolCallParser parser(options);
  ToolCallDelta all;
  auto add = [&](ToolCallDelta d) {
    all.content += d.content;
    for (auto& c : d.calls) all.calls.push_back(std::move(c));
  };
  for (std::string_view p : pieces) add(parser.push(p));
  add(parser.finish());
  return all;
}

void expect_calls(std::string_view text, const ToolCallDelta& expected, const ToolCallOptions& options = {}) {
  EXPECT_EQ(parse_tool_calls(text, options), expected) << text;
  test::QuietLog quiet;  // malformed blocks warn on every run
  int failures = 0;
  test::for_each_split(text, [&](const test::Pieces& pieces) {
    if (failures > 3) return;
    ToolCallDelta got = stream_tool_calls(pieces, options);
    if (got != expected) {
      ++failures;
      std::string cut;
      for (auto p : pieces) cut += "[" + std::string(p) + "]";
      ADD_FAILURE() << "split " << cut << " gave content {" << got.content << "} and " << got.calls.size() << " calls";
    }
  });
}

ToolCall call(std::string id, std::string name, std::string arguments) {
  return {std::move(id), std::move(name), std::move(arguments)};
}

const char* const kWeatherCall =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n"
    "</tool_call>";

TEST(ToolCallParser, NoCall) { expect_calls("Just an answer.\n", {"Just an answer.\n", {}}); }

TEST(ToolCallParser, ThinkThenToolCall) {
  const std::string reply = std::string(
                                "<think>\nThe user wants the weather in Paris. I have get_weather; call it with "
                                "city Paris.\n</think>\n\n") +
                            kWeatherCall;
  const ReasoningDelta r = parse_reasoning(reply);
  EXPECT_EQ(r.reasoning, "The user wants the weather in Paris. I have get_weather; call it with city Paris.");
  const ToolCallOptions options{.id_prefix = "req7"};
  expect_calls(r.content, {"", {call("call_req7_0", "get_weather", R"({"city":"Paris","unit":"celsius"})")}}, options);

  // The two parsers chained, streamed one byte at a time.
  ReasoningParser reasoning;
  ToolCallParser tools(options);
  std::string thought, content;
  std::vector<ToolCall> calls;
  auto take = [&](ToolCallDelta d) {
    content += d.content;
    for (auto& c : d.calls) calls.push_back(c);
  };
  for (char c : reply) {
    ReasoningDelta d = reasoning.push(std::string_view(&c, 1));
    thought += d.reasoning;
    take(tools.push(d.content));
  }
  const ReasoningDelta last = reasoning.finish();
  thought += last.reasoning;
  take(tools.push(last.content));
  take(tools.finish());
  EXPECT_EQ(thought, r.reasoning);
  EXPECT_EQ(content, "");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(tool_call_json(calls[0]), Json::parse(R"({"id": "call_req7_0", "type": "function",
                            "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"unit\":\"celsius\"}"}})"));
}

TEST(ToolCallParser, TwoCallsAfterText) {
  expect_calls(
      "I'll check both cities.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"London\"}}\n</tool_call>",
      {"I'll check both cities.",
       {call("call_r_0", "get_weather", R"({"city":"Paris"})"),
        call("call_r_1", "get_weather", R"({"city":"London"})")}},
      {.id_prefix = "r"});
}

TEST(ToolCallParser, UnicodeArgumentsStayUtf8) {
  expect_calls(
      "<tool_call>\n{\"name\": \"translate\", \"arguments\": {\"text\": \"café ☕\", \"to\": \"北京话\"}}\n</tool_call>",
      {"", {call("call_0", "translate", R"({"text":"café ☕","to":"北京话"})")}});
  // \u escapes (and a surrogate pair) come back as UTF-8.
  expect_calls(R"(<tool_call>{"name": "f", "arguments": {"s": "\u5317\u4eac \ud83d\ude00 \"q\" \n"}}</tool_call>)",
               {"", {call("call_0", "f", "{\"s\":\"北京 😀 \\\"q\\\" \\n\"}")}});
}

TEST(ToolCallParser, ArgumentsAsAStringAreKept) {
  expect_calls(R"(<tool_call>
{"name": "run_sql", "arguments": "{\"query\": \"SELECT 1\"}"}
</tool_call>)",
               {"", {call("call_0", "run_sql", R"({"query": "SELECT 1"})")}});
}

TEST(ToolCallParser, ArgumentKeyOrderAndTypesAreKept) {
  expect_calls(
      R"(<tool_call>{"arguments": {"z": 1, "a": [true, null, 2.5, -3], "m": {"y": "", "b": {}}}, "name": "g"}</tool_call>)",
      {"", {call("call_0", "g", R"({"z":1,"a":[true,null,2.5,-3],"m":{"y":"","b":{}}})")}});
}

TEST(ToolCallParser, OfAKeyWrittenTwiceTheLastCounts) {
  expect_calls(R"(<tool_call>{"name": "a", "arguments": {"k": 1, "j": 0, "k": 2}, "name": "b"}</tool_call>)",
               {"", {call("call_0", "b", R"({"k":2,"j":0})")}});
}

TEST(ToolCallParser, MissingOrNullArgumentsAreAnEmptyObject) {
  expect_calls(R"(<tool_call>{"name": "now"}</tool_call><tool_call>{"name": "now", "arguments": null}</tool_call>)",
               {"", {call("call_0", "now", "{}"), call("call_1", "now", "{}")}});
}

TEST(ToolCallParser, MalformedJsonStaysAsTextWithAWarning) {
  const std::string reply =
      "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}\n</tool_call>";
  test::LogCapture log;
  const ToolCallDelta got = parse_tool_calls(reply);
  EXPECT_EQ(got, (ToolCallDelta{reply, {}}));
  EXPECT_NE(log.text().find("warning: tool call: a <tool_call> block is not a call"), std::string::npos) << log.text();
  expect_calls(reply, {reply, {}});
}

TEST(ToolCallParser, BlocksThatAreNotCallsStayAsText) {
  for (const std::string& body :
       std::vector<std::string>{R"({"arguments": {}})", R"({"name": "", "arguments": {}})", R"({"name": 3})",
                                R"(["get_weather"])", R"({"name": "f", "arguments": [1]})", "", "{\"name\": \"f\"} x",
                                "{\"name\": \"f\"\xff}", std::string(70, '[') + std::string(70, ']')}) {
    const std::string reply = "A\n<tool_call>" + body + "</tool_call>\nB";
    expect_calls(reply, {reply, {}});
  }
}

TEST(ToolCallParser, GoodCallsAroundABadOneAreNumberedInOrder) {
  expect_calls(
      "<tool_call>{\"name\": \"a\"}</tool_call>\n<tool_call>{oops}</tool_call>\n<tool_call>{\"name\": "
      "\"b\"}</tool_call>",
      {"<tool_call>{oops}</tool_call>", {call("call_0", "a", "{}"), call("call_1", "b", "{}")}});
}

TEST(ToolCallParser, UnterminatedBlockStaysAsTextWithAWarning) {
  const std::string reply = "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"ci";
  test::LogCapture log;
  EXPECT_EQ(parse_tool_calls(reply), (ToolCallDelta{reply, {}}));
  EXPECT_NE(log.text().find("is not closed by </tool_call>"), std::string::npos) << log.text();
  expect_calls(reply, {reply, {}});
  expect_calls(std::string(kWeatherCall) + "\n<tool_call>",
               {"<tool_call>", {call("call_0", "get_weather", R"({"city":"Paris","unit":"celsius"})")}});
}

TEST(ToolCallParser, WhitespaceAroundBlocks) {
  const std::string c = R"(<tool_call>{"name": "f"}</tool_call>)";
  const ToolCall f0 = call("call_0", "f", "{}");
  expect_calls("\n\n" + c + "\n\n", {"", {f0}});
  expect_calls("A " + c + " B", {"A B", {f0}});
  expect_calls("A\n" + c + "\nB\n", {"A\nB\n", {f0}});
  expect_calls(c + "\n\nDone.", {"Done.", {f0}});
  expect_calls("  A", {"  A", {}});
  expect_calls("A \n\t", {"A \n\t", {}});
}

TEST(ToolCallParser, HoldsTextBackOnlyFromAPossibleStartTag) {
  ToolCallParser p({.id_prefix = "x"});
  EXPECT_EQ(p.push("Let me check <tool"), (ToolCallDelta{"Let me check", {}}));
  EXPECT_EQ(p.pending_bytes(), 6u);
  EXPECT_EQ(p.push("box> now.\n"), (ToolCallDelta{" <toolbox> now.", {}}));
  EXPECT_EQ(p.push("<tool_call>\n{\"name\": \"f\", \"argu"), (ToolCallDelta{}));
  EXPECT_TRUE(p.in_block());
  EXPECT_EQ(p.push("ments\": {\"k\": 1}}\n</tool_"), (ToolCallDelta{}));
  EXPECT_EQ(p.push("call>"), (ToolCallDelta{"", {call("call_x_0", "f", R"({"k":1})")}}));
  EXPECT_FALSE(p.in_block());
  EXPECT_EQ(p.finish(), (ToolCallDelta{}));
  // finish() reset the numbering for the next reply.
  EXPECT_EQ(p.push(R"(<tool_call>{"name": "g"}</tool_call>)"), (ToolCallDelta{"", {call("call_x_0", "g", "{}")}}));
}

TEST(ToolCallParser, Ids) {
  EXPECT_EQ(tool_call_id("", 3), "call_3");
  EXPECT_EQ(tool_call_id("chatcmpl-9", 0), "call_chatcmpl-9_0");
}

TEST(ToolCallParser, RefusesEmptyTags) {
  ToolCallOptions no_start, no_end;
  no_start.start_tag = "";
  no_end.end_tag = "";
  EXPECT_THROW(ToolCallParser{no_start}, Error);
  EXPECT_THROW(parse_tool_calls("x", no_end), Error);
}

// Random replies over fragments that make and break blocks.
TEST(ToolCallParser, StreamingEqualsWholeTextForEverySplit) {
  const std::vector<std::string> fragments = {
      "<tool_call>{\"name\": \"f\"}</tool_call>",
      "<tool_call>\n{\"name\": \"g\", \"arguments\": {\"é\": [1]}}\n</tool_call>",
      "<tool_call>{\"name\": \"h\", \"arguments\": \"s\"}</tool_call>",
      "<tool_call>{bad}</tool_call>",
      "<tool_call>",
      "</tool_call>",
      "<tool_",
      "call>",
      "</",
      " ",
      "\n",
      "A",
      "{\"name\": \"f\"}"};
  std::mt19937 rng(777);
  test::QuietLog quiet;
  int with_calls = 0, with_text_blocks = 0;
  for (int round = 0; round < 300; ++round) {
    std::string text;
    const int n = std::uniform_int_distribution<int>(0, 9)(rng);
    for (int i = 0; i < n; ++i)
      text += fragments[std::uniform_int_distribution<std::size_t>(0, fragments.size() - 1)(rng)];
    const ToolCallDelta whole = parse_tool_calls(text);
    with_calls += !whole.calls.empty();
    with_text_blocks += whole.content.find("</tool_call>") != std::string::npos;
    test::for_each_split(
        text,
        [&](const test::Pieces& pieces) { ASSERT_EQ(stream_tool_calls(pieces), whole) << "text {" << text << "}"; }, 40,
        30);
  }
  // The fragments do make calls, and blocks that stay text.
  EXPECT_GT(with_calls, 30);
  EXPECT_GT(with_text_blocks, 30);
}

}  // namespace
}  // namespace kern::chat
