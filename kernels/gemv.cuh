// Decode-time GEMV over row-major bf16 weights W[n, k] and a few bf16 input rows x[m, k] (row
// stride ldx), f32 accumulation, bf16 out, with fused prologues and epilogues:
//
//   kern_gemv_bf16(x, w, y, m, n, k, ldx, prefetch)             y[m, n] = bf16(x · Wᵀ)
//   kern_gemv_residual_bf16(x, w, h, m, n, k, ldx, prefetch)    h[m, n] = bf16(h + x · Wᵀ)   (sum in f32, one rounding)
//   kern_gemv_gate_up_silu_bf16(x, w, act, m, inter, k, ldx, prefetch)
//        W = [2·inter, k] (gate rows 0..inter-1, then up rows), g = bf16(x · W[j]ᵀ), u = bf16(x · W[inter+j]ᵀ),
//        act[m, inter] = bf16(bf16(silu(g)) · u)   (the rounding of HF and of kern_silu_mul_bf16)
//   kern_gemv_rms_norm_bf16(x, norm_w, w, y, m, n, k, ldx, eps, prefetch)
//   kern_gemv_rms_norm_gate_up_silu_bf16(x, norm_w, w, act, m, inter, k, ldx, eps, prefetch)
//        as kern_gemv_bf16 / the gate_up entry, on xn = RMSNorm(x) · norm_w instead of x, with HF's
//        rounding: xn = bf16(norm_w · bf16(x · rsqrt(mean(x²) + eps))) (as kern_rms_norm_bf16).
//        Each block normalises the rows into dynamic shared memory: it needs at least (k + 8) · 2
//        bytes of it; with (k + 8) · 2 · r bytes it takes up to min(r, 8) rows of x per pass over W.
//
// Parameters (i32 scalars; eps f32): m rows of x (any m ≥ 0; W is streamed once per 8 rows of x,
// so the decode program uses these only for m ≤ 8), n (or inter) output columns, k, ldx (elements
// between rows of x), prefetch: bytes of its first tile's weights each block asks the L2 to fetch
// before it waits for the previous kernel (0: none; a hint, results do not depend on it).
// Preconditions: k % 8 == 0, ldx % 8 == 0, ldx ≥ k, x / w / norm_w 16-byte aligned, y / h / act
// not overlapping x or w. A violated precondition traps (launch error).
// y, h and act are dense [m, n] (row stride n, or inter).
//
// Programmatic dependent launch: these entries may be launched with `pdl`. Before waiting for the
// previous kernel a block only touches W (the L2 prefetch and the first batch of its weight
// loads, into registers); x, norm_w's row statistics and every output come after the wait.
//
// Geometry: block = any multiple of 32 threads up to 512 (kern gen: 256). A block takes tiles of
// 16 weight rows (kern_gemv_*: tile t = W rows [16t, 16t+16); silu: tile t = act columns
// [8t, 8t+8) = gate rows and the matching up rows); tiles are strided over the grid
// (tile = blockIdx.x; tile += gridDim.x), so any grid works; kern gen launches one block per tile:
// ceil(n / 16) blocks (silu: ceil(inter / 8)).
//
// How: one tensor-core mma.m16n8k16 (bf16 in, f32 accumulate) per 16 rows × 16 k: the 16 weight
// rows are the A operand, the (up to 8) rows of x the B operand, so m ≤ 8 costs the same as m = 1
// and the kernel is bound by streaming W. Each lane loads 16 bytes of W per row (4 lanes cover 64
// consecutive bytes of one row), in batches of kUnroll loads per row, the next batch's loads
// issued before the current batch's mmas (software pipelining: two batches in flight). The
// dot product is order-free in k, so the 8 values of one 16-byte load are spread over the k slots
// of two mma steps, and x is loaded with the same permutation. Warps of a block split k into
// contiguous ranges; their partial sums meet in shared memory and are added in warp order. No
// atomics: results are bitwise repeatable for a given geometry, with or without pdl or prefetch.
#include <cooperative_groups.h>

#pragma once

#include "rms.cuh"

using namespace kern_dev;

namespace {

constexpr int kTileRows = 16;  // mma M: weight rows per tile
constexpr int kXRows = 8;      // mma N: rows of x per pass
constexpr int kMaxWarps = 16;  // block of at most 512 threads
constexpr int kUnroll =
    4;  // 16-byte loads per weight row per batch (the kern gen entries: pipelined, 2 batches in flight)

enum class Epilogue { Store, Residual, SiluMul };

// Streamed weights: read once, kept out of L1. Predicated (no branch, so every load of a batch
// can be issued before the first mma); a load that is off gives zeros and touches no memory.
__device__ __forceinline__ uint4 load_stream(const bf16* p, bool on) {
  uint4 v;
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %5, 0;\n mov.b32 %0, 0;\n mov.b32 %1, 0;\n mov.b32 %2, 0;\n mov.b32 %3, 0;\n"
      " @p ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n}\n"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "r"(static_cast<int>(on)));
  return v;
}

// x is small and read by every block: through L1/L2.
__device__ __forceinline__ uint4 load_x(const bf16* p, bool on) {
  uint4 v;
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %5, 0;\n mov.b32 %0, 0;\n mov.b32 %1, 0;\n mov.b32 %2, 0;\n mov.b32 %3, 0;\n"
      " @p ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n}\n"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "r"(static_cast<int>(on)));
  return v;
}

// D = A·B + D, A 16×16 bf16 (row), B 16×8 bf16 (col), D 16×8 f32.
__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// One block's work on one tile for rows [m0, m0 + xrows) of x. `lo` and `hi` are the weight rows
// of mma rows g and g + 8 for this lane (nullptr: outside W, contributes zeros).
// Returns, through `red`, the per-warp partial sums red[warp][tile row][x row].
template <int kLoads>
__device__ __forceinline__ void tile_partials(const bf16* __restrict__ lo, const bf16* __restrict__ hi,
                                              const bf16* __restrict__ xrow, int k, float (*red)[kTileRows][kXRows]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int chunks = k >> 3;            // 16-byte chunks per row
  const int quads = (chunks + 3) >> 2;  // 4 chunks (32 k) per mma pair
  const int q_begin = static_cast<int>(static_cast<int64_t>(quads) * warp / nwarps);
  const int q_end = static_cast<int>(static_cast<int64_t>(quads) * (warp + 1) / nwarps);
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int q = q_begin; q < q_end; q += kLoads) {
    uint4 a[kLoads], b[kLoads], xv[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int c = (q + u) * 4 + t;
      const bool in = q + u < q_end && c < chunks;
      a[u] = load_stream(lo + c * 8, in && lo != nullptr);
      b[u] = load_stream(hi + c * 8, in && hi != nullptr);
      xv[u] = load_x(xrow + c * 8, in && xrow != nullptr);
    }
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      // k values 0..3 of the chunk go to the first mma's slots (2t, 2t+1 | 2t+8, 2t+9), 4..7 to the second's.
      mma_bf16(acc, a[u].x, b[u].x, a[u].y, b[u].y, xv[u].x, xv[u].y);
      mma_bf16(acc, a[u].z, b[u].z, a[u].w, b[u].w, xv[u].z, xv[u].w);
    }
  }
  // acc: (tile row g, x row 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1).
  red[warp][g][2 * t] = acc[0];
  red[warp][g][2 * t + 1] = acc[1];
  red[warp][g + 8][2 * t] = acc[2];
  red[warp][g + 8][2 * t + 1] = acc[3];
}

// As tile_partials, software-pipelined: the loads of the next kLoads quads are issued before the
// mmas of the current ones (two register sets, so 2·kLoads loads per row can be in flight).
template <int kLoads>
struct Batch {
  uint4 a[kLoads], b[kLoads], xv[kLoads];

  __device__ __forceinline__ void load(const bf16* lo, const bf16* hi, const bf16* xrow, int q, int q_end, int chunks,
                                       int t) {
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int c = (q + u) * 4 + t;
      const bool in = q + u < q_end && c < chunks;
      a[u] = load_stream(lo + c * 8, in && lo != nullptr);
      b[u] = load_stream(hi + c * 8, in && hi != nullptr);
      xv[u] = load_x(xrow + c * 8, in && xrow != nullptr);
    }
  }
  __device__ __forceinline__ void mma(float (&acc)[4]) const {
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      mma_bf16(acc, a[u].x, b[u].x, a[u].y, b[u].y, xv[u].x, xv[u].y);
      mma_bf16(acc, a[u].z, b[u].z, a[u].w, b[u].w, xv[u].z, xv[u].w);
    }
  }
};

template <int kLoads>
__device__ __forceinline__ void tile_partials_pipelined(const bf16* __restrict__ lo, const bf16* __restrict__ hi,
                                                        const bf16* __restrict__ xrow, int k,
                                                        float (*red)[kTileRows][kXRows]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int chunks = k >> 3;
  const int quads = (chunks + 3) >> 2;
  const int q_begin = static_cast<int>(static_cast<int64_t>(quads) * warp / nwarps);
  const int q_end = static_cast<int>(static_cast<int64_t>(quads) * (warp + 1) / nwarps);
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  Batch<kLoads> p, n;
  p.load(lo, hi, xrow, q_begin, q_end, chunks, t);
  for (int q = q_begin; q < q_end; q += 2 * kLoads) {
    n.load(lo, hi, xrow, q + kLoads, q_end, chunks, t);
    p.mma(acc);
    p.load(lo, hi, xrow, q + 2 * kLoads, q_end, chunks, t);
    n.mma(acc);
  }
  red[warp][g][2 * t] = acc[0];
  red[warp][g][2 * t + 1] = acc[1];
  red[warp][g + 8][2 * t] = acc[2];
  red[warp][g + 8][2 * t + 1] = acc[3];
}

// As tile_partials, with W streamed through a per-lane cp.async ring in dynamic shared memory
// (kAsyncStages stages of kAsyncQuads quads x 2 rows): kAsyncStages - 1 stages of loads stay in
// flight while one is computed, whatever the register allocator does. Each lane reads back only
// the slots it filled itself, so no barrier is needed. Dynamic shared memory: blockDim.x · 384 bytes.
constexpr int kAsyncStages = 3, kAsyncQuads = 4;

__device__ __forceinline__ void cp_async16(uint4* dst, const bf16* src, bool on) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(on ? 16 : 0));
}

__device__ __forceinline__ void tile_partials_async(const bf16* __restrict__ w, const bf16* __restrict__ lo,
                                                    const bf16* __restrict__ hi, const bf16* __restrict__ xrow, int k,
                                                    float (*red)[kTileRows][kXRows], uint4* ring) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int chunks = k >> 3;
  const int quads = (chunks + 3) >> 2;
  const int q_begin = static_cast<int>(static_cast<int64_t>(quads) * warp / nwarps);
  const int q_end = static_cast<int>(static_cast<int64_t>(quads) * (warp + 1) / nwarps);
  const int batches = (q_end - q_begin + kAsyncQuads - 1) / kAsyncQuads;
  auto slot = [&](int stage, int u, int r) {
    return ring + ((stage * kAsyncQuads + u) * 2 + r) * blockDim.x + threadIdx.x;
  };
  auto issue = [&](int b) {
    const int stage = b % kAsyncStages;
#pragma unroll
    for (int u = 0; u < kAsyncQuads; ++u) {
      const int q = q_begin + b * kAsyncQuads + u, c = q * 4 + t;
      const bool in = b < batches && q < q_end && c < chunks;
      cp_async16(slot(stage, u, 0), in && lo != nullptr ? lo + c * 8 : w, in && lo != nullptr);
      cp_async16(slot(stage, u, 1), in && hi != nullptr ? hi + c * 8 : w, in && hi != nullptr);
    }
    asm volatile("cp.async.commit_group;\n" ::);
  };
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int b = 0; b < kAsyncStages - 1; ++b) issue(b);
  for (int b = 0; b < batches; ++b) {
    issue(b + kAsyncStages - 1);
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kAsyncStages - 1));
    const int stage = b % kAsyncStages;
#pragma unroll
    for (int u = 0; u < kAsyncQuads; ++u) {
      const int q = q_begin + b * kAsyncQuads + u, c = q * 4 + t;
      const uint4 av = *slot(stage, u, 0), bv = *slot(stage, u, 1);
      const uint4 xv = load_x(xrow + c * 8, q < q_end && c < chunks && xrow != nullptr);
      mma_bf16(acc, av.x, bv.x, av.y, bv.y, xv.x, xv.y);
      mma_bf16(acc, av.z, bv.z, av.w, bv.w, xv.z, xv.w);
    }
  }
  asm volatile("cp.async.wait_group 0;\n" ::);
  red[warp][g][2 * t] = acc[0];
  red[warp][g][2 * t + 1] = acc[1];
  red[warp][g + 8][2 * t] = acc[2];
  red[warp][g + 8][2 * t + 1] = acc[3];
}

__device__ __forceinline__ float warp_ordered_sum(float (*red)[kTileRows][kXRows], int row, int xr) {
  const int nwarps = blockDim.x >> 5;
  float s = 0.0f;
  for (int w = 0; w < nwarps; ++w) s += red[w][row][xr];
  return s;
}

// Output columns per tile: 16 weight rows, or 8 (gate, up) pairs (gate: tile row j, up: row j + 8).
template <Epilogue E>
constexpr int kTileCols = E == Epilogue::SiluMul ? kTileRows / 2 : kTileRows;

// The epilogue of one tile for rows [m0, m0 + xrows) of x, from the per-warp partial sums `red`
// (summed in warp order), into out[m, n] (row stride n) at columns [col0, col0 + kTileCols<E>):
//   Store:    out = bf16(s)
//   Residual: out = bf16(out + s)   (the sum in f32, one rounding)
//   SiluMul:  g = bf16(s_gate), u = bf16(s_up), out = bf16(bf16(silu(g)) · u)
// Shared by gemv (the tuning entries) and gemv_pdl (the production entries), so both round alike.
template <Epilogue E>
__device__ __forceinline__ void write_tile(float (*red)[kTileRows][kXRows], bf16* __restrict__ out, int col0, int m0,
                                           int xrows, int n) {
  constexpr int cols = kTileCols<E>;
  for (int i = threadIdx.x; i < cols * kXRows; i += blockDim.x) {
    const int xr = i / cols, j = i % cols;
    if (xr < xrows && col0 + j < n) {
      if constexpr (E == Epilogue::SiluMul) {
        const float gate = round_bf(warp_ordered_sum(red, j, xr));
        const float up = round_bf(warp_ordered_sum(red, j + 8, xr));
        const float act = round_bf(gate / (1.0f + __expf(-gate)));
        out[static_cast<int64_t>(m0 + xr) * n + col0 + j] = to_bf(act * up);
      } else {
        const float s = warp_ordered_sum(red, j, xr);
        bf16* o = out + static_cast<int64_t>(m0 + xr) * n + col0 + j;
        if constexpr (E == Epilogue::Residual)
          *o = to_bf(to_f(*o) + s);
        else
          *o = to_bf(s);
      }
    }
  }
}

template <Epilogue E, int kLoads = kUnroll, bool kPipelined = true, bool kAsync = false>
__device__ __forceinline__ void gemv(const bf16* __restrict__ x, const bf16* __restrict__ w, bf16* __restrict__ out,
                                     int m, int n, int k, int ldx) {
  if ((k & 7) != 0 || (ldx & 7) != 0 || ldx < k || blockDim.x > 32 * kMaxWarps || (blockDim.x & 31) != 0) __trap();
  __shared__ float red[kMaxWarps][kTileRows][kXRows];
  const int lane = threadIdx.x & 31;
  const int g = lane >> 2;
  constexpr int cols = kTileCols<E>;
  const int tiles = (n + cols - 1) / cols;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int col0 = tile * cols;
    const bf16* lo;
    const bf16* hi;
    if constexpr (E == Epilogue::SiluMul) {
      const bool ok = col0 + g < n;
      lo = ok ? w + static_cast<int64_t>(col0 + g) * k : nullptr;
      hi = ok ? w + static_cast<int64_t>(n + col0 + g) * k : nullptr;
    } else {
      lo = col0 + g < n ? w + static_cast<int64_t>(col0 + g) * k : nullptr;
      hi = col0 + g + 8 < n ? w + static_cast<int64_t>(col0 + g + 8) * k : nullptr;
    }
    for (int m0 = 0; m0 < m; m0 += kXRows) {
      const int xrows = min(kXRows, m - m0);
      const bf16* xrow = g < xrows ? x + static_cast<int64_t>(m0 + g) * ldx : nullptr;
      if constexpr (kAsync) {
        extern __shared__ uint4 gemv_ring[];
        tile_partials_async(w, lo, hi, xrow, k, red, gemv_ring);
      } else if constexpr (kPipelined)
        tile_partials_pipelined<kLoads>(lo, hi, xrow, k, red);
      else
        tile_partials<kLoads>(lo, hi, xrow, k, red);
      __syncthreads();
      write_tile<E>(red, out, col0, m0, xrows, n);
      __syncthreads();  // red is reused by the next pass
    }
  }
}

// ---- The production path: pdl-aware, L2 prefetch, optional fused RMSNorm prologue. ----

// Asks the L2 to fetch [p, p + bytes) (sm_90 bulk prefetch; p 16-byte aligned, bytes a multiple of 16).
__device__ __forceinline__ void prefetch_l2(const void* p, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

// Prefetches the first min(bytes, budget) bytes of the contiguous weight rows at `base`, in 4 KiB
// pieces spread over the block's threads.
__device__ __forceinline__ void prefetch_rows(const bf16* base, int64_t bytes, int64_t budget) {
  constexpr int64_t kPiece = 4096;
  const int64_t total = min(bytes, budget) & ~int64_t{15};
  for (int64_t off = static_cast<int64_t>(threadIdx.x) * kPiece; off < total;
       off += static_cast<int64_t>(blockDim.x) * kPiece)
    prefetch_l2(reinterpret_cast<const char*>(base) + off, static_cast<uint32_t>(min(kPiece, total - off)));
}

// One pipeline stage of a warp: kLoads quads of both weight rows of the lane and of its x row.
// x comes from global memory, or (kSharedX) from the block's normalised copy in shared memory.
template <int kLoads, bool kSharedX>
struct Stage {
  uint4 a[kLoads], b[kLoads], xv[kLoads];

  __device__ __forceinline__ void load_w(const bf16* lo, const bf16* hi, int q, int q_end, int chunks, int t) {
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int c = (q + u) * 4 + t;
      const bool in = q + u < q_end && c < chunks;
      a[u] = load_stream(lo + c * 8, in && lo != nullptr);
      b[u] = load_stream(hi + c * 8, in && hi != nullptr);
    }
  }
  __device__ __forceinline__ void load_x(const bf16* xrow, int q, int q_end, int chunks, int t) {
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int c = (q + u) * 4 + t;
      const bool in = q + u < q_end && c < chunks && xrow != nullptr;
      if constexpr (kSharedX)
        xv[u] = in ? *reinterpret_cast<const uint4*>(xrow + c * 8) : make_uint4(0, 0, 0, 0);
      else
        xv[u] = ::load_x(xrow + c * 8, in);
    }
  }
  __device__ __forceinline__ void mma(float (&acc)[4]) const {
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      mma_bf16(acc, a[u].x, b[u].x, a[u].y, b[u].y, xv[u].x, xv[u].y);
      mma_bf16(acc, a[u].z, b[u].z, a[u].w, b[u].w, xv[u].z, xv[u].w);
    }
  }
};

// The quads [q_begin, q_end) of this warp's share of a row (4 chunks of 8 k per quad).
struct WarpRange {
  int chunks, q_begin, q_end;
  __device__ __forceinline__ explicit WarpRange(int k) {
    const int warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    chunks = k >> 3;
    const int quads = (chunks + 3) >> 2;
    q_begin = static_cast<int>(static_cast<int64_t>(quads) * warp / nwarps);
    q_end = static_cast<int>(static_cast<int64_t>(quads) * (warp + 1) / nwarps);
  }
};

// As tile_partials_pipelined; `p` holds the first stage's weights already when `preloaded`.
template <int kLoads, bool kSharedX>
__device__ __forceinline__ void tile_partials_staged(const bf16* __restrict__ lo, const bf16* __restrict__ hi,
                                                     const bf16* __restrict__ xrow, int k,
                                                     float (*red)[kTileRows][kXRows], Stage<kLoads, kSharedX>& p,
                                                     bool preloaded) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const WarpRange r(k);
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  Stage<kLoads, kSharedX> n;
  if (!preloaded) p.load_w(lo, hi, r.q_begin, r.q_end, r.chunks, t);
  p.load_x(xrow, r.q_begin, r.q_end, r.chunks, t);
  for (int q = r.q_begin; q < r.q_end; q += 2 * kLoads) {
    n.load_w(lo, hi, q + kLoads, r.q_end, r.chunks, t);
    n.load_x(xrow, q + kLoads, r.q_end, r.chunks, t);
    p.mma(acc);
    p.load_w(lo, hi, q + 2 * kLoads, r.q_end, r.chunks, t);
    p.load_x(xrow, q + 2 * kLoads, r.q_end, r.chunks, t);
    n.mma(acc);
  }
  red[warp][g][2 * t] = acc[0];
  red[warp][g][2 * t + 1] = acc[1];
  red[warp][g + 8][2 * t] = acc[2];
  red[warp][g + 8][2 * t + 1] = acc[3];
}

// xs[r][·] = bf16(norm_w · bf16(x[r] · rsqrt(mean(x[r]²) + eps))) for r < rows, row pitch `pitch`
// elements (the rounding of kern_rms_norm_bf16; sums in f32, one warp per row). Ends with a barrier.
__device__ void normalise_rows(const bf16* __restrict__ x, int ldx, const bf16* __restrict__ norm_w, int k, int rows,
                               float eps, bf16* xs, int pitch) {
  __shared__ float rstd[kXRows];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  const int chunks = k >> 3;
  for (int r = warp; r < rows; r += nwarps) {
    const float acc = warp_sum_squares(reinterpret_cast<const uint4*>(x + static_cast<int64_t>(r) * ldx), chunks, lane);
    if (lane == 0) rstd[r] = rms_rstd(acc, k, eps);
  }
  __syncthreads();
  const uint4* wv = reinterpret_cast<const uint4*>(norm_w);
  for (int i = threadIdx.x; i < rows * chunks; i += blockDim.x) {
    const int r = i / chunks, c = i - r * chunks;
    const Bf16x8 o = rms_apply8(reinterpret_cast<const uint4*>(x + static_cast<int64_t>(r) * ldx)[c], wv[c], rstd[r]);
    *reinterpret_cast<Bf16x8*>(xs + static_cast<int64_t>(r) * pitch + c * 8) = o;
  }
  __syncthreads();
}

template <Epilogue E, bool kNorm>
__device__ __forceinline__ void gemv_pdl(const bf16* __restrict__ x, const bf16* __restrict__ norm_w,
                                         const bf16* __restrict__ w, bf16* __restrict__ out, int m, int n, int k,
                                         int ldx, float eps, int prefetch) {
  if ((k & 7) != 0 || (ldx & 7) != 0 || ldx < k || blockDim.x > 32 * kMaxWarps || (blockDim.x & 31) != 0) __trap();
  __shared__ float red[kMaxWarps][kTileRows][kXRows];
  extern __shared__ uint4 gemv_xs_raw[];  // kNorm: the normalised rows of x
  bf16* xs = reinterpret_cast<bf16*>(gemv_xs_raw);
  const int pitch = k + 8;  // 16 bytes of padding: the 8 rows' loads of a quad spread over the banks
  int pass_rows = kXRows;
  if constexpr (kNorm) {
    uint32_t dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    pass_rows = min(kXRows, static_cast<int>(dyn / (static_cast<uint32_t>(pitch) * 2u)));
    if (pass_rows < 1) __trap();
  }
  const int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
  constexpr int cols = kTileCols<E>;
  const int tiles = (n + cols - 1) / cols;
  const bf16* lo = nullptr;
  const bf16* hi = nullptr;
  auto rows_of = [&](int tile) {
    const int col0 = tile * cols;
    if constexpr (E == Epilogue::SiluMul) {
      const bool ok = col0 + g < n;
      lo = ok ? w + static_cast<int64_t>(col0 + g) * k : nullptr;
      hi = ok ? w + static_cast<int64_t>(n + col0 + g) * k : nullptr;
    } else {
      lo = col0 + g < n ? w + static_cast<int64_t>(col0 + g) * k : nullptr;
      hi = col0 + g + 8 < n ? w + static_cast<int64_t>(col0 + g + 8) * k : nullptr;
    }
  };

  // Before the wait: only W.
  Stage<kUnroll, kNorm> p;
  int tile = blockIdx.x;
  if (tile < tiles && m > 0) {
    const int col0 = tile * cols;
    if (prefetch > 0) {
      const int64_t row_bytes = static_cast<int64_t>(k) * 2;
      if constexpr (E == Epilogue::SiluMul) {
        const int64_t bytes = min(cols, n - col0) * row_bytes;
        prefetch_rows(w + static_cast<int64_t>(col0) * k, bytes, prefetch / 2);
        prefetch_rows(w + static_cast<int64_t>(n + col0) * k, bytes, prefetch / 2);
      } else {
        prefetch_rows(w + static_cast<int64_t>(col0) * k, min(cols, n - col0) * row_bytes, prefetch);
      }
    }
    rows_of(tile);
    const WarpRange r(k);
    p.load_w(lo, hi, r.q_begin, r.q_end, r.chunks, t);
  }
  wait_for_previous_grid();
  allow_next_grid();

  bool preloaded = true, normalised = false;
  const bool one_pass = m <= pass_rows;
  for (; tile < tiles; tile += gridDim.x) {
    const int col0 = tile * cols;
    rows_of(tile);
    for (int m0 = 0; m0 < m; m0 += pass_rows) {
      const int xrows = min(pass_rows, m - m0);
      const bf16* xrow;
      if constexpr (kNorm) {
        if (!(one_pass && normalised))
          normalise_rows(x + static_cast<int64_t>(m0) * ldx, ldx, norm_w, k, xrows, eps, xs, pitch);
        normalised = true;
        xrow = g < xrows ? xs + static_cast<int64_t>(g) * pitch : nullptr;
      } else {
        xrow = g < xrows ? x + static_cast<int64_t>(m0 + g) * ldx : nullptr;
      }
      tile_partials_staged<kUnroll, kNorm>(lo, hi, xrow, k, red, p, preloaded);
      preloaded = false;
      __syncthreads();
      write_tile<E>(red, out, col0, m0, xrows, n);
      __syncthreads();  // red (and xs) are reused by the next pass
    }
  }
}

}  // namespace
