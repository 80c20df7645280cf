// kern bench: the state pool's figures (issue 16, docs/design/pool-on-gpu.md step 10).
//
// Pure part (pool_model.cpp; host-tested): the figures made from measured samples, the split of a
// KV size into checkpoints one page-table row can hold, and the manifest a remap is measured on.
// Measuring part (bench_pool.cpp; built with the runtime): host cost of the pool's calls on the
// model's real pool, a remap of whole chunks between a page and a slot arena, park / wake through
// the host tier. See docs/perf.md ("State pool").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kern/base/json.hpp"

namespace kern::bench {

// One host <-> device copy of pinned host memory (one way: bytes / time).
struct CopyCeiling {
  std::uint64_t bytes = 0;
  double ms = 0;    // median GPU ms of one copy
  double gbps = 0;  // bytes / s / 1e9
};
// Error(Api) for no samples, a zero size or a non-positive median.
CopyCeiling make_copy_ceiling(std::uint64_t bytes, const std::vector<double>& ms);

// Median host µs of one pool call at a context (the call alone: what it produced is dropped
// afterwards, untimed).
struct PoolOpCost {
  std::string op;  // lease, checkpoint, lease_from, fork
  std::uint64_t context = 0;
  std::size_t reps = 0;
  double us = 0;
};
PoolOpCost make_pool_op_cost(std::string op, std::uint64_t context, const std::vector<double>& us);

// One remap: chunks mapped into one arena (and unmapped from the other), from the first call that
// plans it to settle() returning.
struct RemapFigure {
  std::string direction;            // "pages -> slot", "slot -> pages"
  std::size_t reps = 0;
  std::uint64_t chunk_bytes = 0;
  std::uint64_t chunks_mapped = 0;  // median over the reps
  std::uint64_t chunks_unmapped = 0;
  std::uint64_t plans = 0;          // remaps it took (median; 1 when one call's plan moved it all)
  double ms = 0;                    // median
  double chunks_per_s = 0;          // chunks_mapped / ms
  double gbps = 0;                  // chunks_mapped × chunk_bytes / ms
};
// Error(Api) for no samples or mismatched sample lists.
RemapFigure make_remap_figure(std::string direction, std::uint64_t chunk_bytes, const std::vector<double>& ms,
                              const std::vector<std::uint64_t>& mapped, const std::vector<std::uint64_t>& unmapped,
                              const std::vector<std::uint64_t>& plans);

// Park (device -> host) or wake (host -> device) of `bytes` of KV: from the first call that issues
// it to every copy landed (Runtime::wait_transfers returning).
struct TransferPoint {
  std::string direction;  // "park", "wake"
  std::uint64_t bytes = 0, pages = 0, stores = 0;  // stores: checkpoints it took (one row each)
  std::size_t reps = 0;
  double ms = 0;          // median, issue to landed
  double issue_us = 0;    // median host µs of issuing it (every room + park, or every wake)
  double gbps = 0;        // bytes / ms
  double of_ceiling = 0;  // gbps / the pinned copy ceiling of that direction (0 without one)
};
TransferPoint make_transfer_point(std::string direction, std::uint64_t bytes, std::uint64_t pages,
                                  std::uint64_t stores, const std::vector<double>& ms,
                                  const std::vector<double>& issue_us, double ceiling_gbps);

// Decode GPU step (graph replays back to back) at `context` while a park or wake of `bytes` runs on
// the transfer stream, against the same replays with nothing in flight.
struct OverlapPoint {
  std::string direction;
  std::uint64_t context = 0, bytes = 0;
  std::size_t replays = 0;  // during the transfers, over every round
  std::size_t rounds = 0;
  double base_us = 0, during_us = 0;  // medians
  double slowdown = 0;                // during / base − 1
  double covered = 0;  // share of the replays' host span inside the transfer window (1: all inside)
};
OverlapPoint make_overlap_point(std::string direction, std::uint64_t context, std::uint64_t bytes,
                                const std::vector<double>& base_ms, const std::vector<double>& during_ms,
                                std::size_t rounds, double covered);

struct PoolFigures {
  bool measured = false;
  std::string note;  // why not, or what was left out
  std::uint64_t unit = 0, page_bytes = 0, chunk_bytes = 0, pages = 0, row_tokens = 0;
  std::vector<PoolOpCost> ops;
  bool remap_measured = false;
  std::string remap_note;  // the manifest it ran on, or why not
  std::vector<RemapFigure> remap;
  bool host_measured = false;
  std::string host_note;
  std::vector<TransferPoint> transfers;  // the sizes park / wake ran at
  std::vector<TransferPoint> issue;      // the issue-cost sizes (e.g. 2,500 pages)
  std::vector<OverlapPoint> overlap;
};

// Pages holding at least `bytes` of KV (a page is page_bytes over every paged state).
std::uint64_t pages_for_bytes(std::uint64_t bytes, std::uint64_t page_bytes);
// `pages` split into checkpoint lengths in tokens, each at most `row_pages` pages (one page-table
// row), all full pages: {row_pages·unit, ..., rest·unit}. Error(Api) for zero unit / row.
std::vector<std::uint64_t> store_tokens(std::uint64_t pages, std::uint64_t unit, std::uint64_t row_pages);

// The manifest the remap is measured on: `manifest` (kern gen qwen3's) with one per-seq state
// `state` of `bytes_per_seq` bytes, which one call of a program no driver runs names (the verifier
// requires every state to be used; nothing runs it). Its calls are a copy of the first program's
// calls up to the first one that names a state (the verifier's dataflow rule: what that call reads
// is written before it), that one pointed at the new state. Error(Manifest) when no call names a
// state or the names are taken.
nlohmann::ordered_json with_seq_state(const nlohmann::ordered_json& manifest, const std::string& state,
                                      std::uint64_t bytes_per_seq, const std::string& program);

// Issue 16's targets for what the figures hold (appended to the report's targets).
struct Target;
void pool_targets(const PoolFigures& p, std::vector<Target>& out);
// The table section and the JSON value ("pool").
std::string format_pool(const PoolFigures& p);
nlohmann::ordered_json pool_json(const PoolFigures& p);

}  // namespace kern::bench

// ---- Measuring (bench_pool.cpp; needs the runtime and a GPU) ----

namespace kern::runtime {
class Runtime;
}
namespace kern::core {
class Protocol;
class Verified;
}

namespace kern::bench {

// Host µs of lease(C), checkpoint(lease, C), lease_from(checkpoint of C, C + 1) and fork(lease, C,
// C + 1) at each context C on `runtime`'s pool, `reps` times after a warm-up round: the stream is
// drained before each call, nothing is synchronised inside the timed call, and what it produced is
// dropped afterwards (untimed), so the pool is back where it started. A context the pool cannot
// hold is left out and said in `note`.
std::vector<PoolOpCost> measure_pool_ops(runtime::Runtime& runtime, const std::vector<std::uint64_t>& contexts,
                                         std::size_t reps, std::string& note);

// Loads `verified` (with_seq_state's manifest: a paged state and a per-seq state of `slot_bytes`)
// without weights, its pool sized for one slot's bytes of pages and three slots, holds every free
// slot, then `reps` times: a slot more (the pool plans pages out of their chunks and the slot in;
// "pages -> slot") and, with two slots free again, a sequence as long as the pages at load ("slot ->
// pages"); each timed from that call to settle() returning, the chunks counted from the pool's
// chunk map before and after.
std::vector<RemapFigure> measure_remap(const core::Verified& verified, const std::string& kernels_dir, int gpu,
                                       std::uint64_t slot_bytes, std::size_t reps, std::string& note);

struct HostTierPlan {
  std::vector<std::uint64_t> park_bytes;  // KV sizes park / wake run at (1, 2, 5.5 GiB)
  std::uint64_t issue_pages = 0;          // the issue-cost size (2,500 pages; 0: none)
  std::uint64_t overlap_bytes = 0;        // the park / wake the decode step runs beside (5 GiB; 0: none)
  std::uint64_t context = 1024;           // that decode step's context
  std::size_t replays = 200;              // at most this many replays per round
  std::size_t overlap_rounds = 5;         // rounds of (alone, during a park, alone, during a wake)
  std::size_t reps = 3;                   // park / wake repetitions per size, after a warm-up
};

// The host tier on `runtime`'s pool (reserve_host once, for the largest size). For each size and
// the issue-cost size: whole-page checkpoints of one row each (fresh leases, retired), then reps
// times (after a warm-up): every room + park issued (the host µs of that), wait_transfers() (ms
// from the first call to it returning); the last parked set then woken reps times (after a
// warm-up) into leases one token longer: every wake issued, wait_transfers(), awake, dropped.
// Then, with a DecodeBench at `context` (its sequence's own lease): overlap_rounds times, replays alone, then a park of overlap_bytes issued and replays
// right behind it, wait_transfers(); the same for a wake of what was parked. Replays per turn:
// 80 % of the transfer's expected time (bytes / the ceiling) over the step, at most `replays`.
void measure_host_tier(const core::Protocol& protocol, runtime::Runtime& runtime, const HostTierPlan& plan,
                       double h2d_gbps, double d2h_gbps, PoolFigures& out);

}  // namespace kern::bench
