// The state pool's StateDevice on a GPU: VMM ops on the arenas (from the remap worker's thread,
// which makes the runtime's context current first), zeroes and device copies on the runtime's
// stream, fences as events on it; the host tier's pinned block (allocated with the memory policy
// bound to the GPU's NUMA node) and a transfer stream of its own for asynchronous park / wake.
#pragma once

#include <memory>
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
  void reserve_host(std::uint64_t bytes) override;
  void transfer_after_compute() override;
  void transfer(const CopyOp& op) override;
  std::shared_ptr<Fence> record_transfer() override;

  std::byte* host_block() const { return host_.data(); }

 private:
  void enqueue(const CopyOp& op, const cuda::Stream& s);
  const cuda::Context& context_;
  const cuda::Stream& stream_;
  std::vector<cuda::VirtualRange>& arenas_;
  const std::vector<cuda::PhysicalChunk>& chunks_;
  cuda::PinnedMemory host_;
  std::unique_ptr<cuda::Stream> transfer_;  // made with the host block
  cuda::Event compute_mark_;                // transfer_after_compute's point in the compute stream
};

}  // namespace kern::runtime
