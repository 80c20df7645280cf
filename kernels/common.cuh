// Shared device helpers for the kern Qwen3 kernels (bf16 storage, f32 arithmetic).
#pragma once

#include <cuda_bf16.h>
#include <stdint.h>

namespace kern_dev {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float to_f(bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ bf16 to_bf(float v) { return __float2bfloat16_rn(v); }
// Round an f32 to bf16 and back (models a bf16 intermediate of the reference implementation).
__device__ __forceinline__ float round_bf(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the whole block (blockDim.x a multiple of 32, at most 1024). Every thread gets the sum.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  __shared__ float total;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < nwarps ? partial[lane] : 0.0f;
    s = warp_sum(s);
    if (lane == 0) total = s;
  }
  __syncthreads();
  const float r = total;
  __syncthreads();  // partial/total may be reused by a later call
  return r;
}

// Programmatic dependent launch (sm_90; no-ops elsewhere and when the launch did not ask for
// it). A kernel launched with `pdl` may start while the previous kernel of the stream still runs:
// before wait_for_previous_grid() it may only read what no earlier kernel of the program writes
// (weights, its parameters); after it, everything earlier kernels wrote is visible.
// allow_next_grid() lets the next kernel of the stream launch (it still waits for this one to
// complete before reading anything): called right after the wait, so at most one kernel is ever
// waiting ahead of the running one.
__device__ __forceinline__ void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void allow_next_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The eight bf16 of one 16-byte load as f32.
__device__ __forceinline__ void unpack_bf16x8(const uint4& u, float (&f)[8]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

// Eight bf16 values moved as one 16-byte access.
struct alignas(16) Bf16x8 {
  bf16 v[8];
};

}  // namespace kern_dev
