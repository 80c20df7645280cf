// Chunked-prefill paged attention on tensor cores (flash-attention-2 style, mma.sync m16n8k16 bf16,
// f32 accumulate), over the KV layout documented in rope.cu (and docs/kernels.md).
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
#include "common.cuh"

using namespace kern_dev;

namespace {

constexpr int kBN = 64;  // keys per tile
constexpr float kLog2e = 1.4426950408889634f;

template <int HD>
struct Tiles {
  static constexpr int kStride = HD + 8;  // 16-byte pad: ldmatrix rows hit distinct banks
  bf16 k[kBN * kStride];
  bf16 v[kBN * kStride];
};

struct PagedKv {
  const bf16* cache;     // layer base
  const int32_t* pages;  // block-table row of this sequence
  int32_t page_size;
  int32_t kv_heads;
  int64_t page_stride;   // elements between consecutive pages
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared; when !valid nothing is read and the destination is zero-filled.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr)
               : "memory");
}

// c += a·b for one m16n8k16 tile (a: 4 regs of bf16x2, row-major; b: 2 regs, col-major).
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ __forceinline__ uint32_t load_u32(const bf16* p) { return *reinterpret_cast<const uint32_t*>(p); }

// Starts the copy of tile keys [t0, t0 + kBN) of kv head kvh (K block, or V block with v_offset)
// into dst; keys at or past kend are zero-filled.
template <int HD, int kThreads>
__device__ __forceinline__ void load_tile(bf16* dst, const PagedKv& kv, int kvh, int t0, int kend, int64_t v_offset) {
  constexpr int kChunks = HD / 8;  // 16-byte pieces per key row
#pragma unroll
  for (int c = threadIdx.x; c < kBN * kChunks; c += kThreads) {
    const int r = c / kChunks, part = c % kChunks;
    const int j = t0 + r;
    const bool valid = j < kend;
    const bf16* src = kv.cache;
    if (valid) {
      const int64_t page = kv.pages[j / kv.page_size];
      src = kv.cache + page * kv.page_stride + v_offset +
            (static_cast<int64_t>(j % kv.page_size) * kv.kv_heads + kvh) * HD + part * 8;
    }
    cp_async16(smem_u32(dst + r * Tiles<HD>::kStride + part * 8), src, valid);
  }
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
    if (cu_seqlens[mid] <= a) lo = mid;
    else hi = mid;
  }
  return a < cu_seqlens[lo + 1] ? lo : -1;
}

// Attends queries of rows [a, a + nq / G) (nq = rows * G <= 16 * kWarps) of sequence s to kv head kvh.
template <int HD, int kWarps>
__device__ __forceinline__ void attend_segment(Tiles<HD>& sm, int* red, const bf16* __restrict__ qkv, int32_t q_stride,
                                               const PagedKv& kv, const int64_t* __restrict__ positions,
                                               bf16* __restrict__ out, int a, int nq, int G, int seq_len, int64_t cap,
                                               int heads, int kvh, float scale_log2) {
  constexpr int kThreads = kWarps * 32;
  constexpr int KS = HD / 16;   // k-steps of Q·Kᵀ
  constexpr int NB = kBN / 8;   // n-blocks of a score tile
  constexpr int ND = HD / 8;    // n-blocks of the output
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

  // This thread's two queries (rows g and g + 8 of the warp's m16 tile).
  const int qa = warp * 16 + g, qb = qa + 8;
  const int end_a = qa < nq ? key_end(positions, a + qa / G, seq_len, cap) : 0;
  const int end_b = qb < nq ? key_end(positions, a + qb / G, seq_len, cap) : 0;
  const int warp_end = __reduce_max_sync(0xffffffffu, max(end_a, end_b));

  uint32_t qf[KS][4];
  {
    const bf16* pa = qa < nq ? qkv + static_cast<int64_t>(a + qa / G) * q_stride + (kvh * G + qa % G) * HD : nullptr;
    const bf16* pb = qb < nq ? qkv + static_cast<int64_t>(a + qb / G) * q_stride + (kvh * G + qb % G) * HD : nullptr;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      const int d = ks * 16 + 2 * t;
      qf[ks][0] = pa != nullptr ? load_u32(pa + d) : 0u;
      qf[ks][1] = pb != nullptr ? load_u32(pb + d) : 0u;
      qf[ks][2] = pa != nullptr ? load_u32(pa + d + 8) : 0u;
      qf[ks][3] = pb != nullptr ? load_u32(pb + d + 8) : 0u;
    }
  }

  float o[ND][4];
#pragma unroll
  for (int nd = 0; nd < ND; ++nd) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.0f;
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;

  const int64_t v_offset = static_cast<int64_t>(kv.page_size) * kv.kv_heads * HD;
  const int ntiles = (kend + kBN - 1) / kBN;
  // ldmatrix lane addresses: K (non-transposed) rows key nb*8 + (lane & 7), columns + (lane >> 3) * 8;
  // V (transposed) rows key kk*16 + ((lane >> 3) & 1) * 8 + (lane & 7), columns + (lane >> 4) * 8.
  const uint32_t k_base = smem_u32(sm.k) + ((lane & 7) * Tiles<HD>::kStride + (lane >> 3) * 8) * 2;
  const uint32_t v_base =
      smem_u32(sm.v) + ((((lane >> 3) & 1) * 8 + (lane & 7)) * Tiles<HD>::kStride + (lane >> 4) * 8) * 2;

  if (ntiles > 0) load_tile<HD, kThreads>(sm.k, kv, kvh, 0, kend, 0);
  cp_async_commit();
  for (int j = 0; j < ntiles; ++j) {
    const int t0 = j * kBN;
    load_tile<HD, kThreads>(sm.v, kv, kvh, t0, kend, v_offset);
    cp_async_commit();
    cp_async_wait<1>();  // K of tile j
    __syncthreads();
    const bool active = t0 < warp_end;
    float sc[NB][4];
    if (active) {
#pragma unroll
      for (int nb = 0; nb < NB; ++nb) {
        sc[nb][0] = sc[nb][1] = sc[nb][2] = sc[nb][3] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < KS; ks += 2) {
          uint32_t b0, b1, b2, b3;
          ldsm_x4(k_base + (nb * 8 * Tiles<HD>::kStride + ks * 16) * 2, b0, b1, b2, b3);
          mma_bf16(sc[nb], qf[ks], b0, b1);
          mma_bf16(sc[nb], qf[ks + 1], b2, b3);
        }
      }
    }
    __syncthreads();  // every warp is done with K of tile j
    if (j + 1 < ntiles) load_tile<HD, kThreads>(sm.k, kv, kvh, t0 + kBN, kend, 0);
    cp_async_commit();

    uint32_t pf[kBN / 16][4];
    if (active) {
      // Scores in log2 units; keys a query may not see score -inf.
      float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
      for (int nb = 0; nb < NB; ++nb) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = t0 + nb * 8 + 2 * t + (e & 1);
          const float s = sc[nb][e] * scale_log2;
          sc[nb][e] = key < (e < 2 ? end_a : end_b) ? s : -INFINITY;
        }
        mx_a = fmaxf(mx_a, fmaxf(sc[nb][0], sc[nb][1]));
        mx_b = fmaxf(mx_b, fmaxf(sc[nb][2], sc[nb][3]));
      }
      mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 1));
      mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 2));
      mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 1));
      mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 2));
      const float mn_a = fmaxf(m_a, mx_a), mn_b = fmaxf(m_b, mx_b);
      // While a query has seen no key its max is -inf: subtract 0 instead (every p is 0 then).
      const float base_a = mn_a == -INFINITY ? 0.0f : mn_a, base_b = mn_b == -INFINITY ? 0.0f : mn_b;
      const float alpha_a = exp2f(m_a - base_a), alpha_b = exp2f(m_b - base_b);
      m_a = mn_a;
      m_b = mn_b;
      float sum_a = 0.0f, sum_b = 0.0f;
#pragma unroll
      for (int nb = 0; nb < NB; ++nb) {
        sc[nb][0] = exp2f(sc[nb][0] - base_a);
        sc[nb][1] = exp2f(sc[nb][1] - base_a);
        sc[nb][2] = exp2f(sc[nb][2] - base_b);
        sc[nb][3] = exp2f(sc[nb][3] - base_b);
        sum_a += sc[nb][0] + sc[nb][1];
        sum_b += sc[nb][2] + sc[nb][3];
      }
      l_a = l_a * alpha_a + sum_a;
      l_b = l_b * alpha_b + sum_b;
#pragma unroll
      for (int nd = 0; nd < ND; ++nd) {
        o[nd][0] *= alpha_a;
        o[nd][1] *= alpha_a;
        o[nd][2] *= alpha_b;
        o[nd][3] *= alpha_b;
      }
      // P as the A operand of P·V: k-step kk covers keys kk*16 .. kk*16 + 15 of the tile.
#pragma unroll
      for (int kk = 0; kk < kBN / 16; ++kk) {
        pf[kk][0] = pack_bf16x2(sc[2 * kk][0], sc[2 * kk][1]);
        pf[kk][1] = pack_bf16x2(sc[2 * kk][2], sc[2 * kk][3]);
        pf[kk][2] = pack_bf16x2(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
        pf[kk][3] = pack_bf16x2(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
      }
    }
    cp_async_wait<1>();  // V of tile j (K of tile j + 1 may still be in flight)
    __syncthreads();
    if (active) {
#pragma unroll
      for (int kk = 0; kk < kBN / 16; ++kk) {
#pragma unroll
        for (int nd = 0; nd < ND; nd += 2) {
          uint32_t b0, b1, b2, b3;
          ldsm_x4_trans(v_base + (kk * 16 * Tiles<HD>::kStride + nd * 8) * 2, b0, b1, b2, b3);
          mma_bf16(o[nd], pf[kk], b0, b1);
          mma_bf16(o[nd + 1], pf[kk], b2, b3);
        }
      }
    }
    __syncthreads();  // every warp is done with V of tile j
  }
  cp_async_wait<0>();
  __syncthreads();  // red and the tiles are free for the next segment

  l_a += __shfl_xor_sync(0xffffffffu, l_a, 1);
  l_a += __shfl_xor_sync(0xffffffffu, l_a, 2);
  l_b += __shfl_xor_sync(0xffffffffu, l_b, 1);
  l_b += __shfl_xor_sync(0xffffffffu, l_b, 2);
  const float inv_a = l_a > 0.0f ? 1.0f / l_a : 0.0f, inv_b = l_b > 0.0f ? 1.0f / l_b : 0.0f;
  if (qa < nq) {
    bf16* dst = out + (static_cast<int64_t>(a + qa / G) * heads + kvh * G + qa % G) * HD + 2 * t;
#pragma unroll
    for (int nd = 0; nd < ND; ++nd)
      *reinterpret_cast<uint32_t*>(dst + nd * 8) = pack_bf16x2(o[nd][0] * inv_a, o[nd][1] * inv_a);
  }
  if (qb < nq) {
    bf16* dst = out + (static_cast<int64_t>(a + qb / G) * heads + kvh * G + qb % G) * HD + 2 * t;
#pragma unroll
    for (int nd = 0; nd < ND; ++nd)
      *reinterpret_cast<uint32_t*>(dst + nd * 8) = pack_bf16x2(o[nd][2] * inv_b, o[nd][3] * inv_b);
  }
}

template <int HD, int kWarps>
__device__ __forceinline__ void prefill_mma(const bf16* __restrict__ qkv, int32_t q_stride, const bf16* __restrict__ cache,
                                            const int32_t* __restrict__ block_table, int32_t max_pages,
                                            const int32_t* __restrict__ seq_lens, const int32_t* __restrict__ cu_seqlens,
                                            const int64_t* __restrict__ positions, bf16* __restrict__ out, int32_t rows,
                                            int32_t seqs, int32_t heads, int32_t kv_heads, int32_t page_size,
                                            int64_t page_stride, float scale, int32_t rows_per_block) {
  __shared__ __align__(128) Tiles<HD> sm;
  __shared__ int red[kWarps];
  constexpr int kBM = kWarps * 16;
  const int kvh = blockIdx.y;
  if (kvh >= kv_heads || rows_per_block < 1 || page_size < 1) return;
  const int G = heads / kv_heads;
  if (G < 1 || G > kBM || G * kv_heads != heads) return;  // unsupported grouping (rejected by kern gen)
  const int max_rows = kBM / G;  // rows attended together (they share each K/V tile)
  const int64_t cap = static_cast<int64_t>(max_pages) * page_size;
  const float scale_log2 = scale * kLog2e;
  // Blocks run in reverse row order: with causal prefill the last rows have the most keys, so the
  // longest blocks start first.
  const int64_t tile = static_cast<int64_t>(gridDim.x) - 1 - blockIdx.x;
  const int64_t r0 = tile * rows_per_block;
  if (r0 >= rows) return;
  const int r1 = static_cast<int>(r0 + rows_per_block < rows ? r0 + rows_per_block : rows);
  for (int a = static_cast<int>(r0); a < r1;) {
    const int s = sequence_of(cu_seqlens, seqs, a);
    if (s < 0) {  // a row outside every sequence: zeros
      bf16* dst = out + (static_cast<int64_t>(a) * heads + kvh * G) * HD;
      for (int i = threadIdx.x; i < G * HD; i += kWarps * 32) dst[i] = to_bf(0.0f);
      ++a;
      continue;
    }
    const int b = min(r1, min(cu_seqlens[s + 1], a + max_rows));
    const PagedKv kv{cache, block_table + static_cast<int64_t>(s) * max_pages, page_size, kv_heads, page_stride};
    attend_segment<HD, kWarps>(sm, red, qkv, q_stride, kv, positions, out, a, (b - a) * G, G, seq_lens[s], cap, heads,
                               kvh, scale_log2);
    a = b;
  }
}

}  // namespace

// qkv rows: row i at qkv + i*q_stride, q heads first; out [rows, heads*HD] bf16.
// grid: (ceil_div(rows, rows_per_block), kv_heads, 1), block (kWarps*32, 1, 1); static shared memory
// only (2 * 64 * (HD + 8) * 2 bytes). kern gen uses rows_per_block = kWarps*16 / G.
#define KERN_ATTN_PREFILL_MMA_ENTRY(NAME, HD, WARPS, MINB)                                                          \
  extern "C" __global__ void __launch_bounds__(WARPS * 32, MINB) NAME(                                               \
      const bf16* qkv, int32_t q_stride, const bf16* cache, const int32_t* block_table, int32_t max_pages,          \
      const int32_t* seq_lens, const int32_t* cu_seqlens, const int64_t* positions, bf16* out, int32_t rows,       \
      int32_t seqs, int32_t heads, int32_t kv_heads, int32_t page_size, int64_t page_stride, float scale,            \
      int32_t rows_per_block) {                                                                                      \
    prefill_mma<HD, WARPS>(qkv, q_stride, cache, block_table, max_pages, seq_lens, cu_seqlens, positions, out, rows, \
                           seqs, heads, kv_heads, page_size, page_stride, scale, rows_per_block);                   \
  }

// Production entries: 8 warps (128 queries) per block.
KERN_ATTN_PREFILL_MMA_ENTRY(kern_attn_prefill_mma_hd64, 64, 8, 1)
KERN_ATTN_PREFILL_MMA_ENTRY(kern_attn_prefill_mma_hd128, 128, 8, 1)
// Tuning variants, timed by the GPU perf test only: 4 warps (64 queries) per block, and 8 warps
// capped at 128 registers (two blocks per SM).
KERN_ATTN_PREFILL_MMA_ENTRY(kern_attn_prefill_mma_w4_hd128, 128, 4, 3)
KERN_ATTN_PREFILL_MMA_ENTRY(kern_attn_prefill_mma_w8b2_hd128, 128, 8, 2)
