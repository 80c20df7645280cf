// RMSNorm and fused residual-add + RMSNorm over rows of bf16 (f32 statistics).
// Rounding follows the HF Qwen3 module: y = bf16(w * bf16(x * rsqrt(mean(x^2) + eps))).
#include "rms.cuh"

using namespace kern_dev;

namespace {

__device__ __forceinline__ float sum_squares(const bf16* __restrict__ x, int hidden) {
  float acc = 0.0f;
  if ((hidden & 7) == 0) {
    const Bf16x8* v = reinterpret_cast<const Bf16x8*>(x);
    for (int i = threadIdx.x; i < hidden / 8; i += blockDim.x) {
      const Bf16x8 c = v[i];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float f = to_f(c.v[j]);
        acc += f * f;
      }
    }
  } else {
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
      const float f = to_f(x[i]);
      acc += f * f;
    }
  }
  return block_sum(acc);
}

__device__ __forceinline__ bf16 norm_one(float x, float rstd, bf16 w) { return rms_apply(x, rstd, to_f(w)); }

__device__ __forceinline__ void write_normed(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                             bf16* __restrict__ y, int hidden, float rstd) {
  if ((hidden & 7) == 0) {
    const Bf16x8* xv = reinterpret_cast<const Bf16x8*>(x);
    const Bf16x8* wv = reinterpret_cast<const Bf16x8*>(w);
    Bf16x8* yv = reinterpret_cast<Bf16x8*>(y);
    for (int i = threadIdx.x; i < hidden / 8; i += blockDim.x) {
      const Bf16x8 a = xv[i], b = wv[i];
      Bf16x8 o;
#pragma unroll
      for (int j = 0; j < 8; ++j) o.v[j] = norm_one(to_f(a.v[j]), rstd, b.v[j]);
      yv[i] = o;
    }
  } else {
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) y[i] = norm_one(to_f(x[i]), rstd, w[i]);
  }
}

}  // namespace

// Rows of at most kRegChunks * blockDim.x 16-byte chunks are held in registers (one read of x);
// the norm weight is loaded before waiting for the previous kernel (pdl: no kernel writes it).
constexpr int kRegChunks = 4;

// y[r] = rmsnorm(x[r]) * w for r < rows. grid: (any, 1, 1) row-strided; block: multiple of 32, <= 1024.
// Bitwise the same in both paths: each thread sums the same chunks in the same order.
extern "C" __global__ void kern_rms_norm_bf16(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                              bf16* __restrict__ y, int32_t rows, int32_t hidden, float eps) {
  const int chunks = hidden / 8;
  const bool in_regs = (hidden & 7) == 0 && chunks <= kRegChunks * static_cast<int>(blockDim.x);
  Bf16x8 wv[kRegChunks];
  if (in_regs) {
#pragma unroll
    for (int j = 0; j < kRegChunks; ++j) {
      const int c = threadIdx.x + j * blockDim.x;
      if (c < chunks) wv[j] = reinterpret_cast<const Bf16x8*>(w)[c];
    }
  }
  wait_for_previous_grid();
  allow_next_grid();
  for (int r = blockIdx.x; r < rows; r += gridDim.x) {
    const bf16* xr = x + static_cast<int64_t>(r) * hidden;
    if (!in_regs) {
      const float rstd = rms_rstd(sum_squares(xr, hidden), hidden, eps);
      write_normed(xr, w, y + static_cast<int64_t>(r) * hidden, hidden, rstd);
      continue;
    }
    Bf16x8 xv[kRegChunks];
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < kRegChunks; ++j) {
      const int c = threadIdx.x + j * blockDim.x;
      if (c < chunks) {
        xv[j] = reinterpret_cast<const Bf16x8*>(xr)[c];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const float f = to_f(xv[j].v[e]);
          acc += f * f;
        }
      }
    }
    const float rstd = rms_rstd(block_sum(acc), hidden, eps);
    Bf16x8* yr = reinterpret_cast<Bf16x8*>(y + static_cast<int64_t>(r) * hidden);
#pragma unroll
    for (int j = 0; j < kRegChunks; ++j) {
      const int c = threadIdx.x + j * blockDim.x;
      if (c < chunks) {
        Bf16x8 o;
#pragma unroll
        for (int e = 0; e < 8; ++e) o.v[e] = norm_one(to_f(xv[j].v[e]), rstd, wv[j].v[e]);
        yr[c] = o;
      }
    }
  }
}

// residual[r] = bf16(residual[r] + delta[r]); y[r] = rmsnorm(residual[r]) * w.
// grid: (any, 1, 1) row-strided; block: multiple of 32, <= 1024.
extern "C" __global__ void kern_fused_add_rms_norm_bf16(bf16* __restrict__ residual, const bf16* __restrict__ delta,
                                                        const bf16* __restrict__ w, bf16* __restrict__ y, int32_t rows,
                                                        int32_t hidden, float eps) {
  wait_for_previous_grid();
  allow_next_grid();
  for (int r = blockIdx.x; r < rows; r += gridDim.x) {
    bf16* xr = residual + static_cast<int64_t>(r) * hidden;
    const bf16* dr = delta + static_cast<int64_t>(r) * hidden;
    // Each thread re-reads only the elements it wrote itself, with the same indexing.
    if ((hidden & 7) == 0) {
      Bf16x8* xv = reinterpret_cast<Bf16x8*>(xr);
      const Bf16x8* dv = reinterpret_cast<const Bf16x8*>(dr);
      for (int i = threadIdx.x; i < hidden / 8; i += blockDim.x) {
        Bf16x8 a = xv[i];
        const Bf16x8 b = dv[i];
#pragma unroll
        for (int j = 0; j < 8; ++j) a.v[j] = to_bf(to_f(a.v[j]) + to_f(b.v[j]));
        xv[i] = a;
      }
    } else {
      for (int i = threadIdx.x; i < hidden; i += blockDim.x) xr[i] = to_bf(to_f(xr[i]) + to_f(dr[i]));
    }
    const float rstd = rms_rstd(sum_squares(xr, hidden), hidden, eps);
    write_normed(xr, w, y + static_cast<int64_t>(r) * hidden, hidden, rstd);
  }
}
