// The Runtime's state-pool API (include/kern/runtime/runtime.hpp): forwards to the StatePool of
// the runtime's PooledStateMemory.
#include "kern/base/error.hpp"
#include "kern/runtime/runtime.hpp"
#include "runtime/runtime_impl.hpp"

namespace kern::runtime {

namespace {

StatePool& pool_of(Runtime::Impl& r) {
  StatePool* p = r.states->state_pool();
  if (!p) fail(ErrorKind::Api, "the manifest has no paged or per-seq state: there is nothing to lease");
  return *p;
}

}  // namespace

pool::Granted<pool::Lease> Runtime::lease(std::uint64_t tokens) { return pool_of(*impl_).lease(tokens); }
pool::Granted<pool::Lease> Runtime::lease_slot() { return pool_of(*impl_).lease_slot(); }
std::optional<pool::Denied> Runtime::extend(pool::Lease& lease, std::uint64_t tokens) {
  return pool_of(*impl_).extend(lease, tokens);
}
pool::Granted<pool::Checkpoint> Runtime::checkpoint(pool::Lease& lease, std::uint64_t len) {
  return pool_of(*impl_).checkpoint(lease, len);
}
pool::Checkpoint Runtime::retire(pool::Lease&& lease, std::uint64_t len) {
  return pool_of(*impl_).retire(std::move(lease), len);
}
pool::Granted<pool::Lease> Runtime::lease_from(const pool::Checkpoint& cp, std::uint64_t tokens) {
  return pool_of(*impl_).lease_from(cp, tokens);
}
pool::Granted<pool::Lease> Runtime::lease_from(const pool::Checkpoint& cp, std::uint64_t len, std::uint64_t tokens) {
  return pool_of(*impl_).lease_from(cp, len, tokens);
}
pool::Granted<pool::Lease> Runtime::fork(pool::Lease& parent, std::uint64_t len, std::uint64_t tokens) {
  return pool_of(*impl_).fork(parent, len, tokens);
}
void Runtime::settle() { pool_of(*impl_).settle(); }
const pool::Pool* Runtime::state_pool() const { return impl_->states->pool(); }

void Runtime::reserve_host(std::uint64_t pages, std::uint64_t slots) { pool_of(*impl_).reserve_host(pages, slots); }
const pool::Host* Runtime::host_tier() const {
  const StatePool* p = impl_->states->state_pool();
  return p ? p->host() : nullptr;
}
std::variant<pool::Room, pool::Checkpoint> Runtime::room(pool::Checkpoint cp) {
  return pool_of(*impl_).room(std::move(cp));
}
pool::Parked Runtime::park(pool::Room&& room) { return pool_of(*impl_).park(std::move(room)); }
std::variant<pool::Parked, pool::Checkpoint> Runtime::park_if_room(pool::Checkpoint cp) {
  return pool_of(*impl_).park_if_room(std::move(cp));
}
pool::Granted<Waking> Runtime::wake(const pool::Parked& parked, std::uint64_t len, std::uint64_t tokens) {
  return pool_of(*impl_).wake(parked, len, tokens);
}
std::variant<pool::Lease, Waking> Runtime::awake(Waking&& waking) { return pool_of(*impl_).awake(std::move(waking)); }
bool Runtime::landed(const Waking& waking) const { return pool_of(*impl_).landed(waking); }
void Runtime::wait_transfers() { pool_of(*impl_).wait_transfers(); }
pool::Granted<pool::Parked> Runtime::park_now(const pool::Checkpoint& cp) { return pool_of(*impl_).park_now(cp); }
pool::Granted<pool::Lease> Runtime::wake_now(const pool::Parked& parked, std::uint64_t len, std::uint64_t tokens) {
  return pool_of(*impl_).wake_now(parked, len, tokens);
}

}  // namespace kern::runtime
