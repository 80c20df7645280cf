// Loader defaults and their environment overrides.
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <string_view>
#include <thread>

#include "kern/base/error.hpp"
#include "kern/runtime/weight_loader.hpp"

namespace kern::runtime {

unsigned default_load_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return std::clamp(hw, 1u, 16u);
}

namespace {

// The value of `name` as an integer in [lo, hi], or nullopt when unset.
std::optional<std::uint64_t> env_integer(const std::function<const char*(const char*)>& get, const char* name,
                                         std::uint64_t lo, std::uint64_t hi) {
  const char* raw = get(name);
  if (raw == nullptr) return std::nullopt;
  const std::string_view text(raw);
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi)
    fail(ErrorKind::Api, "{}=\"{}\": expected an integer in [{}, {}]", name, text, lo, hi);
  return v;
}

}  // namespace

LoaderOptions loader_options_from_env(LoaderOptions base, const std::function<const char*(const char*)>& getenv_fn) {
  const std::function<const char*(const char*)> get =
      getenv_fn ? getenv_fn : [](const char* n) -> const char* { return std::getenv(n); };
  if (auto v = env_integer(get, "KERN_LOAD_THREADS", 1, 256)) base.threads = static_cast<unsigned>(*v);
  if (auto v = env_integer(get, "KERN_LOAD_SLABS", 1, 64)) base.slabs = static_cast<unsigned>(*v);
  if (auto v = env_integer(get, "KERN_LOAD_SLAB_MIB", 1, 1024)) base.layout.slab_bytes = *v << 20;
  if (auto v = env_integer(get, "KERN_LOAD_READ_MIB", 1, 1024)) base.layout.read_bytes = *v << 20;
  if (auto v = env_integer(get, "KERN_LOAD_2D", 0, 1)) base.copy_2d = *v == 1;
  return base;
}

}  // namespace kern::runtime
