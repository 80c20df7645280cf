// Allocator of a fixed block in grains: pages first-fit from the low end, slots from the high
// end, free runs kept coalesced.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

namespace kern::pool::detail {

class GrainAllocator {
 public:
  void init(std::uint64_t grains);
  std::optional<std::uint64_t> alloc_low(std::uint64_t n);   // lowest run that fits
  std::optional<std::uint64_t> alloc_high(std::uint64_t n);  // highest run that fits, its top end
  void free(std::uint64_t first, std::uint64_t n);
  std::uint64_t used() const { return used_; }
  std::uint64_t grains() const { return grains_; }
  const std::map<std::uint64_t, std::uint64_t>& free_runs() const { return free_; }

 private:
  std::map<std::uint64_t, std::uint64_t> free_;  // first grain -> length
  std::uint64_t grains_ = 0, used_ = 0;
};

}  // namespace kern::pool::detail
