// fuzz-deps: kern_core kern_base
// libFuzzer target: arbitrary text through kern capture's record parser (include/kern/core/
// capture.hpp). A malformed record must be an Error(KernelArtifact), never a crash, hang or
// sanitizer report; an accepted one must write back to text that parses to the same text again,
// and summarise with shares that add up.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kern/base/error.hpp"
#include "kern/core/capture.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  kern::core::Capture c;
  try {
    c = kern::core::parse_capture(text);
  } catch (const kern::Error& e) {
    if (e.kind() != kern::ErrorKind::KernelArtifact) std::abort();
    return 0;
  }
  const std::string once = kern::core::write_capture(c);
  const std::string twice = kern::core::write_capture(kern::core::parse_capture(once));
  if (once != twice) std::abort();
  const kern::core::CaptureSummary s = kern::core::summarize_capture(c);
  double share = 0.0;
  std::uint64_t launches = 0;
  for (const auto& k : s.kernels) share += k.share, launches += k.launches;
  if (launches != s.launches || s.kernels.size() != s.entries) std::abort();
  if (s.ns > 0 && std::fabs(share - 1.0) > 1e-9) std::abort();
  (void)kern::core::describe(s);
  return 0;
}
