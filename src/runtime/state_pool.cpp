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
  if (last_transfer_) last_transfer_->wait();        // nor the transfers their pages and the block
}

void StatePool::collect() {
  reap();
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
  return lease_from(cp, cp.tokens(), tokens);
}

pool::Granted<pool::Lease> StatePool::lease_from(const pool::Checkpoint& cp, std::uint64_t len, std::uint64_t tokens) {
  collect();
  auto g = answered(pool_.restore(cp, len, tokens));
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


// ---------------------------------------------------------------- the host tier

Waking& Waking::operator=(Waking&& o) noexcept {
  if (this != &o) {
    drain();
    lease_ = std::move(o.lease_);
    landed_ = std::move(o.landed_);
  }
  return *this;
}

Waking::~Waking() { drain(); }

void Waking::drain() noexcept {
  if (!landed_) return;
  try {
    landed_->wait();
  } catch (...) {
    // A failed wait means the context is broken; the pages are dropped all the same.
  }
  landed_.reset();
}

pool::Host& StatePool::need_host(const char* what) {
  if (!host_) fail(ErrorKind::Api, "state pool: {} needs the host tier (reserve_host first)", what);
  return *host_;
}

void StatePool::reap() {
  std::erase_if(parks_, [](const ParkInFlight& p) { return p.landed->done(); });
}

void StatePool::drain_transfers() {
  if (last_transfer_) last_transfer_->wait();
  reap();
}

void StatePool::reserve_host(std::uint64_t pages, std::uint64_t slots) {
  if (host_) fail(ErrorKind::Api, "state pool: reserve_host called twice (the host block is reserved once)");
  const pool::HostConfig config = pool::HostConfig::for_objects(pool_, pages, slots);
  device_.reserve_host(config.bytes);
  host_.emplace(pool_, config);
  geometry_ = state_geometry(pool_, &*host_);
}

std::variant<pool::Room, pool::Checkpoint> StatePool::room(pool::Checkpoint cp) {
  reap();
  auto g = need_host("room").room(cp);
  if (!g.ok()) return cp;
  return std::move(g).value();
}

pool::Parked StatePool::park(pool::Room&& room) {
  reap();
  pool::Host& host = need_host("park");
  if (!room.valid()) fail(ErrorKind::Api, "state pool: park of an empty room");
  pool::Checkpoint held = room.checkpoint();  // Host::park gives the room's own up
  auto [parked, copies] = host.park(std::move(room));
  device_.transfer_after_compute();
  for (const CopyOp& op : park_ops(copies, geometry_)) device_.transfer(op);
  last_transfer_ = device_.record_transfer();
  parks_.push_back({std::move(held), last_transfer_});
  return std::move(parked);
}

std::variant<pool::Parked, pool::Checkpoint> StatePool::park_if_room(pool::Checkpoint cp) {
  auto r = room(std::move(cp));
  if (auto* back = std::get_if<pool::Checkpoint>(&r)) return std::move(*back);
  return park(std::get<pool::Room>(std::move(r)));
}

pool::Granted<Waking> StatePool::wake(const pool::Parked& parked, std::uint64_t len, std::uint64_t tokens) {
  collect();
  auto g = answered(need_host("wake").restore(parked, pool_, len, tokens));
  if (!g.ok()) return g.denied();
  auto [lease, copies] = std::move(g).value();
  // The fresh pages may have been freed by kernels still queued: the copies start after them.
  device_.transfer_after_compute();
  for (const CopyOp& op : wake_ops(copies, geometry_)) device_.transfer(op);
  last_transfer_ = device_.record_transfer();
  return Waking(std::move(lease), last_transfer_);
}

std::variant<pool::Lease, Waking> StatePool::awake(Waking&& waking) {
  if (!waking.valid()) fail(ErrorKind::Api, "state pool: awake of an empty Waking");
  if (waking.landed_ && !waking.landed_->done()) return std::move(waking);
  waking.landed_.reset();
  return std::move(waking.lease_);
}

bool StatePool::landed(const Waking& waking) const { return !waking.landed_ || waking.landed_->done(); }

void StatePool::wait_transfers() { drain_transfers(); }

pool::Granted<pool::Parked> StatePool::park_now(const pool::Checkpoint& cp) {
  collect();
  pool::Host& host = need_host("park_now");
  drain_transfers();  // host pages an async park still writes may be the ones handed out here
  auto g = host.park(cp);
  if (!g.ok()) return g.denied();
  auto [parked, copies] = std::move(g).value();
  for (const CopyOp& op : park_ops(copies, geometry_)) device_.copy(op);
  return std::move(parked);
}

pool::Granted<pool::Lease> StatePool::wake_now(const pool::Parked& parked, std::uint64_t len, std::uint64_t tokens) {
  collect();
  pool::Host& host = need_host("wake_now");
  drain_transfers();
  auto g = answered(host.restore(parked, pool_, len, tokens));
  if (!g.ok()) return g.denied();
  auto [lease, copies] = std::move(g).value();
  for (const CopyOp& op : wake_ops(copies, geometry_)) device_.copy(op);
  return std::move(lease);
}

}  // namespace kern::runtime
