// Test-only kernels of module test_gemv (built by tests/gpu/kernels/CMakeLists.txt into
// <build>/kernels/test_gemv.fatbin; the harness finds an entry there when the production fatbin
// "gemv" lacks it): the tuning variants of kern_gemv_bf16 timed by PerfGpu.GemvTuning, on the
// templates of kernels/gemv.cuh.
#include "gemv.cuh"

// The pre-pdl production kernel (plain epilogue, no prefetch, x from global): kept for the tuning comparison.
extern "C" __global__ void kern_gemv_bf16_p4(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                             bf16* __restrict__ y, int32_t m, int32_t n, int32_t k, int32_t ldx) {
  gemv<Epilogue::Store>(x, w, y, m, n, k, ldx);
}

// Tuning variants (timed by PerfGpu.GemvTuning; not used by kern gen; no prefetch parameter): 2, 4 or 8 loads per
// row per batch, not pipelined (the kern gen entries are software-pipelined batches of 4: the fastest at every shape
// timed on the H200).
extern "C" __global__ void kern_gemv_bf16_u2(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                             bf16* __restrict__ y, int32_t m, int32_t n, int32_t k, int32_t ldx) {
  gemv<Epilogue::Store, 2, false>(x, w, y, m, n, k, ldx);
}

extern "C" __global__ void kern_gemv_bf16_u4(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                             bf16* __restrict__ y, int32_t m, int32_t n, int32_t k, int32_t ldx) {
  gemv<Epilogue::Store, 4, false>(x, w, y, m, n, k, ldx);
}

extern "C" __global__ void kern_gemv_bf16_u8(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                             bf16* __restrict__ y, int32_t m, int32_t n, int32_t k, int32_t ldx) {
  gemv<Epilogue::Store, 8, false>(x, w, y, m, n, k, ldx);
}

// Tuning variant: W through a cp.async ring in shared memory (dynamic shared memory blockDim.x · 384 bytes).
extern "C" __global__ void kern_gemv_bf16_async(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                                bf16* __restrict__ y, int32_t m, int32_t n, int32_t k, int32_t ldx) {
  gemv<Epilogue::Store, 4, false, true>(x, w, y, m, n, k, ldx);
}

// Tuning variant (sm_90 only; traps elsewhere): split-K across a cluster of kClusterK blocks. The
// blocks of a cluster take one tile each with a kClusterK-th of k; rank 0 adds the per-block
// partial sums (read through distributed shared memory, in rank order) and writes y. Grid =
// tiles · kClusterK launched with cluster dims (kClusterK, 1, 1), any m.
extern "C" __global__ void kern_gemv_bf16_cluster4(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                                   bf16* __restrict__ y, int32_t m, int32_t n, int32_t k, int32_t ldx) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  constexpr int kClusterK = 4;
  if ((k & 7) != 0 || (ldx & 7) != 0 || ldx < k || blockDim.x > 32 * kMaxWarps || (blockDim.x & 31) != 0) __trap();
  __shared__ float red[kMaxWarps][kTileRows][kXRows];
  __shared__ float part[kTileRows][kXRows];
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int tile = blockIdx.x / kClusterK;
  const int g = (threadIdx.x & 31) >> 2;
  const int col0 = tile * kTileRows;
  // This block's k range: quads [q0, q1) of the row, as a sub-row of k0 .. k0 + kk.
  const int quads = ((k >> 3) + 3) >> 2;
  const int q0 = quads * rank / kClusterK, q1 = quads * (rank + 1) / kClusterK;
  const int k0 = q0 * 32, kk = min(k, q1 * 32) - k0;
  const bf16* lo = col0 + g < n ? w + static_cast<int64_t>(col0 + g) * k + k0 : nullptr;
  const bf16* hi = col0 + g + 8 < n ? w + static_cast<int64_t>(col0 + g + 8) * k + k0 : nullptr;
  for (int m0 = 0; m0 < m; m0 += kXRows) {
    const int xrows = min(kXRows, m - m0);
    const bf16* xrow = g < xrows ? x + static_cast<int64_t>(m0 + g) * ldx + k0 : nullptr;
    tile_partials<kUnroll>(lo, hi, xrow, max(kk, 0), red);
    __syncthreads();
    for (int i = threadIdx.x; i < kTileRows * kXRows; i += blockDim.x)
      part[i / kXRows][i % kXRows] = warp_ordered_sum(red, i / kXRows, i % kXRows);
    cluster.sync();
    if (rank == 0) {
      for (int i = threadIdx.x; i < kTileRows * kXRows; i += blockDim.x) {
        const int xr = i / kTileRows, j = i % kTileRows;
        float s = 0.0f;
        for (int r = 0; r < kClusterK; ++r) s += cluster.map_shared_rank(&part[0][0], r)[j * kXRows + xr];
        if (xr < xrows && col0 + j < n) y[static_cast<int64_t>(m0 + xr) * n + col0 + j] = to_bf(s);
      }
    }
    cluster.sync();  // part and red are reused by the next pass; rank 0 has read every block's part
  }
#else
  __trap();
#endif
}
