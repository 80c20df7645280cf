#include "pool/grain_allocator.hpp"

#include <iterator>

#include "kern/base/error.hpp"

namespace kern::pool::detail {

void GrainAllocator::init(std::uint64_t grains) {
  free_.clear();
  grains_ = grains;
  used_ = 0;
  if (grains > 0) free_.emplace(0, grains);
}

std::optional<std::uint64_t> GrainAllocator::alloc_low(std::uint64_t n) {
  if (n == 0) fail(ErrorKind::Api, "host: allocation of 0 grains");
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < n) continue;
    const std::uint64_t first = it->first, len = it->second;
    free_.erase(it);
    if (len > n) free_.emplace(first + n, len - n);
    used_ += n;
    return first;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> GrainAllocator::alloc_high(std::uint64_t n) {
  if (n == 0) fail(ErrorKind::Api, "host: allocation of 0 grains");
  for (auto it = free_.rbegin(); it != free_.rend(); ++it) {
    if (it->second < n) continue;
    const std::uint64_t first = it->first + it->second - n;
    it->second -= n;
    if (it->second == 0) free_.erase(std::next(it).base());
    used_ += n;
    return first;
  }
  return std::nullopt;
}

void GrainAllocator::free(std::uint64_t first, std::uint64_t n) {
  if (n == 0 || first + n > grains_ || n > used_)
    fail(ErrorKind::Api, "host: internal error, freeing grains [{}, {})", first, first + n);
  auto next = free_.lower_bound(first);
  if (next != free_.end() && next->first < first + n)
    fail(ErrorKind::Api, "host: internal error, grains [{}, {}) freed twice", first, first + n);
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second > first)
      fail(ErrorKind::Api, "host: internal error, grains [{}, {}) freed twice", first, first + n);
    if (prev->first + prev->second == first) {
      first = prev->first;
      n += prev->second;
      used_ += prev->second;  // compensated below
      free_.erase(prev);
    }
  }
  if (next != free_.end() && next->first == first + n) {
    n += next->second;
    used_ += next->second;
    free_.erase(next);
  }
  free_.emplace(first, n);
  used_ -= n;
}

}  // namespace kern::pool::detail
