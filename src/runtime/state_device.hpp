// What the state pool asks of memory (runtime/state_pool.hpp), so that its orchestration is pure
// and host-tested over a simulated device (tests/host/runtime/sim_device.hpp); the CUDA side
// implements it over VMM arenas, a pinned host block and two streams: the compute stream (the
// runtime's) and a transfer stream for the host tier's asynchronous park / wake copies, which
// starts after what the compute stream has enqueued and which the compute stream never waits for.
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/state_plan.hpp"

namespace kern::runtime {

// A point in one stream: done once everything enqueued before it has run.
class Fence {
 public:
  virtual ~Fence() = default;
  virtual bool done() const = 0;
  virtual void wait() = 0;  // blocks until done
};

class StateDevice {
 public:
  virtual ~StateDevice() = default;
  // Address-space changes: called from the remap worker's thread, after the plan's fence.
  virtual void vmm(const VmmOp& op) = 0;
  // Enqueued on the compute stream, in call order (main thread).
  virtual void zero(const ZeroOp& op) = 0;
  virtual void copy(const CopyOp& op) = 0;
  virtual std::shared_ptr<Fence> record() = 0;
  // The host tier. reserve_host allocates the pinned block once (Api error the second time).
  virtual void reserve_host(std::uint64_t bytes) = 0;
  // Transfer stream: wait for what the compute stream has enqueued so far, copy, record.
  virtual void transfer_after_compute() = 0;
  virtual void transfer(const CopyOp& op) = 0;
  virtual std::shared_ptr<Fence> record_transfer() = 0;
};

}  // namespace kern::runtime
