// fuzz-deps: kern_chat kern_base
// Chat templates: the input is a template, optionally followed by a NUL byte and a JSON request.
// Loading either succeeds or throws Error(Template); rendering (with small limits) either returns
// or throws Error(Template / Api). Never a crash, hang, leak or sanitizer report.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kern/base/error.hpp"
#include "kern/chat/chat_template.hpp"

namespace {

constexpr std::string_view kDefaultRequest =
    R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi 日本"},
        {"role": "assistant", "content": "<think>r</think>a", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]},
        {"role": "tool", "content": "{\"t\": 1.5}"}], "tools": [{"type": "function", "function": {"name": "f"}}],
        "add_generation_prompt": true, "enable_thinking": false})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  const std::string_view source = input.substr(0, nul);
  const std::string_view request_text = nul == std::string_view::npos ? kDefaultRequest : input.substr(nul + 1);
  static const nlohmann::ordered_json kDefault = nlohmann::ordered_json::parse(kDefaultRequest);
  nlohmann::ordered_json request =
      nul == std::string_view::npos ? kDefault : nlohmann::ordered_json::parse(request_text, nullptr, false);
  if (request.is_discarded()) request = kDefault;

  std::optional<kern::chat::ChatTemplate> tmpl;
  try {
    tmpl = kern::chat::ChatTemplate::from_source(source, "<s>", "</s>", "fuzz");
  } catch (const kern::Error& e) {
    if (e.kind() != kern::ErrorKind::Template) std::abort();
    return 0;
  }
  kern::chat::jinja::RenderLimits limits;
  limits.max_steps = 20000;
  limits.max_output = 1 << 16;
  limits.max_call_depth = 16;
  try {
    const std::string out = tmpl->render(request, limits);
    if (out.size() > limits.max_output) std::abort();
  } catch (const kern::Error& e) {
    if (e.kind() != kern::ErrorKind::Template && e.kind() != kern::ErrorKind::Api) std::abort();
  }
  return 0;
}
