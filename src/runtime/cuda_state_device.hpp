// The state pool's StateDevice on a GPU: VMM ops on the arenas (from the remap worker's thread,
// which makes the runtime's context current first), zeroes and device copies on the runtime's
// stream, fences as events on it. The host tier's copies are not on the GPU yet (Api error).
#pragma once

#include <vector>

#include "kern/cuda/cuda.hpp"
#include "kern/cuda/vmm.hpp"
#include "runtime/state_device.hpp"

namespace kern::runtime {

class CudaStateDevice final : public StateDevice {
 public:
  CudaStateDevice(const cuda::Context& context, const cuda::Stream& stream, std::vector<cuda::VirtualRange>& arenas,
                  const std::vector<cuda::PhysicalChunk>& chunks);
  void vmm(const VmmOp& op) override;
  void zero(const ZeroOp& op) override;
  void copy(const CopyOp& op) override;
  std::shared_ptr<Fence> record() override;

 private:
  const cuda::Context& context_;
  const cuda::Stream& stream_;
  std::vector<cuda::VirtualRange>& arenas_;
  const std::vector<cuda::PhysicalChunk>& chunks_;
};

}  // namespace kern::runtime
