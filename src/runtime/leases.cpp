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
pool::Granted<pool::Lease> Runtime::fork(pool::Lease& parent, std::uint64_t len, std::uint64_t tokens) {
  return pool_of(*impl_).fork(parent, len, tokens);
}
void Runtime::settle() { pool_of(*impl_).settle(); }
const pool::Pool* Runtime::state_pool() const { return impl_->states->pool(); }

}  // namespace kern::runtime
