// serve::Pages over a pure pool::Pool (no device: the copies a call returns are dropped): the
// fake engine's pages (kern serve --fake-engine) and the scheduler's tests.
#pragma once

#include "kern/pool/layout.hpp"
#include "kern/pool/pool.hpp"
#include "kern/serve/scheduler.hpp"

namespace kern::serve {

class PoolPages final : public Pages {
 public:
  // `tokens` of KV (64 bytes each, never touched) in pages of `unit` tokens; one page-table row
  // reaches `row_tokens`.
  PoolPages(std::uint64_t tokens, std::uint64_t unit = 16, std::uint64_t row_tokens = 1 << 16)
      : pool_(make(tokens, unit, row_tokens)) {}
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

 private:
  static pool::Pool make(std::uint64_t tokens, std::uint64_t unit, std::uint64_t row_tokens) {
    pool::PoolLayout l;
    l.paged = {{"kv", 64}};
    l.page_tables = {{"block_table", "kv", unit, row_tokens / unit}};
    return pool::Pool::create(l, pool::PoolConfig::from_capacity(l, unit * 64, pool::Capacity{tokens, 1})).first;
  }
  pool::Pool pool_;
};

}  // namespace kern::serve
