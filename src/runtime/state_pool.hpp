// The state pool's orchestration (docs/pool.md): the pool's decisions executed on a StateDevice.
// Leases, checkpoints, restores and forks run their device copies on the compute stream; a remap
// the pool plans runs on the RemapWorker's thread after a fence recorded behind everything already
// enqueued, and is collected at the next call (its new objects zeroed on the stream, then made
// leasable), so that no call waits for a remap it does not need; settle() waits for every planned
// remap. Every fresh slot is zeroed when leased (recurrent state starts at 0); pages are not
// (positions are written before they are read).
//
// The host tier: park / wake copy on the transfer stream, which first waits for the compute
// stream's work so far; a parked checkpoint is held until its copies land, a woken lease is held
// inside a Waking until its copies land. park_now / wake_now copy on the compute stream (after any
// transfer in flight has landed). Single-threaded: one caller thread, as the pool.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <variant>
#include <vector>

#include "kern/pool/host.hpp"
#include "kern/pool/pool.hpp"
#include "kern/runtime/waking.hpp"
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
  // From the checkpoint's first `len` tokens (its length, or a whole-page multiple below it for a
  // checkpoint without a slot: a prefix-index hit).
  pool::Granted<pool::Lease> lease_from(const pool::Checkpoint& cp, std::uint64_t len, std::uint64_t tokens);
  pool::Granted<pool::Lease> fork(pool::Lease& parent, std::uint64_t len, std::uint64_t tokens);
  // Blocks until no remap is planned or in flight (each landed plan collected).
  void settle();

  // ---- the host tier
  // One pinned block for `pages` host pages and `slots` host slots; Api error the second time.
  void reserve_host(std::uint64_t pages, std::uint64_t slots);
  const pool::Host* host() const { return host_ ? &*host_ : nullptr; }
  // Host room for the checkpoint, or the checkpoint back when the host is full.
  std::variant<pool::Room, pool::Checkpoint> room(pool::Checkpoint cp);
  pool::Parked park(pool::Room&& room);  // copies on the transfer stream
  // Room then park; the checkpoint back when the host is full (the prefix index's evict()).
  std::variant<pool::Parked, pool::Checkpoint> park_if_room(pool::Checkpoint cp);
  pool::Granted<Waking> wake(const pool::Parked& parked, std::uint64_t len, std::uint64_t tokens);
  std::variant<pool::Lease, Waking> awake(Waking&& waking);  // never blocks
  bool landed(const Waking& waking) const;
  void wait_transfers();  // blocks until every park / wake copy issued so far has landed
  pool::Granted<pool::Parked> park_now(const pool::Checkpoint& cp);
  pool::Granted<pool::Lease> wake_now(const pool::Parked& parked, std::uint64_t len, std::uint64_t tokens);

  const pool::Pool& pool() const { return pool_; }
  const StateGeometry& geometry() const { return geometry_; }
  std::uint64_t remaps_started() const { return started_; }
  std::uint64_t parks_in_flight() const { return parks_.size(); }  // checkpoints held for their copies

 private:
  void collect();        // a landed plan: zero what it made, tell the pool, start the next one
  void start_pending();  // the pool's planned remap to the worker, behind a fresh fence
  template <typename T>
  pool::Granted<T> answered(pool::Granted<T> g);  // a Remapping denial starts the plan at once
  void zero_fresh_slot(const pool::Lease& lease);
  void run_copies(const pool::DeviceCopies& copies);
  pool::Host& need_host(const char* what);
  void reap();             // parked checkpoints whose copies landed are released
  void drain_transfers();  // host-side wait for the transfer stream (before compute-lane host copies)

  struct ParkInFlight {
    pool::Checkpoint held;  // its pages stay put until the copies land
    std::shared_ptr<Fence> landed;
  };

  pool::Pool pool_;
  StateDevice& device_;
  StateGeometry geometry_;
  std::optional<pool::Remap> in_flight_;
  std::uint64_t started_ = 0;
  std::optional<pool::Host> host_;
  std::vector<ParkInFlight> parks_;
  std::shared_ptr<Fence> last_transfer_;
  std::unique_ptr<RemapWorker> worker_;  // last: stopped first
};

}  // namespace kern::runtime
