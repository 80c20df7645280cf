// The RMSNorm prologue shared by the norm kernels and the fused-norm GEMVs, with HF Qwen3's
// rounding: y = bf16(w · bf16(x · rsqrt(mean(x²) + eps))), statistics in f32.
#pragma once

#include "common.cuh"

namespace kern_dev {

// rsqrt(mean + eps) from the sum of squares of n elements.
__device__ __forceinline__ float rms_rstd(float sum_squares, int n, float eps) {
  return rsqrtf(sum_squares / static_cast<float>(n) + eps);
}

// Sum of squares of a row of `chunks` 16-byte pieces (8 bf16 each), lane-strided over one warp;
// every lane gets the total.
__device__ __forceinline__ float warp_sum_squares(const uint4* row, int chunks, int lane) {
  float acc = 0.0f;
  for (int c = lane; c < chunks; c += 32) {
    float f[8];
    unpack_bf16x8(row[c], f);
#pragma unroll
    for (int j = 0; j < 8; ++j) acc += f[j] * f[j];
  }
  return warp_sum(acc);
}

// One normalised element: bf16(w · bf16(x · rstd)).
__device__ __forceinline__ bf16 rms_apply(float x, float rstd, float w) { return to_bf(w * round_bf(x * rstd)); }

// Eight normalised elements of one 16-byte piece of x and of w (read in that order, then rstd).
__device__ __forceinline__ Bf16x8 rms_apply8(const uint4& x, const uint4& w, const float& rstd) {
  float f[8], g[8];
  unpack_bf16x8(x, f);
  unpack_bf16x8(w, g);
  const float s = rstd;
  Bf16x8 o;
#pragma unroll
  for (int j = 0; j < 8; ++j) o.v[j] = rms_apply(f[j], s, g[j]);
  return o;
}

}  // namespace kern_dev
