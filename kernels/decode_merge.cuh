// The split-KV decode's merge inside the partial kernel (kern_attn_decode_{mma,warp}_merge_partial_hd*):
// the last of a (sequence, kv head)'s ranges to finish merges them all into `out`, so the call needs
// no reduce kernel (docs/kernels.md, "Decode attention: the merge in the last range").
//
// The arithmetic is kern_attn_decode_reduce_hd*'s (attention.cu, decode::reduce), in the same order:
// mx = the ranges' largest max, w_i = part_weight(m_i, l_i, mx), den = w_0 + w_1 + ... and num =
// fmaf(w_i, o_i, num) from range 0 up, out = bf16(num / den). So a row's bits are the reduce's, and
// do not depend on which range arrived last.
#pragma once

#include "common.cuh"
#include "softmax.cuh"

using namespace kern_dev;

namespace {
namespace decode {

// Row hh of part_o / part_ml (range i at hh · splits_max + i, `used` ranges) merged into out's row hh by
// one warp: each lane computes the weights of its ranges (32 at a time) and the row's max by a warp
// max; then every lane runs over the ranges in order, taking each weight by shuffle (den and num summed
// in the reduce's order), for its HD / 32 consecutive dims, whose loads do not wait on the weights.
// part_o and part_ml were written by other blocks of this launch: read through L2 (ld.global.cg).
template <int HD>
__device__ __forceinline__ void merge_row(const float* __restrict__ part_o, const float* __restrict__ part_ml,
                                          bf16* __restrict__ out, int64_t hh, int used, int splits_max, int lane) {
  constexpr int kDims = HD / 32;
  static_assert(kDims == 2 || kDims == 4, "one vector load per range");
  const int64_t e0 = hh * splits_max;
  float mx = -INFINITY;
  for (int i = lane; i < used; i += 32) mx = fmaxf(mx, __ldcg(&part_ml[(e0 + i) * 2]));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float den = 0.0f, num[kDims];
#pragma unroll
  for (int j = 0; j < kDims; ++j) num[j] = 0.0f;
  const float* po = part_o + e0 * HD + lane * kDims;
  for (int base = 0; base < used; base += 32) {
    float w = 0.0f;
    if (base + lane < used) {
      const float2 ml = __ldcg(reinterpret_cast<const float2*>(part_ml + (e0 + base + lane) * 2));
      w = part_weight(ml.x, ml.y, mx);
    }
    const int n = min(32, used - base);
#pragma unroll 8
    for (int i = 0; i < n; ++i) {
      const float wi = __shfl_sync(0xffffffffu, w, i);
      const float* src = po + static_cast<int64_t>(base + i) * HD;
      float v[kDims];
      if constexpr (kDims == 4) {
        const float4 q = __ldcg(reinterpret_cast<const float4*>(src));
        v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
      } else {
        const float2 q = __ldcg(reinterpret_cast<const float2*>(src));
        v[0] = q.x, v[1] = q.y;
      }
      den += wi;
#pragma unroll
      for (int j = 0; j < kDims; ++j) num[j] = fmaf(wi, v[j], num[j]);
    }
  }
  bf16* dst = out + hh * HD + lane * kDims;
#pragma unroll
  for (int j = 0; j < kDims; ++j) dst[j] = to_bf(num[j] / den);
}

// Rows hh0 .. hh0 + rows − 1 (a sequence's q heads of one kv head) merged by the N / 32 warps of the
// caller (thread index tid), a row per warp at a time.
template <int HD, int N>
__device__ __forceinline__ void merge_ranges(const float* __restrict__ part_o, const float* __restrict__ part_ml,
                                             bf16* __restrict__ out, int64_t hh0, int rows, int used, int splits_max,
                                             int tid) {
  static_assert(N % 32 == 0, "whole warps");
  for (int r = tid / 32; r < rows; r += N / 32) merge_row<HD>(part_o, part_ml, out, hh0 + r, used, splits_max, tid & 31);
}

// Counts one finished range of unit `unit` (sequence · kv_heads + kv head) in, once the calling threads
// stored its part_o / part_ml rows; true for the last of the unit's `used` ranges to arrive, whose
// callers then merge them (merge_ranges) and leave the count 0 for the next launch (arrivals: zero at
// load, as the sampling op's). One thread counts with an acquire-release atomic after a barrier over
// the callers (their stores before it, the merge's loads after it); no full fence per range.
__device__ __forceinline__ int count_range_in(int32_t* __restrict__ arrivals, int unit) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;" : "=r"(old) : "l"(arrivals + unit) : "memory");
  return old;
}
// Warp form: every lane of the warp calls it.
__device__ __forceinline__ bool last_range_of_warp(int32_t* __restrict__ arrivals, int unit, int used) {
  __syncwarp();
  int last = 0;
  if ((threadIdx.x & 31u) == 0) last = count_range_in(arrivals, unit) == used - 1;
  last = __shfl_sync(0xffffffffu, last, 0);
  __syncwarp();
  return last != 0;
}
// Block form: every thread of the block calls it; flag: a word of shared memory.
__device__ __forceinline__ bool last_range_of_block(int32_t* __restrict__ arrivals, int unit, int used, int* flag) {
  __syncthreads();
  if (threadIdx.x == 0) *flag = count_range_in(arrivals, unit) == used - 1;
  __syncthreads();
  return *flag != 0;
}

}  // namespace decode
}  // namespace
