// The sampling op's first kernel (docs/kernels.md, "Sampling"): one pass over the logits spread over
// the whole GPU (race_chunks(vocab) CTAs per row, kernels/sample_layout.cuh), no second pass over
// them and no second launch, for every row but forced ones and those asking for both penalties and
// top log-probs; route[r] = 0 hands a row to the cluster kernel instead.
//
// Each CTA folds its 2048 tokens into a partial: raw (max, sum of exp) for the log-probs, the greedy
// argmax, max l and, where top-p needs the row's mass, sum exp(l - max l). Rows that rank (top-k,
// top-p, top-n log-probs) also get each segment's two largest keys, rows drawn over every token each
// segment's (max l, sum exp(l - it)) (a segment: one warp's 256 tokens). The last CTA
// of the row to arrive folds the partials in chunk order (a fixed order: the token does not depend
// on the batch or on timing), writes the outputs and resets the row's arrival count (a carry
// buffer: zero at load, left zero by every launch).
//
// A row sampled over every token (temperature, penalties, min-p, log-probs without top-k / top-p) is
// drawn by inverse CDF in the row's last CTA (cdf_draw: one uniform, the segments' masses in order,
// then one segment's tokens read again), which picks i with probability softmax(l)_i up to f32 sums.
// - min-p alone by rejection: the draw over all tokens is accepted when its l >= max l +
//   log(min_p); a rejected row goes to the cluster kernel, whose draw uses counters this one never
//   uses: overall each kept token comes out with probability (1 - tail) q_i + tail q_i = q_i.
// - top-k / top-p (and min-p with them), top-n log-probs: the row's 64 largest keys, found by the
//   rank kernel (kern_sample_rank_bf16, below: the row's last CTA here leaves it route 2, the
//   segments' keys and the row's folds) through a threshold (docs/kernels.md, "Ranking rows by a threshold"): tau, the value
//   at which 64 of the segments' two largest keys (a segment: one warp's 256 tokens) are reached,
//   has at least 64 keys at or above it, so every key of the row's top 64 is >= tau; the candidates
//   >= tau are the segments' maxima where a segment's second key is below tau, and a rescan of the
//   segments whose second key is not; ranked by counting, they give the row's sorted top keys.
//   When the kept set is a proper prefix of them, a Gumbel-max race runs over it (race_key: l - log
//   E, E an Exp(1) draw per token from Philox, race_words); otherwise (more than 63 kept, ties
//   running past the known keys, more than kCands candidates) the row goes to the cluster kernel, as do ranking rows with
//   penalties. Which path a row takes depends only on its logits and settings, never on the draw,
//   so each is exactly the kept distribution.
#pragma once

#include "philox.cuh"
#include "sample_common.cuh"
#include "sample_layout.cuh"

namespace kern_sample_dev {

__device__ __forceinline__ uint64_t shfl_xor_u64(uint64_t v, int o) {
  const uint32_t lo = __shfl_xor_sync(kFull, static_cast<uint32_t>(v), o);
  const uint32_t hi = __shfl_xor_sync(kFull, static_cast<uint32_t>(v >> 32), o);
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

constexpr int kRaceWarps = kern_sample::kRaceThreads / 32;
constexpr int kList = 64;        // the row's top keys a ranking row is decided over
constexpr int kCands = 1024;     // candidates >= tau the last CTA holds (more: the cluster kernel's row)
constexpr int kRankChunks = 128;  // chunks a ranking row may have (vocab up to 262,144)
constexpr int kSegKeys = 2 * kRaceWarps;           // a chunk's keys: each segment's (warp's) two largest
constexpr int kTauKeys = kSegKeys * kRankChunks;  // the keys tau is taken from
static_assert(kern_sample::kRaceTokens == 8, "one 16-byte load per thread");

// One chunk's partial result, as stored (kern_sample::kRaceWords words): the partial every row
// folds (32 bytes), then what a ranking row folds besides. Keys are cand_key's (value above, ~id
// below; 0 = none): their maximum is the argmax with ties to the lower id.
struct RacePart {
  float rm, rs;          // raw logits: max, sum of exp(x - max)
  unsigned long long g;  // greedy: the penalized logit's key
  float lmax, ls;        // the largest l; sum of exp(l - lmax) (top-p rows without top-k)
  uint32_t pad0[2];
  // chunk 0 of a ranking row, written by the row's last CTA for the rank kernel: the row's folds
  float rec_log_z, rec_lmax, rec_mass;  // log of the raw softmax's denominator; max l; sum exp(l - max l)
  int32_t rec_tok_g;                    // the greedy token
  unsigned long long rec_race_key;      // the token drawn over every token, as a key (0: none; its id is read)
  uint32_t pad[2];
  unsigned long long seg[kSegKeys];  // a ranking row: segment w's largest key at 2 w, its second at 2 w + 1 (0: none)
  // a row sampled over every token: segment w's largest l (low word) and sum of exp(l - it) (high
  // word), f32 bits; (-inf, 0) for a segment with no finite l
  unsigned long long cdf[kRaceWarps];
};
static_assert(sizeof(RacePart) == 4 * kern_sample::kRaceWords, "the partial's stored size");

// The CTA-wide fold of a thread's results: keys and max l by max (exact in any order), the raw sum
// in the tree's fixed order.
struct RaceFold {
  float rs;
  unsigned long long g;
  float lmax;
};

__device__ __forceinline__ void fold(RaceFold& a, const RaceFold& b) {
  a.rs += b.rs;
  a.g = max(a.g, b.g);
  a.lmax = fmaxf(a.lmax, b.lmax);
}

__device__ __forceinline__ RaceFold shfl_fold(const RaceFold& a, int o) {
  return {__shfl_xor_sync(kFull, a.rs, o), __shfl_xor_sync(kFull, a.g, o), __shfl_xor_sync(kFull, a.lmax, o)};
}

__device__ __forceinline__ RaceFold empty_fold() { return {0.0f, 0ull, -INFINITY}; }

// What a ranking row folds besides: the scaled mass (sums in the tree's order) and a key maximum.
struct ListFold {
  float ls;
  unsigned long long u;
};

__device__ __forceinline__ void fold(ListFold& a, const ListFold& b) {
  a.ls += b.ls;
  a.u = max(a.u, b.u);
}

__device__ __forceinline__ ListFold shfl_fold(const ListFold& a, int o) {
  return {__shfl_xor_sync(kFull, a.ls, o), __shfl_xor_sync(kFull, a.u, o)};
}

__device__ __forceinline__ void empty(RaceFold& a) { a = empty_fold(); }
__device__ __forceinline__ void empty(ListFold& a) { a = {0.0f, 0ull}; }

// Every thread returns the CTA's fold: an xor tree per warp, the warps' results through shared
// memory, the same tree over them in every warp (a fixed order, whatever the timing).
template <class F>
__device__ __forceinline__ F block_fold(F a, F* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) fold(a, shfl_fold(a, o));
  if (lane == 0) red[warp] = a;
  __syncthreads();
  F b;
  if (lane < kRaceWarps) {
    b = red[lane];
  } else {
    empty(b);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) fold(b, shfl_fold(b, o));
  __syncthreads();  // red is free again
  return b;
}

__device__ __forceinline__ float block_max_f(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float b = lane < kRaceWarps ? red[lane] : -INFINITY;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) b = fmaxf(b, __shfl_xor_sync(kFull, b, o));
  __syncthreads();
  return b;
}

// log E for an Exp(1) draw E = -log(1 - w), w = (k + 1/2) 2^-24 with k the word's top 24 bits.
// Small E (the draws that win races) is computed from w by its series, where -log(1 - w) in f32
// would lose w's digits; from w = 1/64 on, 1 - w is formed from k exactly enough for __logf.
// E lies in [2^-25, 17.4]: finite, positive.
__device__ __forceinline__ float log_exponential(uint32_t word) {
  const uint32_t k = word >> 8;
  const float w = (static_cast<float>(k) + 0.5f) * 5.9604644775390625e-8f;  // 2^-24
  const float series = w * (1.0f + w * (0.5f + w * (0.33333334f + w * 0.25f)));
  const float direct = -__logf((static_cast<float>(16777216u - k) - 0.5f) * 5.9604644775390625e-8f);
  return __logf(k < (1u << 18) ? series : direct);
}

// The race key of token id at scaled logit l (one Philox call: the token's group of 4).
__device__ __forceinline__ uint64_t race_key(const Params& p, float l, int32_t id) {
  const kern_philox::U32x4 w = kern_philox::race_words(p.seed, p.counter, static_cast<uint32_t>(id) / 4);
  const int q = id & 3;  // a select, not an indexed (local-memory) load
  const uint32_t word = q == 0 ? w.v[0] : q == 1 ? w.v[1] : q == 2 ? w.v[2] : w.v[3];
  return cand_key(l - log_exponential(word), id);
}

// A ranking row (every thread of the rank kernel's CTA): the row's top keys by a threshold, then
// the cluster kernel's rules over them and the race over the kept prefix (docs/kernels.md,
// "Ranking rows by a threshold").
struct RankRow {
  Params p;
  const kern_dev::bf16* rowp;
  const RacePart* row_parts;
  int32_t row, nch, vocab;
  float inv_t, row_lmax, mass, log_z;  // mass: top-p's whole-row sum exp(l - max l)
  int32_t tok_g;
  unsigned long long race_key;  // the full race's winner (log-prob rows without a filter)
  bool sampled, filtered;
};
struct RankSmem {
  unsigned long long* cands;  // [kCands]
  uint16_t* vals;             // [kTauKeys]
  uint16_t* rescan;           // [kRankChunks * kRaceWarps]
  uint32_t* hist;             // [256]
  uint32_t *n_cands, *n_rescan;
  int *tau_bin, *tau_above;   // [2]
  unsigned long long* top;    // [kList]
};

__device__ __forceinline__ void rank_row(const RankRow& rr, const RankSmem& sm, int64_t* __restrict__ tokens,
                                      float* __restrict__ logprobs, int32_t* __restrict__ top_ids,
                                      int32_t* __restrict__ route, int32_t* __restrict__ arrivals) {
  using kern_sample::kRaceThreads;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const Params& p = rr.p;
  const kern_dev::bf16* rowp = rr.rowp;
  const RacePart* row_parts = rr.row_parts;
  const int32_t row = rr.row, nch = rr.nch, vocab = rr.vocab;
  const float inv_t = rr.inv_t, row_lmax = rr.row_lmax, log_z = rr.log_z;
  const int32_t tok_g = rr.tok_g;
  const bool sampled = rr.sampled, filtered = rr.filtered;
  uint32_t* hist = sm.hist;
  uint16_t* vals = sm.vals;
  uint16_t* rescan = sm.rescan;
  uint32_t& n_cands = *sm.n_cands;
  uint32_t& n_rescan = *sm.n_rescan;
  int* tau_bin = sm.tau_bin;
  int* tau_above = sm.tau_above;
  unsigned long long* top = sm.top;
  ListFold lf{rr.mass, 0ull};
  struct {
    unsigned long long k;
    float lmax;
  } b{rr.race_key, row_lmax};
  // The row's top keys. tau: the largest value at or above which 64 of the segments' keys lie (a
  // radix select on the keys' top 16 bits, the bf16 value, in two 8-bit passes); keys are unique
  // (the id is in them). With fewer than 64 keys, tau = 0: every valid token is a candidate.
  unsigned long long* cands = sm.cands;
  const int nk = kSegKeys * nch;
  // a key's top 16 bits are its bf16 value's order (0 only for no key: NaN is never a key)
  for (int t = threadIdx.x; t < nk; t += kRaceThreads)
    vals[t] = static_cast<uint16_t>(__ldcg(&row_parts[t / kSegKeys].seg[t % kSegKeys]) >> 48);
  hist[threadIdx.x] = 0;
  if (threadIdx.x < 2) tau_bin[threadIdx.x] = -1, tau_above[threadIdx.x] = 0;
  if (threadIdx.x == 0) n_cands = 0, n_rescan = 0;
  __syncthreads();
  // Warp 0: the highest bin b with base + (keys in bins >= b) >= 64, and base + (keys in bins > b).
  auto pick_bin = [&](int base, int pass) {
    if (warp != 0) return;
    uint32_t mine_sum = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) mine_sum += hist[8 * lane + j];
    uint32_t suffix = mine_sum;  // bins of lanes >= this one
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const uint32_t t = __shfl_down_sync(kFull, suffix, o);
      if (lane + o < 32) suffix += t;
    }
    uint32_t above = static_cast<uint32_t>(base) + suffix - mine_sum;  // in the lanes above this one
#pragma unroll
    for (int j = 7; j >= 0; --j) {
      const uint32_t with = above + hist[8 * lane + j];
      if (above < static_cast<uint32_t>(kList) && with >= static_cast<uint32_t>(kList)) {
        tau_bin[pass] = 8 * lane + j;
        tau_above[pass] = static_cast<int>(above);
      }
      above = with;
    }
  };
  for (int t = threadIdx.x; t < nk; t += kRaceThreads)
    if (vals[t] != 0) atomicAdd(&hist[vals[t] >> 8], 1u);
  __syncthreads();
  pick_bin(0, 0);
  __syncthreads();
  const int b1 = tau_bin[0];
  unsigned long long tau = 0;
  if (b1 >= 0) {
    hist[threadIdx.x] = 0;
    __syncthreads();
    for (int t = threadIdx.x; t < nk; t += kRaceThreads)
      if (vals[t] != 0 && (vals[t] >> 8) == b1) atomicAdd(&hist[vals[t] & 255u], 1u);
    __syncthreads();
    pick_bin(tau_above[0], 1);
    __syncthreads();
    tau = static_cast<unsigned long long>((b1 << 8) | tau_bin[1]) << 48;  // every key of that value or above
  }
  // A segment whose second key is below tau holds one candidate, its largest key (when >= tau); the
  // others are rescanned, each by one warp, two at a time.
  auto add = [&](unsigned long long k) {
    const uint32_t at = atomicAdd(&n_cands, 1u);
    if (at < kCands) cands[at] = k;
  };
  const uint16_t tv = static_cast<uint16_t>(tau >> 48);
  for (int sg = threadIdx.x; sg < kRaceWarps * nch; sg += kRaceThreads) {
    const uint16_t g = vals[2 * sg], u = vals[2 * sg + 1];
    if (u != 0 && u >= tv) {
      rescan[atomicAdd(&n_rescan, 1u)] = static_cast<uint16_t>(sg);
    } else if (g != 0 && g >= tv) {
      add(__ldcg(&row_parts[sg / kRaceWarps].seg[2 * (sg % kRaceWarps)]));
    }
  }
  __syncthreads();
  auto load8 = [&](int32_t j0, float (&y)[8]) {
    if (j0 + 8 <= vocab && (reinterpret_cast<uintptr_t>(rowp + j0) & 15u) == 0) {
      unpack_bf16x8(__ldcg(reinterpret_cast<const uint4*>(rowp + j0)), y);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) y[e] = j0 + e < vocab ? to_f(rowp[j0 + e]) : __int_as_float(0x7fc00000);
    }
  };
  const int nr = static_cast<int>(n_rescan);
  for (int r = warp; r < nr; r += 2 * kRaceWarps) {
    const int r2 = r + kRaceWarps;
    const int32_t j0 = static_cast<int32_t>(rescan[r]) * 256 + 8 * lane;
    const int32_t j1 = r2 < nr ? static_cast<int32_t>(rescan[r2]) * 256 + 8 * lane : vocab;
    float y0[8], y1[8];
    load8(j0, y0);
    load8(j1, y1);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      if (!isnan(y0[e]) && cand_key(y0[e], j0 + e) >= tau) add(cand_key(y0[e], j0 + e));
      if (!isnan(y1[e]) && cand_key(y1[e], j1 + e) >= tau) add(cand_key(y1[e], j1 + e));
    }
  }
  if (threadIdx.x < kList) top[threadIdx.x] = 0ull;
  __syncthreads();
  const uint32_t n = n_cands;
  // more candidates than held: the cluster kernel's row (uniform: every thread reads n)
  if (n <= static_cast<uint32_t>(kCands)) {
    for (uint32_t t = threadIdx.x; t < n; t += kRaceThreads) {
      const unsigned long long k = cands[t];
      int above = 0;
      for (uint32_t j = 0; j < n; ++j) above += cands[j] > k ? 1 : 0;
      if (above < kList) top[above] = k;
    }
  }
  __syncthreads();
  if (warp != 0) return;
  uint64_t v[2] = {top[lane], top[lane + 32]};
  // every key outside the candidates is below tau: past the candidates' top 64 more of the row may
  // exist unless tau is 0 (every valid token a candidate) and there are at most 64 of them
  lf.u = (tau != 0 || n > static_cast<uint32_t>(kList)) ? 1ull : 0ull;
  const bool overflow = n > static_cast<uint32_t>(kCands);
  // Warp 0: the row's top 64 (element e = lane + 32 i in v[i], descending; 0 = none).
  bool fallback = overflow;
  // n1: how many of them are known (every key of the row not among them is smaller)
  const int n1 = __popc(__ballot_sync(kFull, v[0] > lf.u)) + __popc(__ballot_sync(kFull, v[1] > lf.u));
  // more of the row may lie beyond the n1 known ones unless every valid token was listed and fits
  const bool beyond = lf.u != 0 || n1 == kList;
  const int n_top = p.n_logprobs;
  if (n_top > n1) fallback = true;
  int32_t tok = tok_g;
  if (sampled && filtered && !fallback) {
    // the kept set: a prefix of the n1 known keys, by the cluster kernel's rules (docs/kernels.md)
    float l[2], ex[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int e = lane + 32 * i;
      l[i] = e < n1 ? scaled(cand_value(v[i]), inv_t) : -INFINITY;
      ex[i] = l[i] == -INFINITY ? 0.0f : __expf(l[i] - row_lmax);
    }
    // inclusive prefix of the masses in list order (lanes 0..31 of v[0], then of v[1])
    float pre[2] = {ex[0], ex[1]};
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const float t = __shfl_up_sync(kFull, pre[i], o);
        if (lane >= o) pre[i] += t;
      }
    }
    pre[1] += __shfl_sync(kFull, pre[0], 31);
    auto at = [&](const float (&arr)[2], int e) { return __shfl_sync(kFull, e < 32 ? arr[0] : arr[1], e & 31); };
    auto count_ge = [&](int limit, float t) {  // known keys below limit with l >= t
      return __popc(__ballot_sync(kFull, lane < limit && l[0] >= t)) +
             __popc(__ballot_sync(kFull, lane + 32 < limit && l[1] >= t));
    };
    int kk = n1;
    float zk = lf.ls;  // top-p without top-k: the whole row's mass
    if (p.use_topk) {
      if (p.top_k >= n1) {
        fallback = true;
      } else {
        const float vk = at(l, static_cast<int>(p.top_k) - 1);
        kk = count_ge(n1, vk);
        if (kk == n1 && beyond) fallback = true;  // ties at the k-th value may run past the list
        zk = at(pre, kk - 1);
      }
    }
    int k = kk;
    if (!fallback && p.use_topp) {
      const float target = p.top_p * zk;
      const int below = __popc(__ballot_sync(kFull, lane < kk && pre[0] < target)) +
                        __popc(__ballot_sync(kFull, lane + 32 < kk && pre[1] < target));
      if (below >= kk && !p.use_topk) {
        fallback = true;  // the nucleus reaches past the known keys
      } else {
        const float vp = at(l, min(below, kk - 1));
        k = min(k, count_ge(n1, vp));
      }
    }
    if (!fallback && p.use_minp) k = min(k, count_ge(n1, row_lmax + logf(p.min_p)));
    if (!fallback && k >= n1 && beyond) fallback = true;  // the kept set may run past the list
    if (!fallback) {
      k = max(1, k);
      uint64_t best = 0;
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int e = lane + 32 * i;
        if (e < k && l[i] != -INFINITY) best = max(best, race_key(p, l[i], cand_id(v[i])));
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) best = max(best, shfl_xor_u64(best, o));
      tok = best == 0 ? tok_g : cand_id(best);
    }
  } else if (sampled && !filtered) {  // log-probs with the race over every token (min-p: rejection)
    tok = b.k == 0 ? 0 : cand_id(b.k);
    if (p.use_minp && b.k != 0) {  // no penalties on this path (log-probs and penalties: cluster kernel)
      fallback = fallback || !(scaled(to_f(rowp[tok]), inv_t) >= b.lmax + logf(p.min_p));
    }
    fallback = fallback || b.k == 0;
  }
  if (lane == 0) {
    arrivals[row] = 0;
    route[row] = fallback ? 0 : 1;
  }
  if (fallback) return;
  float* lp = logprobs + static_cast<int64_t>(row) * (1 + kMaxLogprobs);
  if (lane == 0) {
    tokens[row] = tok;
    lp[0] = to_f(rowp[tok]) - log_z;
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {  // the top n raw logits (no penalties when log-probs are asked)
    const int e = lane + 32 * i;
    if (e < n_top) {
      lp[1 + e] = cand_value(v[i]) - log_z;
      top_ids[static_cast<int64_t>(row) * kMaxLogprobs + e] = cand_id(v[i]);
    }
  }
}

// The inverse-CDF draw of a row sampled over every token (the row's last CTA, every thread calling,
// every chunk's segment pairs visible; docs/kernels.md, "Sampling"). One uniform u per row
// (race_uniform). Thread t holds segments [kCdfPer t, kCdfPer (t + 1)) with weights
// mass * exp(max l of the segment - the row's max l); a shuffle scan over the lanes and the warps'
// totals added in order give each thread a half-open interval of [0, total) whose end is computed
// exactly as the next thread's start, so u * total lies in one interval (the lowest segment wins
// should rounding ever make two overlap), or in none when rounding put it at total: then the row's
// last segment with mass. Warp 0 reads that segment's 256 tokens again (from L2: this kernel just
// read them), forms the same exps as the first pass and scans them over the lanes. A token comes
// out with its e over the row's Σe up to the f32 rounding of the sums (relative ~1e-6) and u's 24
// bits; the draw is a function of (seed, counter, the row's logits and settings) alone.
constexpr int kCdfPer = 4;                          // segments a thread holds
constexpr int kSegTokens = 32 * kern_sample::kRaceTokens;  // a segment: one warp's tokens
static_assert(kRankChunks * kRaceWarps <= kCdfPer * kern_sample::kRaceThreads, "every segment of kRankChunks chunks");

struct CdfSmem {
  float* warp_tot;  // [kRaceWarps]
  int *pick, *last_pos, *tok;
  float *pick_t, *pick_m;
  uint32_t* cnt;  // [kSegTokens] at least: the segment's history counts (penalty rows)
};

// The lanes' inclusive prefix sums in lane order (a shuffle scan: the same operations on every call).
__device__ __forceinline__ float warp_inclusive_sum(float v, int lane) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const float u = __shfl_up_sync(kFull, v, o);
    if (lane >= o) v += u;
  }
  return v;
}

__device__ __forceinline__ void seg_pair(const RacePart* row_parts, int j, float& m, float& s) {
  const unsigned long long v = __ldcg(&row_parts[j / kRaceWarps].cdf[j % kRaceWarps]);
  m = __uint_as_float(static_cast<uint32_t>(v));
  s = __uint_as_float(static_cast<uint32_t>(v >> 32));
}

// The 8 tokens [i0, i0 + 8) of a row as f32, NaN at and past end (one 16-byte load where aligned).
__device__ __forceinline__ void load8(const kern_dev::bf16* __restrict__ rowp, int32_t i0, int32_t end, float (&x)[8]) {
  if (i0 + 8 <= end && (reinterpret_cast<uintptr_t>(rowp + i0) & 15u) == 0) {
    unpack_bf16x8(*reinterpret_cast<const uint4*>(rowp + i0), x);
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) x[e] = i0 + e < end ? to_f(rowp[i0 + e]) : __int_as_float(0x7fc00000);
  }
}

__device__ __forceinline__ int32_t cdf_draw(const Params& p, const kern_dev::bf16* __restrict__ rowp,
                                         const int32_t* __restrict__ h, const RacePart* row_parts, int32_t nch,
                                         int32_t vocab, float inv_t, float row_lmax, const CdfSmem& sm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int nseg = nch * kRaceWarps;
  const int s0 = static_cast<int>(threadIdx.x) * kCdfPer;
  float m[kCdfPer], w[kCdfPer];
  float local = 0.0f;
  int last = -1;  // this thread's last segment with mass
#pragma unroll
  for (int k = 0; k < kCdfPer; ++k) {
    float s = 0.0f;
    m[k] = -INFINITY;
    if (s0 + k < nseg) seg_pair(row_parts, s0 + k, m[k], s);
    w[k] = m[k] == -INFINITY ? 0.0f : s * __expf(m[k] - row_lmax);
    local += w[k];
    if (w[k] > 0.0f) last = s0 + k;
  }
  const float incl = warp_inclusive_sum(local, lane);
  const float excl = __shfl_up_sync(kFull, incl, 1);
  if (lane == 31) sm.warp_tot[warp] = incl;
  if (threadIdx.x == 0) {
    *sm.pick = 0x7fffffff;
    *sm.last_pos = -1;
  }
  __syncthreads();
  float before = 0.0f, total = 0.0f;
#pragma unroll
  for (int v = 0; v < kRaceWarps; ++v) {
    if (v == warp) before = total;
    total += sm.warp_tot[v];
  }
  const float start = lane == 0 ? before : before + excl, stop = before + incl;
  const float target = kern_philox::race_uniform(p.seed, p.counter) * total;
  if (last >= 0) atomicMax(sm.last_pos, last);
  int j = -1;
  float t = 0.0f, mj = 0.0f;
  if (target >= start && target < stop) {
    float run = start;
#pragma unroll
    for (int k = 0; k < kCdfPer; ++k) {
      if (j < 0 && w[k] > 0.0f) {
        if (target < run + w[k]) {
          j = s0 + k;
          t = (target - run) / __expf(m[k] - row_lmax);
          mj = m[k];
        } else {
          run += w[k];
        }
      }
    }
    if (j < 0 && last >= 0) {  // past the running sum by rounding: the thread's last segment, its last token
      j = last;
      t = INFINITY;
#pragma unroll
      for (int k = 0; k < kCdfPer; ++k)
        if (s0 + k == last) mj = m[k];
    }
    if (j >= 0) atomicMin(sm.pick, j);
  }
  __syncthreads();
  if (j >= 0 && j == *sm.pick) {  // segments have one owner: one writer
    *sm.pick_t = t;
    *sm.pick_m = mj;
  }
  __syncthreads();
  j = *sm.pick;
  if (j == 0x7fffffff) {  // u * total rounded to total: the row's last segment with mass, its last token
    j = *sm.last_pos;
    t = INFINITY;
    float s;
    seg_pair(row_parts, j, mj, s);
  } else {
    t = *sm.pick_t;
    mj = *sm.pick_m;
  }
  const int32_t seg_begin = (j / kRaceWarps) * kern_sample::kRaceChunk + (j % kRaceWarps) * kSegTokens;
  const int32_t seg_end = min(vocab, seg_begin + kSegTokens);
  if (p.penalties) {  // the segment's history counts, as the first pass had them
    for (int i = threadIdx.x; i < kSegTokens; i += kern_sample::kRaceThreads) sm.cnt[i] = 0;
    __syncthreads();
    count_history(h, p.history_len, seg_begin, seg_end - seg_begin, 0, sm.cnt);
    __syncthreads();
  }
  if (warp == 0) {
    const int32_t i0 = seg_begin + 8 * lane;
    float x[8], ev[8];
    load8(rowp, i0, seg_end, x);
    if (p.penalties) {
#pragma unroll
      for (int e = 0; e < 8; ++e) penalize(x[e], sm.cnt[8 * lane + e], p);
    }
    float s = 0.0f;  // the same exps and lane sums as the first pass
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float l = scaled(x[e], inv_t);
      ev[e] = l == -INFINITY ? 0.0f : __expf(l - mj);
      s += ev[e];
    }
    const float in = warp_inclusive_sum(s, lane);
    const float ex = __shfl_up_sync(kFull, in, 1);
    const float lo = lane == 0 ? 0.0f : ex;
    const unsigned hit = __ballot_sync(kFull, t >= lo && t < in);
    const unsigned pos = __ballot_sync(kFull, s > 0.0f);  // not empty: the segment has mass
    const int holder = hit != 0u ? __ffs(static_cast<int>(hit)) - 1 : 31 - __clz(static_cast<int>(pos));
    if (lane == holder) {
      int32_t tok = -1, last_e = 0;
      float run = lo;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        if (ev[e] > 0.0f) {
          last_e = e;
          if (tok < 0) {
            if (t < run + ev[e]) {
              tok = i0 + e;
            } else {
              run += ev[e];
            }
          }
        }
      }
      *sm.tok = tok >= 0 ? tok : i0 + last_e;
    }
  }
  __syncthreads();
  return *sm.tok;
}

}  // namespace kern_sample_dev

// The race and rank kernels' parameters (one list: the catalogue's kSampleRace table).
#define KERN_SAMPLE_RACE_PARAMS                                                                                       \
  const kern_dev::bf16 *__restrict__ logits, const float *__restrict__ fparams, const int64_t *__restrict__ iparams, \
      const int32_t *__restrict__ history, int64_t *__restrict__ tokens, float *__restrict__ logprobs,              \
      int32_t *__restrict__ top_ids, float *__restrict__ parts, int32_t *__restrict__ arrivals,                     \
      int32_t *__restrict__ route, int32_t rows, int32_t vocab, int32_t history_stride

extern "C" __global__ void __launch_bounds__(kern_sample::kRaceThreads, 6)
    kern_sample_race_bf16(KERN_SAMPLE_RACE_PARAMS) {
  using namespace kern_sample_dev;
  using kern_sample::kRaceChunk;
  using kern_sample::kRaceThreads;
  wait_for_previous_grid();
  allow_next_grid();
  const int32_t row = blockIdx.y, chunk = blockIdx.x, nch = gridDim.x;
  if (row >= rows || vocab <= 0 || blockDim.x != kRaceThreads) return;
  if (static_cast<int64_t>(nch) != kern_sample::race_chunks(vocab)) __trap();
  // This thread's tokens: [i0, i0 + 8), i0 = begin + 8 t (every load coalesced). The 16-byte load is
  // issued before the row's parameters are read, so the two memory latencies overlap.
  const int32_t begin = chunk * kRaceChunk, end = min(vocab, begin + kRaceChunk);
  const kern_dev::bf16* rowp = logits + static_cast<int64_t>(row) * vocab;
  const int32_t i0 = begin + 8 * static_cast<int32_t>(threadIdx.x);
  const bool whole = i0 + 8 <= end && (reinterpret_cast<uintptr_t>(rowp + i0) & 15u) == 0;
  uint4 raw = make_uint4(0u, 0u, 0u, 0u);
  if (whole) raw = *reinterpret_cast<const uint4*>(rowp + i0);
  const Params p = read_params(fparams + static_cast<int64_t>(row) * 8, iparams + static_cast<int64_t>(row) * 8, vocab,
                               history_stride);
  const bool filtered = !p.greedy && (p.use_topk || p.use_topp);  // drawn from the row's top keys
  const bool listed = filtered || p.n_logprobs > 0;                 // the row's top keys are found
  const bool full_race = !p.greedy && !filtered;                    // drawn over every token (cdf_draw)
  const bool row_mass = filtered && p.use_topp && !p.use_topk;      // top-p of the whole row's mass
  // the cluster kernel's rows (uniform over the row's CTAs): forced, a logit bias, ranking with
  // penalties, a vocabulary of more chunks than the last CTA ranks or draws over
  if (p.forced >= 0 || p.n_bias > 0 || (p.penalties && listed) || ((listed || full_race) && nch > kRankChunks)) {
    if (chunk == 0 && threadIdx.x == 0) route[row] = 0;
    return;
  }
  __shared__ __align__(16) uint32_t cnt[kRaceChunk];  // the chunk's history counts
  __shared__ RaceFold red[kRaceWarps];
  __shared__ ListFold red_list[kRaceWarps];
  __shared__ float red_max[kRaceWarps];
  __shared__ int last;
  __shared__ float cdf_tot[kRaceWarps], cdf_t, cdf_m;
  __shared__ int cdf_pick, cdf_last, cdf_tok;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int32_t* h = history + static_cast<int64_t>(row) * history_stride;
  if (p.penalties) {
    for (int i = threadIdx.x; i < kRaceChunk; i += kRaceThreads) cnt[i] = 0;
    __syncthreads();
    count_history(h, p.history_len, begin, end - begin, 0, cnt);
    __syncthreads();
  }
  float x[8];
  if (whole) {
    unpack_bf16x8(raw, x);
  } else {
    load8(rowp, i0, end, x);
  }
  // the raw logits' maximum over the CTA (NaN and the padding ignored), then their sum of exp against it
  float rm = -INFINITY;
#pragma unroll
  for (int e = 0; e < 8; ++e) rm = fmaxf(rm, x[e]);
  rm = block_max_f(rm, red_max);
  RaceFold a = empty_fold();
  if (rm != -INFINITY) {
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (!isnan(x[e])) a.rs += __expf(x[e] - rm);
  }
  if (p.penalties) {
#pragma unroll
    for (int e = 0; e < 8; ++e) penalize(x[e], cnt[8 * threadIdx.x + e], p);
  }
  const float inv_t = p.greedy ? 1.0f : 1.0f / p.temperature;
  // A thread's greedy winner is found comparing floats (the first of equal values: the lower id)
  // and becomes a key once: the keys' maximum over the same tokens, in fewer instructions per token
  // than a key per token (session 36: 1.5-2 us less per op at batch 1).
  int ge = -1;
  float gv = 0.0f;
#pragma unroll
  for (int e = 0; e < 8; ++e)
    if (!isnan(x[e]) && (ge < 0 || x[e] > gv)) {
      gv = x[e];
      ge = e;
    }
  if (ge >= 0) a.g = cand_key(gv, i0 + ge);
  if (!p.greedy && i0 < end) {
#pragma unroll
    for (int e = 0; e < 8; ++e) a.lmax = fmaxf(a.lmax, scaled(x[e], inv_t));
  }
  RacePart* row_parts = reinterpret_cast<RacePart*>(parts) + static_cast<int64_t>(row) * nch;
  RacePart* mine = row_parts + chunk;
  // A row drawn over every token: each warp's (max l, sum exp(l - it)) over its 256 tokens for the
  // last CTA's inverse-CDF draw (xor trees: every lane holds the same values), stored by lane 0
  // before the block fold's barrier, so before thread 0 counts the chunk in. One exp a token, where
  // the Gumbel race it replaced (until session 42) paid two Philox calls per 8 tokens and two
  // logarithms a token.
  if (full_race) {
    float sm = a.lmax;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sm = fmaxf(sm, __shfl_xor_sync(kFull, sm, o));
    float ss = 0.0f;
    if (sm != -INFINITY) {
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float l = scaled(x[e], inv_t);
        if (l != -INFINITY) ss += __expf(l - sm);
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(kFull, ss, o);
    if (lane == 0) {
      mine->cdf[warp] = (static_cast<unsigned long long>(__float_as_uint(ss)) << 32) | __float_as_uint(sm);
      __threadfence();
    }
  }
  a = block_fold(a, red);
  // A ranking row's chunk (no penalties here: the raw logits' keys): each warp's two largest keys
  // over its 256 tokens (an xor tree of (first, second) pairs, exact in any order), stored by its
  // lane 0; a top-p row without top-k: sum exp(l - the chunk's max l), in the tree's order.
  float ls = 0.0f;
  if (listed) {
    unsigned long long k1 = 0, k2 = 0;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      if (isnan(x[e])) continue;
      const unsigned long long key = cand_key(x[e], i0 + e);
      if (key > k1) {
        k2 = k1;
        k1 = key;
      } else if (key > k2) {
        k2 = key;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const unsigned long long o1 = shfl_xor_u64(k1, o), o2 = shfl_xor_u64(k2, o);
      k2 = max(min(k1, o1), max(k2, o2));
      k1 = max(k1, o1);
    }
    if (lane == 0) {
      reinterpret_cast<ulonglong2*>(mine->seg)[warp] = make_ulonglong2(k1, k2);
      __threadfence();  // before thread 0 counts the chunk in
    }
    if (row_mass && a.lmax != -INFINITY) {
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float l = scaled(x[e], inv_t);
        if (l != -INFINITY) ls += __expf(l - a.lmax);
      }
    }
    if (row_mass) ls = block_fold(ListFold{ls, 0ull}, red_list).ls;
  }
  if (threadIdx.x == 0) {
    RacePart* q = mine;
    reinterpret_cast<ulonglong2*>(q)[0] = make_ulonglong2(
        (static_cast<unsigned long long>(__float_as_uint(a.rs)) << 32) | __float_as_uint(rm), a.g);
    reinterpret_cast<ulonglong2*>(q)[1] =
        make_ulonglong2((static_cast<unsigned long long>(__float_as_uint(ls)) << 32) | __float_as_uint(a.lmax), 0ull);
    __threadfence();
    last = atomicAdd(&arrivals[row], 1) == nch - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();  // every other chunk's partial is visible
  // The row: the chunks' maximum first, then their sums against it and the keys, in chunk order per
  // thread and the tree's order across threads.
  float crm = -INFINITY;
  for (int c = threadIdx.x; c < nch; c += kRaceThreads) crm = fmaxf(crm, __ldcg(&row_parts[c].rm));
  const float row_rm = block_max_f(crm, red_max);
  RaceFold b = empty_fold();
  for (int c = threadIdx.x; c < nch; c += kRaceThreads) {
    const ulonglong2* src = reinterpret_cast<const ulonglong2*>(row_parts + c);
    const ulonglong2 u = __ldcg(src), w = __ldcg(src + 1);
    const float cm = __uint_as_float(static_cast<uint32_t>(u.x)), cs = __uint_as_float(static_cast<uint32_t>(u.x >> 32));
    fold(b, {cm == -INFINITY ? 0.0f : cs * __expf(cm - row_rm), u.y, __uint_as_float(static_cast<uint32_t>(w.x))});
  }
  b = block_fold(b, red);
  const float row_lmax = b.lmax;
  ListFold lf{0.0f, 0ull};
  if (row_mass) {  // the scaled masses against the row's max l
    for (int c = threadIdx.x; c < nch; c += kRaceThreads) {
      const RacePart* q = row_parts + c;
      const float cl = __ldcg(&q->lmax), cls = __ldcg(&q->ls);
      fold(lf, {cl == -INFINITY ? 0.0f : cls * __expf(cl - row_lmax), 0ull});
    }
    lf = block_fold(lf, red_list);
  }
  const float log_z = row_rm + logf(b.rs);
  const int32_t tok_g = b.g == 0 ? 0 : cand_id(b.g);  // greedy, or no finite scaled logit
  const bool sampled = !p.greedy && b.lmax != -INFINITY;
  if (listed && b.g == 0) {  // every raw logit NaN and a list asked for: the cluster kernel's row
    if (threadIdx.x == 0) {
      arrivals[row] = 0;
      route[row] = 0;
    }
    return;
  }
  const bool race = sampled && full_race;  // uniform over the CTA
  const int32_t drawn = race ? cdf_draw(p, rowp, h, row_parts, nch, vocab, inv_t, row_lmax,
                                        CdfSmem{cdf_tot, &cdf_pick, &cdf_last, &cdf_tok, &cdf_t, &cdf_m, cnt})
                             : -1;
  if (!listed) {  // the greedy token, or the draw over every token
    const int32_t tok = race ? drawn : tok_g;
    bool done = true;
    if (race && p.use_minp) {  // the drawn token's l, penalized as above
      float c = 0.0f;
      if (p.penalties)
        for (int64_t j = threadIdx.x; j < p.history_len; j += kRaceThreads) c += h[j] == tok ? 1.0f : 0.0f;
      c = block_fold(RaceFold{c, 0ull, -INFINITY}, red).rs;  // a count: exact below 2^24
      float xw = to_f(rowp[tok]);
      penalize(xw, static_cast<uint32_t>(c), p);
      done = scaled(xw, inv_t) >= b.lmax + logf(p.min_p);
    }
    if (threadIdx.x != 0) return;
    arrivals[row] = 0;
    route[row] = done ? 1 : 0;
    if (!done) return;
    tokens[row] = tok;
    logprobs[static_cast<int64_t>(row) * (1 + kMaxLogprobs)] = to_f(rowp[tok]) - log_z;
    return;
  }
  // A ranking row: its folds for the rank kernel (kern_sample_rank_bf16, below), which finds its
  // top keys and its token. In a kernel of its own: that code inside this one slowed every row's
  // common path (temperature rows at batch 64: 88 us instead of 62, docs/perf.md).
  if (threadIdx.x == 0) {
    RacePart* rec = row_parts;
    rec->rec_log_z = log_z;
    rec->rec_lmax = row_lmax;
    rec->rec_mass = lf.ls;
    rec->rec_tok_g = tok_g;
    rec->rec_race_key = race ? cand_key(0.0f, drawn) : 0ull;  // the rank kernel reads its id
    arrivals[row] = 0;
    route[row] = 2;
  }
}

// The sampling op's second kernel: one CTA per row; rows the race kernel left with route 2 (the
// ranking rows) get their top keys and token here, from the race's partials (the segments' keys,
// chunk 0's record) and the logits of the segments that can hold more than one candidate; every
// other row returns at once. It leaves route 1 (done) or 0 (the cluster kernel's row).
extern "C" __global__ void __launch_bounds__(kern_sample::kRaceThreads, 1)
    kern_sample_rank_bf16(KERN_SAMPLE_RACE_PARAMS) {
  using namespace kern_sample_dev;
  (void)history;
  wait_for_previous_grid();
  allow_next_grid();
  const int32_t row = blockIdx.y;
  if (row >= rows || vocab <= 0 || blockDim.x != kern_sample::kRaceThreads || gridDim.x != 1) return;
  if (__ldcg(&route[row]) != 2) return;  // uniform over the CTA
  const int32_t nch = static_cast<int32_t>(kern_sample::race_chunks(vocab));
  const Params p = read_params(fparams + static_cast<int64_t>(row) * 8, iparams + static_cast<int64_t>(row) * 8, vocab,
                               history_stride);
  __shared__ __align__(16) unsigned long long cands[kCands];
  __shared__ unsigned long long top[kList];
  __shared__ uint32_t n_cands, n_rescan, hist[256];
  __shared__ uint16_t vals[kTauKeys];                     // the segments' keys' values (bf16 order, 0: none)
  __shared__ uint16_t rescan[kRankChunks * kRaceWarps];  // segments to read again
  __shared__ int tau_bin[2], tau_above[2];               // the radix select's two passes
  const RacePart* row_parts = reinterpret_cast<const RacePart*>(parts) + static_cast<int64_t>(row) * nch;
  const float row_lmax = __ldcg(&row_parts->rec_lmax);
  const bool filtered = !p.greedy && (p.use_topk || p.use_topp);
  RankRow rr{p,
             logits + static_cast<int64_t>(row) * vocab,
             row_parts,
             row,
             nch,
             vocab,
             p.greedy ? 1.0f : 1.0f / p.temperature,
             row_lmax,
             __ldcg(&row_parts->rec_mass),
             __ldcg(&row_parts->rec_log_z),
             __ldcg(&row_parts->rec_tok_g),
             __ldcg(&row_parts->rec_race_key),
             !p.greedy && row_lmax != -INFINITY,
             filtered};
  rank_row(rr, RankSmem{cands, vals, rescan, hist, &n_cands, &n_rescan, tau_bin, tau_above, top}, tokens, logprobs,
           top_ids, route, arrivals);
}
