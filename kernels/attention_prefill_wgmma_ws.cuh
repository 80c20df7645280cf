// Chunked-prefill paged attention on wgmma with warp specialisation (sm_90a; docs/kernels.md,
// "Prefill attention on wgmma"): the arithmetic of attention_prefill_wgmma.cuh (read it first) with
// its copies and barriers taken off the math warps.
//  * A block is two consumer warpgroups (64 queries each, as there) and one producer warpgroup. The
//    register file of a scheduler holds three warps of 168 registers; setmaxnreg gives the producer's
//    warps 40 and the consumers' 232 (the consumers need ~180).
//  * The producer streams the segment's K/V tiles (64 keys, swizzled as wgmma reads them) into a ring
//    of S stages with cp.async; each stage has a `full` mbarrier (128 arrivals: one per producer
//    thread, when that thread's copies have landed) and an `empty` one (8 arrivals: one per consumer
//    warp, when its warpgroup's products have read the stage). Neither side ever waits at a block
//    barrier inside a segment, so the producer runs up to S tiles ahead.
//  * Ping-pong (kPP): the warpgroups take turns to issue S = Q·Kᵀ (named barriers 1 and 2), so one
//    warpgroup's softmax runs while the other's products hold the tensor cores.
//  * Every warpgroup walks every tile of the segment (it waits for each fill, takes its turn and
//    releases the stage) and skips the products of tiles none of its queries sees, so the turns and
//    the barrier phases stay in step.
//  * kLean (production): softmax_tile_lean, and o is rescaled only when a row of the warp moved its
//    max. Without it a query's arithmetic is the two-warpgroup kernel's sequence (same products, same
//    softmax, same rescale order) and so are its bits (the test entry wsold).
// Either way a query's arithmetic is a fixed sequence on its own data, so rows stay bitwise
// independent of how they are cut into calls or blocks.
#pragma once

#include "attention_prefill_wgmma.cuh"
#include "mbarrier.cuh"

namespace {

namespace prefill_ws {

using prefill_wg::kBN;
using prefill_wg::kHD;
using prefill_wg::kTileBytes;

constexpr int kConsumerThreads = 256;                // two warpgroups
constexpr int kProducerThreads = 128;               // one warpgroup
constexpr int kThreads = kConsumerThreads + kProducerThreads;
constexpr int kProducerRegs = 40, kConsumerRegs = 232;  // setmaxnreg: 128 · 40 + 256 · 232 ≤ 65,536
constexpr int kBM = 128;                             // queries per block
constexpr int kTurnWg0 = 1, kTurnWg1 = 2;            // named barriers: warpgroup w waits on 1 + w
constexpr int kSegment = 3;                          // named barrier of all threads, twice per segment
template <int S>
constexpr int kSharedBytes = S * 2 * kTileBytes + 1024;  // S stages of a K and a V tile, 1024-byte alignment

struct Ring {
  uint32_t tiles;   // byte address of stage 0 (1024-aligned): K tile, then V tile, per stage
  uint64_t* full;   // [S]
  uint64_t* empty;  // [S]
  __device__ uint32_t k_tile(int s) const { return tiles + static_cast<uint32_t>(2 * s * kTileBytes); }
  __device__ uint32_t v_tile(int s) const { return tiles + static_cast<uint32_t>((2 * s + 1) * kTileBytes); }
};

// The producer warpgroup (this thread is `tid` of its 128): tiles n0 .. n0 + ntiles - 1 of the ring
// (tile i in stage i % S, its u-th use u = i / S) are keys [64 j, 64 j + 64) of this segment, j = i - n0.
// A thread copies one 16-byte column (`part`) of key rows r0, r0 + 8, ..., r0 + 56 (r0 = tid / 16): the
// same swizzled column every 1,024 bytes. Their page-table lookups go out before the wait for the
// stage, all eight at once.
template <int S, bool kSleepy>
__device__ __forceinline__ void produce(const Ring& ring, uint32_t n0, int ntiles, const PagedKv& kv, int kvh,
                                        int kend, int tid) {
  constexpr int kParts = kHD / 8;                       // 16-byte pieces per key row
  constexpr int kRowStep = kProducerThreads / kParts;   // 8
  constexpr int kRows = kBN / kRowStep;                 // rows per thread per tile: 8
  static_assert(kRowStep == 8, "a thread's rows must share their swizzle phase (row % 8)");
  const int part = tid % kParts, r0 = tid / kParts;
  const uint32_t at0 = static_cast<uint32_t>((part >> 3) * (kTileBytes / 2)) + sw128_offset(r0, part & 7);
  const bf16* base = kv.cache + part * 8;
  const int64_t v_offset = v_block_elems(kv.page_size, kv.kv_heads, kHD);
  for (int j = 0; j < ntiles; ++j) {
    const bool whole = (j + 1) * kBN <= kend;  // every key of the tile is copied (all but the last)
    int64_t off[kRows];                         // element offset of each row's piece from base; -1 past kend
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
      const int key = j * kBN + r0 + kRowStep * k;
      off[k] = -1;
      if (whole || key < kend) {
        int64_t page, row;
        page_of(kv, key, page, row);
        off[k] = kv_offset<kHD>(kv, page, row, kvh);
      }
    }
    const uint32_t i = n0 + j;
    const int s = static_cast<int>(i % S);
    const uint32_t parity = ((i / S) & 1) ^ 1;  // use u - 1 released (passes at once for u = 0)
    if constexpr (kSleepy)
      mbar_wait_sleepy(&ring.empty[s], parity, 64);
    else
      mbar_wait(&ring.empty[s], parity);
    const uint32_t k_tile = ring.k_tile(s) + at0, v_tile = ring.v_tile(s) + at0;
    if (whole) {
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        cp_async16(k_tile + 1024 * k, base + off[k], true);
        cp_async16(v_tile + 1024 * k, base + off[k] + v_offset, true);
      }
    } else {
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        const bool valid = off[k] >= 0;
        const bf16* src = valid ? base + off[k] : kv.cache;
        cp_async16(k_tile + 1024 * k, src, valid);
        cp_async16(v_tile + 1024 * k, valid ? src + v_offset : kv.cache, valid);
      }
    }
    mbar_arrive_on_cp_async(&ring.full[s]);
  }
}

// The consumer warpgroups' part of a segment (attend_segment of attention_prefill_wgmma.cuh with the
// ring's tiles n0 .. n0 + ntiles - 1 in place of its own copies).
// The softmax of a tile (kLean: softmax_tile_lean, and o is rescaled only when some row of the warp
// moved its max; multiplying by alpha = 1 is exact, so skipping it changes no bit).
template <bool kLean>
__device__ __forceinline__ void softmax_and_rescale(float (&sc)[prefill_wg::kBN / 2], int t0, int t,
                                                    const int (&q_end)[2], float scale_log2, float (&m)[2],
                                                    float (&l)[2], float (&o)[kHD / 2],
                                                    uint32_t (&pf)[prefill_wg::kBN / 16][4]) {
  float alpha[2];
  if constexpr (kLean) {
    prefill_wg::softmax_tile_lean(sc, t0, t, q_end, scale_log2, m, l, alpha, pf);
    if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) prefill_wg::rescale(o, alpha);
  } else {
    prefill_wg::softmax_tile(sc, t0, t, q_end, scale_log2, m, l, alpha, pf);
    prefill_wg::rescale(o, alpha);
  }
}

template <int S, bool kPP, bool kLean>
__device__ __forceinline__ void consume(const Ring& ring, uint32_t n0, int ntiles, int wg_end,
                                        const uint32_t (&qf)[kHD / 16][4], const int (&q_end)[2], float scale_log2,
                                        float (&o)[kHD / 2], float (&l)[2]) {
  using namespace prefill_wg;
  constexpr int NB = kBN / 8;
  constexpr int KK = kBN / 16;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wg = warp >> 2;
  const int t = lane & 3;
  const int n_wg = (wg_end + kBN - 1) / kBN;  // tiles this warpgroup computes
  float m[2] = {-INFINITY, -INFINITY};
  // Turns: warpgroup 0 issues first; each issue hands the turn to the other warpgroup, except
  // warpgroup 1's last (no one waits for it), so both barriers see as many arrivals as waits.
  if (kPP && wg == 1 && ntiles > 0) named_bar_arrive(kTurnWg0, kConsumerThreads);
  for (int j = 0; j < ntiles; ++j) {
    const uint32_t i = n0 + j;
    const int s = static_cast<int>(i % S);
    mbar_wait(&ring.full[s], (i / S) & 1);
    if (kPP) named_bar_sync(wg == 0 ? kTurnWg0 : kTurnWg1, kConsumerThreads);
    const bool pass = kPP && !(wg == 1 && j == ntiles - 1);
    if (j < n_wg) {  // uniform over the warpgroup
      fence_proxy_async_shared();  // the producer's cp.async writes, before wgmma reads them
      float sc[NB * 4];
      issue_scores(sc, qf, ring.k_tile(s));
      if (pass) named_bar_arrive(wg == 0 ? kTurnWg1 : kTurnWg0, kConsumerThreads);
      wgmma_wait<0>();
      wgmma_fence_operands(sc);
      uint32_t pf[KK][4];
      softmax_and_rescale<kLean>(sc, j * kBN, t, q_end, scale_log2, m, l, o, pf);
      wgmma_fence_operands(o);
      issue_pv(o, pf, ring.v_tile(s));
      wgmma_wait<0>();
      wgmma_fence_operands(o);
    } else if (pass) {
      named_bar_arrive(wg == 0 ? kTurnWg1 : kTurnWg0, kConsumerThreads);
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(&ring.empty[s]);  // this warp's products are done with stage s
  }
}

}  // namespace prefill_ws

// for_each_segment over the block's segments; the ring's tile count runs on across them (every role
// walks the same segments, so the producer's and the consumers' counts agree).
template <int S, bool kPP, bool kLean, bool kSleepy>
__device__ __forceinline__ void prefill_wgmma_ws(const bf16* __restrict__ qkv, int32_t q_stride,
                                                 const bf16* __restrict__ cache,
                                                 const int32_t* __restrict__ block_table, int32_t max_pages,
                                                 const int32_t* __restrict__ seq_lens,
                                                 const int32_t* __restrict__ cu_seqlens,
                                                 const int64_t* __restrict__ positions, bf16* __restrict__ out,
                                                 int32_t rows, int32_t seqs, int32_t heads, int32_t kv_heads,
                                                 int32_t page_size, int64_t page_stride, float scale,
                                                 int32_t rows_per_block, int32_t first_row) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace prefill_ws;
  __shared__ int red[16];
  __shared__ uint64_t full[S], empty[S];
  extern __shared__ __align__(1024) unsigned char ws_smem[];
  uint32_t dyn;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
  if (dyn < static_cast<uint32_t>(kSharedBytes<S>) || blockDim.x != kThreads) __trap();
  const Ring ring{(smem_u32(ws_smem) + 1023u) & ~1023u, full, empty};
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], kProducerThreads);
      mbar_init(&empty[s], kConsumerThreads / 32);
    }
    mbar_init_fence();
  }
  __syncthreads();
  const bool producer = threadIdx.x >= kConsumerThreads;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wg = warp >> 2;
  const int g = lane >> 2, t = lane & 3;
  uint32_t n = 0;  // tiles through the ring so far
  // The roles part here, each with its own walk over the segments (setmaxnreg holds for the code a
  // role runs, so they share none); they meet at named barrier kSegment (all 384 threads) twice per
  // segment: once the bounds are in red, and when red is free again.
  if (producer) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    for_each_segment<kHD, kBM, kThreads>(
        cache, block_table, max_pages, seq_lens, cu_seqlens, out, rows, seqs, heads, kv_heads, page_size,
        page_stride, rows_per_block, first_row, [&](const PagedKv& kv, int, int, int, int, int64_t, int kvh) {
          named_bar_sync(kSegment, kThreads);
          int kend = 0;
#pragma unroll
          for (int w = 0; w < 8; ++w) kend = max(kend, red[w]);
          const int ntiles = (kend + kBN - 1) / kBN;
          produce<S, kSleepy>(ring, n, ntiles, kv, kvh, kend, static_cast<int>(threadIdx.x) - kConsumerThreads);
          n += static_cast<uint32_t>(ntiles);
          named_bar_sync(kSegment, kThreads);
        });
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
  for_each_segment<kHD, kBM, kThreads>(
      cache, block_table, max_pages, seq_lens, cu_seqlens, out, rows, seqs, heads, kv_heads, page_size, page_stride,
      rows_per_block, first_row, [&](const PagedKv&, int a, int nq, int G, int seq_len, int64_t cap, int kvh) {
        // The block's last key (the producer's tile count) and each warpgroup's, as in prefill_wg.
        const int nrows = nq / G;
        int mine = 0;
        for (int i = threadIdx.x; i < nrows; i += kConsumerThreads)
          mine = max(mine, key_end(positions, a + i, seq_len, cap));
        mine = __reduce_max_sync(0xffffffffu, mine);
        int q_idx[2], q_end[2];
        int warp_end = 0;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int qi = warp * 16 + g + 8 * h;
          q_idx[h] = qi;
          q_end[h] = qi < nq ? key_end(positions, a + qi / G, seq_len, cap) : 0;
          warp_end = max(warp_end, q_end[h]);
        }
        warp_end = __reduce_max_sync(0xffffffffu, warp_end);
        if (lane == 0) {
          red[warp] = mine;
          red[8 + warp] = warp_end;
        }
        named_bar_sync(kSegment, kThreads);
        int kend = 0, wg_end = 0;
#pragma unroll
        for (int w = 0; w < 8; ++w) kend = max(kend, red[w]);
#pragma unroll
        for (int w = 0; w < 4; ++w) wg_end = max(wg_end, red[8 + 4 * wg + w]);
        const int ntiles = (kend + kBN - 1) / kBN;
        uint32_t qf[kHD / 16][4];
        {
          const int qa = q_idx[0], qb = q_idx[1];
          const bf16* pa =
              qa < nq ? qkv + static_cast<int64_t>(a + qa / G) * q_stride + (kvh * G + qa % G) * kHD : nullptr;
          const bf16* pb =
              qb < nq ? qkv + static_cast<int64_t>(a + qb / G) * q_stride + (kvh * G + qb % G) * kHD : nullptr;
          load_a_fragments(qf, pa, pb, t);
        }
        float o[kHD / 2];
        float l[2] = {0.0f, 0.0f};
#pragma unroll
        for (int i = 0; i < kHD / 2; ++i) o[i] = 0.0f;
        consume<S, kPP, kLean>(ring, n, ntiles, wg_end, qf, q_end, scale * kLog2e, o, l);
        n += static_cast<uint32_t>(ntiles);
        named_bar_sync(kSegment, kThreads);  // red is free for the next segment
        prefill_wg::store_rows(o, l, q_idx, nq, out, a, G, heads, kvh, t);
      });
#else
  (void)qkv, (void)q_stride, (void)cache, (void)block_table, (void)max_pages, (void)seq_lens, (void)cu_seqlens,
      (void)positions, (void)out, (void)rows, (void)seqs, (void)heads, (void)kv_heads, (void)page_size,
      (void)page_stride, (void)scale, (void)rows_per_block, (void)first_row;
  __trap();  // sm_90a only
#endif
}

}  // namespace

// The warp-specialised wgmma entries (hd 128): the ABI, grid and semantics of
// KERN_ATTN_PREFILL_MMA_ENTRY; 384 threads (two consumer warpgroups and a producer warpgroup), 128 queries
// per block (rows_per_block = 128 / G), prefill_ws::kSharedBytes<STAGES> of dynamic shared memory; PP:
// the warpgroups take turns to issue Q·Kᵀ; LEAN: softmax_tile_lean, o rescaled only when a max moved
// (else the two-warpgroup kernel's softmax and bits); SLEEPY: the producer sleeps between its tries for
// a free stage.
#define KERN_ATTN_PREFILL_WGMMA_WS_ENTRY(NAME, STAGES, PP, LEAN, SLEEPY)                                          \
  extern "C" __global__ void __launch_bounds__(prefill_ws::kThreads, 1)                                            \
      NAME(const bf16* qkv, int32_t q_stride, const bf16* cache, const int32_t* block_table, int32_t max_pages,     \
           const int32_t* seq_lens, const int32_t* cu_seqlens, const int64_t* positions, bf16* out, int32_t rows,   \
           int32_t seqs, int32_t heads, int32_t kv_heads, int32_t page_size, int64_t page_stride, float scale,      \
           int32_t rows_per_block, int32_t first_row) {                                                             \
    prefill_wgmma_ws<STAGES, PP, LEAN, SLEEPY>(qkv, q_stride, cache, block_table, max_pages, seq_lens, cu_seqlens,  \
                                               positions, out, rows, seqs, heads, kv_heads, page_size, page_stride, \
                                               scale, rows_per_block, first_row);                                   \
  }
