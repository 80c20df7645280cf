// ReasoningParser / parse_reasoning: Qwen3 replies, the streaming hold-back, and the property
// that the streamed deltas of any split of a text add up to the whole-text split.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kern/base/error.hpp"
#include "kern/chat/reasoning_parser.hpp"
#include "kern/chat/tool_call_parser.hpp"
#include "split_helpers.hpp"

namespace kern::chat {

void PrintTo(const ReasoningDelta& d, std::ostream* os) {
  *os << "reasoning " << testing::PrintToString(d.reasoning) << " content " << testing::PrintToString(d.content);
}

namespace {

ReasoningDelta stream_reasoning(const test::Pieces& pieces, const ReasoningOptions& options = {}) {
  ReasoningParser parser(options);
  ReasoningDelta all;
  for (std::string_view p : pieces) {
    ReasoningDelta d = parser.push(p);
    if (!d.reasoning.empty()) {
      EXPECT_TRUE(all.content.empty()) << "reasoning after content";
    }
    all.reasoning += d.reasoning;
    all.content += d.content;
  }
  ReasoningDelta d = parser.finish();
  all.reasoning += d.reasoning;
  all.content += d.content;
  return all;
}

// parse_reasoning(text) == expected, and every split of text streams to the same.
void expect_split(std::string_view text, const ReasoningDelta& expected, const ReasoningOptions& options = {}) {
  EXPECT_EQ(parse_reasoning(text, options), expected) << text;
  int failures = 0;
  test::for_each_split(text, [&](const test::Pieces& pieces) {
    if (failures > 3) return;
    ReasoningDelta got = stream_reasoning(pieces, options);
    if (got != expected) {
      ++failures;
      std::string cut;
      for (auto p : pieces) cut += "[" + std::string(p) + "]";
      ADD_FAILURE() << "split " << cut << " gave reasoning {" << got.reasoning << "} content {" << got.content << "}";
    }
  });
}

ReasoningDelta split(std::string reasoning, std::string content) { return {std::move(reasoning), std::move(content)}; }

TEST(ReasoningParser, QwenThinkingReply) {
  expect_split(
      "<think>\nThe user greets me. I should greet back and offer help.\n</think>\n\nHello! How can I help you "
      "today?",
      split("The user greets me. I should greet back and offer help.", "Hello! How can I help you today?"));
}

TEST(ReasoningParser, ReasoningOverSeveralParagraphsKeepsInnerNewlines) {
  expect_split("<think>\nFirst, 2 + 2.\n\nThat is 4.\n</think>\n\nThe answer is **4**.\n\nAnything else?",
               split("First, 2 + 2.\n\nThat is 4.", "The answer is **4**.\n\nAnything else?"));
}

TEST(ReasoningParser, ThinkingDisabledReplyIsContent) {
  // enable_thinking=false: the template wrote "<think>\n\n</think>\n\n" into the prompt.
  expect_split("Paris is the capital of France.", split("", "Paris is the capital of France."));
}

TEST(ReasoningParser, EmptyThinkBlock) {
  expect_split("<think>\n\n</think>\n\nHi there.", split("", "Hi there."));
  expect_split("<think></think>Hi", split("", "Hi"));
}

TEST(ReasoningParser, PromptOpenedTheBlock) {
  // Qwen3-Thinking-2507: the prompt ends with "<think>\n"; the model writes only the end tag.
  const ReasoningOptions opened{.starts_in_reasoning = true};
  expect_split("Okay, 17 is prime: no divisor up to 4.\n</think>\n\nYes, 17 is prime.",
               split("Okay, 17 is prime: no divisor up to 4.", "Yes, 17 is prime."), opened);
  // A start tag written anyway is dropped.
  expect_split("<think>\nHmm.\n</think>\n\nYes.", split("Hmm.", "Yes."), opened);
}

TEST(ReasoningParser, TruncatedReasoningKeepsItsTrailingNewlines) {
  expect_split("<think>\nLet me count: 1, 2, 3\n\n", split("Let me count: 1, 2, 3\n\n", ""));
  expect_split("<think>\nLet me count </thi", split("Let me count </thi", ""));
  expect_split("<thi", split("", "<thi"));
  expect_split("<thi", split("<thi", ""), {.starts_in_reasoning = true});
}

TEST(ReasoningParser, TagsLaterInTheTextArePlainText) {
  expect_split("Qwen3 wraps its thoughts in <think> and </think>.",
               split("", "Qwen3 wraps its thoughts in <think> and </think>."));
  expect_split("<think>\nWrite <think>?\n</think>\n\nUse </think> to close.",
               split("Write <think>?", "Use </think> to close."));
}

TEST(ReasoningParser, ToolCallInsideReasoningIsNotACall) {
  const std::string reply =
      "<think>\nI could emit <tool_call>\n{\"name\": \"search\", \"arguments\": {}}\n</tool_call> but the user only "
      "wants a joke.\n</think>\n\nWhy did the GPU cross the road?";
  const ReasoningDelta r = parse_reasoning(reply);
  EXPECT_NE(r.reasoning.find("<tool_call>"), std::string::npos);
  const ToolCallDelta t = parse_tool_calls(r.content);
  EXPECT_TRUE(t.calls.empty());
  EXPECT_EQ(t.content, "Why did the GPU cross the road?");
}

TEST(ReasoningParser, CustomTags) {
  ReasoningOptions seed;
  seed.start_tag = "<seed:think>";
  seed.end_tag = "</seed:think>";
  expect_split("<seed:think>a<think>b</seed:think>c", split("a<think>b", "c"), seed);
}

TEST(ReasoningParser, RefusesBadTags) {
  ReasoningOptions no_start, newline_end, no_end;
  no_start.start_tag = "";
  newline_end.end_tag = "\n</think>";
  no_end.end_tag = "";
  EXPECT_THROW(ReasoningParser{no_start}, Error);
  EXPECT_THROW(ReasoningParser{newline_end}, Error);
  EXPECT_THROW(parse_reasoning("x", no_end), Error);
}

TEST(ReasoningParser, HoldsBackATagCutAcrossPieces) {
  ReasoningParser p;
  EXPECT_EQ(p.push("<thi"), split("", ""));
  EXPECT_EQ(p.pending_bytes(), 4u);
  EXPECT_EQ(p.push("nk>\n"), split("", ""));
  EXPECT_TRUE(p.in_reasoning());
  EXPECT_EQ(p.push("Two plus two is four.\n</thi"), split("Two plus two is four.", ""));
  EXPECT_EQ(p.pending_bytes(), 6u);  // "\n</thi"
  EXPECT_EQ(p.push("nk>\n\n"), split("", ""));
  EXPECT_FALSE(p.in_reasoning());
  EXPECT_EQ(p.push("4"), split("", "4"));
  EXPECT_EQ(p.finish(), split("", ""));
}

TEST(ReasoningParser, ReleasesWhatTurnsOutNotToBeATag) {
  ReasoningParser p;
  EXPECT_EQ(p.push("<think>a </t"), split("a ", ""));
  EXPECT_EQ(p.push("able>"), split("</table>", ""));
  EXPECT_EQ(p.push("\n\n"), split("", ""));  // may precede the end tag
  EXPECT_EQ(p.push("b"), split("\n\nb", ""));
  EXPECT_EQ(p.finish(), split("", ""));
}

TEST(ReasoningParser, FinishReleasesAndResets) {
  ReasoningParser p;
  EXPECT_EQ(p.push("<think>x\n</thi"), split("x", ""));
  EXPECT_EQ(p.finish(), split("\n</thi", ""));
  EXPECT_EQ(p.pending_bytes(), 0u);
  EXPECT_EQ(p.push("<think>y</think>z"), split("y", "z"));
}

// Random texts over fragments that make and break tags and newlines around them.
TEST(ReasoningParser, StreamingEqualsWholeTextForEverySplit) {
  const std::vector<std::string> fragments = {"<think>", "</think>", "<thi", "nk>",   "</", "<", "\n", "\n\n",
                                              "a",       " ",        "é",    "think", ">",  "/", "x\n"};
  std::mt19937 rng(12345);
  int both = 0;
  for (int round = 0; round < 300; ++round) {
    std::string text;
    const int n = std::uniform_int_distribution<int>(0, 10)(rng);
    for (int i = 0; i < n; ++i)
      text += fragments[std::uniform_int_distribution<std::size_t>(0, fragments.size() - 1)(rng)];
    for (bool opened : {false, true}) {
      const ReasoningOptions options{.starts_in_reasoning = opened};
      const ReasoningDelta whole = parse_reasoning(text, options);
      both += !whole.reasoning.empty() && !whole.content.empty();
      test::for_each_split(
          text,
          [&](const test::Pieces& pieces) {
            ASSERT_EQ(stream_reasoning(pieces, options), whole) << "text {" << text << "} opened " << opened;
          },
          40, 30);
    }
  }
  EXPECT_GT(both, 50);  // the fragments do make replies with reasoning and content
}

}  // namespace
}  // namespace kern::chat
