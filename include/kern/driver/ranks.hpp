// One process holding every rank of a manifest's topology group (kern run / kern bench --gpus;
// issue 20, docs/multi-gpu-handles.md "One process, every rank"): which group the listed GPUs
// stand for, checked before anything loads. Pure: no runtime, no CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kern/core/manifest.hpp"

namespace kern::driver {

struct RankPlan {
  std::string group;      // the topology group whose ranks the GPUs hold ("" without one)
  std::vector<int> gpus;  // gpus[r]: rank r's GPU ordinal
};

// "0,1" -> {0, 1}: non-negative ordinals, at least one. Api error naming `what` otherwise.
std::vector<int> parse_gpu_list(const std::string& text, const std::string& what);

// The plan for `gpus` (empty: one rank on GPU `default_gpu`). A manifest without a group of more
// than one rank runs on one GPU; one with such a group (at most one: one process holds one group's
// ranks) needs exactly that many GPUs. With more than one rank every state must be paged: rank 0's
// pool decides every lease and the other ranks' pools, laid out alike, are only their memory (a
// per-sequence state could make rank 0 remap alone). A GPU may be listed twice (two ranks on one
// GPU: the peer buffers work, NCCL refuses it at connect). Api errors say which flag to change.
RankPlan plan_ranks(const core::Manifest& m, const std::vector<int>& gpus, int default_gpu);

// One call of an eager program queued on one rank.
struct RankCall {
  std::size_t rank, call;
  bool operator==(const RankCall&) const = default;
};
// The order in which one process queues an eager program of `calls` calls on `ranks` ranks: call
// by call, and within a call ranks 1.. before rank 0 (rank 0 is the one whose reads follow). When a
// launch blocks the host, every call before it is queued on every rank, so no queued cross-rank
// wait lacks its partners (driver::RanksExecutor; docs/perf.md, session 36).
std::vector<RankCall> eager_launch_order(std::size_t calls, std::size_t ranks);

}  // namespace kern::driver
