// serve::Pages over a loaded runtime::Runtime's state pool (the GPU): every call copies and zeroes
// on the runtime's stream, in order with the steps around it.
#pragma once

#include "kern/runtime/runtime.hpp"
#include "kern/serve/scheduler.hpp"

namespace kern::serve {

class RuntimePages final : public Pages {
 public:
  explicit RuntimePages(runtime::Runtime& rt);  // Error(Api) when the runtime has no state pool
  pool::Granted<pool::Lease> lease(std::uint64_t tokens) override { return rt_.lease(tokens); }
  std::optional<pool::Denied> extend(pool::Lease& lease, std::uint64_t tokens) override {
    return rt_.extend(lease, tokens);
  }
  pool::Granted<pool::Checkpoint> checkpoint(pool::Lease& lease, std::uint64_t len) override {
    return rt_.checkpoint(lease, len);
  }
  pool::Granted<pool::Lease> lease_from(const pool::Checkpoint& cp, std::uint64_t len, std::uint64_t tokens) override {
    return rt_.lease_from(cp, len, tokens);
  }
  pool::Granted<pool::Lease> fork(pool::Lease& parent, std::uint64_t len, std::uint64_t tokens) override {
    return rt_.fork(parent, len, tokens);
  }
  void settle() override { rt_.settle(); }
  std::uint64_t unit() const override;
  std::uint64_t pages_total() const override;
  std::uint64_t pages_used() const override;
  // The runtime's host tier (Runtime::reserve_host): parks copy on its transfer stream, wakes on the
  // compute stream, in order with the steps around them.
  bool has_host() const override { return rt_.host_tier() != nullptr; }
  std::variant<pool::Parked, pool::Checkpoint> park_if_room(pool::Checkpoint cp) override {
    return rt_.park_if_room(std::move(cp));
  }
  pool::Granted<pool::Lease> wake(const pool::Parked& parked, std::uint64_t len, std::uint64_t tokens) override {
    return rt_.wake_now(parked, len, tokens);
  }
  std::uint64_t host_bytes_used() const override { return rt_.host_tier() ? rt_.host_tier()->used() : 0; }
  std::uint64_t host_bytes_total() const override { return rt_.host_tier() ? rt_.host_tier()->capacity() : 0; }

 private:
  runtime::Runtime& rt_;
};

}  // namespace kern::serve
