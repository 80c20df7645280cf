// The load-time proof behind a `cooperative` launch: its whole grid is resident at once.
// Pure arithmetic (host-tested); load.cpp feeds it the driver's occupancy figures.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kern/runtime/vars.hpp"

namespace kern::runtime {

// The var values at which a launch's geometry peaks: every var at its max, except the launch's
// `when` var, which is clamped to the `when`'s max (the launch never runs above it). Every
// expression form (const, var, ceil_div, mul, add) is non-decreasing in each var, so a grid or
// shared_mem evaluated here bounds every value the launch can have.
std::vector<std::uint64_t> launch_peak_vars(std::vector<std::uint64_t> at_max, std::optional<std::uint32_t> when_var,
                                            std::optional<std::uint64_t> when_max);

// x * y * z of `grid` evaluated at `vars`; Error(Manifest) "<where>: ..." when an axis or the
// product overflows u64.
std::uint64_t grid_blocks_at(const std::array<CompiledExpr, 3>& grid, const std::uint64_t* vars,
                             const std::string& where);

// Throws Error(Manifest) "<where>: ..." unless `blocks` <= per_sm * sms: `per_sm` is
// cuOccupancyMaxActiveBlocksPerMultiprocessor for the launch's block size and dynamic shared
// memory, `sms` the device's multiprocessor count. per_sm == 0 (not one block fits on an SM) is
// its own message; negative figures are Error(Cuda) (the driver reported nonsense).
void check_cooperative_fit(const std::string& where, std::uint64_t blocks, int per_sm, int sms);

}  // namespace kern::runtime
