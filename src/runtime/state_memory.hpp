// Where states live: the runtime asks only for each state's base address and extent
// (runtime/pooled_state_memory.hpp: the VMM pool).
#pragma once

#include <string>
#include <string_view>

#include "kern/cuda/cuda.hpp"
#include "kern/core/manifest.hpp"
#include "kern/runtime/args.hpp"
#include "kern/runtime/domain.hpp"

namespace kern::runtime {

class StateMemory {
 public:
  virtual ~StateMemory() = default;
  // The state's region; Error(Manifest) for an unknown state.
  virtual Pointer region(std::string_view state) const = 0;
};

}  // namespace kern::runtime
