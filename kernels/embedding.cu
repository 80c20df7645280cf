// Row gathers: token embedding lookup and "last row of each sequence".
#include "common.cuh"

using namespace kern_dev;

namespace {

__device__ __forceinline__ void copy_row(const bf16* __restrict__ src, bf16* __restrict__ dst, int hidden) {
  if ((hidden & 7) == 0) {
    const Bf16x8* s = reinterpret_cast<const Bf16x8*>(src);
    Bf16x8* d = reinterpret_cast<Bf16x8*>(dst);
    for (int i = threadIdx.x; i < hidden / 8; i += blockDim.x) d[i] = s[i];
  } else {
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = src[i];
  }
}

__device__ __forceinline__ void zero_row(bf16* __restrict__ dst, int hidden) {
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = to_bf(0.0f);
}

}  // namespace

// out[r, :] = table[ids[r], :] for r < rows. An id outside [0, vocab) yields a zero row.
// grid: (any, 1, 1) (row-strided), block: (any multiple of 32, 1, 1).
extern "C" __global__ void kern_embedding_bf16(const int64_t* __restrict__ ids, const bf16* __restrict__ table,
                                               bf16* __restrict__ out, int32_t rows, int32_t hidden, int32_t vocab) {
  wait_for_previous_grid();
  allow_next_grid();
  for (int r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t id = ids[r];
    bf16* dst = out + static_cast<int64_t>(r) * hidden;
    if (id < 0 || id >= vocab) {
      zero_row(dst, hidden);
    } else {
      copy_row(table + id * hidden, dst, hidden);
    }
  }
}

// out[s, :] = x[cu_seqlens[s + 1] - 1, :] for s < seqs (the last row of each sequence in a
// ragged batch). A sequence with no rows yields a zero row.
// grid: (any, 1, 1) (sequence-strided), block: (any multiple of 32, 1, 1).
extern "C" __global__ void kern_gather_last_rows_bf16(const bf16* __restrict__ x,
                                                      const int32_t* __restrict__ cu_seqlens, bf16* __restrict__ out,
                                                      int32_t seqs, int32_t hidden) {
  for (int s = blockIdx.x; s < seqs; s += gridDim.x) {
    const int32_t begin = cu_seqlens[s], end = cu_seqlens[s + 1];
    bf16* dst = out + static_cast<int64_t>(s) * hidden;
    if (end <= begin || end <= 0) {
      zero_row(dst, hidden);
    } else {
      copy_row(x + static_cast<int64_t>(end - 1) * hidden, dst, hidden);
    }
  }
}
