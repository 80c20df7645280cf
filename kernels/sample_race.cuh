// The sampling op's first kernel (docs/kernels.md, "Sampling"): one pass over the logits spread over
// the whole GPU (race_chunks(vocab) CTAs per row, kernels/sample_layout.cuh), no second pass over
// them and no second launch, for every row but forced ones and those asking for both penalties and
// top log-probs; route[r] = 0 hands a row to the cluster kernel instead.
//
// Each CTA folds its 2048 tokens into a partial: raw (max, sum of exp) for the log-probs, the greedy
// argmax, the race's winner, max l and, where top-p needs the row's mass, sum exp(l - max l). Rows
// that rank (top-k, top-p, top-n log-probs) also get the chunk's 64 largest keys, sorted, and the
// 65th (kernels/sample_rank.cuh: bins by distance below the chunk's maximum, counted without
// atomics, refined until between 65 and 128 tokens are in; then one warp's bitonic sort). The last
// CTA of the row to arrive folds the partials in chunk order (a fixed order: the token does not
// depend on the batch or on timing), writes the outputs and resets the row's arrival count (a carry
// buffer: zero at load, left zero by every launch).
//
// A temperature row samples by the Gumbel-max race: token = argmax_i (l_i - log E_i), E_i an Exp(1)
// draw per token from Philox (kernels/philox.cuh: race_words), which picks i with probability
// exactly softmax(l)_i; over any subset holding the winner it is also that subset's winner.
// - min-p alone by rejection: the race winner over all tokens is accepted when its l >= max l +
//   log(min_p); a rejected row goes to the cluster kernel, whose draw uses counters the race never
//   uses: overall each kept token comes out with probability (1 - tail) q_i + tail q_i = q_i.
// - top-k / top-p (and min-p with them): the row's 64 largest keys are the top 64 of the chunks'
//   lists (every chunk's list holds its own top 64, and the chunk whose 65th key is largest has 64
//   keys above every unlisted one); when the kept set is a proper prefix of them, the race runs over
//   it with the same noise; otherwise (more than 63 kept, ties running past the list, a chunk whose
//   bins could not be refined) the row goes to the cluster kernel. Which path a row takes depends
//   only on its logits and settings, never on the draw, so each is exactly the kept distribution.
#pragma once

#include "philox.cuh"
#include "sample_common.cuh"
#include "sample_layout.cuh"
#include "sample_rank.cuh"

namespace kern_sample_dev {

constexpr int kRaceWarps = kern_sample::kRaceThreads / 32;
constexpr int kList = kern_sample::kRaceList;  // 64
constexpr int kGather = 2 * kList;             // a chunk's listed tokens before the sort: 65 to 128
constexpr int kStage = 24;                     // lists staged in shared memory per round of the row's merge
static_assert(kList == 64, "warp_merge_top64 holds 64 keys");
static_assert(kern_sample::kRaceTokens == 8, "one 16-byte load and 8 bins per thread");

// One chunk's partial result, as stored (kern_sample::kRaceWords words): the partial every row
// folds (32 bytes), what a listed row folds besides, then the list. Keys are cand_key's (value
// above, ~id below; 0 = none): their maximum is the argmax with ties to the lower id.
struct RacePart {
  float rm, rs;                // raw logits: max, sum of exp(x - max)
  unsigned long long g, k;     // greedy: the penalized logit's key; the race: l - log E's key
  float lmax, ls;              // the largest l; sum of exp(l - lmax) (top-p rows without top-k)
  unsigned long long u;        // the chunk's 65th key (0: it has at most 64 valid tokens)
  uint32_t overflow, pad[5];   // 1: the chunk's list could not be built (the row is the cluster kernel's)
  unsigned long long list[kList];  // the chunk's largest keys, descending, 0-padded
};
static_assert(sizeof(RacePart) == 4 * kern_sample::kRaceWords, "the partial's stored size");

// The CTA-wide fold of a thread's results: keys and max l by max (exact in any order), the raw sum
// in the tree's fixed order.
struct RaceFold {
  float rs;
  unsigned long long g, k;
  float lmax;
};

__device__ __forceinline__ void fold(RaceFold& a, const RaceFold& b) {
  a.rs += b.rs;
  a.g = max(a.g, b.g);
  a.k = max(a.k, b.k);
  a.lmax = fmaxf(a.lmax, b.lmax);
}

__device__ __forceinline__ RaceFold shfl_fold(const RaceFold& a, int o) {
  return {__shfl_xor_sync(kFull, a.rs, o), __shfl_xor_sync(kFull, a.g, o), __shfl_xor_sync(kFull, a.k, o),
          __shfl_xor_sync(kFull, a.lmax, o)};
}

__device__ __forceinline__ RaceFold empty_fold() { return {0.0f, 0ull, 0ull, -INFINITY}; }

// What a listed row folds besides (the row's last CTA only): the scaled mass, the largest 65th key,
// any chunk's overflow.
struct ListFold {
  float ls;
  unsigned long long u;
  uint32_t overflow;
};

__device__ __forceinline__ void fold(ListFold& a, const ListFold& b) {
  a.ls += b.ls;
  a.u = max(a.u, b.u);
  a.overflow |= b.overflow;
}

__device__ __forceinline__ ListFold shfl_fold(const ListFold& a, int o) {
  return {__shfl_xor_sync(kFull, a.ls, o), __shfl_xor_sync(kFull, a.u, o), __shfl_xor_sync(kFull, a.overflow, o)};
}

__device__ __forceinline__ void empty(RaceFold& a) { a = empty_fold(); }
__device__ __forceinline__ void empty(ListFold& a) { a = {0.0f, 0ull, 0u}; }

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

// The chunk's bins by distance d >= 0 below its maximum (docs/kernels.md): pass 1 in octaves (bin 0:
// d < 2^-5; bin b: [2^(b-6), 2^(b-5)); bin 15 from 2^9 on), then the crowded bin cut in 16 equal
// parts, then that part again. All scalings are by powers of two of differences taken exactly, so
// counting and listing agree token by token.
__device__ __forceinline__ int octave_bin(float d) {  // d >= 0: its exponent field, shifted and clamped
  return min(15, max(0, static_cast<int>(__float_as_uint(d) >> 23) - 121));
}
__device__ __forceinline__ float octave_lo(int b) { return b == 0 ? 0.0f : __uint_as_float(static_cast<uint32_t>(b - 6 + 127) << 23); }
__device__ __forceinline__ float octave_inv(int b) {  // 16 / the bin's width
  return __uint_as_float(static_cast<uint32_t>((b == 0 ? 9 : 10 - b) + 127) << 23);
}

}  // namespace kern_sample_dev

extern "C" __global__ void __launch_bounds__(kern_sample::kRaceThreads, 6)
    kern_sample_race_bf16(const kern_dev::bf16* __restrict__ logits, const float* __restrict__ fparams,
                          const int64_t* __restrict__ iparams, const int32_t* __restrict__ history,
                          int64_t* __restrict__ tokens, float* __restrict__ logprobs, int32_t* __restrict__ top_ids,
                          float* __restrict__ parts, int32_t* __restrict__ arrivals, int32_t* __restrict__ route,
                          int32_t rows, int32_t vocab, int32_t history_stride) {
  using namespace kern_sample_dev;
  using kern_sample::kRaceChunk;
  using kern_sample::kRaceThreads;
  wait_for_previous_grid();
  allow_next_grid();
  const int32_t row = blockIdx.y, chunk = blockIdx.x, nch = gridDim.x;
  if (row >= rows || vocab <= 0 || blockDim.x != kRaceThreads) return;
  if (static_cast<int64_t>(nch) != kern_sample::race_chunks(vocab)) __trap();
  const Params p = read_params(fparams + static_cast<int64_t>(row) * 8, iparams + static_cast<int64_t>(row) * 8, vocab,
                               history_stride);
  if (p.forced >= 0 || (p.penalties && p.n_logprobs > 0)) {  // the cluster kernel's row (uniform over the row's CTAs)
    if (chunk == 0 && threadIdx.x == 0) route[row] = 0;
    return;
  }
  const bool filtered = !p.greedy && (p.use_topk || p.use_topp);  // drawn from the list
  const bool listed = filtered || p.n_logprobs > 0;                 // the chunk's list is built
  const bool full_race = !p.greedy && !filtered;                    // every token's race key
  const bool row_mass = filtered && p.use_topp && !p.use_topk;      // top-p of the whole row's mass
  // the chunk's history counts and listed tokens, later (the row's last CTA) the chunks' lists staged
  // for the merge, kStage at a time
  __shared__ __align__(16) unsigned long long pool[kStage * kList];
  static_assert(kRaceChunk / 2 + kGather <= kStage * kList, "the counts and the gather list fit the pool");
  uint32_t* cnt = reinterpret_cast<uint32_t*>(pool);  // [kRaceChunk]
  unsigned long long* gather = pool + kRaceChunk / 2;  // [kGather]
  __shared__ RaceFold red[kRaceWarps];
  __shared__ ListFold red_list[kRaceWarps];
  __shared__ float red_max[kRaceWarps];
  __shared__ uint32_t red_bins[8 * kRaceWarps];
  __shared__ unsigned long long tops[kRaceWarps / 2][kList];
  __shared__ uint32_t gathered;
  __shared__ int last;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int32_t begin = chunk * kRaceChunk, end = min(vocab, begin + kRaceChunk);
  const int32_t* h = history + static_cast<int64_t>(row) * history_stride;
  if (p.penalties) {
    for (int i = threadIdx.x; i < kRaceChunk; i += kRaceThreads) cnt[i] = 0;
    if (threadIdx.x == 0) gathered = 0;
    __syncthreads();
    count_history(h, p.history_len, begin, end - begin, 0, cnt);
    __syncthreads();
  } else if (threadIdx.x == 0) {
    gathered = 0;
  }
  // This thread's tokens: [i0, i0 + 8), i0 = begin + 8 t (every load coalesced).
  const kern_dev::bf16* rowp = logits + static_cast<int64_t>(row) * vocab;
  const int32_t i0 = begin + 8 * static_cast<int32_t>(threadIdx.x);
  float x[8];
  if (i0 + 8 <= end && (reinterpret_cast<uintptr_t>(rowp + i0) & 15u) == 0) {
    unpack_bf16x8(*reinterpret_cast<const uint4*>(rowp + i0), x);
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) x[e] = i0 + e < end ? to_f(rowp[i0 + e]) : __int_as_float(0x7fc00000);
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
#pragma unroll
  for (int e = 0; e < 8; ++e)
    if (!isnan(x[e])) a.g = max(a.g, static_cast<unsigned long long>(cand_key(x[e], i0 + e)));
  if (!p.greedy && i0 < end) {
    kern_philox::U32x4 w0, w1;
    if (full_race) {
      w0 = kern_philox::race_words(p.seed, p.counter, static_cast<uint32_t>(i0) / 4);
      w1 = kern_philox::race_words(p.seed, p.counter, static_cast<uint32_t>(i0) / 4 + 1);
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float l = scaled(x[e], inv_t);
      a.lmax = fmaxf(a.lmax, l);
      if (full_race && l != -INFINITY)
        a.k = max(a.k, static_cast<unsigned long long>(
                           cand_key(l - log_exponential(e < 4 ? w0.v[e] : w1.v[e - 4]), i0 + e)));
    }
  }
  a = block_fold(a, red);
  float ls = 0.0f;
  if (row_mass && a.lmax != -INFINITY) {  // sum exp(l - the chunk's max l), the tree's order
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float l = scaled(x[e], inv_t);
      if (l != -INFINITY) ls += __expf(l - a.lmax);
    }
    ls = block_fold(ListFold{ls, 0ull, 0u}, red_list).ls;
  }
  RacePart* row_parts = reinterpret_cast<RacePart*>(parts) + static_cast<int64_t>(row) * nch;
  RacePart* mine = row_parts + chunk;
  uint32_t overflow = 0;
  unsigned long long u_key = 0;
  if (listed && a.g == 0) {  // no valid token in the chunk: an empty list
    if (warp == 0) {
      mine->list[lane] = 0ull;
      mine->list[lane + 32] = 0ull;
    }
  } else if (listed) {
    // The chunk's list: its tokens by distance below its maximum, bins refined until between 65 and
    // 128 are in (or all valid ones, when at most 128 are), then sorted by one warp.
    const float mc = cand_value(a.g);
    int J = 16, S = 16, T = 16, depth = 0;  // the bins chosen at each pass; how many passes decide
    float lo = 0.0f, inv = 0.0f;
    // token e's bin at pass `pass` (1, 2, 3), -1 where it is not counted there; recomputed from x
    // at every use (the same arithmetic each time, so counting and listing agree token by token)
    uint32_t b1p = 0, valid = 0;  // pass 1's bins, a nibble per token; which tokens are not NaN
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (!isnan(x[e])) {
        valid |= 1u << e;
        b1p |= static_cast<uint32_t>(octave_bin(mc - x[e])) << (4 * e);
      }
    // token e's bin at pass `pass` (1, 2, 3), -1 where it is not counted there (the same arithmetic
    // at every use, so counting and listing agree token by token)
    auto bin_at = [&](int e, int pass) {
      if (!((valid >> e) & 1u)) return -1;
      const int b1 = static_cast<int>((b1p >> (4 * e)) & 15u);
      if (pass == 1) return b1;
      if (b1 != J) return -1;
      const float f = ((mc - x[e]) - lo) * inv;
      const int b2 = min(15, static_cast<int>(f));
      if (pass == 2) return b2;
      if (b2 != S) return -1;
      return min(15, static_cast<int>((f - static_cast<float>(S)) * 16.0f));
    };
    auto pick = [&](int pass, uint32_t base) {
      int bins[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) bins[e] = bin_at(e, pass);
      return block_bin_pick<kRaceWarps>(bins, base, kList + 1, red_bins);
    };
    constexpr uint32_t room = kGather;
    const BinPick s1 = pick(1, 0);
    if (!isfinite(mc)) {
      overflow = 1;  // +inf or all -inf: distances are not numbers (the cluster kernel's row)
    } else if (s1.through <= room) {
      depth = 0;  // fewer than 65 valid tokens (bin 16: through counts them all): list every one
      if (s1.bin < 16) {
        depth = 1;
        J = s1.bin;
      }
    } else if (s1.bin >= 15) {
      overflow = 1;
    } else {
      J = s1.bin;
      lo = octave_lo(J);
      inv = octave_inv(J);
      const BinPick s2 = pick(2, s1.before);
      S = s2.bin;
      if (s2.through <= room) {
        depth = 2;
      } else {
        const BinPick s3 = pick(3, s2.before);
        T = s3.bin;
        if (s3.through <= room) {
          depth = 3;
        } else {
          overflow = 1;  // ties: more than 64 tokens share the boundary's value
        }
      }
    }
    if (!overflow) {
      // the listed tokens into `gather` (order by arrival: the sort below makes it deterministic)
      uint32_t in = 0, c = 0;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int q = bin_at(e, 1);
        bool take = q >= 0;
        if (depth >= 1) take = take && q <= J;
        if (depth >= 2 && take && q == J) {
          const int q2 = bin_at(e, 2);
          take = q2 < S || (q2 == S && (depth == 2 || bin_at(e, 3) <= T));
        }
        in |= take ? 1u << e : 0u;
      }
      c = __popc(in);
      uint32_t incl = c;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const uint32_t t = __shfl_up_sync(kFull, incl, o);
        if (lane >= o) incl += t;
      }
      uint32_t base = 0;
      if (lane == 31) base = atomicAdd(&gathered, incl);
      base = __shfl_sync(kFull, base, 31) + incl - c;
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (in & (1u << e)) gather[base++] = cand_key(x[e], i0 + e);
    }
    __syncthreads();
    if (warp == 0 && !overflow) {
      const uint32_t n = min(gathered, static_cast<uint32_t>(kGather));
      uint64_t v[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) v[i] = lane + 32 * i < static_cast<int>(n) ? gather[lane + 32 * i] : 0ull;
      warp_sort_desc<4>(v);
      mine->list[lane] = v[0];
      mine->list[lane + 32] = v[1];
      u_key = __shfl_sync(kFull, v[2], 0);  // element 64: the chunk's 65th key (0 when it has <= 64)
    }
  }
  if (listed && warp == 0) {  // the list entries this lane wrote, before the count below
    __threadfence();
    __syncwarp();
  }
  if (threadIdx.x == 0) {
    RacePart* q = mine;
    reinterpret_cast<ulonglong2*>(q)[0] = make_ulonglong2(
        (static_cast<unsigned long long>(__float_as_uint(a.rs)) << 32) | __float_as_uint(rm), a.g);
    reinterpret_cast<ulonglong2*>(q)[1] = make_ulonglong2(
        a.k, (static_cast<unsigned long long>(__float_as_uint(ls)) << 32) | __float_as_uint(a.lmax));
    if (listed) {
      q->u = u_key;
      q->overflow = overflow;
    }
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
    fold(b, {cm == -INFINITY ? 0.0f : cs * __expf(cm - row_rm), u.y, w.x, __uint_as_float(static_cast<uint32_t>(w.y))});
  }
  b = block_fold(b, red);
  const float row_lmax = b.lmax;
  ListFold lf{0.0f, 0ull, 0u};
  if (listed) {  // the scaled masses against the row's max l, the largest 65th key, any overflow
    for (int c = threadIdx.x; c < nch; c += kRaceThreads) {
      const RacePart* q = row_parts + c;
      const float cl = __ldcg(&q->lmax), cls = __ldcg(&q->ls);
      fold(lf, {cl == -INFINITY ? 0.0f : cls * __expf(cl - row_lmax), __ldcg(&q->u), __ldcg(&q->overflow)});
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
  if (!listed) {  // the greedy token, or the race over every token
    const bool race = sampled && full_race;
    const int32_t tok = race ? (b.k == 0 ? 0 : cand_id(b.k)) : tok_g;
    bool done = !race || b.k != 0;
    if (race && done && p.use_minp) {  // the winner's l, penalized as above
      float c = 0.0f;
      if (p.penalties)
        for (int64_t j = threadIdx.x; j < p.history_len; j += kRaceThreads) c += h[j] == tok ? 1.0f : 0.0f;
      c = block_fold(RaceFold{c, 0ull, 0ull, -INFINITY}, red).rs;  // a count: exact below 2^24
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
  // The row's 64 largest keys: the chunks' lists staged in shared memory (kStage at a time, every
  // 16-byte piece in flight at once), each warp merging lists warp, warp + 8, ... into its top 64,
  // then the warps' results pairwise. Keys are unique, so the result does not depend on the order.
  uint64_t v[2] = {0ull, 0ull};
  for (int r0 = 0; r0 < nch; r0 += kStage) {
    const int nr = min(kStage, nch - r0);
    ulonglong2* dst = reinterpret_cast<ulonglong2*>(pool);
    for (int i = threadIdx.x; i < nr * (kList / 2); i += kRaceThreads)
      dst[i] = __ldcg(reinterpret_cast<const ulonglong2*>(row_parts[r0 + i / (kList / 2)].list) + i % (kList / 2));
    __syncthreads();
    for (int j = warp; j < nr; j += kRaceWarps) {
      const unsigned long long* L = pool + j * kList;
      warp_merge_top64(v, L[kList - 1 - lane], L[kList / 2 - 1 - lane]);
    }
    __syncthreads();
  }
  for (int s = kRaceWarps / 2; s >= 1; s >>= 1) {
    if (warp >= s && warp < 2 * s) {
      tops[warp - s][lane] = v[0];
      tops[warp - s][lane + 32] = v[1];
    }
    __syncthreads();
    if (warp < s) warp_merge_top64(v, tops[warp][kList - 1 - lane], tops[warp][kList / 2 - 1 - lane]);
    __syncthreads();
  }
  if (warp != 0) return;
  // Warp 0: the row's top 64 (element e = lane + 32 i in v[i], descending; 0 = none).
  bool fallback = lf.overflow != 0;
  // n1: how many of them lie above every unlisted key (all of them are then the row's, in order)
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
