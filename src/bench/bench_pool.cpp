// kern bench, the state pool on the GPU (issue 16): host cost of the pool's calls on the model's
// real pool, and a remap of whole chunks between a page arena and a slot arena.
#include <algorithm>
#include <chrono>
#include <map>
#include <utility>

#include "kern/base/error.hpp"
#include "kern/bench/bench.hpp"
#include "kern/core/manifest.hpp"
#include "kern/core/verify.hpp"
#include "kern/pool/pool.hpp"
#include "kern/runtime/runtime.hpp"

namespace kern::bench {
namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

const pool::Pool& pool_of(runtime::Runtime& rt) {
  const pool::Pool* p = rt.state_pool();
  if (!p) fail(ErrorKind::Api, "kern bench: the manifest has no pooled state");
  return *p;
}

template <typename T>
T granted_or_fail(pool::Granted<T> g, const std::string& what) {
  if (!g.ok()) fail(ErrorKind::Api, "kern bench: {} denied: {}", what, g.denied().describe());
  return std::move(g).value();
}

// A lease of `tokens` whose positions [0, tokens) count as written (what a checkpoint or a fork of
// a sequence at that length sees).
pool::Lease written_lease(runtime::Runtime& rt, std::uint64_t tokens) {
  pool::Lease l = granted_or_fail(rt.lease(tokens), fmt::format("lease({})", tokens));
  l.advance(tokens);
  return l;
}

// Where every mapped chunk is: chunk -> (arena, position).
using ChunkMap = std::map<std::uint32_t, std::pair<std::uint32_t, std::uint64_t>>;

ChunkMap chunk_map(const pool::Pool& p) {
  ChunkMap m;
  const auto& arenas = p.arenas();
  for (std::uint32_t a = 0; a < arenas.size(); ++a)
    for (std::uint64_t pos = 0; pos < arenas[a].positions; ++pos)
      if (const auto c = p.chunk_at(a, pos)) m[*c] = {a, pos};
  return m;
}

// Chunks mapped somewhere new (`mapped`) and chunks no longer where they were (`unmapped`).
std::pair<std::uint64_t, std::uint64_t> moved(const ChunkMap& before, const ChunkMap& after) {
  std::uint64_t mapped = 0, unmapped = 0;
  for (const auto& [c, at] : after)
    if (auto it = before.find(c); it == before.end() || it->second != at) ++mapped;
  for (const auto& [c, at] : before)
    if (auto it = after.find(c); it == after.end() || it->second != at) ++unmapped;
  return {mapped, unmapped};
}

}  // namespace

std::vector<PoolOpCost> measure_pool_ops(runtime::Runtime& rt, const std::vector<std::uint64_t>& contexts,
                                         std::size_t reps, std::string& note) {
  const pool::Pool& p = pool_of(rt);
  if (reps == 0) fail(ErrorKind::Api, "kern bench: pool call costs need at least one repetition");
  std::vector<PoolOpCost> out;
  for (std::uint64_t c : contexts) {
    const std::uint64_t tokens = c + 1;  // lease_from / fork: room for the next token
    // The parent's pages, and the child's beyond the whole pages it shares.
    const std::uint64_t need = (c + p.unit() - 1) / p.unit() + (tokens + p.unit() - 1) / p.unit() - c / p.unit();
    if (tokens > p.max_seq_tokens() || need > p.total() - p.used()) {
      note += fmt::format("{}pool calls at {} left out (a row holds {} tokens, {} pages free, {} needed)",
                          note.empty() ? "" : "; ", c, p.max_seq_tokens(), p.total() - p.used(), need);
      continue;
    }
    std::vector<double> lease_us, checkpoint_us, lease_from_us, fork_us;
    for (std::size_t r = 0; r < reps + 1; ++r) {  // the first round warms up
      const bool keep = r > 0;
      {  // lease: fresh pages for a sequence of c tokens
        rt.synchronize();
        const Clock::time_point t0 = Clock::now();
        pool::Granted<pool::Lease> g = rt.lease(c);
        const double us = us_since(t0);
        granted_or_fail(std::move(g), fmt::format("lease({})", c));
        if (keep) lease_us.push_back(us);
      }
      {  // checkpoint of a fresh sequence at c tokens (the seal of its pages and a partial page's copy)
        pool::Lease parent = written_lease(rt, c);
        rt.synchronize();
        const Clock::time_point t0 = Clock::now();
        pool::Granted<pool::Checkpoint> g = rt.checkpoint(parent, c);
        const double us = us_since(t0);
        granted_or_fail(std::move(g), fmt::format("checkpoint at {}", c));
        if (keep) checkpoint_us.push_back(us);
      }
      {  // lease_from: a new sequence continuing a checkpoint of c tokens
        pool::Checkpoint cp;
        {
          pool::Lease parent = written_lease(rt, c);
          cp = rt.retire(std::move(parent), c);
        }
        rt.synchronize();
        const Clock::time_point t0 = Clock::now();
        pool::Granted<pool::Lease> g = rt.lease_from(cp, tokens);
        const double us = us_since(t0);
        granted_or_fail(std::move(g), fmt::format("lease_from at {}", c));
        if (keep) lease_from_us.push_back(us);
      }
      {  // fork of a live sequence of c tokens
        pool::Lease parent = written_lease(rt, c);
        rt.synchronize();
        const Clock::time_point t0 = Clock::now();
        pool::Granted<pool::Lease> g = rt.fork(parent, c, tokens);
        const double us = us_since(t0);
        granted_or_fail(std::move(g), fmt::format("fork at {}", c));
        if (keep) fork_us.push_back(us);
      }
    }
    rt.synchronize();
    out.push_back(make_pool_op_cost("lease", c, lease_us));
    out.push_back(make_pool_op_cost("checkpoint", c, checkpoint_us));
    out.push_back(make_pool_op_cost("lease_from", c, lease_from_us));
    out.push_back(make_pool_op_cost("fork", c, fork_us));
  }
  return out;
}

std::vector<RemapFigure> measure_remap(const core::Verified& verified, const std::string& kernels_dir, int gpu,
                                       std::uint64_t slot_bytes, std::size_t reps, std::string& note) {
  if (reps == 0) fail(ErrorKind::Api, "kern bench: a remap figure needs at least one repetition");
  std::uint64_t bytes_per_token = 0;
  for (const auto& [name, s] : verified.manifest().states) bytes_per_token += s.bytes_per_token;
  if (bytes_per_token == 0) fail(ErrorKind::Api, "kern bench: the remap manifest has no paged state");
  // Pages for the slot's bytes and two chunks more (pages straddle chunks), three slots (the null
  // slot, one sequence, the padding one: PoolConfig::from_capacity).
  runtime::RuntimeOptions options;
  options.gpu = gpu;
  options.capacity.tokens = (slot_bytes + 2 * pool::kChunkCap + bytes_per_token - 1) / bytes_per_token;
  options.capacity.seqs = 1;
  std::unique_ptr<runtime::Runtime> rt = runtime::Runtime::load(verified, kernels_dir, options);
  const pool::Pool& p = pool_of(*rt);
  const std::uint64_t pages_at_load = p.total();

  // Every slot alive at load is held, so the next slot must come from the pages' chunks.
  std::vector<pool::Lease> held;
  while (p.slots() - 1 > p.slots_used()) held.push_back(granted_or_fail(rt->lease_slot(), "lease_slot"));
  if (held.size() < 2) fail(ErrorKind::Api, "kern bench: the remap pool has {} free slots, not 2", held.size());

  std::vector<double> fwd_ms, back_ms;
  std::vector<std::uint64_t> fwd_mapped, fwd_unmapped, fwd_plans, back_mapped, back_unmapped, back_plans;
  const std::uint64_t back_tokens = std::min(p.max_seq_tokens(), pages_at_load * p.unit());
  if (back_tokens < pages_at_load * p.unit())
    note += fmt::format("; slot -> pages: one sequence's row holds {} of the {} tokens the pages held at load",
                        back_tokens, pages_at_load * p.unit());
  for (std::size_t r = 0; r < reps; ++r) {
    // pages -> slot: one more slot than the chunks hold: the pool plans pages (highest first) out of
    // their chunks and the slot into them.
    rt->synchronize();
    ChunkMap before = chunk_map(p);
    std::uint64_t plans0 = p.remapped();
    Clock::time_point t0 = Clock::now();
    pool::Granted<pool::Lease> g = rt->lease_slot();
    rt->settle();
    double us = us_since(t0);
    if (g.ok() || g.denied().kind != pool::DeniedKind::Remapping)
      fail(ErrorKind::Api, "kern bench: a slot beyond the held ones was {}, not a remap",
           g.ok() ? "granted" : g.denied().describe());
    auto [mapped, unmapped] = moved(before, chunk_map(p));
    fwd_ms.push_back(us / 1e3);
    fwd_mapped.push_back(mapped);
    fwd_unmapped.push_back(unmapped);
    fwd_plans.push_back(p.remapped() - plans0);
    pool::Lease made = granted_or_fail(rt->lease_slot(), "lease_slot after the remap");

    // slot -> pages: two free slots (one for the lease, the other its chunks' source), then a
    // sequence as long as the pages at load: the pool plans the free slot out and pages in.
    made = pool::Lease();
    held.pop_back();
    rt->synchronize();
    before = chunk_map(p);
    plans0 = p.remapped();
    t0 = Clock::now();
    g = rt->lease(back_tokens);
    rt->settle();
    us = us_since(t0);
    if (g.ok() || g.denied().kind != pool::DeniedKind::Remapping)
      fail(ErrorKind::Api, "kern bench: a lease of {} tokens was {}, not a remap", back_tokens,
           g.ok() ? "granted" : g.denied().describe());
    std::tie(mapped, unmapped) = moved(before, chunk_map(p));
    back_ms.push_back(us / 1e3);
    back_mapped.push_back(mapped);
    back_unmapped.push_back(unmapped);
    back_plans.push_back(p.remapped() - plans0);
    granted_or_fail(rt->lease(back_tokens), "the lease after the remap");  // and dropped
    held.push_back(granted_or_fail(rt->lease_slot(), "lease_slot"));      // every slot held again
  }
  std::vector<RemapFigure> out;
  out.push_back(make_remap_figure("pages -> slot", p.chunk_bytes(), fwd_ms, fwd_mapped, fwd_unmapped, fwd_plans));
  out.push_back(make_remap_figure("slot -> pages", p.chunk_bytes(), back_ms, back_mapped, back_unmapped, back_plans));
  held.clear();
  rt->synchronize();
  return out;
}

}  // namespace kern::bench
