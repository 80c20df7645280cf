// Two-stage greedy argmax over bf16 logits rows. Ties pick the lowest index (as a CPU scan does);
// NaN entries are ignored; a row with no comparable entry yields 0.
#include "common.cuh"

using namespace kern_dev;

namespace {

constexpr int32_t kNoIndex = 0x7fffffff;

__device__ __forceinline__ void better(float& bv, int32_t& bi, float v, int32_t i) {
  if (v > bv || (v == bv && i < bi)) {
    bv = v;
    bi = i;
  }
}

// Block-wide reduction of (value, index) pairs. blockDim.x a multiple of 32, <= 1024.
__device__ __forceinline__ void block_best(float& bv, int32_t& bi) {
  __shared__ float sv[32];
  __shared__ int32_t si[32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
    better(bv, bi, ov, oi);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  if (lane == 0) {
    sv[warp] = bv;
    si[warp] = bi;
  }
  __syncthreads();
  if (warp == 0) {
    bv = lane < nwarps ? sv[lane] : -INFINITY;
    bi = lane < nwarps ? si[lane] : kNoIndex;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int32_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
      better(bv, bi, ov, oi);
    }
  }
}

}  // namespace

// Stage 1: block b of row r scans columns [b*chunk, min(vocab, (b+1)*chunk)), chunk = ceil(vocab/nblocks),
// and writes its best (value, index) to part_max/part_idx [rows, nblocks].
// grid: (nblocks, rows, 1), block: (multiple of 32, 1, 1).
extern "C" __global__ void kern_argmax_partial_bf16(const bf16* __restrict__ logits, float* __restrict__ part_max,
                                                    int32_t* __restrict__ part_idx, int32_t rows, int32_t vocab,
                                                    int32_t nblocks) {
  wait_for_previous_grid();
  allow_next_grid();
  const int r = blockIdx.y, b = blockIdx.x;
  if (r >= rows || b >= nblocks) return;
  const int32_t chunk = (vocab + nblocks - 1) / nblocks;
  const int32_t begin = b * chunk;
  const int32_t end = min(vocab, begin + chunk);
  const bf16* row = logits + static_cast<int64_t>(r) * vocab;
  float bv = -INFINITY;
  int32_t bi = kNoIndex;
  for (int32_t i = begin + threadIdx.x; i < end; i += blockDim.x) better(bv, bi, to_f(row[i]), i);
  block_best(bv, bi);
  if (threadIdx.x == 0) {
    part_max[static_cast<int64_t>(r) * nblocks + b] = bv;
    part_idx[static_cast<int64_t>(r) * nblocks + b] = bi;
  }
}

// Stage 2: out[r] = index of the best of the nblocks partials of row r.
// grid: (rows, 1, 1), block: (multiple of 32, 1, 1).
extern "C" __global__ void kern_argmax_final(const float* __restrict__ part_max, const int32_t* __restrict__ part_idx,
                                             int64_t* __restrict__ out, int32_t rows, int32_t nblocks) {
  wait_for_previous_grid();
  allow_next_grid();
  const int r = blockIdx.x;
  if (r >= rows) return;
  float bv = -INFINITY;
  int32_t bi = kNoIndex;
  for (int32_t b = threadIdx.x; b < nblocks; b += blockDim.x)
    better(bv, bi, part_max[static_cast<int64_t>(r) * nblocks + b], part_idx[static_cast<int64_t>(r) * nblocks + b]);
  block_best(bv, bi);
  if (threadIdx.x == 0) out[r] = bi == kNoIndex ? 0 : bi;
}
