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

// Rows hh0 .. hh0 + rows − 1 of part_o / part_ml (a sequence's q heads of one kv head; range i of
// row hh at hh · splits_max + i), each with `used` ranges, merged into out's rows hh0 ... N threads
// (index tid) share them: min(N, HD) threads per row, HD / that consecutive dims each. part_o and
// part_ml were written by other blocks of this launch: read through L2 (ld.global.cg).
template <int HD, int N>
__device__ __forceinline__ void merge_ranges(const float* __restrict__ part_o, const float* __restrict__ part_ml,
                                             bf16* __restrict__ out, int64_t hh0, int rows, int used, int splits_max,
                                             int tid) {
  constexpr int kPerRow = N < HD ? N : HD;  // threads per row
  constexpr int kDims = HD / kPerRow;       // consecutive dims per thread
  constexpr int kRowsPerPass = N / kPerRow;
  static_assert(HD % kPerRow == 0 && N % kPerRow == 0, "threads tile the rows");
  static_assert(kDims == 1 || kDims == 2 || kDims == 4, "one vector load per range");
  const int d0 = (tid % kPerRow) * kDims;
  for (int r = tid / kPerRow; r < rows; r += kRowsPerPass) {
    const int64_t e0 = (hh0 + r) * splits_max;
    float mx = -INFINITY;
#pragma unroll 8
    for (int i = 0; i < used; ++i) mx = fmaxf(mx, __ldcg(&part_ml[(e0 + i) * 2]));
    float den = 0.0f, num[kDims];
#pragma unroll
    for (int j = 0; j < kDims; ++j) num[j] = 0.0f;
    const float* po = part_o + e0 * HD + d0;
#pragma unroll 4
    for (int i = 0; i < used; ++i) {
      const float2 ml = __ldcg(reinterpret_cast<const float2*>(part_ml + (e0 + i) * 2));
      const float w = part_weight(ml.x, ml.y, mx);
      den += w;
      float v[kDims];
      if constexpr (kDims == 4) {
        const float4 q = __ldcg(reinterpret_cast<const float4*>(po + static_cast<int64_t>(i) * HD));
        v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
      } else if constexpr (kDims == 2) {
        const float2 q = __ldcg(reinterpret_cast<const float2*>(po + static_cast<int64_t>(i) * HD));
        v[0] = q.x, v[1] = q.y;
      } else {
        v[0] = __ldcg(po + static_cast<int64_t>(i) * HD);
      }
#pragma unroll
      for (int j = 0; j < kDims; ++j) num[j] = fmaf(w, v[j], num[j]);
    }
    bf16* dst = out + (hh0 + r) * HD + d0;
#pragma unroll
    for (int j = 0; j < kDims; ++j) dst[j] = to_bf(num[j] / den);
  }
}

// Counts one finished range of unit `unit` (sequence · kv_heads + kv head) in, once the calling threads
// stored its part_o / part_ml rows; true for the last of the unit's `used` ranges to arrive, whose
// callers then merge them (merge_ranges) and leave the count 0 for the next launch (arrivals: zero at
// load, as the sampling op's). The stores are fenced before the count and the merge's loads after it.
// Warp form: every lane of the warp calls it.
__device__ __forceinline__ bool last_range_of_warp(int32_t* __restrict__ arrivals, int unit, int used) {
  __threadfence();
  __syncwarp();
  int last = 0;
  if ((threadIdx.x & 31u) == 0) {
    __threadfence();
    last = atomicAdd(&arrivals[unit], 1) == used - 1;
  }
  last = __shfl_sync(0xffffffffu, last, 0);
  if (last) __threadfence();
  return last != 0;
}
// Block form: every thread of the block calls it; flag: a word of shared memory.
__device__ __forceinline__ bool last_range_of_block(int32_t* __restrict__ arrivals, int unit, int used, int* flag) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    *flag = atomicAdd(&arrivals[unit], 1) == used - 1;
  }
  __syncthreads();
  const bool last = *flag != 0;
  if (last) __threadfence();
  return last;
}

}  // namespace decode
}  // namespace
