// The state pool's orchestration (docs/design/pool-on-gpu.md, step 5): the pool's decisions
// executed on a StateDevice. Leases, checkpoints, restores and forks run their device copies on
// the compute stream; a remap the pool plans runs on the RemapWorker's thread after a fence
// recorded behind everything already enqueued, and is collected at the next call (its new objects
// zeroed on the stream, then made leasable), so that no call waits for a remap it does not need;
// settle() waits for every planned remap. Every fresh slot is zeroed when leased (recurrent state
// starts at 0); pages are not (positions are written before they are read). Single-threaded: one
// caller thread, as the pool.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "kern/pool/pool.hpp"
#include "runtime/remap_worker.hpp"
#include "runtime/state_device.hpp"
#include "runtime/state_plan.hpp"

namespace kern::runtime {

class StatePool {
 public:
  // `pool` comes from Pool::create, whose initial plan the caller has already executed.
  StatePool(pool::Pool pool, StateDevice& device);
  ~StatePool();

  pool::Granted<pool::Lease> lease(std::uint64_t tokens);
  pool::Granted<pool::Lease> lease_slot();
  std::optional<pool::Denied> extend(pool::Lease& lease, std::uint64_t tokens);
  pool::Granted<pool::Checkpoint> checkpoint(pool::Lease& lease, std::uint64_t len);
  pool::Checkpoint retire(pool::Lease&& lease, std::uint64_t len);
  pool::Granted<pool::Lease> lease_from(const pool::Checkpoint& cp, std::uint64_t tokens);
  pool::Granted<pool::Lease> fork(pool::Lease& parent, std::uint64_t len, std::uint64_t tokens);
  // Blocks until no remap is planned or in flight (each landed plan collected).
  void settle();

  const pool::Pool& pool() const { return pool_; }
  const StateGeometry& geometry() const { return geometry_; }
  std::uint64_t remaps_started() const { return started_; }

 private:
  void collect();        // a landed plan: zero what it made, tell the pool, start the next one
  void start_pending();  // the pool's planned remap to the worker, behind a fresh fence
  template <typename T>
  pool::Granted<T> answered(pool::Granted<T> g);  // a Remapping denial starts the plan at once
  void zero_fresh_slot(const pool::Lease& lease);
  void run_copies(const pool::DeviceCopies& copies);

  pool::Pool pool_;
  StateDevice& device_;
  StateGeometry geometry_;
  std::optional<pool::Remap> in_flight_;
  std::uint64_t started_ = 0;
  std::unique_ptr<RemapWorker> worker_;  // last: stopped first
};

}  // namespace kern::runtime
