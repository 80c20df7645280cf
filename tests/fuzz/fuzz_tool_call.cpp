// fuzz-deps: kern_chat kern_base
// libFuzzer target: arbitrary text through the reasoning splitter and the tool-call parser, whole
// and streamed in random pieces (the cuts drawn from the input's first bytes). Streaming must
// equal the whole-text result for every cut, for each parser alone and for the two chained
// (the tool-call parser fed the reasoning parser's content); any difference aborts. Nothing may
// throw, crash, hang or trip a sanitizer.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "kern/base/log.hpp"
#include "kern/chat/reasoning_parser.hpp"
#include "kern/chat/tool_call_parser.hpp"

namespace {

using namespace kern::chat;

// Cut points from a seed: pieces of 0..15 bytes, now and then a long one.
std::vector<std::string_view> cut(std::string_view text, std::uint32_t seed) {
  std::vector<std::string_view> pieces;
  std::uint32_t x = seed | 1u;
  std::size_t at = 0;
  while (at < text.size()) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    const std::size_t n = (x & 0xF0000u) == 0 ? (x >> 8) % 512 : x % 16;
    pieces.push_back(text.substr(at, n));
    at += std::min(n, text.size() - at);
  }
  return pieces;
}

// Tag pairs: the parsers' defaults (Qwen3's, index 0), and short ones that overlap themselves or
// each other.
struct Tags {
  const char* start;
  const char* end;
};
constexpr Tags kReasoningTags[] = {{nullptr, nullptr}, {"aa", "aab"}, {"<", "<<"}, {"x", "x"}};
constexpr Tags kToolTags[] = {{nullptr, nullptr}, {"[[", "]]"}, {"aa", "aa"}, {"{", "}"}};

template <class Options>
Options with_tags(Options o, const Tags& t) {
  if (t.start) {
    o.start_tag = t.start;
    o.end_tag = t.end;
  }
  return o;
}

ReasoningOptions reasoning_options(std::uint8_t flags) {
  ReasoningOptions o;
  o.starts_in_reasoning = flags & 1;
  return with_tags(o, kReasoningTags[(flags >> 1) & 3]);
}

ToolCallOptions tool_options(std::uint8_t flags) {
  ToolCallOptions o;
  o.id_prefix = "f";
  return with_tags(o, kToolTags[(flags >> 3) & 3]);
}

void add(ToolCallDelta& all, ToolCallDelta d) {
  all.content += d.content;
  for (auto& c : d.calls) all.calls.push_back(std::move(c));
}

void check(std::string_view text, std::uint8_t flags, std::uint32_t seed) {
  const ReasoningOptions ro = reasoning_options(flags);
  const ToolCallOptions to = tool_options(flags);
  const ReasoningDelta whole = parse_reasoning(text, ro);
  if (whole.reasoning.size() + whole.content.size() > text.size()) std::abort();
  const ToolCallDelta whole_tools = parse_tool_calls(text, to);
  const ToolCallDelta whole_chained = parse_tool_calls(whole.content, to);

  ReasoningParser reasoning(ro);
  ToolCallParser tools(to), chained(to);
  ReasoningDelta streamed;
  ToolCallDelta streamed_tools, streamed_chained;
  for (std::string_view piece : cut(text, seed)) {
    ReasoningDelta d = reasoning.push(piece);
    if (!d.reasoning.empty() && !streamed.content.empty()) std::abort();  // reasoning after content
    streamed.reasoning += d.reasoning;
    streamed.content += d.content;
    add(streamed_chained, chained.push(d.content));
    add(streamed_tools, tools.push(piece));
  }
  ReasoningDelta d = reasoning.finish();
  streamed.reasoning += d.reasoning;
  streamed.content += d.content;
  add(streamed_chained, chained.push(d.content));
  add(streamed_chained, chained.finish());
  add(streamed_tools, tools.finish());
  if (streamed != whole) std::abort();
  if (streamed_tools != whole_tools) std::abort();
  if (streamed_chained != whole_chained) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kern::log().set_level(spdlog::level::off);  // malformed blocks warn on nearly every input
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 5) return 0;
  const std::uint8_t flags = data[0];
  const std::uint32_t seed = data[1] | data[2] << 8 | data[3] << 16 | static_cast<std::uint32_t>(data[4]) << 24;
  check(std::string_view(reinterpret_cast<const char*>(data) + 5, size - 5), flags, seed);
  return 0;
}
