#include "gpu_fixture.hpp"

#include <cstdlib>

#include "kern/base/sha256.hpp"

namespace kern::gputest {

std::string kernels_dir() {
  if (const char* env = std::getenv("KERN_RUNTIME_TEST_KERNELS")) return env;
  return KERN_RUNTIME_TEST_KERNELS;
}
std::string production_kernels_dir() {
  if (const char* env = std::getenv("KERN_KERNELS_DIR"); env != nullptr && *env != '\0') return env;
  return std::string(KERN_BINARY_DIR) + "/kernels";
}

std::string cubin_path() { return kernels_dir() + "/runtime_test_kernels.cubin"; }
std::string fatbin_path() { return kernels_dir() + "/runtime_test_kernels.fatbin"; }
std::string cubin_sha() {
  static std::string s = sha256_file_hex(cubin_path());
  return s;
}
std::string fatbin_sha() {
  static std::string s = sha256_file_hex(fatbin_path());
  return s;
}

core::Verified verified(std::string json, const std::string& sha) {
  for (std::size_t at = json.find("@SHA@"); at != std::string::npos; at = json.find("@SHA@")) json.replace(at, 5, sha);
  return core::verify(core::parse_manifest(json, "test manifest"));
}

std::unique_ptr<runtime::Runtime> load(const core::Verified& v, runtime::RuntimeOptions options,
                                       const std::string& dir) {
  return runtime::Runtime::load(v, dir, options);
}

std::uint16_t to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<std::uint16_t>(u >> 16);
}

float from_bf16(std::uint16_t h) {
  std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::vector<std::uint16_t> random_bf16(std::size_t n, std::uint64_t seed) {
  std::vector<std::uint16_t> out(n);
  std::uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& x : out) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    float f = static_cast<float>(static_cast<double>(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    x = to_bf16(f);
  }
  return out;
}

std::vector<float> random_f32(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<float> d(-4.0f, 4.0f);
  std::vector<float> out(n);
  for (auto& x : out) x = d(g);
  return out;
}

}  // namespace kern::gputest
