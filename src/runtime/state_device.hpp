// What the state pool asks of memory (runtime/state_pool.hpp), so that its orchestration is pure
// and host-tested over a simulated device (tests/host/runtime/sim_device.hpp); the CUDA side
// implements it over VMM arenas, one stream and events.
#pragma once

#include <memory>

#include "runtime/state_plan.hpp"

namespace kern::runtime {

// A point in the compute stream: done once everything enqueued before it has run.
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
};

}  // namespace kern::runtime
