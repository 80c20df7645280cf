// A wake in flight (Runtime::wake): the lease the parked store is being copied into, held here
// until the copies on the transfer stream have landed. Runtime::awake hands the lease out only
// then, so no lease exists for pages still in flight; dropping a Waking waits for its copies
// before its pages go back to the pool. Move-only.
#pragma once

#include <memory>

#include "kern/pool/lease.hpp"

namespace kern::runtime {

class Fence;  // runtime/state_device.hpp

class Waking {
 public:
  Waking() = default;
  Waking(Waking&& o) noexcept = default;
  Waking& operator=(Waking&& o) noexcept;
  Waking(const Waking&) = delete;
  Waking& operator=(const Waking&) = delete;
  ~Waking();

  bool valid() const { return lease_.valid(); }
  std::uint64_t capacity() const { return lease_.capacity(); }  // tokens the lease will hold
  std::uint64_t prefix() const { return lease_.prefix(); }      // tokens woken

 private:
  friend class StatePool;
  Waking(pool::Lease lease, std::shared_ptr<Fence> landed) : lease_(std::move(lease)), landed_(std::move(landed)) {}
  void drain() noexcept;  // waits for the copies
  pool::Lease lease_;
  std::shared_ptr<Fence> landed_;
};

}  // namespace kern::runtime
