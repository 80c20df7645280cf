// Chunked-prefill paged attention on Hopper's warpgroup MMA (sm_90a; docs/kernels.md, "Prefill
// attention on wgmma"): the semantics, query blocking and row invariance of
// attention_prefill_mma.cuh (read its header first), with the two products on wgmma.mma_async:
//  * a block is WG warpgroups (production: 2); warpgroup w takes queries [64 w, 64 w + 64) of the
//    block's 64 WG (rows of one sequence times the G q heads of one kv head), each warp 16 of them,
//    Q's fragments in registers (the A operand of S = Q·Kᵀ, m64n64k16, 8 k-steps over hd 128);
//  * K and V tiles of 64 keys come in by cp.async, two stages, 128-byte swizzled as wgmma reads
//    them: [hd half][key][64 elements], so K is the K-major B of Q·Kᵀ and V the MN-major B of P·V;
//  * S lands in registers in the mma.sync accumulator layout, so the online softmax is the mma
//    kernel's, and P (bf16) is the register A operand of O += P·V (m64n128k16, 4 k-steps).
// A warpgroup skips a tile none of its 64 queries sees (the whole warpgroup issues each wgmma).
// A query's arithmetic is a fixed sequence on its own data (wgmma's summation order is fixed per
// output element), so rows stay bitwise independent of how they are cut into calls or blocks.
#pragma once

#include "attention_prefill_mma.cuh"
#include "wgmma.cuh"

namespace {

namespace prefill_wg {

constexpr int kHD = 128;
constexpr int kBN = 64;                       // keys per tile
// A block is WG warpgroups of 64 queries each (production: 2).
template <int WG>
constexpr int kThreads = WG * 128;
template <int WG>
constexpr int kBM = WG * 64;  // queries per block
constexpr int kTileBytes = kBN * kHD * 2;     // one K or V tile: two 8 KB halves
// One K or V tile of BN keys (the warp-specialised kernel's tiles may be wider): two halves of
// head_dim, BN 128-byte rows each.
template <int BN>
constexpr int kTileBytesOf = BN * kHD * 2;
// Dynamic shared memory: two stages of a K and a V tile, plus slack for the 1024-byte alignment.
constexpr int kSharedBytes = 2 * 2 * kTileBytes + 1024;

// Copies keys [t0, t0 + kBN) of kv head kvh (K into k_tile, V into v_tile: byte addresses of
// 1024-aligned tiles) in the swizzled layout; keys at or past kend are zero-filled.
template <int WG>
__device__ __forceinline__ void load_tile(uint32_t k_tile, uint32_t v_tile, const PagedKv& kv, int kvh, int t0,
                                          int kend, int64_t v_offset) {
  for_each_tile_piece<kHD, kBN, kThreads<WG>>(kv, kvh, t0, kend, [&](int r, int part, const bf16* src, bool valid) {
    const uint32_t at = static_cast<uint32_t>((part >> 3) * (kTileBytes / 2)) + sw128_offset(r, part & 7);
    cp_async16(k_tile + at, src, valid);
    cp_async16(v_tile + at, valid ? src + v_offset : kv.cache, valid);
  });
}

// P (a score tile after exp2, sc[4 nb + e] in the accumulator layout) as the bf16 A fragments of P·V,
// one m16k16 fragment per 16 keys.
template <int BN>
__device__ __forceinline__ void pack_p(const float (&sc)[BN / 2], uint32_t (&pf)[BN / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    pf[kk][0] = pack_bf16x2(sc[8 * kk + 0], sc[8 * kk + 1]);
    pf[kk][1] = pack_bf16x2(sc[8 * kk + 2], sc[8 * kk + 3]);
    pf[kk][2] = pack_bf16x2(sc[8 * kk + 4], sc[8 * kk + 5]);
    pf[kk][3] = pack_bf16x2(sc[8 * kk + 6], sc[8 * kk + 7]);
  }
}

// A segment's queries as this thread sees them (warp w of the block holds queries 16 w .. 16 w + 15, a
// lane the two rows g and g + 8): their indices q_idx and key ends q_end (0 past nq); warp_end, the
// largest key end of the warp's queries; mine, the largest key end of the segment rows a + i, i =
// threadIdx.x, + kThreads, ... (both reduced over the warp). Warp w's lane 0 puts them in the
// block's table for the others.
struct QueryRows {
  int q_idx[2], q_end[2];
  int mine, warp_end;
};
template <int kThreads>
__device__ __forceinline__ QueryRows query_rows(const int64_t* __restrict__ positions, int a, int nq, int G,
                                                int seq_len, int64_t cap) {
  const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2;
  QueryRows q;
  q.mine = 0;
  for (int i = threadIdx.x; i < nq / G; i += kThreads) q.mine = max(q.mine, key_end(positions, a + i, seq_len, cap));
  q.mine = __reduce_max_sync(0xffffffffu, q.mine);
  q.warp_end = 0;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int qi = warp * 16 + g + 8 * h;
    q.q_idx[h] = qi;
    q.q_end[h] = qi < nq ? key_end(positions, a + qi / G, seq_len, cap) : 0;
    q.warp_end = max(q.warp_end, q.q_end[h]);
  }
  q.warp_end = __reduce_max_sync(0xffffffffu, q.warp_end);
  return q;
}

// This thread's Q fragments (the A operand of Q·Kᵀ from registers) for its two query rows.
__device__ __forceinline__ void load_q_fragments(uint32_t (&qf)[kHD / 16][4], const bf16* __restrict__ qkv,
                                                 int32_t q_stride, int a, int nq, int G, int kvh,
                                                 const int (&q_idx)[2], int t) {
  const int qa = q_idx[0], qb = q_idx[1];
  const bf16* pa = qa < nq ? qkv + static_cast<int64_t>(a + qa / G) * q_stride + (kvh * G + qa % G) * kHD : nullptr;
  const bf16* pb = qb < nq ? qkv + static_cast<int64_t>(a + qb / G) * q_stride + (kvh * G + qb % G) * kHD : nullptr;
  load_a_fragments(qf, pa, pb, t);
}

// The mma kernel's online softmax on one score tile in the same layout (sc[4 nb + e]: row g + 8 (e >> 1),
// key t0 + nb * 8 + 2 t + (e & 1)): masks keys a row may not see, moves each row's state (m, l) to the
// new max, returns the accumulator's rescale alpha per row and P (bf16) as the A fragments of P·V.
__device__ __forceinline__ void softmax_tile(float (&sc)[kBN / 2], int t0, int t, const int (&q_end)[2],
                                             float scale_log2, float (&m)[2], float (&l)[2], float (&alpha)[2],
                                             uint32_t (&pf)[kBN / 16][4]) {
  constexpr int NB = kBN / 8;
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int nb = 0; nb < NB; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = t0 + nb * 8 + 2 * t + (e & 1);
      const float s = sc[4 * nb + e] * scale_log2;
      sc[4 * nb + e] = key < q_end[e >> 1] ? s : -INFINITY;
      mx[e >> 1] = fmaxf(mx[e >> 1], sc[4 * nb + e]);
    }
  float base[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    const float mn = fmaxf(m[h], mx[h]);
    base[h] = mn == -INFINITY ? 0.0f : mn;  // a row that has seen no key: every p is 0
    alpha[h] = online_rescale(m[h], l[h], mn, base[h]);
  }
#pragma unroll
  for (int i = 0; i < NB * 4; ++i) {
    sc[i] = exp2f(sc[i] - base[(i >> 1) & 1]);
    sum[(i >> 1) & 1] += sc[i];
  }
  l[0] += sum[0];
  l[1] += sum[1];
  pack_p<kBN>(sc, pf);
}

// ex2.approx with subnormal results flushed to zero: one MUFU.EX2 where exp2f adds a range check
// and two multiplies (a p below 2^-126 is 0 instead of a subnormal).
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// softmax_tile with fewer instructions per score (the warp-specialised kernel's; session 29): keys are
// masked only in a tile that reaches past one of the thread's rows' ends, the row max is taken on the
// raw scores (scaling is monotonic, so it is the same max), each p is exp2(s · scale - base) with one
// FFMA and an ex2 that flushes subnormals. Not the bits of softmax_tile (the FFMA rounds once where
// FMUL, FADD round twice).
template <int BN>
__device__ __forceinline__ void softmax_tile_lean(float (&sc)[BN / 2], int t0, int t, const int (&q_end)[2],
                                                  float scale_log2, float (&m)[2], float (&l)[2], float (&alpha)[2],
                                                  uint32_t (&pf)[BN / 16][4]) {
  constexpr int NB = BN / 8;
  if (t0 + BN > min(q_end[0], q_end[1])) {
#pragma unroll
    for (int nb = 0; nb < NB; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = t0 + nb * 8 + 2 * t + (e & 1);
        if (key >= q_end[e >> 1]) sc[4 * nb + e] = -INFINITY;
      }
  }
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int i = 0; i < NB * 4; ++i) mx[(i >> 1) & 1] = fmaxf(mx[(i >> 1) & 1], sc[i]);
  float base[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    const float mn = fmaxf(m[h], mx[h] * scale_log2);
    base[h] = mn == -INFINITY ? 0.0f : mn;  // a row that has seen no key: every p is 0
    alpha[h] = online_rescale(m[h], l[h], mn, base[h]);
  }
#pragma unroll
  for (int i = 0; i < NB * 4; ++i) {
    sc[i] = exp2_ftz(fmaf(sc[i], scale_log2, -base[(i >> 1) & 1]));
    sum[(i >> 1) & 1] += sc[i];
  }
  l[0] += sum[0];
  l[1] += sum[1];
  pack_p<BN>(sc, pf);
}

// o (the m64n128 accumulator: o[4 nd + e], row g + 8 (e >> 1)) times each row's alpha.
__device__ __forceinline__ void rescale(float (&o)[kHD / 2], const float (&alpha)[2]) {
#pragma unroll
  for (int i = 0; i < kHD / 2; ++i) o[i] *= alpha[(i >> 1) & 1];
}

// S = Q·Kᵀ for one tile of BN keys (64 or 128) into sc (issued, not waited for): K-major B, hd half
// ks / 4, 16 elements (32 bytes) per k-step inside it, 8-key groups 1024 bytes apart.
template <int BN = kBN>
__device__ __forceinline__ void issue_scores(float (&sc)[BN / 2], const uint32_t (&qf)[kHD / 16][4], uint32_t k_tile) {
  static_assert(BN == 64 || BN == 128, "one wgmma covers the tile's keys");
  const uint64_t desc = wgmma_desc_sw128(k_tile, 16, 1024);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kHD / 16; ++ks) {
    const uint64_t d = wgmma_desc_advance(desc, (ks >> 2) * (kTileBytesOf<BN> / 2) + (ks & 3) * 32);
    if constexpr (BN == 64)
      wgmma_m64n64k16_rs(sc, qf[ks], d, ks > 0 ? 1 : 0);
    else
      wgmma_m64n128k16_rs<0>(sc, qf[ks], d, ks > 0 ? 1 : 0);
  }
  wgmma_commit();
}

// issue_scores with Q in shared memory too (q_tile: the warpgroup's 64 queries in the K tile's
// layout, [hd half][query][64 elements] swizzled), for kernels whose registers cannot hold Q (BN 64).
__device__ __forceinline__ void issue_scores_ss(float (&sc)[kBN / 2], uint32_t q_tile, uint32_t k_tile) {
  const uint64_t desc_q = wgmma_desc_sw128(q_tile, 16, 1024), desc_k = wgmma_desc_sw128(k_tile, 16, 1024);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kHD / 16; ++ks) {
    const uint32_t at = (ks >> 2) * (kTileBytes / 2) + (ks & 3) * 32;
    wgmma_m64n64k16_ss(sc, wgmma_desc_advance(desc_q, at), wgmma_desc_advance(desc_k, at), ks > 0 ? 1 : 0);
  }
  wgmma_commit();
}

// O += P·V for one tile of BN keys (issued, not waited for): MN-major B, 16 keys (two 8-key groups
// of 1024 bytes) per k-step, hd halves kTileBytesOf<BN> / 2 apart.
template <int BN = kBN>
__device__ __forceinline__ void issue_pv(float (&o)[kHD / 2], const uint32_t (&pf)[BN / 16][4], uint32_t v_tile) {
  const uint64_t desc = wgmma_desc_sw128(v_tile, kTileBytesOf<BN> / 2, 1024);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) wgmma_m64n128k16_rs<1>(o, pf[kk], wgmma_desc_advance(desc, kk * 2048), 1);
  wgmma_commit();
}

// Writes this thread's two query rows of O (the m64n128 accumulator), each divided by its row sum
// (the l of the row's four lanes added; 0 for a row that saw no key); q_idx: the rows' query indices
// in the segment (row a + qi / G, q head kvh · G + qi % G), rows at or past nq are not written.
__device__ __forceinline__ void store_rows(const float (&o)[kHD / 2], const float (&l)[2], const int (&q_idx)[2],
                                           int nq, bf16* __restrict__ out, int a, int G, int heads, int kvh, int t) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float s = l[h];
    s += __shfl_xor_sync(0xffffffffu, s, 1);
    s += __shfl_xor_sync(0xffffffffu, s, 2);
    const float inv = s > 0.0f ? 1.0f / s : 0.0f;
    const int qi = q_idx[h];
    if (qi < nq) {
      bf16* dst = out + (static_cast<int64_t>(a + qi / G) * heads + kvh * G + qi % G) * kHD + 2 * t;
#pragma unroll
      for (int nd = 0; nd < kHD / 8; ++nd)
        *reinterpret_cast<uint32_t*>(dst + nd * 8) =
            pack_bf16x2(o[4 * nd + 2 * h] * inv, o[4 * nd + 2 * h + 1] * inv);
    }
  }
}

// Attends the block's queries of rows [a, a + nq / G) of one sequence to kv head kvh (as
// attend_segment of attention_prefill_mma.cuh): each product is waited for at once, two stages.
template <int WG>
__device__ __forceinline__ void attend_segment(uint32_t tiles, int* red, const bf16* __restrict__ qkv,
                                               int32_t q_stride, const PagedKv& kv,
                                               const int64_t* __restrict__ positions, bf16* __restrict__ out, int a,
                                               int nq, int G, int seq_len, int64_t cap, int heads, int kvh,
                                               float scale_log2) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int KS = kHD / 16;  // k-steps of Q·Kᵀ
  constexpr int NB = kBN / 8;   // n8 blocks of a score tile
  constexpr int ND = kHD / 8;   // n8 blocks of the output
  constexpr int KK = kBN / 16;  // k-steps of P·V
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wg = warp >> 2;
  const int t = lane & 3;

  // Block-wide last key, and each warpgroup's.
  const QueryRows qr = query_rows<kThreads<WG>>(positions, a, nq, G, seq_len, cap);
  const auto& q_idx = qr.q_idx;
  const auto& q_end = qr.q_end;
  if (lane == 0) {
    red[warp] = qr.mine;
    red[8 + warp] = qr.warp_end;
  }
  __syncthreads();
  int kend = 0, wg_end = 0;
#pragma unroll
  for (int w = 0; w < 4 * WG; ++w) kend = max(kend, red[w]);
#pragma unroll
  for (int w = 0; w < 4; ++w) wg_end = max(wg_end, red[8 + 4 * wg + w]);

  uint32_t qf[KS][4];
  load_q_fragments(qf, qkv, q_stride, a, nq, G, kvh, q_idx, t);

  float o[ND * 4];
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < ND * 4; ++i) o[i] = 0.0f;

  const int64_t v_offset = v_block_elems(kv.page_size, kv.kv_heads, kHD);
  const int ntiles = (kend + kBN - 1) / kBN;
  // stage s: K tile at tiles + 2 s kTileBytes, V tile right after it
  auto k_tile = [&](int s) { return tiles + static_cast<uint32_t>(2 * s * kTileBytes); };
  auto v_tile = [&](int s) { return tiles + static_cast<uint32_t>((2 * s + 1) * kTileBytes); };
  if (ntiles > 0) load_tile<WG>(k_tile(0), v_tile(0), kv, kvh, 0, kend, v_offset);
  cp_async_commit();
  for (int j = 0; j < ntiles; ++j) {
    const int t0 = j * kBN;
    const int st = j & 1;
    if (j + 1 < ntiles) load_tile<WG>(k_tile(st ^ 1), v_tile(st ^ 1), kv, kvh, t0 + kBN, kend, v_offset);
    cp_async_commit();
    cp_async_wait<1>();  // this thread's pieces of tile j
    fence_proxy_async_shared();
    __syncthreads();  // ... and every thread's
    if (t0 < wg_end) {
      float sc[NB * 4];
      issue_scores(sc, qf, k_tile(st));
      wgmma_wait<0>();
      wgmma_fence_operands(sc);
      float alpha[2];
      uint32_t pf[KK][4];
      softmax_tile(sc, t0, t, q_end, scale_log2, m, l, alpha, pf);
      rescale(o, alpha);
      wgmma_fence_operands(o);
      issue_pv(o, pf, v_tile(st));
      wgmma_wait<0>();
      wgmma_fence_operands(o);
    }
    __syncthreads();  // every warpgroup is done with the tile-j buffers
  }
  cp_async_wait<0>();
  __syncthreads();  // red and the tiles are free for the next segment

  store_rows(o, l, q_idx, nq, out, a, G, heads, kvh, t);
#else
  (void)tiles, (void)red, (void)qkv, (void)q_stride, (void)kv, (void)positions, (void)out, (void)a, (void)nq, (void)G,
      (void)seq_len, (void)cap, (void)heads, (void)kvh, (void)scale_log2;
  __trap();  // sm_90a only
#endif
}

}  // namespace prefill_wg

// for_each_segment (attention_prefill_mma.cuh) over this kernel's segments.
template <int WG>
__device__ __forceinline__ void prefill_wgmma(const bf16* __restrict__ qkv, int32_t q_stride,
                                              const bf16* __restrict__ cache, const int32_t* __restrict__ block_table,
                                              int32_t max_pages, const int32_t* __restrict__ seq_lens,
                                              const int32_t* __restrict__ cu_seqlens,
                                              const int64_t* __restrict__ positions, bf16* __restrict__ out,
                                              int32_t rows, int32_t seqs, int32_t heads, int32_t kv_heads,
                                              int32_t page_size, int64_t page_stride, float scale,
                                              int32_t rows_per_block, int32_t first_row) {
  using namespace prefill_wg;
  __shared__ int red[16];
  extern __shared__ __align__(1024) unsigned char wg_smem[];
  uint32_t dyn;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
  if (dyn < static_cast<uint32_t>(kSharedBytes) || blockDim.x != kThreads<WG>) __trap();
  const uint32_t tiles = (smem_u32(wg_smem) + 1023u) & ~1023u;  // wgmma's swizzle needs 1024-byte alignment
  for_each_segment<kHD, kBM<WG>, kThreads<WG>>(
      cache, block_table, max_pages, seq_lens, cu_seqlens, out, rows, seqs, heads, kv_heads, page_size, page_stride,
      rows_per_block, first_row, [&](const PagedKv& kv, int a, int nq, int G, int seq_len, int64_t cap, int kvh) {
        attend_segment<WG>(tiles, red, qkv, q_stride, kv, positions, out, a, nq, G, seq_len, cap, heads, kvh,
                              scale * kLog2e);
      });
}

}  // namespace

// The wgmma entries (hd 128): the ABI, grid and semantics of KERN_ATTN_PREFILL_MMA_ENTRY; WG warpgroups
// (128 · WG threads, 64 · WG queries: rows_per_block = 64 · WG / G), prefill_wg::kSharedBytes of
// dynamic shared memory, MINB blocks per SM asked of the register allocator.
#define KERN_ATTN_PREFILL_WGMMA_ENTRY(NAME, WG, MINB)                                                                  \
  extern "C" __global__ void __launch_bounds__(prefill_wg::kThreads<WG>, MINB)                                         \
      NAME(const bf16* qkv, int32_t q_stride, const bf16* cache, const int32_t* block_table, int32_t max_pages,        \
           const int32_t* seq_lens, const int32_t* cu_seqlens, const int64_t* positions, bf16* out, int32_t rows,      \
           int32_t seqs, int32_t heads, int32_t kv_heads, int32_t page_size, int64_t page_stride, float scale,         \
           int32_t rows_per_block, int32_t first_row) {                                                                \
    prefill_wgmma<WG>(qkv, q_stride, cache, block_table, max_pages, seq_lens, cu_seqlens, positions, out, rows,        \
                            seqs, heads, kv_heads, page_size, page_stride, scale, rows_per_block, first_row);          \
  }
