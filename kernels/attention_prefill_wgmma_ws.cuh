// Chunked-prefill paged attention on wgmma with warp specialisation (sm_90a; docs/kernels.md,
// "Prefill attention on wgmma"): the arithmetic of attention_prefill_wgmma.cuh (read it first) with
// its copies and barriers taken off the math warps.
//  * A block is two consumer warpgroups (64 queries each, as there) and one producer warpgroup. The
//    register file of a scheduler holds three warps of 168 registers; setmaxnreg gives the producer's
//    warps 40 and the consumers' 232 (the consumers need ~180).
//  * The producer streams the segment's K/V tiles (BN keys, swizzled as wgmma reads them) into a ring
//    of S stages with cp.async; each stage has a `full` mbarrier (128 arrivals: one per producer
//    thread, when that thread's copies have landed) and an `empty` one (8 arrivals: one per consumer
//    warp, when its warpgroup's products have read the stage). Neither side ever waits at a block
//    barrier inside a segment, so the producer runs up to S tiles ahead.
//  * Every warpgroup walks every tile of the segment (it waits for each fill and releases the stage)
//    and skips the products of tiles none of its queries sees, so the barrier phases stay in step.
//  * kLean (production): softmax_tile_lean, and o is rescaled only when a row of the warp moved its
//    max. Without it (BN 64 only) a query's arithmetic is the two-warpgroup kernel's sequence (same
//    products, same softmax, same rescale order) and so are its bits (the test entry wsold).
// Either way a query's arithmetic is a fixed sequence on its own data, so rows stay bitwise
// independent of how they are cut into calls or blocks. Measured and not kept (docs/perf.md, session
// 29): turns between the warpgroups at Q·Kᵀ (ping-pong), each warpgroup's products overlapping its own
// softmax, a producer that sleeps between tries, six stages.
#pragma once

#include "attention_prefill_wgmma.cuh"
#include "mbarrier.cuh"

namespace {

namespace prefill_ws {

using prefill_wg::kHD;
using prefill_wg::kTileBytesOf;

// CW consumer warpgroups (2, or 3 with Q in shared memory: their registers cannot hold it) of 64
// queries each, and one producer warpgroup.
constexpr int kProducerThreads = 128;
template <int CW>
constexpr int kConsumerThreads = CW * 128;
template <int CW>
constexpr int kThreads = kConsumerThreads<CW> + kProducerThreads;
template <int CW>
constexpr int kBM = CW * 64;  // queries per block
// setmaxnreg: 128 · 40 + 256 · 232 ≤ 65,536 (two consumer warpgroups), 128 · 32 + 384 · 160 = 65,536 (three).
template <int CW>
constexpr int kProducerRegs = CW == 2 ? 40 : 32;
template <int CW>
constexpr int kConsumerRegs = CW == 2 ? 232 : 160;
constexpr int kSegment = 1;  // named barrier of all threads, twice per segment
constexpr int kQLoaded = 2;  // named barriers 2, 3, 4: a consumer warpgroup's Q tile is in shared memory
// S stages of a K and a V tile of BN keys, the Q tiles of three consumer warpgroups, slack for the
// 1024-byte alignment.
template <int S, int BN, int CW>
constexpr int kSharedBytes = S * 2 * kTileBytesOf<BN> + (CW == 3 ? CW * prefill_wg::kTileBytes : 0) + 1024;

template <int BN>
struct Ring {
  uint32_t tiles;   // byte address of stage 0 (1024-aligned): K tile, then V tile, per stage
  uint64_t* full;   // [S]
  uint64_t* empty;  // [S]
  __device__ uint32_t k_tile(int s) const { return tiles + static_cast<uint32_t>(2 * s * kTileBytesOf<BN>); }
  __device__ uint32_t v_tile(int s) const { return tiles + static_cast<uint32_t>((2 * s + 1) * kTileBytesOf<BN>); }
  // Consumer warpgroup w's Q tile, after the S stages (three consumer warpgroups only).
  __device__ uint32_t q_tile(int S, int w) const {
    return tiles + static_cast<uint32_t>(S * 2 * kTileBytesOf<BN> + w * prefill_wg::kTileBytes);
  }
};

// The producer warpgroup (this thread is `tid` of its 128): tiles n0 .. n0 + ntiles - 1 of the ring
// (tile i in stage i % S, its u-th use u = i / S) are keys [BN j, BN j + BN) of this segment, j = i - n0.
// A thread copies one 16-byte column (`part`) of key rows r0, r0 + 8, r0 + 16, ... (r0 = tid / 16): the
// same swizzled column every 1,024 bytes, in groups of 64 keys whose eight page-table lookups go out
// at once (the first group's before the wait for the stage).
template <int S, int BN>
__device__ __forceinline__ void produce(const Ring<BN>& ring, uint32_t n0, int ntiles, const PagedKv& kv, int kvh,
                                        int kend, int tid) {
  constexpr int kParts = kHD / 8;                      // 16-byte pieces per key row
  constexpr int kRowStep = kProducerThreads / kParts;  // 8
  constexpr int kRows = 8;                             // rows per thread per group of 64 keys
  constexpr int kGroups = BN / (kRowStep * kRows);     // groups of 64 keys per tile
  static_assert(kRowStep == 8 && kGroups * kRowStep * kRows == BN,
                "a thread's rows must share their swizzle phase (row % 8)");
  const int part = tid % kParts, r0 = tid / kParts;
  const uint32_t at0 = static_cast<uint32_t>((part >> 3) * (kTileBytesOf<BN> / 2)) + sw128_offset(r0, part & 7);
  const bf16* base = kv.cache + part * 8;
  const int64_t v_offset = v_block_elems(kv.page_size, kv.kv_heads, kHD);
  for (int j = 0; j < ntiles; ++j) {
    const uint32_t i = n0 + j;
    const int s = static_cast<int>(i % S);
#pragma unroll
    for (int grp = 0; grp < kGroups; ++grp) {
      const int key0 = j * BN + grp * kRowStep * kRows;
      const bool whole = key0 + kRowStep * kRows <= kend;  // every key of the group is copied
      int64_t off[kRows];                                  // element offset of each row's piece from base; -1 past kend
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        const int key = key0 + r0 + kRowStep * k;
        off[k] = -1;
        if (whole || key < kend) {
          int64_t page, row;
          page_of(kv, key, page, row);
          off[k] = kv_offset<kHD>(kv, page, row, kvh);
        }
      }
      if (grp == 0) mbar_wait(&ring.empty[s], ((i / S) & 1) ^ 1);  // use u - 1 released (passes at once for u = 0)
      const uint32_t at = at0 + static_cast<uint32_t>(grp * kRows * 1024);
      const uint32_t k_tile = ring.k_tile(s) + at, v_tile = ring.v_tile(s) + at;
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
    }
    mbar_arrive_on_cp_async(&ring.full[s]);
  }
}

// The softmax of a tile (kLean: softmax_tile_lean, and o is rescaled only when some row of the warp
// moved its max; multiplying by alpha = 1 is exact, so skipping it changes no bit).
template <int BN, bool kLean>
__device__ __forceinline__ void softmax_and_rescale(float (&sc)[BN / 2], int t0, int t, const int (&q_end)[2],
                                                    float scale_log2, float (&m)[2], float (&l)[2],
                                                    float (&o)[kHD / 2], uint32_t (&pf)[BN / 16][4]) {
  float alpha[2];
  if constexpr (kLean) {
    prefill_wg::softmax_tile_lean<BN>(sc, t0, t, q_end, scale_log2, m, l, alpha, pf);
    if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) prefill_wg::rescale(o, alpha);
  } else {
    static_assert(BN == prefill_wg::kBN, "the two-warpgroup kernel's softmax takes its 64-key tiles");
    prefill_wg::softmax_tile(sc, t0, t, q_end, scale_log2, m, l, alpha, pf);
    prefill_wg::rescale(o, alpha);
  }
}

// The consumer warpgroups' part of a segment (attend_segment of attention_prefill_wgmma.cuh with the
// ring's tiles n0 .. n0 + ntiles - 1 in place of its own copies): each product is waited for at once.
// Q is qf (registers) with two consumer warpgroups, q_tile (shared memory) with three.
template <int S, int BN, bool kLean, int CW>
__device__ __forceinline__ void consume(const Ring<BN>& ring, uint32_t n0, int ntiles, int wg_end,
                                        const uint32_t (&qf)[kHD / 16][4], uint32_t q_tile, const int (&q_end)[2],
                                        float scale_log2, float (&o)[kHD / 2], float (&l)[2]) {
  using namespace prefill_wg;
  const int lane = threadIdx.x & 31;
  const int t = lane & 3;
  const int n_wg = (wg_end + BN - 1) / BN;  // tiles this warpgroup computes
  float m[2] = {-INFINITY, -INFINITY};
  for (int j = 0; j < ntiles; ++j) {
    const uint32_t i = n0 + j;
    const int s = static_cast<int>(i % S);
    mbar_wait(&ring.full[s], (i / S) & 1);
    if (j < n_wg) {                // uniform over the warpgroup
      fence_proxy_async_shared();  // the producer's cp.async writes, before wgmma reads them
      float sc[BN / 2];
      if constexpr (CW == 3) {
        static_assert(BN == kBN, "Q from shared memory: 64-key tiles");
        issue_scores_ss(sc, q_tile, ring.k_tile(s));
      } else {
        issue_scores<BN>(sc, qf, ring.k_tile(s));
      }
      wgmma_wait<0>();
      wgmma_fence_operands(sc);
      uint32_t pf[BN / 16][4];
      softmax_and_rescale<BN, kLean>(sc, j * BN, t, q_end, scale_log2, m, l, o, pf);
      wgmma_fence_operands(o);
      issue_pv<BN>(o, pf, ring.v_tile(s));
      wgmma_wait<0>();
      wgmma_fence_operands(o);
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(&ring.empty[s]);  // this warp's products are done with stage s
  }
}

}  // namespace prefill_ws

// for_each_segment over the block's segments; the ring's tile count runs on across them (every role
// walks the same segments, so the producer's and the consumers' counts agree).
template <int S, int BN, bool kLean, int CW>
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
  __shared__ int red[32];  // [warp]: the warp's rows' last key; [16 + warp]: its queries' last key
  __shared__ uint64_t full[S], empty[S];
  extern __shared__ __align__(1024) unsigned char ws_smem[];
  uint32_t dyn;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
  if (dyn < static_cast<uint32_t>(kSharedBytes<S, BN, CW>) || blockDim.x != kThreads<CW>) __trap();
  const Ring<BN> ring{(smem_u32(ws_smem) + 1023u) & ~1023u, full, empty};
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], kProducerThreads);
      mbar_init(&empty[s], kConsumerThreads<CW> / 32);
    }
    mbar_init_fence();
  }
  __syncthreads();
  const bool producer = threadIdx.x >= kConsumerThreads<CW>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wg = warp >> 2;
  const int t = lane & 3;
  uint32_t n = 0;  // tiles through the ring so far
  // The roles part here, each with its own walk over the segments (setmaxnreg holds for the code a
  // role runs, so they share none); they meet at named barrier kSegment (all 384 threads) twice per
  // segment: once the bounds are in red, and when red is free again.
  if (producer) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs<CW>));
    for_each_segment<kHD, kBM<CW>, kThreads<CW>>(
        cache, block_table, max_pages, seq_lens, cu_seqlens, out, rows, seqs, heads, kv_heads, page_size,
        page_stride, rows_per_block, first_row, [&](const PagedKv& kv, int, int, int, int, int64_t, int kvh) {
          named_bar_sync(kSegment, kThreads<CW>);
          int kend = 0;
#pragma unroll
          for (int w = 0; w < 4 * CW; ++w) kend = max(kend, red[w]);
          const int ntiles = (kend + BN - 1) / BN;
          produce<S, BN>(ring, n, ntiles, kv, kvh, kend, static_cast<int>(threadIdx.x) - kConsumerThreads<CW>);
          n += static_cast<uint32_t>(ntiles);
          named_bar_sync(kSegment, kThreads<CW>);
        });
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs<CW>));
  for_each_segment<kHD, kBM<CW>, kThreads<CW>>(
      cache, block_table, max_pages, seq_lens, cu_seqlens, out, rows, seqs, heads, kv_heads, page_size, page_stride,
      rows_per_block, first_row, [&](const PagedKv&, int a, int nq, int G, int seq_len, int64_t cap, int kvh) {
        // The block's last key (the producer's tile count) and each warpgroup's, as in prefill_wg.
        const prefill_wg::QueryRows qr =
            prefill_wg::query_rows<kConsumerThreads<CW>>(positions, a, nq, G, seq_len, cap);
        const auto& q_idx = qr.q_idx;
        const auto& q_end = qr.q_end;
        if (lane == 0) {
          red[warp] = qr.mine;
          red[16 + warp] = qr.warp_end;
        }
        named_bar_sync(kSegment, kThreads<CW>);
        int kend = 0, wg_end = 0;
#pragma unroll
        for (int w = 0; w < 4 * CW; ++w) kend = max(kend, red[w]);
#pragma unroll
        for (int w = 0; w < 4; ++w) wg_end = max(wg_end, red[16 + 4 * wg + w]);
        const int ntiles = (kend + BN - 1) / BN;
        uint32_t qf[kHD / 16][4];
        const uint32_t q_tile = ring.q_tile(S, wg);
        if constexpr (CW == 3) {  // the warpgroup's 64 queries into its Q tile (zeros past nq)
          const int wt = threadIdx.x & 127;
#pragma unroll
          for (int c = wt; c < 64 * (kHD / 8); c += 128) {
            const int r = c / (kHD / 8), part = c % (kHD / 8), qi = 64 * wg + r;
            const bool valid = qi < nq;
            const bf16* src =
                valid ? qkv + static_cast<int64_t>(a + qi / G) * q_stride + (kvh * G + qi % G) * kHD + part * 8 : qkv;
            cp_async16(q_tile + static_cast<uint32_t>((part >> 3) * (prefill_wg::kTileBytes / 2)) +
                           sw128_offset(r, part & 7),
                       src, valid);
          }
          cp_async_commit();
          cp_async_wait<0>();
          fence_proxy_async_shared();
          named_bar_sync(kQLoaded + wg, 128);
        } else {
          prefill_wg::load_q_fragments(qf, qkv, q_stride, a, nq, G, kvh, q_idx, t);
        }
        float o[kHD / 2];
        float l[2] = {0.0f, 0.0f};
#pragma unroll
        for (int i = 0; i < kHD / 2; ++i) o[i] = 0.0f;
        consume<S, BN, kLean, CW>(ring, n, ntiles, wg_end, qf, q_tile, q_end, scale * kLog2e, o, l);
        n += static_cast<uint32_t>(ntiles);
        named_bar_sync(kSegment, kThreads<CW>);  // red is free for the next segment
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
// KERN_ATTN_PREFILL_MMA_ENTRY; CW consumer warpgroups and a producer warpgroup (128 · CW + 128 threads),
// 64 · CW queries per block (rows_per_block = 64 · CW / G), STAGES stages of BN-key K/V tiles
// (prefill_ws::kSharedBytes<STAGES, BN, CW> of dynamic shared memory); LEAN: softmax_tile_lean, o
// rescaled only when a max moved (else, BN 64 only, the two-warpgroup kernel's softmax and bits).
#define KERN_ATTN_PREFILL_WGMMA_WS_ENTRY(NAME, STAGES, BN, LEAN, CW)                                               \
  extern "C" __global__ void __launch_bounds__(prefill_ws::kThreads<CW>, 1)                                        \
      NAME(const bf16* qkv, int32_t q_stride, const bf16* cache, const int32_t* block_table, int32_t max_pages,     \
           const int32_t* seq_lens, const int32_t* cu_seqlens, const int64_t* positions, bf16* out, int32_t rows,   \
           int32_t seqs, int32_t heads, int32_t kv_heads, int32_t page_size, int64_t page_stride, float scale,      \
           int32_t rows_per_block, int32_t first_row) {                                                             \
    prefill_wgmma_ws<STAGES, BN, LEAN, CW>(qkv, q_stride, cache, block_table, max_pages, seq_lens, cu_seqlens,          \
                                       positions, out, rows, seqs, heads, kv_heads, page_size, page_stride, scale,  \
                                       rows_per_block, first_row);                                                  \
  }
