#include "kern/serve/openai_response.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace {

using namespace kern::serve;

const ResponseHeader kChatHeader{"chatcmpl-1", 1700000000, "qwen3"};
const ResponseHeader kCmplHeader{"cmpl-1", 1700000000, "qwen3"};

TEST(ResponseIds, Prefixes) {
  EXPECT_EQ(response_id(RequestKind::Chat, 0x1, 0xabc), "chatcmpl-0000000000000001" "0000000000000abc");
  EXPECT_EQ(response_id(RequestKind::Completion, ~0ull, 0), "cmpl-ffffffffffffffff0000000000000000");
}

TEST(ChatCompletion, PlainAnswer) {
  ChatChoice c;
  c.content = "Hello!";
  const std::vector<ChatChoice> choices = {c};
  EXPECT_EQ(to_body(chat_completion_json(kChatHeader, choices, Usage{5, 2, 3})),
            R"({"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"qwen3","choices":[)"
            R"({"index":0,"message":{"role":"assistant","content":"Hello!"},"logprobs":null,"finish_reason":"stop"}],)"
            R"("usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7,"prompt_tokens_details":{"cached_tokens":3}}})");
}

TEST(ChatCompletion, ReasoningToolCallsAndSeveralChoices) {
  ChatChoice a;
  a.reasoning_content = "think";
  a.tool_calls = {{"call_1", "get_weather", R"({"city": "Paris"})"}, {"call_2", "noop", "{}"}};
  a.finish_reason = FinishReason::ToolCalls;
  ChatChoice b;
  b.content = "no";
  b.finish_reason = FinishReason::Length;
  const std::vector<ChatChoice> choices = {a, b};
  EXPECT_EQ(to_body(chat_completion_json(kChatHeader, choices, Usage{1, 2, 0})),
            R"({"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"qwen3","choices":[)"
            R"({"index":0,"message":{"role":"assistant","content":null,"reasoning_content":"think","tool_calls":[)"
            R"({"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},)"
            R"({"id":"call_2","type":"function","function":{"name":"noop","arguments":"{}"}}]},"logprobs":null,"finish_reason":"tool_calls"},)"
            R"({"index":1,"message":{"role":"assistant","content":"no"},"logprobs":null,"finish_reason":"length"}],)"
            R"("usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3,"prompt_tokens_details":{"cached_tokens":0}}})");
}

TEST(ChatCompletion, EmptyContentWithoutToolsIsAString) {
  const std::vector<ChatChoice> choices = {ChatChoice{}};
  const ResponseJson j = chat_completion_json(kChatHeader, choices, {});
  EXPECT_EQ(j["choices"][0]["message"]["content"], "");
  EXPECT_FALSE(j["choices"][0]["message"].contains("reasoning_content"));
  EXPECT_FALSE(j["choices"][0]["message"].contains("tool_calls"));
}

TEST(ChatLogprobs, Shape) {
  ChatChoice c;
  c.content = "Hé";
  c.logprobs = std::vector<TokenLogprob>{{"H", -0.25, {{"H", -0.25}, {"A", -1.5}}},
                                         {"\xC3", -0.5, {}},  // part of "é": bytes carry it
                                         {"\xA9", -std::numeric_limits<double>::infinity(), {}}};
  const std::vector<ChatChoice> choices = {c};
  const ResponseJson j = chat_completion_json(kChatHeader, choices, {});
  EXPECT_EQ(to_body(j["choices"][0]["logprobs"]),
            R"({"content":[{"token":"H","logprob":-0.25,"bytes":[72],"top_logprobs":[{"token":"H","logprob":-0.25,"bytes":[72]},)"
            R"({"token":"A","logprob":-1.5,"bytes":[65]}]},)"
            "{\"token\":\"\xEF\xBF\xBD\",\"logprob\":-0.5,\"bytes\":[195],\"top_logprobs\":[]},"
            "{\"token\":\"\xEF\xBF\xBD\",\"logprob\":-9999.0,\"bytes\":[169],\"top_logprobs\":[]}]}");
}

TEST(Completion, Shape) {
  CompletionChoice c;
  c.text = " world";
  c.finish_reason = FinishReason::Length;
  const std::vector<CompletionChoice> choices = {c};
  EXPECT_EQ(to_body(completion_json(kCmplHeader, choices, Usage{2, 1, 0})),
            R"({"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"qwen3","choices":[)"
            R"({"index":0,"text":" world","logprobs":null,"finish_reason":"length"}],)"
            R"("usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3,"prompt_tokens_details":{"cached_tokens":0}}})");
}

TEST(CompletionLogprobs, EchoPutsPromptFirstWithNullLogprob) {
  CompletionChoice c;
  c.text = "Hi thereé";
  c.logprobs = std::vector<TokenLogprob>{
      {"Hi", std::nullopt, {}},                              // first prompt token: nothing predicts it
      {" there", -2.0, {{" there", -2.0}, {" you", -1.0}}},  // prompt token
      {"é", -0.5, {{"é", -0.5}, {"e", -1.25}, {"é", -3.0}}}, // generated; a repeated text keeps the first
  };
  const std::vector<CompletionChoice> choices = {c};
  const ResponseJson j = completion_json(kCmplHeader, choices, {});
  EXPECT_EQ(to_body(j["choices"][0]["logprobs"]),
            R"({"tokens":["Hi"," there","é"],"token_logprobs":[null,-2.0,-0.5],)"
            R"("top_logprobs":[null,{" there":-2.0," you":-1.0},{"é":-0.5,"e":-1.25}],"text_offset":[0,2,8]})");
}

TEST(CompletionLogprobs, OffsetsCountCodePointsAcrossSplitCharacters) {
  // "€" (3 bytes) split over two tokens, then "x": offsets 0, 1 (the second piece adds no
  // character), 1 + first_offset.
  const std::vector<TokenLogprob> t = {{"\xE2\x82", -1.0, {}}, {"\xAC", -1.0, {}}, {"x", -1.0, {}}};
  const ResponseJson j = completion_logprobs_json(t, 10);
  EXPECT_EQ(to_body(j["text_offset"]), "[10,11,11]");
  EXPECT_EQ(code_points("a€😀"), 3u);
}

TEST(ChatChunks, FirstMiddleLastAndUsage) {
  StreamHeader s{kChatHeader, RequestKind::Chat, true};
  ChatChunkChoice first;
  first.first = true;
  EXPECT_EQ(sse_event(chat_chunk_json(s, std::vector<ChatChunkChoice>{first})),
            R"(data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"qwen3","choices":[)"
            R"({"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null})"
            "\n\n");
  ChatChunkChoice mid;
  mid.reasoning_content = "hm";
  mid.content = "Hi";
  EXPECT_EQ(to_body(chat_chunk_json(s, std::vector<ChatChunkChoice>{mid})["choices"][0]),
            R"({"index":0,"delta":{"content":"Hi","reasoning_content":"hm"},"logprobs":null,"finish_reason":null})");
  ChatChunkChoice last;
  last.finish_reason = FinishReason::Stop;
  EXPECT_EQ(to_body(chat_chunk_json(s, std::vector<ChatChunkChoice>{last})["choices"][0]),
            R"({"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"})");
  EXPECT_EQ(sse_event(usage_chunk_json(s, Usage{3, 4, 1})),
            R"(data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"qwen3","choices":[],)"
            R"("usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7,"prompt_tokens_details":{"cached_tokens":1}}})"
            "\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
  // Without include_usage no chunk carries a usage key.
  s.include_usage = false;
  EXPECT_FALSE(chat_chunk_json(s, std::vector<ChatChunkChoice>{mid}).contains("usage"));
}

TEST(ChatChunks, ToolCallDeltasAndLogprobs) {
  StreamHeader s{kChatHeader, RequestKind::Chat, false};
  ChatChunkChoice c;
  c.index = 1;
  c.tool_calls = {{0, "call_9", "get", ""}, {0, "", "", "{\"a\":"}};
  c.logprobs = std::vector<TokenLogprob>{{"x", -0.5, {}}};
  c.finish_reason = FinishReason::ToolCalls;
  EXPECT_EQ(to_body(chat_chunk_json(s, std::vector<ChatChunkChoice>{c})["choices"][0]),
            R"({"index":1,"delta":{"tool_calls":[{"index":0,"id":"call_9","type":"function","function":{"name":"get","arguments":""}},)"
            R"({"index":0,"function":{"arguments":"{\"a\":"}}]},)"
            R"("logprobs":{"content":[{"token":"x","logprob":-0.5,"bytes":[120],"top_logprobs":[]}]},"finish_reason":"tool_calls"})");
}

TEST(CompletionChunks, TextLogprobsAndUsage) {
  StreamHeader s{kCmplHeader, RequestKind::Completion, true};
  CompletionChunkChoice c;
  c.text = "ab";
  c.text_offset = 5;
  c.logprobs = std::vector<TokenLogprob>{{"a", -1.0, {{"a", -1.0}}}, {"b", -2.0, {{"b", -2.0}}}};
  EXPECT_EQ(sse_event(completion_chunk_json(s, std::vector<CompletionChunkChoice>{c})),
            R"(data: {"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"qwen3","choices":[)"
            R"({"index":0,"text":"ab","logprobs":{"tokens":["a","b"],"token_logprobs":[-1.0,-2.0],"top_logprobs":[{"a":-1.0},{"b":-2.0}],)"
            R"("text_offset":[5,6]},"finish_reason":null}],"usage":null})"
            "\n\n");
  CompletionChunkChoice end;
  end.finish_reason = FinishReason::Length;
  EXPECT_EQ(to_body(completion_chunk_json(s, std::vector<CompletionChunkChoice>{end})["choices"][0]),
            R"({"index":0,"text":"","logprobs":null,"finish_reason":"length"})");
  EXPECT_EQ(to_body(usage_chunk_json(s, Usage{1, 1, 0})),
            R"({"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"qwen3","choices":[],)"
            R"("usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2,"prompt_tokens_details":{"cached_tokens":0}}})");
}

TEST(Models, List) {
  const std::vector<ModelCard> models = {{"qwen3-4b", 1700000001, 40960}};
  EXPECT_EQ(to_body(models_json(models)),
            R"({"object":"list","data":[{"id":"qwen3-4b","object":"model","created":1700000001,"owned_by":"kern","max_model_len":40960}]})");
  EXPECT_EQ(to_body(models_json({})), R"({"object":"list","data":[]})");
}

TEST(Utf8Safety, IllFormedTextNeverThrows) {
  // Non-ASCII stays raw UTF-8 (no \u escapes); ill-formed bytes become U+FFFD.
  ChatChoice c;
  c.content = "ok é \xFF \xC3";
  c.reasoning_content = "\xE2\x82";
  c.tool_calls = {{"id\x80", "n\xC0", "{\"a\":\"\xF0\x9F\"}"}};
  const std::vector<ChatChoice> choices = {c};
  std::string body;
  ASSERT_NO_THROW(body = to_body(chat_completion_json(kChatHeader, choices, {})));
  EXPECT_NE(body.find("ok é \xEF\xBF\xBD \xEF\xBF\xBD"), std::string::npos) << body;
  EXPECT_EQ(body.find("\\u"), std::string::npos);
  const ResponseJson reparsed = ResponseJson::parse(body);  // what came out is valid UTF-8 JSON
  EXPECT_EQ(reparsed["choices"][0]["message"]["role"], "assistant");
  CompletionChunkChoice k;
  k.text = "\xED\xA0\x80";
  k.logprobs = std::vector<TokenLogprob>{{"\xFE", -1.0, {{"\xFE", -1.0}, {"\xFF", -2.0}}}};
  ASSERT_NO_THROW(body = sse_event(completion_chunk_json(StreamHeader{kCmplHeader, RequestKind::Completion, false},
                                                         std::vector<CompletionChunkChoice>{k})));
  ResponseJson chunk;
  EXPECT_NO_THROW(chunk = ResponseJson::parse(body.substr(6)));
  EXPECT_EQ(chunk["object"], "text_completion");
}

TEST(Logprobs, NonFiniteValuesBecomeFinite) {
  const std::vector<TokenLogprob> t = {{"a", std::nan(""), {{"b", -1e30}}}, {"c", 1e-9, {}}};
  EXPECT_EQ(to_body(completion_logprobs_json(t)["token_logprobs"]), "[-9999.0,0.0]");
  EXPECT_EQ(to_body(completion_logprobs_json(t)["top_logprobs"][0]), R"({"b":-9999.0})");
}

}  // namespace
