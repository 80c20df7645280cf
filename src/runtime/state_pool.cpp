#include "runtime/state_pool.hpp"

#include "kern/base/error.hpp"

namespace kern::runtime {

StatePool::StatePool(pool::Pool pool, StateDevice& device)
    : pool_(std::move(pool)),
      device_(device),
      geometry_(state_geometry(pool_, nullptr)),
      worker_(std::make_unique<RemapWorker>(device)) {}

StatePool::~StatePool() {
  if (worker_ && worker_->busy()) worker_->wait();  // the plan's ops must not outlive the device
}

void StatePool::collect() {
  if (!in_flight_ || !worker_->done()) return;
  worker_->collect();
  for (const ZeroOp& z : zero_ops(in_flight_->made_pages, in_flight_->made_slots, geometry_)) device_.zero(z);
  pool_.complete(*in_flight_);
  in_flight_.reset();
  start_pending();
}

void StatePool::start_pending() {
  if (in_flight_) return;
  std::optional<pool::Remap> plan = pool_.take_pending();
  if (!plan) return;
  std::vector<VmmOp> ops = vmm_ops(*plan, geometry_);
  in_flight_ = std::move(plan);
  ++started_;
  worker_->start(std::move(ops), device_.record());
}

template <typename T>
pool::Granted<T> StatePool::answered(pool::Granted<T> g) {
  if (!g.ok() && g.denied().kind == pool::DeniedKind::Remapping) start_pending();
  return g;
}

void StatePool::zero_fresh_slot(const pool::Lease& lease) {
  if (const auto s = lease.seq_slot())
    for (const ZeroOp& z : zero_ops({}, {*s}, geometry_)) device_.zero(z);
}

void StatePool::run_copies(const pool::DeviceCopies& copies) {
  for (const CopyOp& op : device_copy_ops(copies, geometry_)) device_.copy(op);
}

pool::Granted<pool::Lease> StatePool::lease(std::uint64_t tokens) {
  collect();
  auto g = answered(pool_.lease(tokens));
  if (g.ok()) zero_fresh_slot(g.value());
  return g;
}

pool::Granted<pool::Lease> StatePool::lease_slot() {
  collect();
  auto g = answered(pool_.lease_slot());
  if (g.ok()) zero_fresh_slot(g.value());
  return g;
}

std::optional<pool::Denied> StatePool::extend(pool::Lease& lease, std::uint64_t tokens) {
  collect();
  std::optional<pool::Denied> d = pool_.extend(lease, tokens);
  if (d && d->kind == pool::DeniedKind::Remapping) start_pending();
  return d;
}

pool::Granted<pool::Checkpoint> StatePool::checkpoint(pool::Lease& lease, std::uint64_t len) {
  collect();
  auto g = answered(pool_.checkpoint(lease, len));
  if (!g.ok()) return g.denied();
  auto [cp, copies] = std::move(g).value();
  run_copies(copies);
  return std::move(cp);
}

pool::Checkpoint StatePool::retire(pool::Lease&& lease, std::uint64_t len) {
  collect();
  return pool_.retire(std::move(lease), len);
}

pool::Granted<pool::Lease> StatePool::lease_from(const pool::Checkpoint& cp, std::uint64_t tokens) {
  collect();
  auto g = answered(pool_.restore(cp, cp.tokens(), tokens));
  if (!g.ok()) return g.denied();
  auto [lease, copies] = std::move(g).value();
  run_copies(copies);
  return std::move(lease);
}

pool::Granted<pool::Lease> StatePool::fork(pool::Lease& parent, std::uint64_t len, std::uint64_t tokens) {
  collect();
  auto g = answered(pool_.fork(parent, len, tokens));
  if (!g.ok()) return g.denied();
  auto [lease, copies] = std::move(g).value();
  run_copies(copies);
  return std::move(lease);
}

void StatePool::settle() {
  for (;;) {
    collect();
    start_pending();
    if (!in_flight_) {
      if (!pool_.remapping()) return;
      fail(ErrorKind::Api, "state pool: the pool reports a remap that is neither pending nor in flight here");
    }
    worker_->wait();
  }
}

}  // namespace kern::runtime
