// serve::Pages over a pure pool::Pool (no device: the copies a call returns are dropped): the
// fake engine's pages (kern serve --fake-engine) and the scheduler's tests.
#pragma once

#include <optional>

#include "kern/pool/host.hpp"
#include "kern/pool/layout.hpp"
#include "kern/pool/pool.hpp"
#include "kern/serve/scheduler.hpp"

namespace kern::serve {

class PoolPages final : public Pages {
 public:
  // `tokens` of KV (64 bytes each, never touched) in pages of `unit` tokens; one page-table row
  // reaches `row_tokens`; a host tier of `host_bytes` when > 0 (pure accounting, like the pool).
  PoolPages(std::uint64_t tokens, std::uint64_t unit = 16, std::uint64_t row_tokens = 1 << 16,
            std::uint64_t host_bytes = 0)
      : pool_(make(tokens, unit, row_tokens)) {
    if (host_bytes > 0) host_.emplace(pool_, pool::HostConfig{host_bytes, unit * kTokenBytes});  // a page per grain
  }
  pool::Granted<pool::Lease> lease(std::uint64_t tokens) override { return pool_.lease(tokens); }
  std::optional<pool::Denied> extend(pool::Lease& lease, std::uint64_t tokens) override {
    return pool_.extend(lease, tokens);
  }
  pool::Granted<pool::Checkpoint> checkpoint(pool::Lease& lease, std::uint64_t len) override {
    auto g = pool_.checkpoint(lease, len);
    if (!g.ok()) return g.denied();
    return std::move(g).value().first;
  }
  pool::Granted<pool::Lease> lease_from(const pool::Checkpoint& cp, std::uint64_t len, std::uint64_t tokens) override {
    auto g = pool_.restore(cp, len, tokens);
    if (!g.ok()) return g.denied();
    return std::move(std::move(g).value().first);
  }
  pool::Granted<pool::Lease> fork(pool::Lease& parent, std::uint64_t len, std::uint64_t tokens) override {
    auto g = pool_.fork(parent, len, tokens);
    if (!g.ok()) return g.denied();
    return std::move(std::move(g).value().first);
  }
  void settle() override {
    while (std::optional<pool::Remap> plan = pool_.take_pending()) pool_.complete(*plan);
  }
  std::uint64_t unit() const override { return pool_.unit(); }
  std::uint64_t pages_total() const override { return pool_.total(); }
  std::uint64_t pages_used() const override { return pool_.used(); }
  const pool::Pool& pool() const { return pool_; }

  bool has_host() const override { return host_.has_value(); }
  std::variant<pool::Parked, pool::Checkpoint> park_if_room(pool::Checkpoint cp) override {
    auto g = host_->park(cp);
    if (!g.ok()) return cp;
    return std::move(std::move(g).value().first);
  }
  pool::Granted<pool::Lease> wake(const pool::Parked& parked, std::uint64_t len, std::uint64_t tokens) override {
    auto g = host_->restore(parked, pool_, len, tokens);
    if (!g.ok()) return g.denied();
    return std::move(std::move(g).value().first);
  }
  std::uint64_t host_bytes_used() const override { return host_ ? host_->used() : 0; }
  std::uint64_t host_bytes_total() const override { return host_ ? host_->capacity() : 0; }
  const pool::Host* host() const { return host_ ? &*host_ : nullptr; }
  static constexpr std::uint64_t kTokenBytes = 64;  // KV bytes per token of the fake layout

 private:
  static pool::Pool make(std::uint64_t tokens, std::uint64_t unit, std::uint64_t row_tokens) {
    pool::PoolLayout l;
    l.paged = {{"kv", kTokenBytes}};
    l.page_tables = {{"block_table", "kv", unit, row_tokens / unit}};
    return pool::Pool::create(l, pool::PoolConfig::from_capacity(l, unit * kTokenBytes, pool::Capacity{tokens, 1})).first;
  }
  pool::Pool pool_;
  std::optional<pool::Host> host_;
};

}  // namespace kern::serve
