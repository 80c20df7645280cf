// Test helpers shared by the verifier and protocol tests: load a fixture manifest as JSON,
// mutate it with an RFC 6902 patch, parse it.
#pragma once

#include <string>

#include "kern/base/file.hpp"
#include "kern/base/json.hpp"
#include "kern/core/manifest.hpp"
#include "kern/core/verify.hpp"

namespace kern::core::testing {

// "toy", "qwen" (the examples), or a file name under tests/fixtures/manifests/valid/ without ".json".
inline std::string fixture_path(const std::string& base) {
  if (base == "toy") return std::string(KERN_SOURCE_DIR) + "/examples/toy.json";
  if (base == "qwen") return std::string(KERN_SOURCE_DIR) + "/examples/qwen3-like.json";
  return std::string(KERN_SOURCE_DIR) + "/tests/fixtures/manifests/valid/" + base + ".json";
}

inline Json load_fixture(const std::string& base) { return Json::parse(read_file(fixture_path(base))); }

inline Manifest parse_patched(const std::string& base, const std::string& patch) {
  Json j = load_fixture(base);
  if (!patch.empty()) j = j.patch(Json::parse(patch));
  return parse_manifest(j.dump(), base);
}

inline std::string describe(const std::vector<Violation>& vs) {
  std::string s;
  for (const auto& v : vs) s += "  " + v.line() + "\n";
  return s.empty() ? "  (none)\n" : s;
}

}  // namespace kern::core::testing
