// Split-KV paged decode attention over the KV layout documented in docs/kernels.md (module
// attention; the entries kern gen launches):
//  * kern_attn_decode_partial_hd{64,128} (CUDA cores, below) and kern_attn_decode_mma_partial_hd{64,128}
//    (tensor cores, attention_decode_mma.cuh) cut each sequence's context [0, seq_len) into ranges
//    whose count and length they choose from seq_len and the number of sequences (decode_split.cuh),
//    serving every q head of a kv head from one read of its K/V;
//  * kern_attn_decode_warp_partial_hd{64,128} (tensor cores, one warp per item, attention_decode_warp.cuh)
//    computes the same ranges with the warps of a fixed grid striding over them;
//  * kern_attn_decode_reduce_hd{64,128} merges the ranges of sequences that have more than one.
// The CUDA-core chunked-prefill baseline (kern_attn_prefill_hd*) and the _s2/_s4 tuning variants of the
// tensor-core partial are test-only: tests/gpu/kernels/test_attention.cu.
#include "attention_decode_mma.cuh"
#include "attention_decode_warp.cuh"
#include "decode_split.cuh"
#include "paged_kv.cuh"
#include "softmax.cuh"

using namespace kern_dev;

namespace {

// ---------------------------------------------------------------------------------------------
// Split-KV decode (one query row per sequence).
//
// Work split (decode_split.cuh): with split_tokens > 0 (kern gen's default, batch-invariant) a
// sequence of length len is cut into ranges of chunk = max(split_tokens, round_up(ceil(len /
// splits_max), 32)) keys, ceil(len / chunk) of them, whatever else shares the call, and the grid's
// blocks stride over the (range, sequence, kv head) items. With split_tokens = 0 every sequence of
// the call gets the same count, nsplit = clamp(ceil(target_blocks / (seqs * kv_heads)), 1,
// splits_max), chunk = max(32, round_up(ceil(len / nsplit), 32)): few sequences get many short
// ranges, many sequences few long ones, and a sequence's bits depend on how many share the call.
// A sequence with one range (or none: len 0) is written straight to `out` by the partial kernel
// and the reduce skips it. Everything is a pure function of (seq_lens, seqs, kv_heads,
// target_blocks, splits_max, split_tokens): results are bitwise repeatable.
//
// Partial block = one (sequence, kv head, range), 4 warps. Every q head of the kv head (GQA
// group G; up to 4 per pass in registers, a larger group takes more passes over the range, whose
// repeated reads mostly hit L2) is served from each K/V byte read once per pass. A key row
// (HD bf16) is spread over HD/8 lanes, 8 elements (16 bytes) each, so a warp holds 32/(HD/8)
// keys per load step and kUnroll steps are in flight per iteration (K and V: 2*kUnroll
// 16-byte loads per lane). Warps own interleaved groups of keys of the range and keep their
// own online softmax (log2 units) with no block barrier in the key loop; one barrier at the
// end merges the warps in a fixed order.
namespace decode {

constexpr int kWarps = 4;  // warps per partial block
constexpr int kThreads = kWarps * 32;
constexpr int kMinBlocksPerSm = 4;  // caps registers at 128 per thread (4 blocks of 4 warps per SM)
constexpr int kUnroll = 4;          // load steps in flight per warp iteration
constexpr int kPassHeads = 4;       // q heads one pass holds in registers (more: a second pass)
constexpr int kMaxGroup = 16;       // q heads per kv head (rejected by kern gen above)

// 16 bytes of K or V, streamed (not kept in L1).
__device__ __forceinline__ uint4 load_stream(const bf16* p) {
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(p));
  return r;
}

struct Args {
  const bf16* qkv;
  int32_t q_stride;
  const bf16* cache;
  const int32_t* pages;  // block-table row of the sequence
  int32_t page_size, kv_heads, heads, group;
  int64_t page_stride;
  float q_scale;  // scale * log2(e)
  float* part_o;
  float* part_ml;
  bf16* out;
  int32_t splits_max;
};

// Shared memory of one partial block: per warp, per head of the pass, (max, sum, HD sums).
template <int HD>
struct WarpState {
  float m[kWarps][kPassHeads];
  float l[kWarps][kPassHeads];
  float o[kWarps][kPassHeads][HD];
};

// q heads g0 .. g0+nq-1 of kv head kvh of sequence s (nq <= QG) over keys [begin, end).
template <int HD, int QG>
__device__ void partial_pass(const Args& a, WarpState<HD>& ws, int s, int kvh, int g0, int nq, int split, int begin,
                             int end, bool direct) {
  constexpr int kLanesPerKey = HD / 8;
  constexpr int kKeysPerStep = 32 / kLanesPerKey;
  constexpr int kKeysPerIter = kKeysPerStep * kUnroll;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int slot = lane / kLanesPerKey, part = lane % kLanesPerKey;

  float q[QG][8];
  const bf16* qrow =
      a.qkv + static_cast<int64_t>(s) * a.q_stride + static_cast<int64_t>(kvh * a.group + g0) * HD + part * 8;
#pragma unroll
  for (int g = 0; g < QG; ++g) {
    if (g < nq) {
      unpack_bf16x8(*reinterpret_cast<const uint4*>(qrow + g * HD), q[g]);
#pragma unroll
      for (int i = 0; i < 8; ++i) q[g][i] *= a.q_scale;
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) q[g][i] = 0.0f;
    }
  }
  float m[QG], l[QG], acc[QG][8];
#pragma unroll
  for (int g = 0; g < QG; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[g][i] = 0.0f;
  }

  const int64_t v_offset = v_block_elems(a.page_size, a.kv_heads, HD);
  const bf16* head_base = a.cache + static_cast<int64_t>(kvh) * HD + part * 8;
  constexpr int kStride = kWarps * kKeysPerIter;  // keys between a warp's consecutive iterations
  // Block-table entries of this lane's keys, fetched one iteration ahead (off the K/V load's path).
  int pg[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int j = begin + warp * kKeysPerIter + u * kKeysPerStep + slot;
    pg[u] = j < end ? a.pages[j / a.page_size] : 0;
  }
  for (int base = begin + warp * kKeysPerIter; base < end; base += kStride) {
    uint4 kr[kUnroll], vr[kUnroll];
    bool valid[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = base + u * kKeysPerStep + slot;
      valid[u] = j < end;
      kr[u] = make_uint4(0, 0, 0, 0);
      vr[u] = make_uint4(0, 0, 0, 0);
      if (valid[u]) {
        const bf16* src = head_base + static_cast<int64_t>(pg[u]) * a.page_stride +
                          static_cast<int64_t>(j % a.page_size) * a.kv_heads * HD;
        kr[u] = load_stream(src);
        vr[u] = load_stream(src + v_offset);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = base + kStride + u * kKeysPerStep + slot;
      pg[u] = j < end ? a.pages[j / a.page_size] : 0;
    }
    // Scores (log2 units) of this lane's keys for every head of the pass; masked keys -inf.
    float sc[kUnroll][QG];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float k[8];
      unpack_bf16x8(kr[u], k);
#pragma unroll
      for (int g = 0; g < QG; ++g) {
        float d = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) d = fmaf(q[g][i], k[i], d);
#pragma unroll
        for (int o = kLanesPerKey / 2; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
        sc[u][g] = valid[u] ? d : -INFINITY;
      }
    }
#pragma unroll
    for (int g = 0; g < QG; ++g) {
      float cm = sc[0][g];
#pragma unroll
      for (int u = 1; u < kUnroll; ++u) cm = fmaxf(cm, sc[u][g]);
#pragma unroll
      for (int o = kLanesPerKey; o < 32; o <<= 1) cm = fmaxf(cm, __shfl_xor_sync(0xffffffffu, cm, o));
      // Key `base` is valid, so cm (and the new max) is finite; exp2(-inf - finite) = 0.
      const float m_new = fmaxf(m[g], cm);
      const float alpha = online_rescale(m[g], l[g], m_new);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[g][i] *= alpha;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const float p = exp2f(sc[u][g] - m_new);  // 0 for a masked key (its V is zeros)
        l[g] += p;
        float v[8];
        unpack_bf16x8(vr[u], v);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[g][i] = fmaf(p, v[i], acc[g][i]);
      }
    }
  }
  // Sum the warp's key slots (m is already uniform over the warp), then publish per warp.
#pragma unroll
  for (int g = 0; g < QG; ++g) {
#pragma unroll
    for (int o = kLanesPerKey; o < 32; o <<= 1) {
      l[g] += __shfl_xor_sync(0xffffffffu, l[g], o);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[g][i] += __shfl_xor_sync(0xffffffffu, acc[g][i], o);
    }
  }
  if (slot == 0) {
#pragma unroll
    for (int g = 0; g < QG; ++g) {
      *reinterpret_cast<float4*>(&ws.o[warp][g][part * 8]) = make_float4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]);
      *reinterpret_cast<float4*>(&ws.o[warp][g][part * 8 + 4]) =
          make_float4(acc[g][4], acc[g][5], acc[g][6], acc[g][7]);
      if (part == 0) {
        ws.m[warp][g] = m[g];
        ws.l[warp][g] = l[g];
      }
    }
  }
  __syncthreads();
  // Merge the warps in warp order.
  for (int e = threadIdx.x; e < nq * HD; e += kThreads) {
    const int g = e / HD, d = e % HD;
    const SoftmaxMerged mg =
        merge_parts<kWarps>([&](int w) { return SoftmaxPart{ws.m[w][g], ws.o[w][g][d], ws.l[w][g]}; });
    const float mx = mg.m, den = mg.den;
    const float o = den > 0.0f ? mg.num / den : 0.0f;
    const int64_t h = static_cast<int64_t>(s) * a.heads + kvh * a.group + g0 + g;
    if (direct) {
      a.out[h * HD + d] = to_bf(o);
    } else {
      const int64_t e_split = h * a.splits_max + split;
      a.part_o[e_split * HD + d] = o;
      if (d == 0) {
        a.part_ml[e_split * 2] = mx;
        a.part_ml[e_split * 2 + 1] = den;
      }
    }
  }
  __syncthreads();  // ws is reused by the next pass
}

template <int HD, int QG>
__device__ void partial_all_heads(const Args& a, WarpState<HD>& ws, int s, int kvh, int split, int begin, int end,
                                  bool direct) {
  for (int g0 = 0; g0 < a.group; g0 += QG)
    partial_pass<HD, QG>(a, ws, s, kvh, g0, min(QG, a.group - g0), split, begin, end, direct);
}

template <int HD>
__device__ void partial(const bf16* __restrict__ qkv, int32_t q_stride, const bf16* __restrict__ cache,
                        const int32_t* __restrict__ block_table, int32_t max_pages,
                        const int32_t* __restrict__ seq_lens, float* __restrict__ part_o, float* __restrict__ part_ml,
                        bf16* __restrict__ out, int32_t seqs, int32_t heads, int32_t kv_heads, int32_t page_size,
                        int64_t page_stride, int32_t splits_max, int32_t target_blocks, int32_t split_tokens,
                        float scale) {
  __shared__ __align__(16) WarpState<HD> ws;
  // Before waiting for the previous kernel (pdl): only the caller's seq_lens (the split of the
  // context); q and the current token's K/V come from the previous kernels.
  if (seqs < 1 || kv_heads < 1 || page_size < 1) return;
  const int group = heads / kv_heads;
  if (group < 1 || group * kv_heads != heads || group > kMaxGroup) return;  // rejected by kern gen
  const Plan plan = plan_of(seqs, kv_heads, max_pages, page_size, target_blocks, splits_max, split_tokens);
  for_each_item(plan, seq_lens, [&](int s, int kvh, int split, const Split& sp) {
    const bool direct = sp.used <= 1;  // one range (or an empty context): the block writes `out`
    const int begin = split * sp.chunk, end = min(sp.len, begin + sp.chunk);
    wait_for_previous_grid();
    allow_next_grid();
    const Args a{qkv,         q_stride,       cache,  block_table + static_cast<int64_t>(s) * max_pages,
                 page_size,   kv_heads,       heads,  group,
                 page_stride, scale * kLog2e, part_o, part_ml,
                 out,         splits_max};
    static_assert(kPassHeads == 4, "the dispatch below assumes passes of up to 4 heads");
    if (group <= 1)
      partial_all_heads<HD, 1>(a, ws, s, kvh, split, begin, end, direct);
    else if (group <= 2)
      partial_all_heads<HD, 2>(a, ws, s, kvh, split, begin, end, direct);
    else if (group == 3)
      partial_all_heads<HD, 3>(a, ws, s, kvh, split, begin, end, direct);
    else
      partial_all_heads<HD, 4>(a, ws, s, kvh, split, begin, end, direct);
  });
}

// One block per (sequence, q head), HD threads; sequences with at most one range were written
// by the partial kernel.
template <int HD>
__device__ void reduce(const float* __restrict__ part_o, const float* __restrict__ part_ml, bf16* __restrict__ out,
                       const int32_t* __restrict__ seq_lens, int32_t max_pages, int32_t seqs, int32_t heads,
                       int32_t kv_heads, int32_t page_size, int32_t splits_max, int32_t target_blocks,
                       int32_t split_tokens) {
  __shared__ float weight[kMaxSplits];
  __shared__ float total;
  const int s = blockIdx.x, h = blockIdx.y;
  if (s >= seqs || h >= heads || kv_heads < 1 || page_size < 1) return;
  const Plan plan = plan_of(seqs, kv_heads, max_pages, page_size, target_blocks, splits_max, split_tokens);
  const Split sp = split_of(plan, seq_lens[s]);  // seq_lens: the caller's, before the wait
  if (sp.used <= 1) return;
  wait_for_previous_grid();
  allow_next_grid();
  const int64_t e0 = (static_cast<int64_t>(s) * heads + h) * splits_max;
  // Every used range saw at least one key: its sum is >= 1 and its max finite.
  float mx = -INFINITY;
  for (int i = 0; i < sp.used; ++i) mx = fmaxf(mx, part_ml[(e0 + i) * 2]);
  for (int i = threadIdx.x; i < sp.used; i += blockDim.x)
    weight[i] = part_weight(part_ml[(e0 + i) * 2], part_ml[(e0 + i) * 2 + 1], mx);
  __syncthreads();
  if (threadIdx.x == 0) {
    float den = 0.0f;
    for (int i = 0; i < sp.used; ++i) den += weight[i];
    total = den;
  }
  __syncthreads();
  const float* po = part_o + e0 * HD + threadIdx.x;
  float num = 0.0f;
#pragma unroll 8
  for (int i = 0; i < sp.used; ++i) num = fmaf(weight[i], po[static_cast<int64_t>(i) * HD], num);
  out[(static_cast<int64_t>(s) * heads + h) * HD + threadIdx.x] = to_bf(num / total);
}

}  // namespace decode

}  // namespace

// Decode: q row s = sequence s (row stride q_stride elements, q heads first); out [seqs, heads*HD] bf16.
// part_o: f32 [seqs, heads, splits_max, HD]; part_ml: f32 [seqs, heads, splits_max, 2] (max in log2
// units, sum); only ranges of sequences with more than one range are written (and read).
// partial grid: (>= seqs*kv_heads + target_blocks, 1, 1), block (128, 1, 1); blocks past the work exit.
// reduce grid: (seqs, heads, 1), block (HD, 1, 1). Both take the same seq_lens, max_pages,
// page_size, seqs, kv_heads, splits_max (<= 1024), target_blocks and split_tokens.
#define KERN_ATTN_DECODE_ENTRIES(HD)                                                                                  \
  extern "C" __global__ void __launch_bounds__(decode::kThreads, decode::kMinBlocksPerSm)                             \
      kern_attn_decode_partial_hd##HD(const bf16* qkv, int32_t q_stride, const bf16* cache,                           \
                                      const int32_t* block_table, int32_t max_pages, const int32_t* seq_lens,         \
                                      float* part_o, float* part_ml, bf16* out, int32_t seqs, int32_t heads,          \
                                      int32_t kv_heads, int32_t page_size, int64_t page_stride, int32_t splits_max,   \
                                      int32_t target_blocks, int32_t split_tokens, float scale) {                     \
    decode::partial<HD>(qkv, q_stride, cache, block_table, max_pages, seq_lens, part_o, part_ml, out, seqs, heads,    \
                        kv_heads, page_size, page_stride, splits_max, target_blocks, split_tokens, scale);            \
  }                                                                                                                   \
  extern "C" __global__ void __launch_bounds__(HD) kern_attn_decode_reduce_hd##HD(                                    \
      const float* part_o, const float* part_ml, bf16* out, const int32_t* seq_lens, int32_t max_pages, int32_t seqs, \
      int32_t heads, int32_t kv_heads, int32_t page_size, int32_t splits_max, int32_t target_blocks,                  \
      int32_t split_tokens) {                                                                                         \
    decode::reduce<HD>(part_o, part_ml, out, seq_lens, max_pages, seqs, heads, kv_heads, page_size, splits_max,       \
                       target_blocks, split_tokens);                                                                  \
  }

KERN_ATTN_DECODE_ENTRIES(64)
KERN_ATTN_DECODE_ENTRIES(128)

// Tensor-core decode partials (attention_decode_mma.cuh): the ABI, grid and block of kern_attn_decode_partial_hd*,
// plus dynamic shared memory kWarps · S · 2 · 16 · (HD + 8) · 2 bytes: S = 3 stages per warp, 55296 bytes at
// hd 64 and 104448 at hd 128 (two blocks per SM on the H200).
KERN_ATTN_DECODE_MMA_ENTRY(kern_attn_decode_mma_partial_hd64, 64, 3)
KERN_ATTN_DECODE_MMA_ENTRY(kern_attn_decode_mma_partial_hd128, 128, 3)

// Warp-item tensor-core decode partials (attention_decode_warp.cuh): the ABI and block of
// kern_attn_decode_mma_partial_hd*, any grid; 2 stages per warp (dynamic shared memory 4 · 2 · 2 · 16 ·
// (HD + 8) · 2 bytes: 36864 at hd 64, 69632 at hd 128) and at most 168 registers, so three blocks fit
// an SM (12 warps: session 21 measured the kernel bound by its warps' instruction latency, docs/perf.md).
KERN_ATTN_DECODE_WARP_ENTRY(kern_attn_decode_warp_partial_hd64, 64, 2, 3)
KERN_ATTN_DECODE_WARP_ENTRY(kern_attn_decode_warp_partial_hd128, 128, 2, 3)
// Both partials with the key-major products (G <= 8): kern gen --decode-attn-key-major.
KERN_ATTN_DECODE_MMA_KM_ENTRY(kern_attn_decode_mma_km_partial_hd64, 64, 3)
KERN_ATTN_DECODE_MMA_KM_ENTRY(kern_attn_decode_mma_km_partial_hd128, 128, 3)
KERN_ATTN_DECODE_WARP_KM_ENTRY(kern_attn_decode_warp_km_partial_hd64, 64, 2, 3)
KERN_ATTN_DECODE_WARP_KM_ENTRY(kern_attn_decode_warp_km_partial_hd128, 128, 2, 3)
