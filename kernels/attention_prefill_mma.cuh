// The chunked-prefill attention template (entries: attention_prefill.cu; tuning variants:
// tests/gpu/kernels/test_attention_prefill.cu). Chunked-prefill paged attention on tensor cores (flash-attention-2
// style, mma.sync m16n8k16 bf16, f32 accumulate), over the KV layout documented in rope.cu (and docs/kernels.md).
//
// A block serves one kv head and up to kBM queries of it: consecutive rows of one sequence times
// all G = heads / kv_heads q heads of that kv head (query qi = row (qi / G), q head kvh*G + qi % G),
// so each K/V tile is read once for all of them. Each warp owns 16 queries (one m16 tile). Keys
// stream through shared memory in tiles of kBN tokens (cp.async; K of tile j+1 loads while tile j's
// softmax and P·V run, V of tile j while its Q·Kᵀ runs), with an online softmax in f32 (log2
// units); P is rounded to bf16 for the P·V product, as in flash-attention.
//
// Semantics (as kern_attn_prefill_hd*): row r of sequence s (by cu_seqlens) attends to keys
// [0, min(positions[r] + 1, seq_lens[s])) of s through the block table; the chunk's own K/V must
// already be in the cache (kern_qk_norm_rope_cache_bf16 runs first). Rows outside every sequence
// give zeros.
//
// Row invariance: a query's result does not depend on which other queries share its block, so a
// row comes out bitwise identical however the rows are cut into calls. Every query walks the key
// tiles [0, kBN), [kBN, 2 kBN), ... from key 0 in the same order; each mma output row and each
// softmax row is computed by a fixed sequence of operations on that row's data only (its position
// in the warp or the block changes which lanes hold it, not the arithmetic). A key the query may not
// see scores -inf, so its p is exactly 0; a tile that holds no key the query may see leaves it
// unchanged (running max unchanged, alpha = exp2(0) = 1, l += 0, o += 0·V). Keys past the block's
// last visible key are zero-filled in shared memory (never read), so the V a masked p multiplies is
// always finite cache data or zero. A warp skips a tile where none of its 16 queries sees a key.
#pragma once

#include "mma.cuh"
#include "paged_kv.cuh"
#include "softmax.cuh"

using namespace kern_dev;

namespace {

// The 16-byte pieces of tile keys [t0, t0 + kBN) of kv head kvh, spread over the block's kThreads
// threads: each thread calls piece(r, part, src, valid) for key t0 + r, piece `part` of its head_dim,
// src its K piece in the cache (the V piece is src + v_offset) when valid (key < kend), else the cache
// base. The tile copy of the prefill kernels whose math warps copy (they differ only in where a piece
// lands); the warp-specialised kernel's producer maps its pieces otherwise, to issue a group's page
// lookups together (attention_prefill_wgmma_ws.cuh).
template <int HD, int kBN, int kThreads, class Piece>
__device__ __forceinline__ void for_each_tile_piece(const PagedKv& kv, int kvh, int t0, int kend, Piece&& piece) {
  constexpr int kChunks = HD / 8;  // 16-byte pieces per key row
#pragma unroll
  for (int c = threadIdx.x; c < kBN * kChunks; c += kThreads) {
    const int r = c / kChunks, part = c % kChunks;
    const int j = t0 + r;
    const bool valid = j < kend;
    const bf16* src = kv.cache;
    if (valid) {
      int64_t page, row;
      page_of(kv, j, page, row);
      src = kv.cache + kv_offset<HD>(kv, page, row, kvh) + part * 8;
    }
    piece(r, part, src, valid);
  }
}

// Starts the copy of tile keys [t0, t0 + kBN) of kv head kvh into dst_k (K) and, when dst_v is not
// null, the same keys' V into dst_v (one address computation for both); keys at or past kend are
// zero-filled.
template <int HD, int kBN, int kThreads>
__device__ __forceinline__ void load_tile(bf16* dst_k, bf16* dst_v, const PagedKv& kv, int kvh, int t0, int kend,
                                          int64_t v_offset) {
  for_each_tile_piece<HD, kBN, kThreads>(kv, kvh, t0, kend, [&](int r, int part, const bf16* src, bool valid) {
    const int at = r * (HD + 8) + part * 8;
    if (dst_k != nullptr) cp_async16(smem_u32(dst_k + at), src, valid);
    if (dst_v != nullptr) cp_async16(smem_u32(dst_v + at), valid ? src + v_offset : kv.cache, valid);
  });
}

// End of the keys row r of sequence s may see: min(positions[r] + 1, seq_len), within [0, cap].
__device__ __forceinline__ int key_end(const int64_t* __restrict__ positions, int r, int seq_len, int64_t cap) {
  int64_t e = positions[r] + 1;
  e = e < seq_len ? e : seq_len;
  e = e < cap ? e : cap;
  return e > 0 ? static_cast<int>(e) : 0;
}

// The sequence holding row a (cu_seqlens[s] <= a < cu_seqlens[s + 1]), or -1 when none does.
// Binary search for the last s with cu_seqlens[s] <= a (empty sequences are skipped that way).
__device__ __forceinline__ int sequence_of(const int32_t* __restrict__ cu_seqlens, int seqs, int a) {
  int lo = 0, hi = seqs;  // answer in [lo, hi)
  if (seqs < 1 || cu_seqlens[0] > a) return -1;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (cu_seqlens[mid] <= a)
      lo = mid;
    else
      hi = mid;
  }
  return a < cu_seqlens[lo + 1] ? lo : -1;
}

// Shared-memory tiles of one block: K and V tiles [kBN][HD + 8] bf16 and, when the Q fragments
// are not kept in registers, the block's Q tile [kWarps * 16 * MT][HD + 8].
template <int HD, int kBN>
__host__ __device__ constexpr int tile_elems() {
  return kBN * (HD + 8);
}
template <int HD, int kWarps, int MT>
__host__ __device__ constexpr int q_tile_elems() {
  return kWarps * 16 * MT * (HD + 8);
}

// Attends queries of rows [a, a + nq / G) (nq = rows * G <= 16 * MT * kWarps) of sequence s to kv
// head kvh. Each warp owns MT m16 tiles of queries (16 * MT consecutive queries). MT == 1 keeps the
// warp's Q fragments in registers; MT == 2 stages Q in shared memory (sq) and reuses each K/V
// fragment read from shared memory for both m16 tiles.
template <int HD, int kWarps, int MT, int kBN, int kStages>
__device__ __forceinline__ void attend_segment(bf16* sk, bf16* sv, bf16* sq, int* red, const bf16* __restrict__ qkv,
                                               int32_t q_stride, const PagedKv& kv,
                                               const int64_t* __restrict__ positions, bf16* __restrict__ out, int a,
                                               int nq, int G, int seq_len, int64_t cap, int heads, int kvh,
                                               float scale_log2) {
  constexpr int kThreads = kWarps * 32;
  constexpr int kStride = HD + 8;
  constexpr int KS = HD / 16;   // k-steps of Q·Kᵀ
  constexpr int NB = kBN / 8;   // n-blocks of a score tile
  constexpr int ND = HD / 8;    // n-blocks of the output
  constexpr int KK = kBN / 16;  // k-steps of P·V
  constexpr bool kQInSmem = MT > 1;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int rows = nq / G;

  // Block-wide last key: the largest end among the segment's rows.
  int mine = 0;
  for (int i = threadIdx.x; i < rows; i += kThreads) mine = max(mine, key_end(positions, a + i, seq_len, cap));
  mine = __reduce_max_sync(0xffffffffu, mine);
  if (lane == 0) red[warp] = mine;
  __syncthreads();
  int kend = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) kend = max(kend, red[w]);

  // This thread's queries: rows g and g + 8 of each of the warp's m16 tiles.
  int q_idx[MT][2], q_end[MT][2];
  int warp_end = 0;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int qi = (warp * MT + mt) * 16 + g + 8 * h;
      q_idx[mt][h] = qi;
      q_end[mt][h] = qi < nq ? key_end(positions, a + qi / G, seq_len, cap) : 0;
      warp_end = max(warp_end, q_end[mt][h]);
    }
  warp_end = __reduce_max_sync(0xffffffffu, warp_end);

  // Q: fragments in registers (MT == 1), or the block's Q tile staged in shared memory.
  uint32_t qf[kQInSmem ? 1 : KS][4];
  if constexpr (!kQInSmem) {
    const int qa = q_idx[0][0], qb = q_idx[0][1];
    const bf16* pa = qa < nq ? qkv + static_cast<int64_t>(a + qa / G) * q_stride + (kvh * G + qa % G) * HD : nullptr;
    const bf16* pb = qb < nq ? qkv + static_cast<int64_t>(a + qb / G) * q_stride + (kvh * G + qb % G) * HD : nullptr;
    load_a_fragments(qf, pa, pb, t);
  } else {
    constexpr int kChunks = HD / 8;
    for (int c = threadIdx.x; c < kWarps * 16 * MT * kChunks; c += kThreads) {
      const int qi = c / kChunks, part = c % kChunks;
      const bool valid = qi < nq;
      const bf16* src =
          valid ? qkv + static_cast<int64_t>(a + qi / G) * q_stride + (kvh * G + qi % G) * HD + part * 8 : qkv;
      cp_async16(smem_u32(sq + qi * kStride + part * 8), src, valid);
    }
  }

  float o[MT][ND][4];
  float m[MT][2], l[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int nd = 0; nd < ND; ++nd) o[mt][nd][0] = o[mt][nd][1] = o[mt][nd][2] = o[mt][nd][3] = 0.0f;
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.0f;
  }

  const int64_t v_offset = v_block_elems(kv.page_size, kv.kv_heads, HD);
  const int ntiles = (kend + kBN - 1) / kBN;
  // ldmatrix lane addresses: K (non-transposed) rows key nb*8 + (lane & 7), columns + (lane >> 3) * 8;
  // V (transposed) rows key kk*16 + ((lane >> 3) & 1) * 8 + (lane & 7), columns + (lane >> 4) * 8;
  // Q (A operand) rows query (lane & 15), columns + (lane >> 4) * 8.
  const uint32_t k_base = smem_u32(sk) + ((lane & 7) * kStride + (lane >> 3) * 8) * 2;
  const uint32_t v_base = smem_u32(sv) + ((((lane >> 3) & 1) * 8 + (lane & 7)) * kStride + (lane >> 4) * 8) * 2;
  const uint32_t q_base = smem_u32(sq) + ((warp * MT * 16 + (lane & 15)) * kStride + (lane >> 4) * 8) * 2;

  // kStages == 1: one K and one V buffer (V of tile j loads during its Q·Kᵀ, K of tile j + 1 during
  // its softmax and P·V). kStages == 2: two of each; tile j + 1 loads while tile j is computed.
  constexpr int kTileElems = tile_elems<HD, kBN>();
  if (ntiles > 0) {
    load_tile<HD, kBN, kThreads>(sk, kStages == 2 ? sv : nullptr, kv, kvh, 0, kend, v_offset);
  }
  cp_async_commit();  // (with the Q tile when staged)
  for (int j = 0; j < ntiles; ++j) {
    const int t0 = j * kBN;
    const int st = kStages == 2 ? (j & 1) : 0;
    if constexpr (kStages == 1) {
      load_tile<HD, kBN, kThreads>(nullptr, sv, kv, kvh, t0, kend, v_offset);
    } else if (j + 1 < ntiles) {
      load_tile<HD, kBN, kThreads>(sk + (st ^ 1) * kTileElems, sv + (st ^ 1) * kTileElems, kv, kvh, t0 + kBN, kend,
                                   v_offset);
    }
    cp_async_commit();
    cp_async_wait<1>();  // K (and with two stages V) of tile j
    __syncthreads();
    const bool active = t0 < warp_end;
    float sc[MT][NB][4];
    if (active) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nb = 0; nb < NB; ++nb) sc[mt][nb][0] = sc[mt][nb][1] = sc[mt][nb][2] = sc[mt][nb][3] = 0.0f;
#pragma unroll
      for (int ks = 0; ks < KS; ks += 2) {
        uint32_t qs[MT][2][4];
        if constexpr (kQInSmem) {
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h)
              ldsm_x4(q_base + (mt * 16 * kStride + (ks + h) * 16) * 2, qs[mt][h][0], qs[mt][h][1], qs[mt][h][2],
                      qs[mt][h][3]);
        }
#pragma unroll
        for (int nb = 0; nb < NB; ++nb) {
          uint32_t b0, b1, b2, b3;
          ldsm_x4(k_base + (st * kTileElems + nb * 8 * kStride + ks * 16) * 2, b0, b1, b2, b3);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            if constexpr (kQInSmem) {
              mma_bf16(sc[mt][nb], qs[mt][0], b0, b1);
              mma_bf16(sc[mt][nb], qs[mt][1], b2, b3);
            } else {
              mma_bf16(sc[mt][nb], qf[ks], b0, b1);
              mma_bf16(sc[mt][nb], qf[ks + 1], b2, b3);
            }
          }
        }
      }
    }
    if constexpr (kStages == 1) {
      __syncthreads();  // every warp is done with K of tile j
      if (j + 1 < ntiles) load_tile<HD, kBN, kThreads>(sk, nullptr, kv, kvh, t0 + kBN, kend, v_offset);
      cp_async_commit();
    }

    uint32_t pf[MT][KK][4];
    if (active) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        // Scores in log2 units; keys a query may not see score -inf.
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nb = 0; nb < NB; ++nb)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = t0 + nb * 8 + 2 * t + (e & 1);
            const float s = sc[mt][nb][e] * scale_log2;
            sc[mt][nb][e] = key < q_end[mt][e >> 1] ? s : -INFINITY;
            mx[e >> 1] = fmaxf(mx[e >> 1], sc[mt][nb][e]);
          }
        float base[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
          mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
          const float mn = fmaxf(m[mt][h], mx[h]);
          // While a query has seen no key its max is -inf: subtract 0 instead (every p is 0 then).
          base[h] = mn == -INFINITY ? 0.0f : mn;
          const float alpha = online_rescale(m[mt][h], l[mt][h], mn, base[h]);
#pragma unroll
          for (int nd = 0; nd < ND; ++nd) {
            o[mt][nd][2 * h] *= alpha;
            o[mt][nd][2 * h + 1] *= alpha;
          }
        }
#pragma unroll
        for (int nb = 0; nb < NB; ++nb)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            sc[mt][nb][e] = exp2f(sc[mt][nb][e] - base[e >> 1]);
            sum[e >> 1] += sc[mt][nb][e];
          }
        l[mt][0] += sum[0];
        l[mt][1] += sum[1];
        // P as the A operand of P·V: k-step kk covers keys kk*16 .. kk*16 + 15 of the tile.
#pragma unroll
        for (int kk = 0; kk < KK; ++kk) {
          pf[mt][kk][0] = pack_bf16x2(sc[mt][2 * kk][0], sc[mt][2 * kk][1]);
          pf[mt][kk][1] = pack_bf16x2(sc[mt][2 * kk][2], sc[mt][2 * kk][3]);
          pf[mt][kk][2] = pack_bf16x2(sc[mt][2 * kk + 1][0], sc[mt][2 * kk + 1][1]);
          pf[mt][kk][3] = pack_bf16x2(sc[mt][2 * kk + 1][2], sc[mt][2 * kk + 1][3]);
        }
      }
    }
    if constexpr (kStages == 1) {
      cp_async_wait<1>();  // V of tile j (K of tile j + 1 may still be in flight)
      __syncthreads();
    }
    if (active) {
#pragma unroll
      for (int kk = 0; kk < KK; ++kk) {
#pragma unroll
        for (int nd = 0; nd < ND; nd += 2) {
          uint32_t b0, b1, b2, b3;
          ldsm_x4_trans(v_base + (st * kTileElems + kk * 16 * kStride + nd * 8) * 2, b0, b1, b2, b3);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma_bf16(o[mt][nd], pf[mt][kk], b0, b1);
            mma_bf16(o[mt][nd + 1], pf[mt][kk], b2, b3);
          }
        }
      }
    }
    __syncthreads();  // every warp is done with the tile-j buffers
  }
  cp_async_wait<0>();
  __syncthreads();  // red and the tiles are free for the next segment

#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = l[mt][h];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
      const int qi = q_idx[mt][h];
      if (qi < nq) {
        bf16* dst = out + (static_cast<int64_t>(a + qi / G) * heads + kvh * G + qi % G) * HD + 2 * t;
#pragma unroll
        for (int nd = 0; nd < ND; ++nd)
          *reinterpret_cast<uint32_t*>(dst + nd * 8) = pack_bf16x2(o[mt][nd][2 * h] * inv, o[mt][nd][2 * h + 1] * inv);
      }
    }
}

// A block's rows (every prefill attention kernel's outer loop): kv head blockIdx.y, rows
// [first_row + tile · rows_per_block, + rows_per_block) with tile = gridDim.x − 1 − blockIdx.x (blocks
// run last rows first: with causal prefill those have the most keys, so the longest blocks start
// first), cut into runs of one sequence of at most kBM / G rows, each handed to
// segment(kv, a, nq = rows · G, G, seq_len, cap, kvh); rows outside every sequence get zeros.
template <int HD, int kBM, int kThreads, class Segment>
__device__ __forceinline__ void for_each_segment(const bf16* __restrict__ cache,
                                                 const int32_t* __restrict__ block_table, int32_t max_pages,
                                                 const int32_t* __restrict__ seq_lens,
                                                 const int32_t* __restrict__ cu_seqlens, bf16* __restrict__ out,
                                                 int32_t rows, int32_t seqs, int32_t heads, int32_t kv_heads,
                                                 int32_t page_size, int64_t page_stride, int32_t rows_per_block,
                                                 int32_t first_row, Segment&& segment) {
  const int kvh = blockIdx.y;
  if (kvh >= kv_heads || rows_per_block < 1 || page_size < 1) return;
  const int G = heads / kv_heads;
  if (G < 1 || G > kBM || G * kv_heads != heads) return;  // unsupported grouping (rejected by kern gen)
  const int max_rows = kBM / G;                           // rows attended together (they share each K/V tile)
  const int64_t cap = static_cast<int64_t>(max_pages) * page_size;
  const int64_t tile = static_cast<int64_t>(gridDim.x) - 1 - blockIdx.x;
  if (first_row < 0) return;
  const int64_t r0 = first_row + tile * rows_per_block;
  if (r0 >= rows) return;
  const int r1 = static_cast<int>(r0 + rows_per_block < rows ? r0 + rows_per_block : rows);
  for (int a = static_cast<int>(r0); a < r1;) {
    const int s = sequence_of(cu_seqlens, seqs, a);
    if (s < 0) {  // a row outside every sequence: zeros
      bf16* dst = out + (static_cast<int64_t>(a) * heads + kvh * G) * HD;
      for (int i = threadIdx.x; i < G * HD; i += kThreads) dst[i] = to_bf(0.0f);
      ++a;
      continue;
    }
    const int b = min(r1, min(cu_seqlens[s + 1], a + max_rows));
    const PagedKv kv{cache,       block_table + static_cast<int64_t>(s) * max_pages,
                     page_size,   kv_heads,
                     page_stride, page_shift_of(page_size)};
    segment(kv, a, (b - a) * G, G, seq_lens[s], cap, kvh);
    a = b;
  }
}

// Shared memory: static when the Q fragments live in registers (MT == 1), else dynamic
// (Q tile + K tile + V tile, launched with prefill_mma_smem_bytes(HD, kWarps, MT) bytes).
template <int HD, int kWarps, int MT, int kBN, int kStages>
__device__ __forceinline__ void prefill_mma(const bf16* __restrict__ qkv, int32_t q_stride,
                                            const bf16* __restrict__ cache, const int32_t* __restrict__ block_table,
                                            int32_t max_pages, const int32_t* __restrict__ seq_lens,
                                            const int32_t* __restrict__ cu_seqlens,
                                            const int64_t* __restrict__ positions, bf16* __restrict__ out, int32_t rows,
                                            int32_t seqs, int32_t heads, int32_t kv_heads, int32_t page_size,
                                            int64_t page_stride, float scale, int32_t rows_per_block,
                                            int32_t first_row) {
  __shared__ int red[kWarps];
  bf16 *sk, *sv, *sq;
  if constexpr (MT == 1 && kStages == 1) {
    __shared__ __align__(128) bf16 tiles[2 * tile_elems<HD, kBN>()];
    sk = tiles;
    sv = tiles + tile_elems<HD, kBN>();
    sq = tiles;  // unused
  } else {
    extern __shared__ __align__(128) unsigned char dyn_smem[];
    sq = reinterpret_cast<bf16*>(dyn_smem);
    sk = sq + (MT > 1 ? q_tile_elems<HD, kWarps, MT>() : 0);
    sv = sk + kStages * tile_elems<HD, kBN>();
  }
  constexpr int kBM = kWarps * 16 * MT;
  for_each_segment<HD, kBM, kWarps * 32>(
      cache, block_table, max_pages, seq_lens, cu_seqlens, out, rows, seqs, heads, kv_heads, page_size, page_stride,
      rows_per_block, first_row,
      [&](const PagedKv& kv, int a, int nq, int G, int seq_len, int64_t cap, int kvh) {
        attend_segment<HD, kWarps, MT, kBN, kStages>(sk, sv, sq, red, qkv, q_stride, kv, positions, out, a, nq, G,
                                                     seq_len, cap, heads, kvh, scale * kLog2e);
      });
}

}  // namespace

// qkv rows: row i at qkv + i*q_stride, q heads first; out [rows, heads*HD] bf16. Rows below first_row
// are neither read nor written (a mixed step's decode rows, which the decode kernel takes): block
// tiles start at first_row, and blocks whose tile starts at or past `rows` return at once.
// grid: (ceil_div(rows, rows_per_block), kv_heads, 1), block (WARPS*32, 1, 1). Shared-memory rows
// are padded by 16 bytes (HD + 8 elements) so ldmatrix reads hit distinct banks.
#define KERN_ATTN_PREFILL_MMA_ENTRY(NAME, HD, WARPS, MT, BN, STAGES, MINB)                                             \
  extern "C" __global__ void __launch_bounds__(WARPS * 32, MINB)                                                       \
      NAME(const bf16* qkv, int32_t q_stride, const bf16* cache, const int32_t* block_table, int32_t max_pages,        \
           const int32_t* seq_lens, const int32_t* cu_seqlens, const int64_t* positions, bf16* out, int32_t rows,      \
           int32_t seqs, int32_t heads, int32_t kv_heads, int32_t page_size, int64_t page_stride, float scale,         \
           int32_t rows_per_block, int32_t first_row) {                                                                \
    prefill_mma<HD, WARPS, MT, BN, STAGES>(qkv, q_stride, cache, block_table, max_pages, seq_lens, cu_seqlens,         \
                                           positions, out, rows, seqs, heads, kv_heads, page_size, page_stride, scale, \
                                           rows_per_block, first_row);                                                 \
  }
