// A decode step's pool work at long context: grow the lease by one token (a fresh page every
// unit tokens), hand out the token's slot, and checkpoint every completed page (the previous
// checkpoint is dropped, as the prefix index does for a growing chain). The per-step cost must
// not grow with the pages already held.
#include <benchmark/benchmark.h>

#include <optional>

#include "kern/pool/pool.hpp"

namespace kern::pool {
namespace {

constexpr std::uint64_t kUnit = 16;
constexpr std::uint64_t kWindow = 8192;  // steps before the lease is re-made (untimed)
constexpr std::uint64_t kMaxContext = 1ull << 20;

PoolLayout qwen3_4b_like() {
  PoolLayout l;
  l.paged = {{"kv", 36ull * 8 * 128 * 2 * 2}};  // 36 layers, 8 KV heads of 128, K and V, bf16
  l.page_tables = {{"block_table", "kv", kUnit, (kMaxContext + 2 * kWindow) / kUnit}};
  return l;
}

void BM_DecodeStep(benchmark::State& state) {
  const std::uint64_t held = static_cast<std::uint64_t>(state.range(0));
  const PoolLayout layout = qwen3_4b_like();
  auto [pool, plan] = Pool::create(
      layout, PoolConfig::from_capacity(layout, chunk_bytes_for(layout), Capacity{kMaxContext + 2 * kWindow, 1}));
  // The context already held: one sealed chain of held / unit pages.
  Checkpoint base = pool.retire(std::move(pool.lease(held).value()), held);
  std::optional<Lease> lease;
  std::optional<Checkpoint> latest;
  std::uint64_t pos = 0;
  auto restart = [&] {
    latest.reset();
    lease.reset();
    lease.emplace(std::move(pool.restore(base, held, held + 1).value().first));
    pos = held;
  };
  restart();
  std::uint64_t steps = 0;
  for (auto _ : state) {
    if (pos == held + kWindow) {
      state.PauseTiming();
      restart();
      state.ResumeTiming();
    }
    if (auto denied = pool.extend(*lease, pos + 1)) state.SkipWithError(denied->describe().c_str());
    benchmark::DoNotOptimize(lease->slot(pos));
    ++pos;
    if (pos % kUnit == 0) {
      auto cp = pool.checkpoint(*lease, pos);
      if (!cp.ok()) state.SkipWithError(cp.denied().describe().c_str());
      latest = std::move(std::move(cp).value().first);  // the previous checkpoint is dropped
    }
    ++steps;
  }
  state.counters["pages_held"] = static_cast<double>(pool.used());
  state.counters["chunk_MiB"] = static_cast<double>(pool.chunk_bytes() >> 20);
  state.SetItemsProcessed(static_cast<std::int64_t>(steps));
}

BENCHMARK(BM_DecodeStep)
    ->Arg(kUnit)
    ->Arg(16384)
    ->Arg(131072)
    ->Arg(524288)
    ->Arg(kMaxContext)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kern::pool

BENCHMARK_MAIN();
