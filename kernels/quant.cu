// Per-tensor e4m3 quantization of a bf16 tensor, the operands of the fp8 GEMMs (extern
// cublaslt_fp8_tn: C = (a_scale·A)(w_scale·W)ᵀ). One scale for the whole tensor, absmax / 448 (448 the
// largest finite e4m3), and each element x -> e4m3(x / scale) rounded to nearest even and saturated to
// ±448 (__NV_SATFINITE). Two kernels, no atomics:
//   kern_absmax_partial_bf16: CTA b writes the largest |x| of its slice to partials[b];
//   kern_quant_e4m3_bf16:     every CTA reduces partials[0, parts) to the absmax, takes the scale from it
//                             (CTA 0 stores it in scale[0]) and converts its own slice.
// The maximum is exact, so the scale and every byte are the same whatever the grids and the slicing.
// An all-zero tensor gets scale 1 (and zero bytes) instead of a 0 / 0. NaN elements are left out of the
// absmax (fmaxf) and stay NaN; an infinite element makes the scale infinite.
#include <cuda_fp8.h>

#include "common.cuh"

using namespace kern_dev;

namespace {

constexpr float kE4m3Max = 448.0f;

// Max over the whole block (blockDim.x a multiple of 32, at most 1024), every thread gets it. Called
// once per kernel (the shared words are not reused).
__device__ __forceinline__ float block_max(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  v = warp_max(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  return warp_max(lane < nwarps ? partial[lane] : 0.0f);
}

// The slice of a CTA: 8-element vectors (16-byte loads) v = blockIdx·blockDim + thread, stepping
// gridDim·blockDim, when the element count is a multiple of 8 and the pointers allow it; single
// elements the same way otherwise.
__device__ __forceinline__ bool by_vectors(int64_t count, const void* x, const void* q) {
  return (count & 7) == 0 && (reinterpret_cast<uintptr_t>(x) & 15) == 0 && (reinterpret_cast<uintptr_t>(q) & 7) == 0;
}

__device__ __forceinline__ unsigned char to_e4m3(float v) {
  return static_cast<unsigned char>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

}  // namespace

// grid: (any G ≥ 1, 1, 1), block: a multiple of 32 threads, at most 1024. x [rows, cols] bf16 (rows·cols
// elements, contiguous); partials [G] f32.
extern "C" __global__ void kern_absmax_partial_bf16(const bf16* __restrict__ x, float* __restrict__ partials,
                                                    int32_t rows, int32_t cols) {
  wait_for_previous_grid();
  allow_next_grid();
  const int64_t count = static_cast<int64_t>(rows) * cols;
  const int64_t start = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  float m = 0.0f;
  if (by_vectors(count, x, x)) {
    const uint4* x8 = reinterpret_cast<const uint4*>(x);
    for (int64_t v = start; v < (count >> 3); v += stride) {
      float f[8];
      unpack_bf16x8(x8[v], f);
#pragma unroll
      for (int j = 0; j < 8; ++j) m = fmaxf(m, fabsf(f[j]));
    }
  } else {
    for (int64_t i = start; i < count; i += stride) m = fmaxf(m, fabsf(to_f(x[i])));
  }
  m = block_max(m);
  if (threadIdx.x == 0) partials[blockIdx.x] = m;
}

// grid: (any, 1, 1), block: a multiple of 32 threads, at most 1024. partials [parts] f32 from
// kern_absmax_partial_bf16 over the same x; scale [1] f32 (only element 0 is written); q [rows, cols]
// e4m3. scale = absmax / 448 in f32 (1 when absmax is 0); q = e4m3(x / scale), the division in f32.
extern "C" __global__ void kern_quant_e4m3_bf16(const bf16* __restrict__ x, const float* __restrict__ partials,
                                                float* __restrict__ scale, __nv_fp8_storage_t* __restrict__ q,
                                                int32_t rows, int32_t cols, int32_t parts) {
  wait_for_previous_grid();
  allow_next_grid();
  float m = 0.0f;
  for (int i = threadIdx.x; i < parts; i += blockDim.x) m = fmaxf(m, partials[i]);
  const float amax = block_max(m);
  const float s = amax > 0.0f ? amax / kE4m3Max : 1.0f;
  if (blockIdx.x == 0 && threadIdx.x == 0) scale[0] = s;
  const int64_t count = static_cast<int64_t>(rows) * cols;
  const int64_t start = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  if (by_vectors(count, x, q)) {
    const uint4* x8 = reinterpret_cast<const uint4*>(x);
    uint2* q8 = reinterpret_cast<uint2*>(q);
    for (int64_t v = start; v < (count >> 3); v += stride) {
      float f[8];
      unpack_bf16x8(x8[v], f);
      uint32_t w[2] = {0, 0};
#pragma unroll
      for (int j = 0; j < 8; ++j) w[j >> 2] |= static_cast<uint32_t>(to_e4m3(f[j] / s)) << (8 * (j & 3));
      q8[v] = make_uint2(w[0], w[1]);
    }
  } else {
    for (int64_t i = start; i < count; i += stride) q[i] = to_e4m3(to_f(x[i]) / s);
  }
}
