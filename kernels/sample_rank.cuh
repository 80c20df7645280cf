// Ranking primitives of the race kernel's candidate lists (kernels/sample_race.cuh; docs/kernels.md,
// "Sampling"): a warp's bitonic sort and merge of u64 keys, and a CTA's count of its tokens by bin
// without shared-memory atomics (packed per-thread counters summed by redux.sync).
#pragma once

#include <stdint.h>

#include "sample_common.cuh"

namespace kern_sample_dev {

__device__ __forceinline__ uint64_t shfl_xor_u64(uint64_t v, int o) {
  const uint32_t lo = __shfl_xor_sync(kFull, static_cast<uint32_t>(v), o);
  const uint32_t hi = __shfl_xor_sync(kFull, static_cast<uint32_t>(v >> 32), o);
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

// One compare-exchange stage of a bitonic network over N = 32 R keys held by a warp, element
// e = lane + 32 i in v[i]: partner e ^ j; in a block of size k sorted descending ((e & k) == 0)
// the lower element keeps the larger key, in an ascending block the smaller.
template <int R>
__device__ __forceinline__ void bitonic_stage(uint64_t (&v)[R], int k, int j) {
  const int lane = threadIdx.x & 31;
  if (j >= 32) {
    const int ji = j >> 5;
#pragma unroll
    for (int i = 0; i < R; ++i) {
      if ((i & ji) != 0) continue;
      const bool desc = ((lane + 32 * i) & k) == 0;
      const uint64_t a = v[i], b = v[i + ji];
      if (desc ? a < b : a > b) {
        v[i] = b;
        v[i + ji] = a;
      }
    }
  } else {
    const bool lower = (lane & j) == 0;
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const uint64_t o = shfl_xor_u64(v[i], j);
      const bool desc = ((lane + 32 * i) & k) == 0;
      v[i] = (lower == desc) ? max(v[i], o) : min(v[i], o);
    }
  }
}

// Sorts the warp's N = 32 R keys descending (element e = lane + 32 i in v[i]).
template <int R>
__device__ __forceinline__ void warp_sort_desc(uint64_t (&v)[R]) {
  constexpr int N = 32 * R;
#pragma unroll
  for (int k = 2; k <= N; k <<= 1)
#pragma unroll
    for (int j = k >> 1; j > 0; j >>= 1) bitonic_stage<R>(v, k, j);
}

// Sorts a bitonic sequence of the warp's N = 32 R keys descending.
template <int R>
__device__ __forceinline__ void warp_merge_desc(uint64_t (&v)[R]) {
  constexpr int N = 32 * R;
#pragma unroll
  for (int j = N >> 1; j > 0; j >>= 1) bitonic_stage<R>(v, 2 * N, j);
}

// v (sorted descending, 64 keys: v[0] = element lane, v[1] = lane + 32) becomes the top 64 of v and
// the sorted-descending list b, whose element 63 - e the caller passed as br[i] for e = lane + 32 i:
// the elementwise maximum of a descending and an ascending sequence is bitonic and holds the top 64.
__device__ __forceinline__ void warp_merge_top64(uint64_t (&v)[2], uint64_t br0, uint64_t br1) {
  v[0] = max(v[0], br0);
  v[1] = max(v[1], br1);
  warp_merge_desc<2>(v);
}

// Which bin (0..15) each of a thread's 8 tokens falls in, or -1 (not counted); every thread of the CTA
// calls. Returns, in every thread, the smallest bin J at which base + (the CTA's tokens in bins
// 0..J) reaches `need` (16 if none), and those cumulative counts through J - 1 and through J (through
// bin 15 when J = 16). red: 8 x kRaceWarps words of shared memory, free on entry and on return.
struct BinPick {
  int bin;
  uint32_t before, through;
};

template <int kWarps>
__device__ __forceinline__ BinPick block_bin_pick(const int (&bins)[8], uint32_t base, uint32_t need, uint32_t* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint64_t packed = 0;  // a nibble per bin: at most 8 tokens per thread
#pragma unroll
  for (int e = 0; e < 8; ++e)
    if (bins[e] >= 0) packed += 1ull << (4 * bins[e]);
#pragma unroll
  for (int q = 0; q < 8; ++q) {  // bins 2q and 2q + 1 as 16-bit fields: at most 32 * 8 per warp, 2048 per CTA
    const uint32_t w = static_cast<uint32_t>((packed >> (8 * q)) & 0xfu) |
                       (static_cast<uint32_t>((packed >> (8 * q + 4)) & 0xfu) << 16);
    const uint32_t s = __reduce_add_sync(kFull, w);
    if (lane == 0) red[warp * 8 + q] = s;
  }
  __syncthreads();
  uint32_t col = 0;  // lane q < 8: bins 2q, 2q + 1 over the CTA (integers: any order)
  if (lane < 8)
#pragma unroll
    for (int w = 0; w < kWarps; ++w) col += red[w * 8 + lane];
  __syncthreads();  // red is free again
  uint32_t c = __shfl_sync(kFull, col, (lane & 15) >> 1);
  c = lane >= 16 ? 0u : ((lane & 1) ? (c >> 16) : (c & 0xffffu));
  uint32_t s = c;  // inclusive scan over bins
#pragma unroll
  for (int o = 1; o < 16; o <<= 1) {
    const uint32_t t = __shfl_up_sync(kFull, s, o);
    if (lane >= o) s += t;
  }
  s += base;
  const unsigned hit = __ballot_sync(kFull, lane < 16 && s >= need);
  const int bin = hit ? __ffs(hit) - 1 : 16;
  const uint32_t through = __shfl_sync(kFull, s, bin < 16 ? bin : 15);
  const uint32_t prev = __shfl_sync(kFull, s, bin > 0 ? bin - 1 : 0);
  return {bin, bin == 0 ? base : prev, through};
}

}  // namespace kern_sample_dev
