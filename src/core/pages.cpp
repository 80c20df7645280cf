#include "kern/core/pages.hpp"

#include <limits>
#include <numeric>

#include "kern/base/error.hpp"

namespace kern::core {

std::uint64_t page_unit_with(std::uint64_t unit, std::uint64_t stride) {
  if (stride == 0) return unit;
  const std::uint64_t step = stride / std::gcd(unit, stride);
  if (step > std::numeric_limits<std::uint64_t>::max() / unit)
    fail(ErrorKind::Manifest, "page unit (lcm of the page-table strides {} and {}) overflows 64 bits", unit, stride);
  return unit * step;
}

}  // namespace kern::core
