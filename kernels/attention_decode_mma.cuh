#pragma once

#include "decode_split.cuh"
#include "mma.cuh"
#include "paged_kv.cuh"
#include "softmax.cuh"

using namespace kern_dev;

namespace {

// ---------------------------------------------------------------------------------------------
// Split-KV decode on tensor cores (kern_attn_decode_mma_partial_hd*): the same work split, ABI,
// partial outputs and direct writes as decode::partial above (the reduce kernel is shared), with
// the K/V stream and the arithmetic reorganised for bandwidth:
//  * a warp takes every 4th tile of 16 keys of the block's range and streams its tiles through its
//    own ring of S stages in shared memory with cp.async (16-byte pieces; a tile past the range is
//    zero-filled), S − 1 tiles in flight while it computes one, with no block barrier in the key
//    loop (only __syncwarp: the lanes read each other's pieces through ldmatrix);
//  * every q head of the kv head is one row of an m16 tile (G ≤ 16; rows past G are zero queries),
//    so S = Q·Kᵀ is 2 × HD/16 mma.m16n8k16 and P·V is HD/8 of them per tile, instead of a dot
//    product and a shuffle reduction per (key, head) on the CUDA cores;
//  * online softmax in f32 (log2 units) per row; P rounded to bf16 for P·V, as in the prefill
//    kernel and flash-attention (the f32 kernel above keeps P in f32);
//  * the four warps' (max, sum, output) rows are merged in warp order, as above; their scratch
//    reuses each warp's own ring once its stream is done.
// Dynamic shared memory: kWarps · S · 2 · 16 · (HD + 8) · 2 bytes (decode_mma_smem_bytes; a launch with less
// traps). Results are bitwise repeatable (fixed tile order, fixed merge order).
namespace decode_mma {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kKeys = 16;  // keys per warp tile (the n of Q·Kᵀ, the k of P·V)

template <int HD>
__host__ __device__ constexpr int tile_elems() {
  return kKeys * (HD + 8);  // one K or V tile, rows padded by 16 bytes (conflict-free ldmatrix)
}
template <int HD, int S>
__host__ __device__ constexpr int smem_bytes() {
  return kWarps * S * 2 * tile_elems<HD>() * 2;
}

// Q of sequence s, kv head kvh as the m16 A tile: rows g and g + 8 are q heads kvh·G + g and
// kvh·G + g + 8 (zero past G).
template <int HD>
__device__ __forceinline__ void load_group_q(uint32_t (&qf)[HD / 16][4], const bf16* __restrict__ qkv,
                                             int32_t q_stride, int s, int kvh, int group, int g, int t) {
  const bf16* q0 = qkv + static_cast<int64_t>(s) * q_stride + static_cast<int64_t>(kvh) * group * HD;
  load_a_fragments(qf, g < group ? q0 + g * HD : nullptr, g + 8 < group ? q0 + (g + 8) * HD : nullptr, t);
}

// This lane's ldmatrix addresses in a ring's first stage: K rows key nb·8 + (lane & 7), columns +
// (lane >> 3)·8; V (transposed) rows key ((lane >> 3) & 1)·8 + (lane & 7), columns + (lane >> 4)·8.
template <int HD>
__device__ __forceinline__ uint32_t k_lane_base(const bf16* ring, int lane) {
  return smem_u32(ring) + ((lane & 7) * (HD + 8) + (lane >> 3) * 8) * 2;
}
template <int HD>
__device__ __forceinline__ uint32_t v_lane_base(const bf16* ring, int lane) {
  return smem_u32(ring + tile_elems<HD>()) + ((((lane >> 3) & 1) * 8 + (lane & 7)) * (HD + 8) + (lane >> 4) * 8) * 2;
}

// The copy of one K and V tile (keys t0 .. t0 + 15 of a range ending at `end`, kv head kvh, through
// the sequence's block-table row `pages`) into a ring stage, as this lane's 16-byte pieces: lane l
// takes column piece l % (HD/8) of keys l / (HD/8) + i · 32/(HD/8); keys at or past `end` read
// nothing and land as zeros. Tiles start at multiples of 16 keys, so with pages of a multiple of 16
// keys (kern gen's) a tile lies in one page: one page lookup and one address per tile, and the
// lane's pieces are a fixed stride apart (no division per piece: session 21's profile of the warp
// kernel had its key loop bound by the integer work of the old per-piece addressing). Shared by
// decode_mma and decode_warp.
template <int HD>
struct TileCopy {
  static constexpr int kChunks = HD / 8;           // 16-byte pieces of a K (or V) row
  static constexpr int kRowsPer = 32 / kChunks;    // keys one warp-wide copy covers
  static constexpr int kIters = kKeys / kRowsPer;  // copies per lane per tile (each K and V)
  static_assert(32 % kChunks == 0 && kKeys % kRowsPer == 0, "a warp covers whole K rows");
  const bf16* cache;
  int64_t page_stride, v_offset, key_stride;  // elements: page to page, K to V, key to key (kv_heads · HD)
  int page_size, page_shift, kv_heads, r0, part;
  uint32_t lane_dst;  // this lane's first piece in a stage, bytes from the stage's start
  bool one_page;

  __device__ __forceinline__ TileCopy(const bf16* c, int64_t ps, int page, int kvh_count, int lane)
      : cache(c),
        page_stride(ps),
        v_offset(v_block_elems(page, kvh_count, HD)),
        key_stride(static_cast<int64_t>(kvh_count) * HD),
        page_size(page),
        page_shift(page_shift_of(page)),
        kv_heads(kvh_count),
        r0(lane / kChunks),
        part(lane % kChunks),
        lane_dst(static_cast<uint32_t>((r0 * (HD + 8) + part * 8) * 2)),
        one_page(page % kKeys == 0) {}

  // A tile within one page (one_page) whose block-table entry the caller read already: `page` is
  // pages[p] for key t0's page p (decode_warp reads it one issue ahead).
  __device__ __forceinline__ void issue_on_page(uint32_t stage, int32_t page, int t0, int end, int kvh) const {
    constexpr uint32_t kRowBytes = (HD + 8) * 2, kVBytes = tile_elems<HD>() * 2;
    const uint32_t dst = stage + lane_dst;
    int p, row;
    slot_page_row(t0, page_size, page_shift, p, row);
    const bf16* base =
        cache + static_cast<int64_t>(page) * page_stride + (static_cast<int64_t>(row + r0) * kv_heads + kvh) * HD + part * 8;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const bool valid = t0 + r0 + i * kRowsPer < end;
      const bf16* src = base + i * kRowsPer * key_stride;
      const uint32_t d = dst + i * kRowsPer * kRowBytes;
      cp_async16(d, valid ? src : cache, valid);
      cp_async16(d + kVBytes, valid ? src + v_offset : cache, valid);
    }
  }

  // `stage`: the stage's shared-memory address (its K tile; V follows at tile_elems).
  __device__ __forceinline__ void issue(uint32_t stage, const int32_t* __restrict__ pages, int t0, int end,
                                        int kvh) const {
    constexpr uint32_t kRowBytes = (HD + 8) * 2, kVBytes = tile_elems<HD>() * 2;
    const uint32_t dst = stage + lane_dst;
    if (one_page) {
      int p, row;
      slot_page_row(t0, page_size, page_shift, p, row);
      issue_on_page(stage, pages[p], t0, end, kvh);
    } else {
#pragma unroll
      for (int i = 0; i < kIters; ++i) {
        const int j = t0 + r0 + i * kRowsPer;
        const bool valid = j < end;
        const bf16* src = cache;
        if (valid) {
          int p, row;
          slot_page_row(j, page_size, page_shift, p, row);
          src = cache + static_cast<int64_t>(pages[p]) * page_stride + (static_cast<int64_t>(row) * kv_heads + kvh) * HD +
                part * 8;
        }
        const uint32_t d = dst + i * kRowsPer * kRowBytes;
        cp_async16(d, src, valid);
        cp_async16(d + kVBytes, valid ? src + v_offset : cache, valid);
      }
    }
  }
};

// One tile of 16 keys (t0 ...) of a range ending at `end` against the m16 tile of q heads (qf): the
// scores S = Q·Kᵀ, the online softmax update of each row's (m, l) in log2 units (keys at or past
// `end` score -inf; their V is zeros), and O += P·V with P rounded to bf16. k_tile / v_tile are this
// lane's ldmatrix addresses in the stage holding the tile. Shared by decode_mma and decode_warp.
template <int HD>
__device__ __forceinline__ void tile_step(const uint32_t (&qf)[HD / 16][4], uint32_t k_tile, uint32_t v_tile, int t0,
                                          int end, int t, float scale_log2, float (&o)[HD / 8][4], float (&m)[2],
                                          float (&l)[2]) {
  constexpr int kStride = HD + 8;
  constexpr int KS = HD / 16;
  constexpr int ND = HD / 8;
  float sc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
  for (int ks = 0; ks < KS; ks += 2)
#pragma unroll
    for (int nb = 0; nb < 2; ++nb) {
      uint32_t b0, b1, b2, b3;
      ldsm_x4(k_tile + (nb * 8 * kStride + ks * 16) * 2, b0, b1, b2, b3);
      mma_bf16(sc[nb], qf[ks], b0, b1);
      mma_bf16(sc[nb], qf[ks + 1], b2, b3);
    }
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int nb = 0; nb < 2; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = t0 + nb * 8 + 2 * t + (e & 1);
      sc[nb][e] = key < end ? sc[nb][e] * scale_log2 : -INFINITY;
      mx[e >> 1] = fmaxf(mx[e >> 1], sc[nb][e]);
    }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    // Key t0 is in the range, so the quad's max (which covers it) is finite.
    const float mn = fmaxf(m[h], mx[h]);
    const float alpha = online_rescale(m[h], l[h], mn);  // 0 on the first tile (m = -inf)
#pragma unroll
    for (int nd = 0; nd < ND; ++nd) {
      o[nd][2 * h] *= alpha;
      o[nd][2 * h + 1] *= alpha;
    }
  }
#pragma unroll
  for (int nb = 0; nb < 2; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      sc[nb][e] = exp2f(sc[nb][e] - m[e >> 1]);
      l[e >> 1] += sc[nb][e];
    }
  const uint32_t pf[4] = {pack_bf16x2(sc[0][0], sc[0][1]), pack_bf16x2(sc[0][2], sc[0][3]),
                          pack_bf16x2(sc[1][0], sc[1][1]), pack_bf16x2(sc[1][2], sc[1][3])};
#pragma unroll
  for (int nd = 0; nd < ND; nd += 2) {
    uint32_t b0, b1, b2, b3;
    ldsm_x4_trans(v_tile + nd * 8 * 2, b0, b1, b2, b3);
    mma_bf16(o[nd], pf, b0, b1);
    mma_bf16(o[nd + 1], pf, b2, b3);
  }
}

// Key-major tiles (decode_warp's KM; the products of session 30's producer/consumer
// kernel, docs/perf.md): the key axis is mma's M, so the q heads of a kv head (G <= 8) are its n8
// and no row is padded to 16: Sᵀ = K·Qᵀ is HD/16 mma.m16n8k16 per 16 keys and Oᵀ += Vᵀ·Pᵀ HD/16 more
// (tile_step: 2·HD/16 and HD/8), with 4 scores per lane instead of 8. Lane (g, t) holds keys g and
// g + 8 of q heads 2t and 2t + 1; Pᵀ reaches mma's B operand through movmatrix.trans.
//   qb: Qᵀ as B (k = head dims, n = q heads): q head g's dims ks·16 + 2t, +1 (and + 8), zeros past G.
//   o: Oᵀ, o[mt][c] dim mt·16 + g and o[mt][2 + c] dim mt·16 + g + 8 of q head 2t + c; m, l per q
//   head 2t + c (l is this lane's share: sum it over the 8 lanes of a t at the end).
// k_tile / v_tile: this lane's ldmatrix addresses in the stage (km_k_lane / km_v_lane offsets).
template <int HD>
__device__ __forceinline__ uint32_t km_k_lane(int lane) {  // K as A: 16 keys x 16 dims per k-step
  return static_cast<uint32_t>((((lane & 7) + ((lane >> 3) & 1) * 8) * (HD + 8) + (lane >> 4) * 8) * 2);
}
template <int HD>
__device__ __forceinline__ uint32_t km_v_lane(int lane) {  // Vᵀ as A (transposed load): 16 dims x 16 keys
  return static_cast<uint32_t>(tile_elems<HD>() * 2 +
                               (((lane & 7) + (lane >> 4) * 8) * (HD + 8) + ((lane >> 3) & 1) * 8) * 2);
}
template <int HD>
__device__ __forceinline__ void load_group_qt(uint32_t (&qb)[HD / 16][2], const bf16* __restrict__ qkv,
                                              int32_t q_stride, int s, int kvh, int group, int g, int t) {
  const bf16* q = g < group ? qkv + static_cast<int64_t>(s) * q_stride + static_cast<int64_t>(kvh * group + g) * HD
                            : nullptr;
#pragma unroll
  for (int ks = 0; ks < HD / 16; ++ks) {
    qb[ks][0] = q != nullptr ? load_u32(q + ks * 16 + 2 * t) : 0u;
    qb[ks][1] = q != nullptr ? load_u32(q + ks * 16 + 2 * t + 8) : 0u;
  }
}
template <int HD>
__device__ __forceinline__ void tile_step_km(const uint32_t (&qb)[HD / 16][2], uint32_t k_tile, uint32_t v_tile,
                                             int t0, int end, int g, float scale_log2, float (&o)[HD / 16][4],
                                             float (&m)[2], float (&l)[2]) {
  constexpr int KS = HD / 16;
  float sc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    uint32_t a[4];
    ldsm_x4(k_tile + ks * 32, a[0], a[1], a[2], a[3]);
    mma_bf16(sc, a, qb[ks][0], qb[ks][1]);
  }
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    sc[e] = t0 + g + 8 * (e >> 1) < end ? sc[e] * scale_log2 : -INFINITY;
    mx[e & 1] = fmaxf(mx[e & 1], sc[e]);
  }
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    mx[c] = fmaxf(mx[c], __shfl_xor_sync(0xffffffffu, mx[c], 4));
    mx[c] = fmaxf(mx[c], __shfl_xor_sync(0xffffffffu, mx[c], 8));
    mx[c] = fmaxf(mx[c], __shfl_xor_sync(0xffffffffu, mx[c], 16));
    // Key t0 is in the range, so the column's max (which covers it) is finite.
    const float alpha = online_rescale(m[c], l[c], fmaxf(m[c], mx[c]));  // 0 on the first tile
#pragma unroll
    for (int mt = 0; mt < KS; ++mt) {
      o[mt][c] *= alpha;
      o[mt][2 + c] *= alpha;
    }
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    sc[e] = exp2f(sc[e] - m[e & 1]);
    l[e & 1] += sc[e];
  }
  // Pᵀ as B (k = 16 keys, n = q heads): the score accumulator's two 8x8 blocks, transposed.
  const uint32_t b0 = movmatrix_trans(pack_bf16x2(sc[0], sc[1]));
  const uint32_t b1 = movmatrix_trans(pack_bf16x2(sc[2], sc[3]));
#pragma unroll
  for (int mt = 0; mt < KS; ++mt) {
    uint32_t a[4];
    ldsm_x4_trans(v_tile + mt * 32, a[0], a[1], a[2], a[3]);
    mma_bf16(o[mt], a, b0, b1);
  }
}

template <int HD, int S, bool KM>
__device__ void range(const bf16* __restrict__ qkv, int32_t q_stride, const bf16* __restrict__ cache,
                      const int32_t* __restrict__ block_table, int32_t max_pages, float* __restrict__ part_o,
                      float* __restrict__ part_ml, bf16* __restrict__ out, int32_t heads, int32_t kv_heads,
                      int32_t page_size, int64_t page_stride, int32_t splits_max, float scale, int group, int s,
                      int kvh, int split, const decode::Split& sp);

// KM: each warp's tiles with the key-major products (tile_step_km; G <= 8), merged as without.
template <int HD, int S, bool KM = false>
__device__ void partial(const bf16* __restrict__ qkv, int32_t q_stride, const bf16* __restrict__ cache,
                        const int32_t* __restrict__ block_table, int32_t max_pages,
                        const int32_t* __restrict__ seq_lens, float* __restrict__ part_o, float* __restrict__ part_ml,
                        bf16* __restrict__ out, int32_t seqs, int32_t heads, int32_t kv_heads, int32_t page_size,
                        int64_t page_stride, int32_t splits_max, int32_t target_blocks, int32_t split_tokens,
                        float scale) {
  constexpr int TE = tile_elems<HD>();
  static_assert((HD / 16) % 2 == 0, "k-steps are taken in pairs");
  static_assert((16 * HD + 32) * 4 <= S * 2 * TE * 2, "the merge scratch must fit in a warp's ring");
  extern __shared__ __align__(128) unsigned char decode_mma_smem[];
  uint32_t dyn;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
  if (dyn < static_cast<uint32_t>(smem_bytes<HD, S>())) __trap();
  // Before waiting for the previous kernel (pdl): only the caller's seq_lens, as decode::partial.
  if (seqs < 1 || kv_heads < 1 || page_size < 1) return;
  const int group = heads / kv_heads;
  if (group < 1 || group * kv_heads != heads || group > (KM ? 8 : 16)) return;  // rejected by kern gen
  const decode::Plan plan =
      decode::plan_of(seqs, kv_heads, max_pages, page_size, target_blocks, splits_max, split_tokens);
  decode::for_each_item(plan, seq_lens, [&](int s, int kvh, int split, const decode::Split& sp) {
    wait_for_previous_grid();
    allow_next_grid();
    range<HD, S, KM>(qkv, q_stride, cache, block_table, max_pages, part_o, part_ml, out, heads, kv_heads, page_size,
                 page_stride, splits_max, scale, group, s, kvh, split, sp);
  });
}

// This warp's tiles i = 0 .. mine - 1 of an item through its ring of S stages: issue(i) starts tile i's
// copy into stage i % S (S - 1 tiles ahead), step(i, the stage's offset in bytes) computes tile i once
// every lane's pieces have landed; the ring is idle on return.
template <int HD, int S, class Issue, class Step>
__device__ __forceinline__ void stream_tiles(int mine, Issue&& issue, Step&& step) {
  constexpr int TE = tile_elems<HD>();
#pragma unroll
  for (int i = 0; i < S - 1; ++i) {
    if (i < mine) issue(i);
    cp_async_commit();
  }
  for (int i = 0; i < mine; ++i) {
    if (i + S - 1 < mine) issue(i + S - 1);  // into the stage tile i − 1 used (freed by the __syncwarp below)
    cp_async_commit();
    cp_async_wait<S - 1>();  // this lane's pieces of tile i have landed
    __syncwarp();            // ... and every other lane's
    step(i, static_cast<uint32_t>((i % S) * 2 * TE * 2));
    __syncwarp();  // every lane is done with stage i % S before it is refilled
  }
  cp_async_wait<0>();
  __syncwarp();
}

// KM: one warp's share of a range (its tiles i = warp, warp + 4, ...) with the key-major products,
// its rows left in its own ring as range() leaves them (o [16][HD], then m [16], l [16]; rows 0-7
// written, those from G on the zero q heads' finite values, rows 8-15 not: the merge reads rows
// below G only).
// issue(i): range()'s copy of this warp's tile i.
template <int HD, int S, class Issue>
__device__ __forceinline__ void range_km_rows(const bf16* __restrict__ qkv, int32_t q_stride, float scale, int group,
                                              int s, int kvh, int begin, int end, int mine, int warp, int lane,
                                              bf16* ring, Issue&& issue) {
  constexpr int KS = HD / 16;
  const int g = lane >> 2, t = lane & 3;
  const uint32_t ring_u32 = smem_u32(ring);
  uint32_t qb[KS][2];
  load_group_qt<HD>(qb, qkv, q_stride, s, kvh, group, g, t);
  float o[KS][4];
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int mt = 0; mt < KS; ++mt) o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.0f;
  const float scale_log2 = scale * kLog2e;
  const uint32_t k_base = ring_u32 + km_k_lane<HD>(lane), v_base = ring_u32 + km_v_lane<HD>(lane);
  stream_tiles<HD, S>(mine, issue, [&](int i, uint32_t st) {
    tile_step_km<HD>(qb, k_base + st, v_base + st, begin + (warp + kWarps * i) * kKeys, end, g, scale_log2, o, m, l);
  });
  float* ws_o = reinterpret_cast<float*>(ring);
  float* ws_m = ws_o + 16 * HD;
  float* ws_l = ws_m + 16;
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    l[c] += __shfl_xor_sync(0xffffffffu, l[c], 4);
    l[c] += __shfl_xor_sync(0xffffffffu, l[c], 8);
    l[c] += __shfl_xor_sync(0xffffffffu, l[c], 16);
    const int row = 2 * t + c;  // q head
#pragma unroll
    for (int mt = 0; mt < KS; ++mt) {
      ws_o[row * HD + mt * 16 + g] = o[mt][c];
      ws_o[row * HD + mt * 16 + g + 8] = o[mt][2 + c];
    }
    if (g == 0) {
      ws_m[row] = m[c];
      ws_l[row] = l[c];
    }
  }
}

// One (sequence s, kv head kvh, range split) item of decode_mma::partial; leaves shared memory free.
template <int HD, int S, bool KM>
__device__ void range(const bf16* __restrict__ qkv, int32_t q_stride, const bf16* __restrict__ cache,
                      const int32_t* __restrict__ block_table, int32_t max_pages, float* __restrict__ part_o,
                      float* __restrict__ part_ml, bf16* __restrict__ out, int32_t heads, int32_t kv_heads,
                      int32_t page_size, int64_t page_stride, int32_t splits_max, float scale, int group, int s,
                      int kvh, int split, const decode::Split& sp) {
  constexpr int TE = tile_elems<HD>();
  constexpr int KS = HD / 16;  // k-steps of Q·Kᵀ
  constexpr int ND = HD / 8;   // n-blocks of the output
  extern __shared__ __align__(128) unsigned char decode_mma_smem[];
  const bool direct = sp.used <= 1;
  const int begin = split * sp.chunk, end = min(sp.len, begin + sp.chunk);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int32_t* pages = block_table + static_cast<int64_t>(s) * max_pages;
  bf16* ring = reinterpret_cast<bf16*>(decode_mma_smem) + static_cast<size_t>(warp) * S * 2 * TE;
  const int tiles = end > begin ? (end - begin + kKeys - 1) / kKeys : 0;
  const int mine = tiles > warp ? (tiles - warp + kWarps - 1) / kWarps : 0;  // this warp's tiles

  // Starts the copy of this warp's tile i (keys begin + (warp + 4 i)·16 ...) into stage i % S.
  const TileCopy<HD> copy(cache, page_stride, page_size, kv_heads, lane);
  const uint32_t ring_u32 = smem_u32(ring);
  auto issue = [&](int i) {
    const int t0 = begin + (warp + kWarps * i) * kKeys;
    copy.issue(ring_u32 + static_cast<uint32_t>((i % S) * 2 * TE * 2), pages, t0, end, kvh);
  };

  if constexpr (KM) {
    range_km_rows<HD, S>(qkv, q_stride, scale, group, s, kvh, begin, end, mine, warp, lane, ring, issue);
  } else {
    uint32_t qf[KS][4];
    load_group_q<HD>(qf, qkv, q_stride, s, kvh, group, g, t);
    float o[ND][4];
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int nd = 0; nd < ND; ++nd) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.0f;
    const float scale_log2 = scale * kLog2e;

    // ldmatrix lane addresses (as the prefill kernel): K rows key nb·8 + (lane & 7), columns + (lane >> 3)·8;
    // V (transposed) rows key ((lane >> 3) & 1)·8 + (lane & 7), columns + (lane >> 4)·8.
    const uint32_t k_base = k_lane_base<HD>(ring, lane), v_base = v_lane_base<HD>(ring, lane);

    stream_tiles<HD, S>(mine, issue, [&](int i, uint32_t st) {
      tile_step<HD>(qf, k_base + st, v_base + st, begin + (warp + kWarps * i) * kKeys, end, t, scale_log2, o, m, l);
    });

    // The warp's rows (sum over the quad), into its own ring: o [16][HD], then m [16], l [16].
    float* ws_o = reinterpret_cast<float*>(ring);
    float* ws_m = ws_o + 16 * HD;
    float* ws_l = ws_m + 16;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
      const int row = g + 8 * h;
#pragma unroll
      for (int nd = 0; nd < ND; ++nd)
        *reinterpret_cast<float2*>(&ws_o[row * HD + nd * 8 + 2 * t]) = make_float2(o[nd][2 * h], o[nd][2 * h + 1]);
      if (t == 0) {
        ws_m[row] = m[h];
        ws_l[row] = l[h];
      }
    }
  }
  __syncthreads();
  // Merge the warps in warp order (as decode::partial_pass).
  constexpr int kWarpFloats = S * 2 * TE / 2;  // a warp's ring, in floats
  const float* ws0 = reinterpret_cast<const float*>(decode_mma_smem);
  for (int e = threadIdx.x; e < group * HD; e += kThreads) {
    const int gg = e / HD, d = e % HD;
    const SoftmaxMerged mg = merge_parts<kWarps>([&](int w) {
      const float* wsw = ws0 + w * kWarpFloats;
      return SoftmaxPart{wsw[16 * HD + gg], wsw[gg * HD + d], wsw[16 * HD + 16 + gg]};
    });
    const float mxw = mg.m, den = mg.den;
    const float r = den > 0.0f ? mg.num / den : 0.0f;
    const int64_t hh = static_cast<int64_t>(s) * heads + kvh * group + gg;
    if (direct) {
      out[hh * HD + d] = to_bf(r);
    } else {
      const int64_t e_split = hh * splits_max + split;
      part_o[e_split * HD + d] = r;
      if (d == 0) {
        part_ml[e_split * 2] = mxw;
        part_ml[e_split * 2 + 1] = den;
      }
    }
  }
  __syncthreads();  // the rings are the next item's
}

}  // namespace decode_mma

}  // namespace

// Tensor-core decode partials (decode_mma above): the ABI, grid and block of kern_attn_decode_partial_hd*,
// plus dynamic shared memory kWarps · S · 2 · 16 · (HD + 8) · 2 bytes: S = 3 stages per warp, 55296 bytes at
// hd 64 and 104448 at hd 128 (two blocks per SM on the H200). The _s2 / _s4 variants (69632 / 139264 bytes
// at hd 128) are tuning points run by the GPU tests only.
//
// KERN_ATTN_DECODE_PARTIAL_ENTRY states the partial kernels' ABI once: an entry NAME with launch bounds
// (THREADS, MIN_BLOCKS) calling the device function FN (parenthesised: it may hold template commas).
#define KERN_ATTN_DECODE_PARTIAL_ENTRY(NAME, THREADS, MIN_BLOCKS, FN)                                            \
  extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)                                             \
      NAME(const bf16* qkv, int32_t q_stride, const bf16* cache, const int32_t* block_table, int32_t max_pages, \
           const int32_t* seq_lens, float* part_o, float* part_ml, bf16* out, int32_t seqs, int32_t heads,      \
           int32_t kv_heads, int32_t page_size, int64_t page_stride, int32_t splits_max, int32_t target_blocks, \
           int32_t split_tokens, float scale) {                                                                 \
    FN(qkv, q_stride, cache, block_table, max_pages, seq_lens, part_o, part_ml, out, seqs, heads, kv_heads,      \
       page_size, page_stride, splits_max, target_blocks, split_tokens, scale);                                 \
  }
#define KERN_ATTN_DECODE_MMA_ENTRY(NAME, HD, S) \
  KERN_ATTN_DECODE_PARTIAL_ENTRY(NAME, decode_mma::kThreads, 2, (decode_mma::partial<HD, S>))
// The same with the key-major products (partial's KM; G <= 8).
#define KERN_ATTN_DECODE_MMA_KM_ENTRY(NAME, HD, S) \
  KERN_ATTN_DECODE_PARTIAL_ENTRY(NAME, decode_mma::kThreads, 2, (decode_mma::partial<HD, S, true>))
