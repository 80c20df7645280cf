// Test-only kernels of module test_attention (tests/gpu/kernels/CMakeLists.txt builds it into
// <build>/kernels/test_attention.fatbin; the harness finds an entry there when the production
// fatbin "attention" lacks it). kern gen launches none of these.
//  * kern_attn_prefill_hd{64,128}: the CUDA-core chunked-prefill baseline (the reference and the
//    timing peer of the tensor-core prefill in attention_prefill.cu).
//  * kern_attn_decode_mma_s{2,4}_partial_hd128: 2- and 4-stage tuning variants of the tensor-core
//    decode partial (kernels/attention_decode_mma.cuh; 69632 / 139264 bytes of dynamic shared memory).
//
// Prefill: one block serves one kv head and up to 16 queries of it: all of that kv head's q heads
// (GQA group G = heads / kv_heads <= 16) of up to 16/G consecutive rows of one sequence, so each
// K/V tile is read once for all of them. Keys are streamed in tiles of 32 tokens through shared
// memory with an online (log2-domain) softmax.
//
#include "attention_decode_mma.cuh"
#include "attention_decode_warp.cuh"
#include "mma.cuh"
#include "paged_kv.cuh"
#include "softmax.cuh"

using namespace kern_dev;

namespace {

constexpr int kTile = 32;         // keys per tile (= warp size, used by the softmax step)
constexpr int kMaxQ = 16;         // queries per block: rows x q heads of one kv head
constexpr int kMaxGroup = kMaxQ;  // q heads per kv head

template <int HD>
struct Smem {
  static constexpr int kPad = 8;  // keeps 16-byte row reads conflict-free
  float q[kMaxQ][HD];             // pre-scaled by scale*log2(e)
  bf16 k[kTile][HD + kPad];
  bf16 v[kTile][HD + kPad];
  float p[kMaxQ][kTile];
  float m[kMaxQ];
  float l[kMaxQ];
  float alpha[kMaxQ];
  int end[kMaxQ];  // per query: keys [begin, end) it attends to
};

// Attends nq = rows * G queries to keys [begin, end) of kv head kvh, query qi being q head
// kvh*G + qi%G of row qi/G (q rows at q0, q0 + q_stride, ...). Query qi sees only keys below
// sm.end[qi] (filled by the caller before the call; end = the largest of them).
// Thread d (blockDim.x == HD) ends with acc[qi] = sum_t p_t v_t[d] (unnormalised) and
// sm.m[qi], sm.l[qi] the running max (log2 units) and sum.
template <int HD>
__device__ void attend(Smem<HD>& sm, const bf16* __restrict__ q0, int q_stride, int G, int nq, float scale,
                       const PagedKv& kv, int kvh, int begin, int end, float (&acc)[kMaxQ]) {
  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  constexpr int kWarps = HD / 32;
  for (int qi = 0; qi < nq; ++qi)
    sm.q[qi][tid] =
        to_f(q0[static_cast<int64_t>(qi / G) * q_stride + (kvh * G + qi % G) * HD + tid]) * (scale * kLog2e);
  if (tid < kMaxQ) {
    sm.m[tid] = -INFINITY;
    sm.l[tid] = 0.0f;
  }
#pragma unroll
  for (int qi = 0; qi < kMaxQ; ++qi) acc[qi] = 0.0f;
  __syncthreads();

  const int64_t v_offset = v_block_elems(kv.page_size, kv.kv_heads, HD);
  for (int t0 = begin; t0 < end; t0 += kTile) {
    const int n = min(kTile, end - t0);
    // Load the K and V tiles, 16 bytes per access.
    constexpr int kChunksPerRow = HD / 8;
    for (int c = tid; c < kTile * kChunksPerRow; c += HD) {
      const int t = c / kChunksPerRow, part = c % kChunksPerRow;
      if (t < n) {
        const int j = t0 + t;
        int64_t page, row;
        page_of(kv, j, page, row);
        const bf16* src = kv.cache + kv_offset<HD>(kv, page, row, kvh) + part * 8;
        *reinterpret_cast<Bf16x8*>(&sm.k[t][part * 8]) = *reinterpret_cast<const Bf16x8*>(src);
        *reinterpret_cast<Bf16x8*>(&sm.v[t][part * 8]) = *reinterpret_cast<const Bf16x8*>(src + v_offset);
      }
    }
    __syncthreads();
    // Scores (log2 units) for every (query, key); keys a query may not see score -inf.
    for (int idx = tid; idx < nq * kTile; idx += HD) {
      const int qi = idx / kTile, t = idx % kTile;
      float s = -INFINITY;
      if (t < n && t0 + t < sm.end[qi]) {
        s = 0.0f;
#pragma unroll 4
        for (int d = 0; d < HD; d += 8) {
          const Bf16x8 kc = *reinterpret_cast<const Bf16x8*>(&sm.k[t][d]);
          const float4 qa = *reinterpret_cast<const float4*>(&sm.q[qi][d]);
          const float4 qb = *reinterpret_cast<const float4*>(&sm.q[qi][d + 4]);
          s += qa.x * to_f(kc.v[0]) + qa.y * to_f(kc.v[1]) + qa.z * to_f(kc.v[2]) + qa.w * to_f(kc.v[3]);
          s += qb.x * to_f(kc.v[4]) + qb.y * to_f(kc.v[5]) + qb.z * to_f(kc.v[6]) + qb.w * to_f(kc.v[7]);
        }
      }
      sm.p[qi][t] = s;
    }
    __syncthreads();
    // Online softmax: one warp per query, one lane per key of the tile.
    for (int qi = warp; qi < nq; qi += kWarps) {
      const float s = sm.p[qi][lane];
      const float m_old = sm.m[qi];
      const float m_new = fmaxf(m_old, warp_max(s));  // -inf only while the query has seen no key
      const float e = s == -INFINITY ? 0.0f : exp2f(s - m_new);
      const float sum = warp_sum(e);
      sm.p[qi][lane] = e;
      if (lane == 0) {
        const float a = m_old == -INFINITY ? 0.0f : exp2f(m_old - m_new);
        sm.alpha[qi] = a;
        sm.l[qi] = sm.l[qi] * a + sum;
        sm.m[qi] = m_new;
      }
    }
    __syncthreads();
#pragma unroll
    for (int qi = 0; qi < kMaxQ; ++qi) {
      if (qi < nq) {
        float a = acc[qi] * sm.alpha[qi];
        for (int t = 0; t < n; ++t) a += sm.p[qi][t] * to_f(sm.v[t][tid]);
        acc[qi] = a;
      }
    }
    __syncthreads();  // tiles and p are overwritten next round
  }
}

template <int HD>
__device__ void prefill(const bf16* __restrict__ qkv, int32_t q_stride, const bf16* __restrict__ cache,
                        const int32_t* __restrict__ block_table, int32_t max_pages,
                        const int32_t* __restrict__ seq_lens, const int32_t* __restrict__ cu_seqlens,
                        const int64_t* __restrict__ positions, bf16* __restrict__ out, int32_t rows, int32_t seqs,
                        int32_t heads, int32_t kv_heads, int32_t page_size, int64_t page_stride, float scale,
                        int32_t rows_per_block) {
  __shared__ Smem<HD> sm;
  const int kvh = blockIdx.y;
  const int r0 = blockIdx.x * rows_per_block, r1 = min(rows, r0 + rows_per_block);
  if (kvh >= kv_heads || rows_per_block < 1) return;
  const int G = heads / kv_heads;
  if (G < 1 || G > kMaxGroup || G * kv_heads != heads) return;  // unsupported grouping (rejected by kern gen)
  const int max_rows = kMaxQ / G;                               // rows attended together (they share each K/V tile)
  const int context_cap = max_pages * page_size;
  for (int a = r0; a < r1;) {
    // Sequence of row a: the s with cu_seqlens[s] <= a < cu_seqlens[s + 1]; rows past the last
    // sequence belong to none (they attend to nothing and get zeros).
    int s = -1, seg_end = r1;
    for (int i = 0; i < seqs; ++i)
      if (cu_seqlens[i] <= a && a < cu_seqlens[i + 1]) {
        s = i;
        seg_end = min(r1, cu_seqlens[i + 1]);
      }
    if (s < 0) seg_end = a + 1;  // a row outside every sequence: alone, attending to nothing
    const int b = min(seg_end, a + max_rows);
    const int nq = (b - a) * G;
    const int seq_len = s < 0 ? 0 : seq_lens[s];
    int end = 0;
    for (int r = a; r < b; ++r) {
      const int e =
          s < 0 ? 0
                : static_cast<int>(max(static_cast<int64_t>(0), min(static_cast<int64_t>(seq_len), positions[r] + 1)));
      end = max(end, min(e, context_cap));
    }
    __syncthreads();  // the previous round's readers of sm are done
    if (threadIdx.x < nq) {
      const int r = a + threadIdx.x / G;
      const int e =
          s < 0 ? 0
                : static_cast<int>(max(static_cast<int64_t>(0), min(static_cast<int64_t>(seq_len), positions[r] + 1)));
      sm.end[threadIdx.x] = min(e, context_cap);
    }
    float acc[kMaxQ];
    const PagedKv kv{cache,       block_table + static_cast<int64_t>(s < 0 ? 0 : s) * max_pages,
                     page_size,   kv_heads,
                     page_stride, -1};  // always divides (as this baseline always did)
    attend<HD>(sm, qkv + static_cast<int64_t>(a) * q_stride, q_stride, G, nq, scale, kv, kvh, 0, end, acc);
#pragma unroll
    for (int qi = 0; qi < kMaxQ; ++qi) {
      if (qi < nq) {
        const float l = sm.l[qi];
        const int64_t row = a + qi / G;
        out[(row * heads + kvh * G + qi % G) * HD + threadIdx.x] = to_bf(l > 0.0f ? acc[qi] / l : 0.0f);
      }
    }
    a = b;
  }
}

}  // namespace

// q rows: row i of qkv (row stride q_stride elements), q heads first; out [*, heads*HD] bf16.
// prefill grid: (ceil_div(rows, rows_per_block), kv_heads, 1), block (HD, 1, 1).
#define KERN_ATTN_ENTRIES(HD)                                                                                          \
  extern "C" __global__ void __launch_bounds__(HD) kern_attn_prefill_hd##HD(                                           \
      const bf16* qkv, int32_t q_stride, const bf16* cache, const int32_t* block_table, int32_t max_pages,             \
      const int32_t* seq_lens, const int32_t* cu_seqlens, const int64_t* positions, bf16* out, int32_t rows,           \
      int32_t seqs, int32_t heads, int32_t kv_heads, int32_t page_size, int64_t page_stride, float scale,              \
      int32_t rows_per_block) {                                                                                        \
    prefill<HD>(qkv, q_stride, cache, block_table, max_pages, seq_lens, cu_seqlens, positions, out, rows, seqs, heads, \
                kv_heads, page_size, page_stride, scale, rows_per_block);                                              \
  }

KERN_ATTN_ENTRIES(64)
KERN_ATTN_ENTRIES(128)

KERN_ATTN_DECODE_MMA_ENTRY(kern_attn_decode_mma_s2_partial_hd128, 128, 2)
KERN_ATTN_DECODE_MMA_ENTRY(kern_attn_decode_mma_s4_partial_hd128, 128, 4)
// The warp-item kernel's tuning point: three stages at two blocks per SM (its layout through session 20).
KERN_ATTN_DECODE_WARP_ENTRY(kern_attn_decode_warp_s3_partial_hd128, 128, 3, 2)
