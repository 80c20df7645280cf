// SiLU(gate) * up over concatenated [rows, 2*inter] (gate columns first) -> [rows, inter].
// Rounding follows HF: out = bf16(bf16(silu(gate)) * up).
#include "common.cuh"

using namespace kern_dev;

// grid: (rows, any, 1) (column-strided by gridDim.y*blockDim.x), block: (any, 1, 1).
extern "C" __global__ void kern_silu_mul_bf16(const bf16* __restrict__ gate_up, bf16* __restrict__ out, int32_t rows,
                                              int32_t inter) {
  const int r = blockIdx.x;
  if (r >= rows) return;
  const bf16* g = gate_up + static_cast<int64_t>(r) * 2 * inter;
  const bf16* u = g + inter;
  bf16* o = out + static_cast<int64_t>(r) * inter;
  for (int i = blockIdx.y * blockDim.x + threadIdx.x; i < inter; i += gridDim.y * blockDim.x) {
    const float gv = to_f(g[i]);
    const float act = round_bf(gv / (1.0f + __expf(-gv)));
    o[i] = to_bf(act * to_f(u[i]));
  }
}
