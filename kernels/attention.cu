// Paged attention over the KV layout documented in rope.cu (and docs/kernels.md).
//
// Prefill: one block serves one kv head and up to 16 queries of it: all of that kv head's q heads
// (GQA group G = heads / kv_heads <= 16) of up to 16/G consecutive rows of one sequence, so each
// K/V tile is read once for all of them. Keys are streamed in tiles of 32 tokens through shared
// memory with an online (log2-domain) softmax.
//
//  * decode (section "Split-KV decode" below, independent of the prefill code):
//    kern_attn_decode_partial_hd{64,128} cuts each sequence's context [0, seq_len) into ranges
//    whose count and length it chooses from seq_len and the number of sequences, serving every q
//    head of a kv head from one read of its K/V; kern_attn_decode_reduce_hd{64,128} merges the
//    ranges of sequences that have more than one.
//  * chunked prefill: kern_attn_prefill_hd{64,128}: row r of sequence s (by cu_seqlens) attends to
//    keys [0, min(positions[r] + 1, seq_lens[s])) of s through the block table; the chunk's own K/V
//    must already be in the cache (kern_qk_norm_rope_cache_bf16 runs first), so causality within the
//    chunk follows from the positions.
#include "mma.cuh"

using namespace kern_dev;

namespace {

constexpr int kTile = 32;        // keys per tile (= warp size, used by the softmax step)
constexpr int kMaxQ = 16;        // queries per block: rows x q heads of one kv head
constexpr int kMaxGroup = kMaxQ; // q heads per kv head
constexpr float kLog2e = 1.4426950408889634f;

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
  int end[kMaxQ];                 // per query: keys [begin, end) it attends to
};

struct PagedKv {
  const bf16* cache;      // layer base
  const int32_t* pages;   // block-table row of this sequence
  int32_t page_size;
  int32_t kv_heads;
  int64_t page_stride;    // elements between consecutive pages
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
    sm.q[qi][tid] = to_f(q0[static_cast<int64_t>(qi / G) * q_stride + (kvh * G + qi % G) * HD + tid]) * (scale * kLog2e);
  if (tid < kMaxQ) {
    sm.m[tid] = -INFINITY;
    sm.l[tid] = 0.0f;
  }
#pragma unroll
  for (int qi = 0; qi < kMaxQ; ++qi) acc[qi] = 0.0f;
  __syncthreads();

  const int64_t v_offset = static_cast<int64_t>(kv.page_size) * kv.kv_heads * HD;
  for (int t0 = begin; t0 < end; t0 += kTile) {
    const int n = min(kTile, end - t0);
    // Load the K and V tiles, 16 bytes per access.
    constexpr int kChunksPerRow = HD / 8;
    for (int c = tid; c < kTile * kChunksPerRow; c += HD) {
      const int t = c / kChunksPerRow, part = c % kChunksPerRow;
      if (t < n) {
        const int j = t0 + t;
        const int64_t page = kv.pages[j / kv.page_size];
        const bf16* src = kv.cache + page * kv.page_stride +
                          (static_cast<int64_t>(j % kv.page_size) * kv.kv_heads + kvh) * HD + part * 8;
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
  const int max_rows = kMaxQ / G;  // rows attended together (they share each K/V tile)
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
      const int e = s < 0 ? 0 : static_cast<int>(max(static_cast<int64_t>(0), min(static_cast<int64_t>(seq_len), positions[r] + 1)));
      end = max(end, min(e, context_cap));
    }
    __syncthreads();  // the previous round's readers of sm are done
    if (threadIdx.x < nq) {
      const int r = a + threadIdx.x / G;
      const int e = s < 0 ? 0 : static_cast<int>(max(static_cast<int64_t>(0), min(static_cast<int64_t>(seq_len), positions[r] + 1)));
      sm.end[threadIdx.x] = min(e, context_cap);
    }
    float acc[kMaxQ];
    const PagedKv kv{cache, block_table + static_cast<int64_t>(s < 0 ? 0 : s) * max_pages, page_size, kv_heads,
                     page_stride};
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


// ---------------------------------------------------------------------------------------------
// Split-KV decode (one query row per sequence).
//
// Work split: the sequences' contexts are cut into `nsplit` ranges each, the same nsplit for
// every sequence of the call: nsplit = clamp(ceil(target_blocks / (seqs * kv_heads)), 1,
// splits_max), so a call with few sequences gets many short ranges (enough blocks to fill the
// GPU) and a call with many sequences gets few long ones (less partial-output traffic). A
// sequence of length len uses ranges of chunk = max(32, round_up(ceil(len / nsplit), 32))
// tokens, ceil(len / chunk) of them; a sequence with one range (or none: len 0) is written
// straight to `out` by the partial kernel and the reduce skips it. Everything is a pure
// function of (seq_lens, seqs, kv_heads, target_blocks, splits_max): results are bitwise
// repeatable; a sequence's bits depend on the number of sequences in the call (nsplit).
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

constexpr int kWarps = 4;           // warps per partial block
constexpr int kThreads = kWarps * 32;
constexpr int kMinBlocksPerSm = 4;  // caps registers at 128 per thread (4 blocks of 4 warps per SM)
constexpr int kUnroll = 4;          // load steps in flight per warp iteration
constexpr int kPassHeads = 4;       // q heads one pass holds in registers (more: a second pass)
constexpr int kSplitAlign = 32;     // range lengths are multiples of this (and at least this)
constexpr int kMaxSplits = 1024;    // hard cap on splits_max (reduce keeps weights in shared memory)

struct Split {
  int nsplit;  // ranges per sequence in this call
  int len;     // the sequence's context, clamped to the block table
  int chunk;   // tokens per range
  int used;    // non-empty ranges: ceil(len / chunk)
};

__device__ __forceinline__ int splits_per_seq(int seqs, int kv_heads, int target_blocks, int splits_max) {
  const long long units = static_cast<long long>(max(seqs, 1)) * max(kv_heads, 1);
  const long long want = (static_cast<long long>(max(target_blocks, 1)) + units - 1) / units;
  return static_cast<int>(max(1LL, min(want, static_cast<long long>(min(max(splits_max, 1), kMaxSplits)))));
}

__device__ __forceinline__ Split split_of(int seq_len, int nsplit, int max_pages, int page_size) {
  Split sp;
  sp.nsplit = nsplit;
  sp.len = static_cast<int>(max(0LL, min(static_cast<long long>(seq_len), static_cast<long long>(max_pages) * page_size)));
  const int per = (sp.len + nsplit - 1) / nsplit;
  sp.chunk = max(kSplitAlign, (per + kSplitAlign - 1) / kSplitAlign * kSplitAlign);
  sp.used = (sp.len + sp.chunk - 1) / sp.chunk;
  return sp;
}

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
  float q_scale;         // scale * log2(e)
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
  const bf16* qrow = a.qkv + static_cast<int64_t>(s) * a.q_stride + static_cast<int64_t>(kvh * a.group + g0) * HD + part * 8;
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

  const int64_t v_offset = static_cast<int64_t>(a.page_size) * a.kv_heads * HD;
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
      const float alpha = exp2f(m[g] - m_new);
      m[g] = m_new;
      l[g] *= alpha;
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
      *reinterpret_cast<float4*>(&ws.o[warp][g][part * 8 + 4]) = make_float4(acc[g][4], acc[g][5], acc[g][6], acc[g][7]);
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
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, ws.m[w][g]);
    float num = 0.0f, den = 0.0f;
    if (mx != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float f = exp2f(ws.m[w][g] - mx);  // 0 for a warp that saw no key
        num += f * ws.o[w][g][d];
        den += f * ws.l[w][g];
      }
    }
    const float o = den > 0.0f ? num / den : 0.0f;
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
                        const int32_t* __restrict__ block_table, int32_t max_pages, const int32_t* __restrict__ seq_lens,
                        float* __restrict__ part_o, float* __restrict__ part_ml, bf16* __restrict__ out, int32_t seqs,
                        int32_t heads, int32_t kv_heads, int32_t page_size, int64_t page_stride, int32_t splits_max,
                        int32_t target_blocks, float scale) {
  __shared__ __align__(16) WarpState<HD> ws;
  // Before waiting for the previous kernel (pdl): only the caller's seq_lens (the split of the
  // context); q and the current token's K/V come from the previous kernels.
  if (seqs < 1 || kv_heads < 1 || page_size < 1) return;
  const int group = heads / kv_heads;
  if (group < 1 || group * kv_heads != heads || group > kMaxGroup) return;  // rejected by kern gen
  const int nsplit = splits_per_seq(seqs, kv_heads, target_blocks, splits_max);
  const long long b = blockIdx.x;
  if (b >= static_cast<long long>(seqs) * kv_heads * nsplit) return;
  const int split = static_cast<int>(b % nsplit);
  const int unit = static_cast<int>(b / nsplit);
  const int kvh = unit % kv_heads, s = unit / kv_heads;
  const Split sp = split_of(seq_lens[s], nsplit, max_pages, page_size);
  const bool direct = sp.used <= 1;  // one range (or an empty context): the block writes `out`
  if (split >= max(sp.used, 1)) return;
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
}

// One block per (sequence, q head), HD threads; sequences with at most one range were written
// by the partial kernel.
template <int HD>
__device__ void reduce(const float* __restrict__ part_o, const float* __restrict__ part_ml, bf16* __restrict__ out,
                       const int32_t* __restrict__ seq_lens, int32_t max_pages, int32_t seqs, int32_t heads,
                       int32_t kv_heads, int32_t page_size, int32_t splits_max, int32_t target_blocks) {
  __shared__ float weight[kMaxSplits];
  __shared__ float total;
  const int s = blockIdx.x, h = blockIdx.y;
  if (s >= seqs || h >= heads || kv_heads < 1 || page_size < 1) return;
  const int nsplit = splits_per_seq(seqs, kv_heads, target_blocks, splits_max);
  const Split sp = split_of(seq_lens[s], nsplit, max_pages, page_size);  // seq_lens: the caller's, before the wait
  if (sp.used <= 1) return;
  wait_for_previous_grid();
  allow_next_grid();
  const int64_t e0 = (static_cast<int64_t>(s) * heads + h) * splits_max;
  // Every used range saw at least one key: its sum is >= 1 and its max finite.
  float mx = -INFINITY;
  for (int i = 0; i < sp.used; ++i) mx = fmaxf(mx, part_ml[(e0 + i) * 2]);
  for (int i = threadIdx.x; i < sp.used; i += blockDim.x)
    weight[i] = part_ml[(e0 + i) * 2 + 1] * exp2f(part_ml[(e0 + i) * 2] - mx);
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

template <int HD, int S>
__device__ void partial(const bf16* __restrict__ qkv, int32_t q_stride, const bf16* __restrict__ cache,
                        const int32_t* __restrict__ block_table, int32_t max_pages, const int32_t* __restrict__ seq_lens,
                        float* __restrict__ part_o, float* __restrict__ part_ml, bf16* __restrict__ out, int32_t seqs,
                        int32_t heads, int32_t kv_heads, int32_t page_size, int64_t page_stride, int32_t splits_max,
                        int32_t target_blocks, float scale) {
  constexpr int kStride = HD + 8;
  constexpr int TE = tile_elems<HD>();
  constexpr int KS = HD / 16;  // k-steps of Q·Kᵀ
  constexpr int ND = HD / 8;   // n-blocks of the output
  constexpr int kChunks = HD / 8;
  static_assert(KS % 2 == 0, "k-steps are taken in pairs");
  static_assert((16 * HD + 32) * 4 <= S * 2 * TE * 2, "the merge scratch must fit in a warp's ring");
  extern __shared__ __align__(128) unsigned char decode_mma_smem[];
  uint32_t dyn;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
  if (dyn < static_cast<uint32_t>(smem_bytes<HD, S>())) __trap();
  // Before waiting for the previous kernel (pdl): only the caller's seq_lens, as decode::partial.
  if (seqs < 1 || kv_heads < 1 || page_size < 1) return;
  const int group = heads / kv_heads;
  if (group < 1 || group * kv_heads != heads || group > 16) return;  // rejected by kern gen
  const int nsplit = decode::splits_per_seq(seqs, kv_heads, target_blocks, splits_max);
  const long long b = blockIdx.x;
  if (b >= static_cast<long long>(seqs) * kv_heads * nsplit) return;
  const int split = static_cast<int>(b % nsplit);
  const int unit = static_cast<int>(b / nsplit);
  const int kvh = unit % kv_heads, s = unit / kv_heads;
  const decode::Split sp = decode::split_of(seq_lens[s], nsplit, max_pages, page_size);
  const bool direct = sp.used <= 1;
  if (split >= max(sp.used, 1)) return;
  const int begin = split * sp.chunk, end = min(sp.len, begin + sp.chunk);
  wait_for_previous_grid();
  allow_next_grid();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int32_t* pages = block_table + static_cast<int64_t>(s) * max_pages;
  const int64_t v_offset = static_cast<int64_t>(page_size) * kv_heads * HD;
  const bool one_page = page_size % kKeys == 0;  // tiles start at multiples of 16 keys
  bf16* ring = reinterpret_cast<bf16*>(decode_mma_smem) + static_cast<size_t>(warp) * S * 2 * TE;
  const int tiles = end > begin ? (end - begin + kKeys - 1) / kKeys : 0;
  const int mine = tiles > warp ? (tiles - warp + kWarps - 1) / kWarps : 0;  // this warp's tiles

  // Starts the copy of this warp's tile i (keys begin + (warp + 4 i)·16 ...) into stage i % S.
  auto issue = [&](int i) {
    const int t0 = begin + (warp + kWarps * i) * kKeys;
    bf16* sk = ring + (i % S) * 2 * TE;
    const int64_t first_page = pages[t0 / page_size];
#pragma unroll
    for (int c = lane; c < kKeys * kChunks; c += 32) {
      const int r = c / kChunks, part = c % kChunks;
      const int j = t0 + r;
      const bool valid = j < end;
      const bf16* src = cache;
      if (valid) {
        const int64_t page = one_page ? first_page : static_cast<int64_t>(pages[j / page_size]);
        src = cache + page * page_stride + (static_cast<int64_t>(j % page_size) * kv_heads + kvh) * HD + part * 8;
      }
      cp_async16(smem_u32(sk + r * kStride + part * 8), src, valid);
      cp_async16(smem_u32(sk + TE + r * kStride + part * 8), valid ? src + v_offset : cache, valid);
    }
  };

  // Q: rows g and g + 8 of the m16 tile are q heads kvh·G + g and kvh·G + g + 8 (zero past G).
  uint32_t qf[KS][4];
  {
    const bf16* q0 = qkv + static_cast<int64_t>(s) * q_stride + static_cast<int64_t>(kvh) * group * HD;
    const bf16* pa = g < group ? q0 + g * HD : nullptr;
    const bf16* pb = g + 8 < group ? q0 + (g + 8) * HD : nullptr;
    load_a_fragments(qf, pa, pb, t);
  }
  float o[ND][4];
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int nd = 0; nd < ND; ++nd) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.0f;
  const float scale_log2 = scale * kLog2e;

  // ldmatrix lane addresses (as the prefill kernel): K rows key nb·8 + (lane & 7), columns + (lane >> 3)·8;
  // V (transposed) rows key ((lane >> 3) & 1)·8 + (lane & 7), columns + (lane >> 4)·8.
  const uint32_t k_base = smem_u32(ring) + ((lane & 7) * kStride + (lane >> 3) * 8) * 2;
  const uint32_t v_base = smem_u32(ring + TE) + ((((lane >> 3) & 1) * 8 + (lane & 7)) * kStride + (lane >> 4) * 8) * 2;

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
    const int t0 = begin + (warp + kWarps * i) * kKeys;
    const uint32_t st = static_cast<uint32_t>((i % S) * 2 * TE * 2);
    float sc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int ks = 0; ks < KS; ks += 2)
#pragma unroll
      for (int nb = 0; nb < 2; ++nb) {
        uint32_t b0, b1, b2, b3;
        ldsm_x4(k_base + st + (nb * 8 * kStride + ks * 16) * 2, b0, b1, b2, b3);
        mma_bf16(sc[nb], qf[ks], b0, b1);
        mma_bf16(sc[nb], qf[ks + 1], b2, b3);
      }
    // Online softmax per row (log2 units); keys past the range score -inf (their V is zeros).
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
      const float alpha = exp2f(m[h] - mn);  // 0 on the first tile (m = -inf)
      m[h] = mn;
      l[h] *= alpha;
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
      ldsm_x4_trans(v_base + st + nd * 8 * 2, b0, b1, b2, b3);
      mma_bf16(o[nd], pf, b0, b1);
      mma_bf16(o[nd + 1], pf, b2, b3);
    }
    __syncwarp();  // every lane is done with stage i % S before it is refilled
  }
  cp_async_wait<0>();
  __syncwarp();

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
  __syncthreads();
  // Merge the warps in warp order (as decode::partial_pass).
  constexpr int kWarpFloats = S * 2 * TE / 2;  // a warp's ring, in floats
  const float* ws0 = reinterpret_cast<const float*>(decode_mma_smem);
  for (int e = threadIdx.x; e < group * HD; e += kThreads) {
    const int gg = e / HD, d = e % HD;
    float mxw = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mxw = fmaxf(mxw, ws0[w * kWarpFloats + 16 * HD + gg]);
    float num = 0.0f, den = 0.0f;
    if (mxw != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float* wsw = ws0 + w * kWarpFloats;
        const float f = exp2f(wsw[16 * HD + gg] - mxw);  // 0 for a warp that saw no key
        num += f * wsw[gg * HD + d];
        den += f * wsw[16 * HD + 16 + gg];
      }
    }
    const float r = den > 0.0f ? num / den : 0.0f;
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
}

}  // namespace decode_mma

}  // namespace

// q rows: row i of qkv (row stride q_stride elements), q heads first; out [*, heads*HD] bf16.
// prefill grid: (ceil_div(rows, rows_per_block), kv_heads, 1), block (HD, 1, 1).
#define KERN_ATTN_ENTRIES(HD)                                                                                        \
  extern "C" __global__ void __launch_bounds__(HD) kern_attn_prefill_hd##HD(                                         \
      const bf16* qkv, int32_t q_stride, const bf16* cache, const int32_t* block_table, int32_t max_pages,          \
      const int32_t* seq_lens, const int32_t* cu_seqlens, const int64_t* positions, bf16* out, int32_t rows,       \
      int32_t seqs, int32_t heads, int32_t kv_heads, int32_t page_size, int64_t page_stride, float scale,            \
      int32_t rows_per_block) {                                                                                      \
    prefill<HD>(qkv, q_stride, cache, block_table, max_pages, seq_lens, cu_seqlens, positions, out, rows, seqs,    \
                heads, kv_heads, page_size, page_stride, scale, rows_per_block);                                   \
  }

KERN_ATTN_ENTRIES(64)
KERN_ATTN_ENTRIES(128)

// Decode: q row s = sequence s (row stride q_stride elements, q heads first); out [seqs, heads*HD] bf16.
// part_o: f32 [seqs, heads, splits_max, HD]; part_ml: f32 [seqs, heads, splits_max, 2] (max in log2
// units, sum); only ranges of sequences with more than one range are written (and read).
// partial grid: (>= seqs*kv_heads + target_blocks, 1, 1), block (128, 1, 1); blocks past the work exit.
// reduce grid: (seqs, heads, 1), block (HD, 1, 1). Both take the same seq_lens, max_pages,
// page_size, seqs, kv_heads, splits_max (<= 1024) and target_blocks.
#define KERN_ATTN_DECODE_ENTRIES(HD)                                                                                 \
  extern "C" __global__ void __launch_bounds__(decode::kThreads, decode::kMinBlocksPerSm)                           \
      kern_attn_decode_partial_hd##HD(                                                                               \
      const bf16* qkv, int32_t q_stride, const bf16* cache, const int32_t* block_table, int32_t max_pages,           \
      const int32_t* seq_lens, float* part_o, float* part_ml, bf16* out, int32_t seqs, int32_t heads,                \
      int32_t kv_heads, int32_t page_size, int64_t page_stride, int32_t splits_max, int32_t target_blocks,           \
      float scale) {                                                                                                 \
    decode::partial<HD>(qkv, q_stride, cache, block_table, max_pages, seq_lens, part_o, part_ml, out, seqs, heads,   \
                        kv_heads, page_size, page_stride, splits_max, target_blocks, scale);                         \
  }                                                                                                                  \
  extern "C" __global__ void __launch_bounds__(HD) kern_attn_decode_reduce_hd##HD(                                   \
      const float* part_o, const float* part_ml, bf16* out, const int32_t* seq_lens, int32_t max_pages,              \
      int32_t seqs, int32_t heads, int32_t kv_heads, int32_t page_size, int32_t splits_max,                          \
      int32_t target_blocks) {                                                                                       \
    decode::reduce<HD>(part_o, part_ml, out, seq_lens, max_pages, seqs, heads, kv_heads, page_size, splits_max,      \
                       target_blocks);                                                                               \
  }

KERN_ATTN_DECODE_ENTRIES(64)
KERN_ATTN_DECODE_ENTRIES(128)

// Tensor-core decode partials (decode_mma above): the ABI, grid and block of kern_attn_decode_partial_hd*,
// plus dynamic shared memory kWarps · S · 2 · 16 · (HD + 8) · 2 bytes: S = 3 stages per warp, 55296 bytes at
// hd 64 and 104448 at hd 128 (two blocks per SM on the H200). The _s2 / _s4 variants (69632 / 139264 bytes
// at hd 128) are tuning points run by the GPU tests only.
#define KERN_ATTN_DECODE_MMA_ENTRY(NAME, HD, S)                                                                        \
  extern "C" __global__ void __launch_bounds__(decode_mma::kThreads, 2) NAME(                                          \
      const bf16* qkv, int32_t q_stride, const bf16* cache, const int32_t* block_table, int32_t max_pages,           \
      const int32_t* seq_lens, float* part_o, float* part_ml, bf16* out, int32_t seqs, int32_t heads,                \
      int32_t kv_heads, int32_t page_size, int64_t page_stride, int32_t splits_max, int32_t target_blocks,           \
      float scale) {                                                                                                 \
    decode_mma::partial<HD, S>(qkv, q_stride, cache, block_table, max_pages, seq_lens, part_o, part_ml, out, seqs,   \
                               heads, kv_heads, page_size, page_stride, splits_max, target_blocks, scale);           \
  }

KERN_ATTN_DECODE_MMA_ENTRY(kern_attn_decode_mma_partial_hd64, 64, 3)
KERN_ATTN_DECODE_MMA_ENTRY(kern_attn_decode_mma_partial_hd128, 128, 3)
KERN_ATTN_DECODE_MMA_ENTRY(kern_attn_decode_mma_s2_partial_hd128, 128, 2)
KERN_ATTN_DECODE_MMA_ENTRY(kern_attn_decode_mma_s4_partial_hd128, 128, 4)
