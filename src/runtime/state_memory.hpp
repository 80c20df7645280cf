// Where states live. The seam the VMM pool replaces later: the runtime asks only for each
// state's base address and extent.
#pragma once

#include <map>
#include <memory>
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

// Plain contiguous allocations: fixed states at their size, paged states at
// bytes_per_token × capacity.tokens, per-seq states at bytes_per_seq × (capacity.seqs + 1)
// (slot 0 is reserved as the null slot). Zero-filled.
class ContiguousStateMemory final : public StateMemory {
 public:
  ContiguousStateMemory(const core::Manifest& m, const Capacity& capacity, const cuda::Stream& stream);
  Pointer region(std::string_view state) const override;

 private:
  std::map<std::string, cuda::DeviceMemory, std::less<>> states_;
};

}  // namespace kern::runtime
