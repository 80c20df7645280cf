// Sampling + log-probs for a decode step (docs/kernels.md, "Sampling"): the op is three kernels.
// kern_sample_race_bf16 (kernels/sample_race.cuh) takes most rows in one pass over the whole GPU
// and marks them in route; kern_sample_rank_bf16 (same file) decides the ranking rows it left
// (route 2) through the row's top keys above a threshold; kern_sample_bf16, below, takes the others
// (route 0: forced rows, a logit bias, penalties with a ranking, min-p rejections, kept sets past the row's 63
// largest keys, more candidates than the rank kernel holds):
// one thread-block cluster of kCluster CTAs per row (sm_90; the sm_80 images trap). Each CTA stages
// its slice of the row's raw logits into shared memory at once (cp.async) and keeps the penalized,
// temperature-scaled logits beside them; the CTAs combine their partial results
// through distributed shared memory. Every reduction runs in a fixed order (integer counts, f32 sums
// in thread / warp / rank order), so a row's token depends only on the row's own inputs.
//
// Per row r (all in f32):
//   x_i   = logits[r, i] + its logit bias (sampling_keys[r, 6] = n entries: (id, f32 bits) pairs in
//           the history row's last 2 n slots), penalized for the tokens of the history (count c_i > 0):
//           x = x > 0 ? x / repetition : x * repetition;  x -= frequency * c_i + presence
//   greedy (temperature NaN or <= 0): token = argmax x (ties lowest index, NaN ignored: kern_argmax_*)
//   else  l_i = x_i * (1 / temperature), NaN -> -inf, clamped to <= FLT_MAX; e_i = exp(l_i - max l);
//         kept = { l_i >= max(t_k, t_p, t_m) }: t_k the top_k-th largest l (ties at it kept),
//         t_p the l at which the descending cumulative mass of the top-k set first reaches
//         top_p · (its mass), t_m = max l + log(min_p); token drawn from kept ∝ e: by the race
//         (sample_race.cuh) for the rows it takes, else by inverse CDF here with
//         u = Philox4x32-10(key seed, counter (counter, 0)) (kernels/philox.cuh).
//   forced (sampling_keys[r, 5] = id + 1, id < vocab): token = id, drawn or argmax'd never (a prompt
//         position scored: its log-probs below are the point);
//   logprobs[r, 0] = log_softmax(raw logits)[token]; [1..n] and top_ids[r, 0..n) the n_logprobs
//   largest raw logits (descending, ties to the lower id) and their log-probs.
#include <cooperative_groups.h>
#include <float.h>

#include "common.cuh"
#include "mma.cuh"
#include "philox.cuh"
#include "sample_layout.cuh"
#include "sample_race.cuh"

using namespace kern_dev;
using namespace kern_sample_dev;
using kern_sample::kCluster;
using kern_sample::kRegionBytes;
using kern_sample::kThreads;

namespace {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

constexpr int kWarps = kThreads / 32;
constexpr int kBins = 32;   // distance histogram bins
constexpr int kCap = 2048;  // candidate list capacity (power of two, <= 8 * kThreads)

static_assert(kCap <= 8 * kThreads, "the prefix sums give each thread 8 candidates");
static_assert(kCluster == 8, "KERN_SAMPLE_CLUSTER spells the cluster size");
static_assert(kWarps * kBins * (4 + 8) <= kRegionBytes, "histogram columns fit the region");
static_assert(2 * kCap * 8 + kCap * 4 <= kRegionBytes, "candidate lists fit the region");

namespace cg = cooperative_groups;


// Distance bin of d >= 0 (inf allowed): eight bins per octave of 1 + d, bin 0 = [0, 0.09), the last
// bin everything from 1 + d = 16 on. Monotone non-decreasing in d (no rounding but fl(1 + d)).
__device__ __forceinline__ int dist_bin(float d) {
  const int b = static_cast<int>(__float_as_uint(__fadd_rn(1.0f, d)) >> 20) - (127 << 3);
  return min(b, kBins - 1);
}



// Masses e = exp(l - max l) in [0, 1] as integers of 2^-40 (a row's total stays below 2^58): sums of
// them are exact and so independent of the order they are made in.
constexpr float kMassScale = 1099511627776.0f;  // 2^40
__device__ __forceinline__ unsigned long long fixed_mass(float e) { return __float2ull_rn(e * kMassScale); }
__device__ __forceinline__ float mass_value(unsigned long long m) { return __ull2float_rn(m) * (1.0f / kMassScale); }

struct Smem {
  uint32_t x[2][4 * kBins];      // exchange buffers (read by the other CTAs of the cluster)
  uint32_t all[kCluster][8];     // this CTA's copy of every rank's small exchange words
  uint32_t g[2 * kBins];         // merged histogram: l counts, raw counts
  unsigned long long gm[kBins];  // merged histogram: l masses (fixed point)
  float w[kThreads];             // per-thread mass (CDF search)
  float aux[kThreads];           // per-thread max (online pass), then CDF prefix
  uint32_t red[2 * kWarps];      // block reductions
  uint32_t list_n[2];            // candidate list fill (rank 0's are the ones used)
  int32_t bc[2];                 // broadcast
};

// Fixed-order block reductions: a warp xor tree, the warps' results through shared memory, then
// the same xor tree over them in every warp (so every thread holds the identical result: no
// broadcast step, and the order never depends on timing). O(log) steps per thread: with 32 warps
// a loop over the warps' results would cost more than the tokens' own work.
static_assert(kWarps <= 32, "the second tree level is one warp wide");
__device__ __forceinline__ uint32_t tree_sum_u(uint32_t v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}
__device__ __forceinline__ int tree_max_i(int v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(kFull, v, o));
  return v;
}
// Writes this warp's (a, b) words, waits, and returns warp `lane`'s words (or the identity pair).
__device__ __forceinline__ void warp_words(uint32_t& a, uint32_t& b, uint32_t ia, uint32_t ib, Smem& sm) {
  const int lane = threadIdx.x & 31;
  if (lane == 0) {
    sm.red[threadIdx.x >> 5] = a;
    sm.red[kWarps + (threadIdx.x >> 5)] = b;
  }
  __syncthreads();
  a = lane < kWarps ? sm.red[lane] : ia;
  b = lane < kWarps ? sm.red[kWarps + lane] : ib;
  __syncthreads();  // red is free for the next reduction
}
__device__ __forceinline__ float block_sum_f(float v, Smem& sm) {
  uint32_t a = __float_as_uint(warp_sum(v)), b = 0;
  warp_words(a, b, __float_as_uint(0.0f), 0, sm);
  return warp_sum(__uint_as_float(a));
}
__device__ __forceinline__ uint32_t block_sum_u(uint32_t v, Smem& sm) {
  uint32_t a = tree_sum_u(v), b = 0;
  warp_words(a, b, 0, 0, sm);
  return tree_sum_u(a);
}
__device__ __forceinline__ int block_max_i(int v, Smem& sm) {
  uint32_t a = static_cast<uint32_t>(tree_max_i(v)), b = 0;
  warp_words(a, b, static_cast<uint32_t>(INT32_MIN), 0, sm);
  return tree_max_i(static_cast<int>(a));
}
__device__ __forceinline__ void block_ms(float& m, float& s, Smem& sm) {
  tree_ms(m, s);
  uint32_t a = __float_as_uint(m), b = __float_as_uint(s);
  warp_words(a, b, __float_as_uint(-INFINITY), __float_as_uint(0.0f), sm);
  m = __uint_as_float(a);
  s = __uint_as_float(b);
  tree_ms(m, s);
}
__device__ __forceinline__ void block_best(float& bv, int32_t& bi, Smem& sm) {
  tree_best(bv, bi);
  uint32_t a = __float_as_uint(bv), b = static_cast<uint32_t>(bi);
  warp_words(a, b, __float_as_uint(-INFINITY), static_cast<uint32_t>(kNoIndex), sm);
  bv = __uint_as_float(a);
  bi = static_cast<int32_t>(b);
  tree_best(bv, bi);
}
// Inclusive prefix sum over a warp in lane order.
template <class T>
__device__ __forceinline__ T warp_scan(T v) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T y = __shfl_up_sync(kFull, v, o);
    if (lane >= o) v += y;
  }
  return v;
}
// Inclusive prefix sum over the block in thread order (a warp scan, then the warps' totals scanned
// by every warp alike).
__device__ __forceinline__ float block_scan_f(float v, Smem& sm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_scan(v);
  uint32_t a = __float_as_uint(__shfl_sync(kFull, v, 31)), b = 0;
  warp_words(a, b, __float_as_uint(0.0f), 0, sm);
  const float incl = warp_scan(__uint_as_float(a));
  const float excl = __shfl_up_sync(kFull, incl, 1);
  const float off = __shfl_sync(kFull, lane == 0 ? 0.0f : excl, warp);  // the warps before this one
  return v + off;
}

// One CTA's slice of a row: elements [begin, begin + n). Shared-memory position s holds element
// begin + s - pad (valid for pad <= s < pad + n), so that slot q (positions [8q, 8q + 8)) starts on a
// 16-byte boundary of the logits. Thread t owns the slots q = t, t + kThreads, ... The raw logits
// are staged once into shared memory (xs, NaN at invalid positions): every pass reads them there.
struct Slice {
  const bf16* row;
  bf16* xs;
  int32_t begin, n, pad, nslots;
  __device__ bool valid(int s) const { return s >= pad && s < pad + n; }
  __device__ int32_t id(int s) const { return begin + s - pad; }
  // Starts the copy of the slice into xs (cp.async, every slot in flight at once; partial slots
  // element by element); stage_wait() makes it visible to the whole CTA.
  __device__ void stage() const {
    for (int q = threadIdx.x; q < nslots; q += kThreads) {
      const int s0 = 8 * q;
      if (s0 >= pad && s0 + 8 <= pad + n) {
        cp_async16(smem_u32(xs + s0), row + (begin - pad + s0), true);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e)
          xs[s0 + e] = valid(s0 + e) ? row[begin - pad + s0 + e] : __ushort_as_bfloat16(0x7fc0);
      }
    }
    cp_async_commit();
  }
  __device__ static void stage_wait() {
    cp_async_wait<0>();
    __syncthreads();
  }
  // The raw logits of slot q (NaN at invalid positions).
  __device__ void load(int q, float (&x)[8]) const { unpack_bf16x8(*reinterpret_cast<const uint4*>(xs + 8 * q), x); }
};


class Sampler {
 public:
  __device__ Sampler(cg::cluster_group cl, Smem& sm, float* lv, unsigned char* region, const Slice& sl, const Params& p,
                     int32_t row, int32_t vocab)
      : cl_(cl), sm_(sm), lv_(lv), region_(region), sl_(sl), p_(p), row_(row), vocab_(vocab) {}

  __device__ void run(const int32_t* history, int32_t history_stride, const bf16* row_logits, int64_t* tokens,
                      float* logprobs, int32_t* top_ids);

 private:
  // ---- exchanges: this CTA's words into x[buf], cluster barrier, then read the other ranks.
  __device__ void exchange_small(int nwords) {
    cl_.sync();
    if (threadIdx.x < kCluster) {
      const uint32_t* remote = cl_.map_shared_rank(sm_.x[buf_], static_cast<unsigned>(threadIdx.x));
      for (int i = 0; i < nwords; ++i) sm_.all[threadIdx.x][i] = remote[i];
    }
    __syncthreads();
    buf_ ^= 1;
  }
  // Merged (count, mass) of the cluster; `cnt`, `mass` this thread's part.
  __device__ void exchange_cm(uint32_t& cnt, float& mass) {
    cnt = block_sum_u(cnt, sm_);
    mass = block_sum_f(mass, sm_);
    if (threadIdx.x == 0) {
      sm_.x[buf_][0] = cnt;
      sm_.x[buf_][1] = __float_as_uint(mass);
    }
    exchange_small(2);
    cnt = 0;
    mass = 0.0f;
    for (int c = 0; c < kCluster; ++c) {
      cnt += sm_.all[c][0];
      mass += __uint_as_float(sm_.all[c][1]);
    }
  }

  __device__ float lmass(float v) const { return __expf(v - lmax_); }
  __device__ int lbin(float v) const { return dist_bin(__fmul_rn(lmax_ - v, p_.temperature)); }
  __device__ int rbin(float x) const { return dist_bin(isnan(x) ? INFINITY : rmax_ - x); }

  // Sum of e over slot q's valid elements with l >= tau, in position order.
  __device__ float slot_mass(int q, float tau) const {
    float ss = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int s = 8 * q + e;
      const float v = lv_[s];
      if (sl_.valid(s) && v >= tau) ss += lmass(v);
    }
    return ss;
  }

  __device__ void phase_a(const int32_t* history, int32_t history_stride);
  __device__ void mass_pass_and_search(float tau);
  __device__ void select_rank_and_search(const float (&zc)[kCluster], float tau);
  __device__ int32_t search_cdf(float r, float tau);
  __device__ void histogram_pass();
  __device__ void compaction_pass();
  __device__ void fallback_sample();
  __device__ void fallback_topn();
  __device__ int32_t finish_sample(uint64_t* list, float* pre, int n);
  __device__ void finish_topn(uint64_t* list, int n);
  __device__ void sort_desc(uint64_t* a, int n);
  __device__ void emit_token(int32_t tok) {
    tok = min(max(tok, 0), vocab_ - 1);
    tokens_[row_] = tok;
    logprobs_[static_cast<int64_t>(row_) * (1 + kMaxLogprobs)] = to_f(row_logits_[tok]) - log_z_;
  }
  __device__ uint64_t* list_s() const { return reinterpret_cast<uint64_t*>(region_); }
  __device__ uint64_t* list_r() const { return reinterpret_cast<uint64_t*>(region_) + kCap; }
  __device__ float* list_pre() const { return reinterpret_cast<float*>(region_ + 2 * kCap * 8); }
  // Appends `key` (when `pred`; every lane of the warp calls it) to rank 0's list `which`.
  __device__ void append(int which, bool pred, uint64_t key) {
    const unsigned m = __ballot_sync(kFull, pred);
    if (m == 0) return;
    const int lane = threadIdx.x & 31, leader = __ffs(m) - 1;
    unsigned base = 0;
    if (lane == leader) base = atomicAdd(cl_.map_shared_rank(&sm_.list_n[which], 0u), static_cast<unsigned>(__popc(m)));
    base = __shfl_sync(kFull, base, leader);
    if (pred) {
      const unsigned pos = base + __popc(m & ((1u << lane) - 1u));
      uint64_t* dst = cl_.map_shared_rank(which == 0 ? list_s() : list_r(), 0u);
      if (pos < static_cast<unsigned>(kCap)) dst[pos] = key;
    }
  }

  cg::cluster_group cl_;
  Smem& sm_;
  float* lv_;
  unsigned char* region_;
  Slice sl_;
  Params p_;
  int32_t row_, vocab_;
  int buf_ = 0;
  const bf16* row_logits_ = nullptr;
  int64_t* tokens_ = nullptr;
  float* logprobs_ = nullptr;
  int32_t* top_ids_ = nullptr;
  // Row-wide results of phase A (identical in every thread of the cluster).
  float rmax_ = -INFINITY, log_z_ = 0.0f, lmax_ = -INFINITY, u_ = 0.0f;
  float zc_[kCluster] = {};  // per-rank mass of the online pass
  int32_t greedy_token_ = 0;
  // Histogram results.
  float zhist_ = 0.0f;
  int bin_s_ = kBins - 1, bin_r_ = kBins - 1;
  bool filtered_ = false;  // sampling with top-k or top-p: the histogram's l part
  bool cand_s_ = false, cand_r_ = false;
};

// Phase A: raw logits -> (penalties) -> l into shared memory; per-thread raw (max, sum), l (max, sum),
// argmax of the penalized logits; merged over the cluster.
__device__ void Sampler::phase_a(const int32_t* history, int32_t history_stride) {
  uint32_t* cnt = reinterpret_cast<uint32_t*>(lv_);
  const int32_t* h = history + static_cast<int64_t>(row_) * history_stride;
  const int32_t* bias = h + history_stride - 2 * p_.n_bias;  // the row's logit-bias pairs
  const bool adjusted = p_.adjusted();
  if (adjusted) {
    for (int i = threadIdx.x; i < 8 * sl_.nslots; i += kThreads) cnt[i] = 0;
    __syncthreads();
    if (p_.penalties) count_history(h, p_.history_len, sl_.begin, sl_.n, sl_.pad, cnt);
    mark_bias(bias, p_.n_bias, sl_.begin, sl_.n, sl_.pad, cnt);
    __syncthreads();
  }
  Slice::stage_wait();
  const bool online = !p_.greedy && !p_.use_topk && !p_.use_topp && !p_.use_minp;
  const float inv_t = p_.greedy ? 1.0f : 1.0f / p_.temperature;
  float rm = -INFINITY, rs = 0.0f, lm = -INFINITY, ls = 0.0f, bv = -INFINITY;
  int32_t bi = kNoIndex;
  for (int q = threadIdx.x; q < sl_.nslots; q += kThreads) {
    float x[8];
    sl_.load(q, x);
    // raw (max, sum) of the slot; NaN ignored
    float gm = -INFINITY;
#pragma unroll
    for (int e = 0; e < 8; ++e) gm = fmaxf(gm, x[e]);  // fmaxf ignores NaN
    if (gm != -INFINITY) {
      float gs = 0.0f;
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (!isnan(x[e])) gs += __expf(x[e] - gm);
      merge_ms(rm, rs, gm, gs);
    }
    // Staged invalid positions are NaN: they never win the argmax (every comparison is false), become
    // -inf below and hold no history count, so no validity test is needed here.
    if (adjusted) {
#pragma unroll
      for (int e = 0; e < 8; ++e) adjust(x[e], cnt[8 * q + e], p_, bias);  // what this thread's own position holds
    }
    const int32_t id0 = sl_.id(8 * q);
#pragma unroll
    for (int e = 0; e < 8; ++e) better(bv, bi, x[e], id0 + e);
    if (!p_.greedy) {
      float l[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        l[e] = scaled(x[e], inv_t);
      }
      float4* dst = reinterpret_cast<float4*>(lv_ + 8 * q);
      dst[0] = make_float4(l[0], l[1], l[2], l[3]);
      dst[1] = make_float4(l[4], l[5], l[6], l[7]);
      float g = -INFINITY;
#pragma unroll
      for (int e = 0; e < 8; ++e) g = fmaxf(g, l[e]);
      if (online && g != -INFINITY) {
        float gs = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) gs += __expf(l[e] - g);
        merge_ms(lm, ls, g, gs);
      } else {
        lm = fmaxf(lm, g);
      }
    }
  }
  sm_.aux[threadIdx.x] = lm;  // the online pass's per-thread (max, sum) for the CDF search
  sm_.w[threadIdx.x] = ls;
  block_ms(rm, rs, sm_);
  block_ms(lm, ls, sm_);
  block_best(bv, bi, sm_);
  if (threadIdx.x == 0) {
    sm_.x[buf_][0] = __float_as_uint(rm);
    sm_.x[buf_][1] = __float_as_uint(rs);
    sm_.x[buf_][2] = __float_as_uint(lm);
    sm_.x[buf_][3] = __float_as_uint(ls);
    sm_.x[buf_][4] = __float_as_uint(bv);
    sm_.x[buf_][5] = static_cast<uint32_t>(bi);
  }
  exchange_small(6);
  float gm = -INFINITY, gs = 0.0f;
  bv = -INFINITY;
  bi = kNoIndex;
  for (int c = 0; c < kCluster; ++c) {
    merge_ms(gm, gs, __uint_as_float(sm_.all[c][0]), __uint_as_float(sm_.all[c][1]));
    lmax_ = fmaxf(lmax_, __uint_as_float(sm_.all[c][2]));
    better(bv, bi, __uint_as_float(sm_.all[c][4]), static_cast<int32_t>(sm_.all[c][5]));
  }
  rmax_ = gm;
  log_z_ = gm + logf(gs);
  greedy_token_ = bi == kNoIndex ? 0 : bi;
  for (int c = 0; c < kCluster; ++c) {
    const float m = __uint_as_float(sm_.all[c][2]), s = __uint_as_float(sm_.all[c][3]);
    zc_[c] = (m == -INFINITY || !online) ? 0.0f : s * __expf(m - lmax_);
  }
}

// The token in this CTA at CDF position r (per-thread masses in sm_.w, elements with l >= tau):
// the thread by a block prefix over sm_.w, its slot by a warp prefix, then the element. Called by
// every thread of the CTA; returns the token in every thread.
__device__ int32_t Sampler::search_cdf(float r, float tau) {
  const int t = threadIdx.x, lane = t & 31;
  const float w = sm_.w[t];
  const float pre = block_scan_f(w, sm_);
  sm_.aux[t] = pre;
  const int below = static_cast<int>(block_sum_u(pre <= r ? 1u : 0u, sm_));  // sm_.aux visible after its barriers
  const int last = block_max_i(w > 0.0f ? t : -1, sm_);
  const int ts = max(0, min(below, last));
  const float r1 = r - (ts > 0 ? sm_.aux[ts - 1] : 0.0f);
  if (t < 32) {
    const int q = ts + lane * kThreads;
    const float ss = q < sl_.nslots ? slot_mass(q, tau) : 0.0f;
    float cum = ss;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const float y = __shfl_up_sync(kFull, cum, o);
      if (lane >= o) cum += y;
    }
    const int below2 = __popc(__ballot_sync(kFull, cum <= r1));
    const unsigned pos = __ballot_sync(kFull, ss > 0.0f);
    const int last2 = pos ? 31 - __clz(pos) : 0;
    const int ls = min(below2, last2);
    const float before = __shfl_sync(kFull, cum, max(ls - 1, 0));
    const float r2 = r1 - (ls > 0 ? before : 0.0f);
    if (lane == ls) {
      const int q2 = ts + ls * kThreads;
      int pick = -1, lastp = -1, first_valid = -1;
      float c2 = 0.0f;
      if (q2 < sl_.nslots) {
        for (int e = 0; e < 8; ++e) {
          const int s = 8 * q2 + e;
          if (!sl_.valid(s)) continue;
          if (first_valid < 0) first_valid = e;
          const float v = lv_[s];
          const float ev = v >= tau ? lmass(v) : 0.0f;
          if (ev > 0.0f) {
            lastp = e;
            c2 += ev;
            if (pick < 0 && c2 > r2) pick = e;
          }
        }
      }
      if (pick < 0) pick = lastp;
      if (pick < 0) pick = first_valid;
      sm_.bc[0] = pick < 0 ? sl_.begin : sl_.id(8 * q2 + pick);
    }
  }
  __syncthreads();
  const int32_t tok = sm_.bc[0];
  __syncthreads();
  return tok;
}

// Picks the rank whose mass holds u · Z (zc: per-rank masses, in rank order), and there the token.
__device__ void Sampler::select_rank_and_search(const float (&zc)[kCluster], float tau) {
  float z = 0.0f;
  for (int c = 0; c < kCluster; ++c) z += zc[c];
  const float target = u_ * z;
  float pre[kCluster];
  float run = 0.0f;
  int below = 0, last = 0;
  for (int c = 0; c < kCluster; ++c) {
    run += zc[c];
    pre[c] = run;
    if (run <= target) below = c + 1;
    if (zc[c] > 0.0f) last = c;
  }
  const int cs = min(below, last);
  if (static_cast<int>(cl_.block_rank()) != cs) return;  // uniform per CTA
  const float r = target - (cs > 0 ? pre[cs - 1] : 0.0f);
  const int32_t tok = search_cdf(r, tau);
  if (threadIdx.x == 0) emit_token(tok);
}

// Per-thread masses of l >= tau into sm_.w, per-rank totals exchanged, then the search.
__device__ void Sampler::mass_pass_and_search(float tau) {
  float w = 0.0f;
  for (int q = threadIdx.x; q < sl_.nslots; q += kThreads) w += slot_mass(q, tau);
  sm_.w[threadIdx.x] = w;
  const float z = block_sum_f(w, sm_);
  if (threadIdx.x == 0) sm_.x[buf_][0] = __float_as_uint(z);
  exchange_small(1);
  float zc[kCluster];
  for (int c = 0; c < kCluster; ++c) zc[c] = __uint_as_float(sm_.all[c][0]);
  select_rank_and_search(zc, tau);
}

// Distance histograms, one column per warp (shared atomics on integers only, so the sums do not
// depend on the order the atomics land in): l's counts and masses by lbin (sampling with top-k /
// top-p; masses in fixed point, kMassScale units), raw counts by rbin (top-n log-probs); summed over
// the warps and then over the cluster's ranks.
__device__ void Sampler::histogram_pass() {
  const bool hs = filtered_, hr = p_.n_logprobs > 0;
  uint32_t* cnt = reinterpret_cast<uint32_t*>(region_);  // [kWarps][kBins]: l count | raw count << 16
  unsigned long long* mass = reinterpret_cast<unsigned long long*>(region_ + 4 * kWarps * kBins);  // [kWarps][kBins]
  const int t = threadIdx.x, warp = t >> 5;
  for (int i = t; i < kWarps * kBins; i += kThreads) {
    cnt[i] = 0;
    mass[i] = 0;
  }
  __syncthreads();
  uint32_t* wc = cnt + warp * kBins;
  unsigned long long* wm = mass + warp * kBins;
  for (int q = t; q < sl_.nslots; q += kThreads) {
    float x[8];
    if (hr) sl_.load(q, x);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int s = 8 * q + e;
      if (!sl_.valid(s)) continue;
      if (hs) {
        const float v = lv_[s];
        const int b = lbin(v);
        atomicAdd(&wc[b], 1u);
        atomicAdd(&wm[b], fixed_mass(lmass(v)));
      }
      if (hr) atomicAdd(&wc[rbin(x[e])], 1u << 16);
    }
  }
  __syncthreads();
  // warp b sums bin b over the warps' columns (lane w reads warp w's), a fixed xor tree -> this
  // rank's exchange words (l count, raw count, mass lo, hi)
  static_assert(kWarps == kBins, "one warp per bin, one lane per column");
  {
    const int b = warp, lane = t & 31;
    const uint32_t c = cnt[lane * kBins + b];
    uint32_t cl = tree_sum_u(c & 0xffffu), cr = tree_sum_u(c >> 16);
    unsigned long long ms = mass[lane * kBins + b];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ms += __shfl_xor_sync(kFull, ms, o);
    if (lane == 0) {
      sm_.x[buf_][b] = cl;
      sm_.x[buf_][kBins + b] = cr;
      sm_.x[buf_][2 * kBins + b] = static_cast<uint32_t>(ms);
      sm_.x[buf_][3 * kBins + b] = static_cast<uint32_t>(ms >> 32);
    }
  }
  cl_.sync();
  if (t < kBins) {
    uint32_t cl = 0, cr = 0;
    unsigned long long ms = 0;
    for (int c = 0; c < kCluster; ++c) {
      const uint32_t* r = cl_.map_shared_rank(sm_.x[buf_], static_cast<unsigned>(c));
      cl += r[t];
      cr += r[kBins + t];
      ms +=
          static_cast<unsigned long long>(r[2 * kBins + t]) | (static_cast<unsigned long long>(r[3 * kBins + t]) << 32);
    }
    sm_.g[t] = cl;
    sm_.g[kBins + t] = cr;
    sm_.gm[t] = ms;
  }
  __syncthreads();
  buf_ ^= 1;
  // Every warp alike (lane b holds bin b): inclusive scans over the bins, then the first bin whose
  // cumulative count (mass) reaches the bound, the last bin if none before it does.
  static_assert(kBins == 32, "one lane per bin");
  const int lane = t & 31;
  const uint32_t cs = warp_scan(sm_.g[lane]), cr = warp_scan(sm_.g[kBins + lane]);
  const unsigned long long ms = warp_scan(sm_.gm[lane]);
  zhist_ = mass_value(__shfl_sync(kFull, ms, kBins - 1));
  auto first_lane = [&](bool reached, uint32_t incl, int& bin) {
    const unsigned hit = __ballot_sync(kFull, reached && lane < kBins - 1);
    bin = hit ? __ffs(hit) - 1 : kBins - 1;
    return __shfl_sync(kFull, incl, bin);  // the count up to and with that bin
  };
  if (hs) {
    const float target = p_.top_p * zhist_;
    const bool reached = p_.use_topk ? cs >= static_cast<uint64_t>(p_.top_k) : mass_value(ms) >= target;
    cand_s_ = first_lane(reached, cs, bin_s_) <= static_cast<uint32_t>(kCap);
  }
  if (hr) cand_r_ = first_lane(cr >= static_cast<uint32_t>(p_.n_logprobs), cr, bin_r_) <= static_cast<uint32_t>(kCap);
  __syncthreads();  // the columns are dead; rank 0's region takes the candidate lists next
}

// Candidates (elements in the bins up to bin_s_ / bin_r_) appended to rank 0's lists.
__device__ void Sampler::compaction_pass() {
  const int t = threadIdx.x;
  for (int q0 = 0; q0 < sl_.nslots; q0 += kThreads) {  // uniform trip count: whole warps append
    const int q = q0 + t;
    const bool has = q < sl_.nslots;
    float x[8] = {};
    if (cand_r_ && has) sl_.load(q, x);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int s = 8 * q + e;
      const bool ok = has && sl_.valid(s);
      if (cand_s_) {
        const float v = ok ? lv_[s] : -INFINITY;
        append(0, ok && lbin(v) <= bin_s_, ok ? cand_key(v, sl_.id(s)) : 0);
      }
      if (cand_r_) {
        const float xr = ok ? (isnan(x[e]) ? -INFINITY : x[e]) : -INFINITY;
        append(1, ok && rbin(ok ? x[e] : 0.0f) <= bin_r_, ok ? cand_key(xr, sl_.id(s)) : 0);
      }
    }
  }
  cl_.sync();  // rank 0 holds every candidate
}

// Bitonic sort of a[0, n), descending (n <= kCap), padding to a power of two with zeros.
__device__ void Sampler::sort_desc(uint64_t* a, int n) {
  int p = 1;
  while (p < n) p <<= 1;
  for (int i = n + threadIdx.x; i < p; i += kThreads) a[i] = 0;
  __syncthreads();
  for (int k = 2; k <= p; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < p; i += kThreads) {
        const int l = i ^ j;
        if (l > i) {
          const uint64_t x = a[i], y = a[l];
          if ((i & k) == 0 ? x < y : x > y) {
            a[i] = y;
            a[l] = x;
          }
        }
      }
      __syncthreads();
    }
  }
}

// The sampled token from the sorted candidates (rank 0, every thread).
__device__ int32_t Sampler::finish_sample(uint64_t* list, float* pre, int n) {
  if (n <= 0) return greedy_token_;  // cannot happen: bin 0 holds the maximum
  sort_desc(list, n);
  const int t = threadIdx.x;
  float loc[8];
  float run = 0.0f;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const int j = 8 * t + e;
    run += j < n ? lmass(cand_value(list[j])) : 0.0f;
    loc[e] = run;
  }
  const float off = block_scan_f(run, sm_) - run;
#pragma unroll
  for (int e = 0; e < 8; ++e)
    if (8 * t + e < n) pre[8 * t + e] = off + loc[e];
  __syncthreads();
  // count of j < limit with pred(j), over the block
  auto count = [&](int limit, auto pred) {
    uint32_t c = 0;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int j = 8 * t + e;
      if (j < limit && pred(j)) ++c;
    }
    return static_cast<int>(block_sum_u(c, sm_));
  };
  auto value = [&](int j) { return cand_value(list[j]); };
  int kk = n;
  float zk = zhist_;
  if (p_.use_topk) {
    const float vk = value(static_cast<int>(min(p_.top_k, static_cast<int64_t>(n))) - 1);
    kk = count(n, [&](int j) { return value(j) >= vk; });
    zk = pre[kk - 1];
  }
  int kp = n;
  if (p_.use_topp) {
    const float target = p_.top_p * zk;
    const int js = min(count(kk, [&](int j) { return pre[j] < target; }), kk - 1);
    const float vp = value(js);
    kp = count(n, [&](int j) { return value(j) >= vp; });
  }
  int km = n;
  if (p_.use_minp) {
    const float tm = lmax_ + logf(p_.min_p);
    km = count(n, [&](int j) { return value(j) >= tm; });
  }
  const int k = max(1, min(kk, min(kp, km)));
  const float r = u_ * pre[k - 1];
  int idx = count(k, [&](int j) { return pre[j] <= r; });
  const int last = block_max_i(
      [&] {
        int m = -1;
        for (int e = 0; e < 8; ++e) {
          const int j = 8 * t + e;
          if (j < k && lmass(value(j)) > 0.0f) m = j;
        }
        return m;
      }(),
      sm_);
  idx = max(0, min(idx, last));
  return cand_id(list[idx]);
}

// The top n_logprobs raw logits from the sorted candidates (rank 0, every thread).
__device__ void Sampler::finish_topn(uint64_t* list, int n) {
  sort_desc(list, n);
  const int64_t base = static_cast<int64_t>(row_);
  for (int j = threadIdx.x; j < p_.n_logprobs && j < n; j += kThreads) {
    logprobs_[base * (1 + kMaxLogprobs) + 1 + j] = cand_value(list[j]) - log_z_;
    top_ids_[base * kMaxLogprobs + j] = cand_id(list[j]);
  }
}

// Exact thresholds by bisection over the value keys (count and mass queries, fixed-order sums), then
// the inverse CDF over l >= the threshold. For candidate sets above kCap.
__device__ void Sampler::fallback_sample() {
  const uint32_t kmax = fkey(lmax_);
  auto query = [&](uint32_t t, uint32_t& c, float& m) {
    c = 0;
    m = 0.0f;
    for (int q = threadIdx.x; q < sl_.nslots; q += kThreads) {
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int s = 8 * q + e;
        const float v = lv_[s];
        if (sl_.valid(s) && fkey(v) >= t) {
          ++c;
          m += lmass(v);
        }
      }
    }
    exchange_cm(c, m);
  };
  uint32_t tk = 0;
  float zk = zhist_;
  if (p_.use_topk) {  // the largest key t with count(key >= t) >= top_k
    for (int bit = 31; bit >= 0; --bit) {
      const uint32_t cand = tk | (1u << bit);
      uint32_t c;
      float m;
      query(cand, c, m);
      if (c >= static_cast<uint64_t>(p_.top_k)) {
        tk = cand;
        zk = m;
      }
    }
  }
  uint32_t tp = 0;
  if (p_.use_topp) {  // the largest key t with mass(key >= t) >= top_p · zk
    const float target = p_.top_p * zk;
    for (int bit = 31; bit >= 0; --bit) {
      const uint32_t cand = tp | (1u << bit);
      uint32_t c;
      float m;
      query(cand, c, m);
      if (m >= target) tp = cand;
    }
    tp = min(tp, kmax);
  }
  uint32_t tau = max(tk, tp);
  if (p_.use_minp) tau = max(tau, fkey(lmax_ + logf(p_.min_p)));
  tau = min(tau, kmax);
  mass_pass_and_search(fkey_inv(tau));
}

// Exact top-n of the raw logits by bisection over the unique keys (bf16 value, ~id), then those n
// elements appended to rank 0's list. For candidate sets above kCap.
__device__ void Sampler::fallback_topn() {
  const int idb = 32 - __clz(max(vocab_ - 1, 1));  // bits of an id
  auto key16 = [](float x) -> uint32_t {
    if (isnan(x)) return 0;
    uint32_t b = __float_as_uint(x) >> 16;
    if (b == 0x8000u) b = 0;
    return (b & 0x8000u) ? (~b & 0xffffu) : (b | 0x8000u);
  };
  auto ckey = [&](float x, int32_t id) {
    return (static_cast<uint64_t>(key16(x)) << idb) | ((1ull << idb) - 1 - static_cast<uint64_t>(id));
  };
  uint64_t tn = 0;
  for (int bit = 15 + idb; bit >= 0; --bit) {
    const uint64_t cand = tn | (1ull << bit);
    uint32_t c = 0;
    float m = 0.0f;
    for (int q = threadIdx.x; q < sl_.nslots; q += kThreads) {
      float x[8];
      sl_.load(q, x);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int s = 8 * q + e;
        if (sl_.valid(s) && ckey(x[e], sl_.id(s)) >= cand) ++c;
      }
    }
    exchange_cm(c, m);
    if (c >= static_cast<uint32_t>(p_.n_logprobs)) tn = cand;
  }
  for (int q0 = 0; q0 < sl_.nslots; q0 += kThreads) {
    const int q = q0 + threadIdx.x;
    const bool has = q < sl_.nslots;
    float x[8] = {};
    if (has) sl_.load(q, x);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int s = 8 * q + e;
      const bool ok = has && sl_.valid(s) && ckey(x[e], sl_.id(s)) >= tn;
      append(1, ok, ok ? cand_key(isnan(x[e]) ? -INFINITY : x[e], sl_.id(s)) : 0);
    }
  }
  cl_.sync();
}

__device__ void Sampler::run(const int32_t* history, int32_t history_stride, const bf16* row_logits, int64_t* tokens,
                             float* logprobs, int32_t* top_ids) {
  row_logits_ = row_logits;
  tokens_ = tokens;
  logprobs_ = logprobs;
  top_ids_ = top_ids;
  if (threadIdx.x == 0) {
    sm_.list_n[0] = 0;
    sm_.list_n[1] = 0;
  }
  u_ = kern_philox::sample_uniform(p_.seed, p_.counter);
  phase_a(history, history_stride);  // ends in a cluster barrier: list_n is zero everywhere before any append
  const bool rank0 = cl_.block_rank() == 0;
  const bool sampleable = !p_.greedy && lmax_ != -INFINITY && p_.forced < 0;
  const bool filtered = sampleable && (p_.use_topk || p_.use_topp);
  filtered_ = filtered;
  if (!sampleable) {
    if (rank0 && threadIdx.x == 0) emit_token(p_.forced >= 0 ? p_.forced : greedy_token_);
  } else if (!filtered && !p_.use_minp) {  // temperature only: the online pass's masses
    const float m = sm_.aux[threadIdx.x], s = sm_.w[threadIdx.x];
    __syncthreads();
    sm_.w[threadIdx.x] = m == -INFINITY ? 0.0f : s * __expf(m - lmax_);
    __syncthreads();
    select_rank_and_search(zc_, -INFINITY);
  } else if (!filtered) {  // min-p only
    mass_pass_and_search(lmax_ + logf(p_.min_p));
  }
  if (filtered || p_.n_logprobs > 0) {
    histogram_pass();
    if (cand_s_ || cand_r_) compaction_pass();
  }
  if (filtered && !cand_s_) fallback_sample();
  if (p_.n_logprobs > 0 && !cand_r_) fallback_topn();
  cl_.sync();  // no CTA leaves while another may still read its shared memory
  if (rank0) {
    if (filtered && cand_s_) {
      const int32_t tok = finish_sample(list_s(), list_pre(), static_cast<int>(min(sm_.list_n[0], uint32_t{kCap})));
      if (threadIdx.x == 0) emit_token(tok);
    }
    if (p_.n_logprobs > 0) finish_topn(list_r(), static_cast<int>(min(sm_.list_n[1], uint32_t{kCap})));
  }
}

#endif  // __CUDA_ARCH__ >= 900

}  // namespace

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define KERN_SAMPLE_CLUSTER
#else
#define KERN_SAMPLE_CLUSTER __cluster_dims__(8, 1, 1)  // kCluster
#endif

// grid (kCluster = 8, rows, 1), block (kThreads = 1024, 1, 1), compile-time cluster (8, 1, 1); dynamic shared memory
// kern_sample::shared_bytes(vocab) (kernels/sample_layout.cuh; less traps). sm_80 images trap.
extern "C" __global__ void KERN_SAMPLE_CLUSTER __launch_bounds__(kThreads)
    kern_sample_bf16(const bf16* __restrict__ logits, const float* __restrict__ fparams,
                     const int64_t* __restrict__ iparams, const int32_t* __restrict__ history,
                     int64_t* __restrict__ tokens, float* __restrict__ logprobs, int32_t* __restrict__ top_ids,
                     const int32_t* __restrict__ route, int32_t rows, int32_t vocab, int32_t history_stride) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  wait_for_previous_grid();
  allow_next_grid();
  const int32_t row = blockIdx.y;
  if (row >= rows || vocab <= 0 || blockDim.x != kThreads) return;  // uniform over the cluster
  if (route[row] != 0) return;                                     // the race kernel's row
  const int32_t chunk = static_cast<int32_t>(kern_sample::chunk(vocab));
  const int32_t slot_floats = static_cast<int32_t>(8 * kern_sample::slice_slots(vocab));
  uint32_t dyn;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
  if (dyn < static_cast<uint32_t>(kern_sample::shared_bytes(vocab)) || chunk > 8 * 32 * kThreads - 16) __trap();
  extern __shared__ __align__(16) unsigned char dyn_smem[];
  __shared__ Smem sm;
  cg::cluster_group cl = cg::this_cluster();
  const int rank = static_cast<int>(cl.block_rank());
  Slice sl;
  sl.row = logits + static_cast<int64_t>(row) * vocab;
  sl.begin = min(vocab, rank * chunk);
  sl.n = min(vocab, sl.begin + chunk) - sl.begin;
  sl.pad = static_cast<int32_t>((reinterpret_cast<uintptr_t>(sl.row + sl.begin) & 15u) >> 1);
  sl.nslots = (sl.pad + sl.n + 7) / 8;
  sl.xs = reinterpret_cast<bf16*>(dyn_smem);
  sl.stage();  // in flight while the parameters and the history are read
  const Params p = read_params(fparams + static_cast<int64_t>(row) * 8, iparams + static_cast<int64_t>(row) * 8, vocab,
                               history_stride);
  unsigned char* lv = dyn_smem + 2 * slot_floats;  // after xs
  Sampler s(cl, sm, reinterpret_cast<float*>(lv), lv + 4 * slot_floats, sl, p, row, vocab);
  s.run(history, history_stride, sl.row, tokens, logprobs, top_ids);
#else
  __trap();
#endif
}
