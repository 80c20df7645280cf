// What each input buffer of one sequence is known to start with, and the smallest write that
// brings it to new contents: one ranged write from the first element that differs. A decode step
// then writes the token, position, slot and seq_len elements, and the one new page-table entry
// when a page begins (not the whole row, which grows with the context).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kern/core/manifest.hpp"

namespace kern::driver {

class Executor;

class InputShadow {
 public:
  // Element sizes and monotone domains come from the manifest's input buffers.
  explicit InputShadow(const core::Manifest& m);

  // Forgets everything: the next write of each buffer writes all the bytes it is given.
  void clear() { known_.clear(); }

  // Makes input `buffer` start with `bytes`: writes through `exec` the elements from the first
  // one that differs from what the buffer is known to hold (from element 0 when its domain is
  // monotone: the runtime checks it against the elements before) up to the end of `bytes`.
  // Returns the bytes written (0 when nothing changed). Nothing is remembered when the write fails.
  std::uint64_t write(Executor& exec, std::string_view buffer, std::span<const std::byte> bytes);

  // The first bytes the buffer is known to hold (empty when none).
  std::span<const std::byte> known(std::string_view buffer) const;

 private:
  struct Layout {
    std::size_t element = 1;
    bool monotone = false;
  };
  std::map<std::string, Layout, std::less<>> layout_;
  std::map<std::string, std::vector<std::byte>, std::less<>> known_;
};

}  // namespace kern::driver
