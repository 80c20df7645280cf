// SiLU(gate) * up over concatenated [rows, 2*inter] (gate columns first) -> [rows, inter].
// Rounding follows HF: out = bf16(bf16(silu(gate)) * up).
#include "common.cuh"

using namespace kern_dev;

// grid: (rows, any, 1) (column-strided by gridDim.y*blockDim.x), block: (any, 1, 1).
// When inter is a multiple of 8 (every Qwen3 shape) each thread moves 8 columns per step with 16-byte
// accesses (rows are then 16-byte aligned); the arithmetic per element is the same either way.
extern "C" __global__ void kern_silu_mul_bf16(const bf16* __restrict__ gate_up, bf16* __restrict__ out, int32_t rows,
                                              int32_t inter) {
  const int r = blockIdx.x;
  if (r >= rows) return;
  const bf16* g = gate_up + static_cast<int64_t>(r) * 2 * inter;
  const bf16* u = g + inter;
  bf16* o = out + static_cast<int64_t>(r) * inter;
  const int start = blockIdx.y * blockDim.x + threadIdx.x, stride = gridDim.y * blockDim.x;
  if ((inter & 7) == 0) {
    const uint4* g8 = reinterpret_cast<const uint4*>(g);
    const uint4* u8 = reinterpret_cast<const uint4*>(u);
    uint4* o8 = reinterpret_cast<uint4*>(o);
    for (int c = start; c < (inter >> 3); c += stride) {
      float gv[8], uv[8];
      unpack_bf16x8(g8[c], gv);
      unpack_bf16x8(u8[c], uv);
      Bf16x8 y;
#pragma unroll
      for (int j = 0; j < 8; ++j) y.v[j] = to_bf(round_bf(gv[j] / (1.0f + __expf(-gv[j]))) * uv[j]);
      o8[c] = *reinterpret_cast<const uint4*>(&y);
    }
    return;
  }
  for (int i = start; i < inter; i += stride) {
    const float gv = to_f(g[i]);
    const float act = round_bf(gv / (1.0f + __expf(-gv)));
    o[i] = to_bf(act * to_f(u[i]));
  }
}
