// Co-residency arithmetic for cooperative launches (see cooperative.hpp).
#include "runtime/cooperative.hpp"

#include <algorithm>

#include "kern/base/error.hpp"

namespace kern::runtime {

std::vector<std::uint64_t> launch_peak_vars(std::vector<std::uint64_t> at_max, std::optional<std::uint32_t> when_var,
                                            std::optional<std::uint64_t> when_max) {
  if (when_var && when_max && *when_var < at_max.size())
    at_max[*when_var] = std::min(at_max[*when_var], std::max<std::uint64_t>(*when_max, 1));
  return at_max;
}

std::uint64_t grid_blocks_at(const std::array<CompiledExpr, 3>& grid, const std::uint64_t* vars,
                             const std::string& where) {
  std::uint64_t blocks = 1;
  for (std::size_t a = 0; a < 3; ++a) {
    const std::optional<std::uint64_t> n = grid[a].eval(vars);
    if (!n) fail(ErrorKind::Manifest, "{}: grid[{}] ({}) overflows at the var bounds", where, a, grid[a].text);
    if (__builtin_mul_overflow(blocks, *n, &blocks))
      fail(ErrorKind::Manifest, "{}: the grid's block count overflows u64 at the var bounds", where);
  }
  return blocks;
}

void check_cooperative_fit(const std::string& where, std::uint64_t blocks, int per_sm, int sms) {
  if (per_sm < 0 || sms <= 0)
    fail(ErrorKind::Cuda, "{}: the driver reports {} SMs and {} resident blocks per SM", where, sms, per_sm);
  if (per_sm == 0)
    fail(ErrorKind::Manifest,
         "{}: cooperative kernel cannot run at all: not one of its blocks fits on an SM (occupancy 0 for its block "
         "size and shared memory)",
         where);
  const std::uint64_t capacity = static_cast<std::uint64_t>(per_sm) * static_cast<std::uint64_t>(sms);
  if (blocks > capacity)
    fail(ErrorKind::Manifest,
         "{}: cooperative grid of {} blocks exceeds the {} blocks the device can hold at once ({} SMs x {} per SM)",
         where, blocks, capacity, sms, per_sm);
}

}  // namespace kern::runtime
