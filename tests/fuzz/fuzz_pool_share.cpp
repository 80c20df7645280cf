// fuzz-deps: kern_pool kern_core kern_base
// libFuzzer target: arbitrary bytes through the pool-share description parser
// (include/kern/pool/share.hpp), what a second process reads before it maps another's pool. A
// malformed description must be an Error(Io), never a crash, hang or sanitizer report; an accepted one
// must write back to text that parses to the same description, and name every chunk at most once.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "kern/base/error.hpp"
#include "kern/pool/share.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  kern::pool::PoolShare s;
  try {
    s = kern::pool::parse_pool_share(text);
  } catch (const kern::Error& e) {
    if (e.kind() != kern::ErrorKind::Io) std::abort();
    return 0;
  }
  if (!(kern::pool::parse_pool_share(kern::pool::write_pool_share(s)) == s)) std::abort();
  std::vector<bool> used(s.chunks, false);
  for (const auto& a : s.arenas)
    for (std::int64_t c : a.chunks) {
      if (c < -1 || (c >= 0 && static_cast<std::uint64_t>(c) >= s.chunks)) std::abort();
      if (c >= 0) {
        if (used[static_cast<std::size_t>(c)]) std::abort();
        used[static_cast<std::size_t>(c)] = true;
      }
    }
  return 0;
}
