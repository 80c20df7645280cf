// The sampling op's first kernel (docs/kernels.md, "Sampling"): one pass over the logits for the
// rows that need no ranking — greedy, or temperature with optional penalties and min-p, and no
// log-probs beyond the chosen token's — spread over the whole GPU (race_chunks(vocab) CTAs per
// row, kernels/sample_layout.cuh) with no second pass and no second launch.
//
// A temperature row samples by the Gumbel-max race: token = argmax_i (l_i - log E_i), E_i an
// Exp(1) draw per token from Philox (kernels/philox.cuh: race_words), which picks i with
// probability exactly softmax(l)_i. Each CTA folds its 2048 tokens into one partial (raw
// (max, sum of exp) for the log-prob, the greedy argmax, the race's winner and its l, max l); the
// last CTA of the row to arrive folds the partials in chunk order (a fixed order: the token does
// not depend on the batch or on timing), writes the token and logprobs[r, 0], and resets the
// row's arrival count for the next launch (a carry buffer: zero at load, left zero by every launch).
//
// min-p by rejection: the race winner over all tokens is accepted when its l >= max l + log(min_p);
// then it is the winner over the kept set as well (the race restricted to a subset containing the
// winner has the same winner), so accepted draws follow the min-p distribution. A rejected row is
// left to the cluster kernel, whose draw uses counters the race never uses: overall each kept token
// comes out with probability (1 - tail) q_i + tail q_i = q_i.
//
// route[r] = 1 when this kernel wrote row r's outputs, 0 when the cluster kernel must (top-k,
// top-p, top log-probs, a min-p rejection).
#pragma once

#include "philox.cuh"
#include "sample_common.cuh"
#include "sample_layout.cuh"

namespace kern_sample_dev {

constexpr int kRaceWarps = kern_sample::kRaceThreads / 32;
constexpr int kGroups = kern_sample::kRaceTokens / 8;

// One chunk's partial result, as stored (kern_sample::kRaceWords words). Keys are cand_key's
// (value above, ~id below; 0 = none): their maximum is the argmax with ties to the lower id.
struct RacePart {
  float rm, rs;               // raw logits: max, sum of exp(x - max)
  unsigned long long g, k;    // greedy: the penalized logit's key; the race: l - log E's key
  float lmax, unused;         // the largest l
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

// Every thread returns the CTA's fold: an xor tree per warp, the warps' results through shared
// memory, the same tree over them in every warp (a fixed order, whatever the timing).
__device__ __forceinline__ RaceFold block_fold(RaceFold a, RaceFold* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) fold(a, shfl_fold(a, o));
  if (lane == 0) red[warp] = a;
  __syncthreads();
  RaceFold b = lane < kRaceWarps ? red[lane] : RaceFold{0.0f, 0ull, 0ull, -INFINITY};
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

}  // namespace kern_sample_dev

extern "C" __global__ void __launch_bounds__(kern_sample::kRaceThreads, 6)
    kern_sample_race_bf16(const kern_dev::bf16* __restrict__ logits, const float* __restrict__ fparams,
                          const int64_t* __restrict__ iparams, const int32_t* __restrict__ history,
                          int64_t* __restrict__ tokens, float* __restrict__ logprobs, float* __restrict__ parts,
                          int32_t* __restrict__ arrivals, int32_t* __restrict__ route, int32_t rows, int32_t vocab,
                          int32_t history_stride) {
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
  if (p.use_topk || p.use_topp || p.n_logprobs > 0 || p.forced >= 0) {  // the cluster kernel's row (uniform over the row's CTAs)
    if (chunk == 0 && threadIdx.x == 0) route[row] = 0;
    return;
  }
  __shared__ uint32_t cnt[kRaceChunk];
  __shared__ RaceFold red[kRaceWarps];
  __shared__ float red_max[kRaceWarps];
  __shared__ int last;
  const int32_t begin = chunk * kRaceChunk, end = min(vocab, begin + kRaceChunk);
  const int32_t* h = history + static_cast<int64_t>(row) * history_stride;
  if (p.penalties) {
    for (int i = threadIdx.x; i < kRaceChunk; i += kRaceThreads) cnt[i] = 0;
    __syncthreads();
    count_history(h, p.history_len, begin, end - begin, 0, cnt);
    __syncthreads();
  }
  // Group gi of this thread: tokens [i0(gi), i0(gi) + 8), i0(gi) = begin + 8 (t + 256 gi): every load coalesced.
  const kern_dev::bf16* rowp = logits + static_cast<int64_t>(row) * vocab;
  float x[kGroups][8];
#pragma unroll
  for (int gi = 0; gi < kGroups; ++gi) {
    const int32_t i0 = begin + 8 * (static_cast<int32_t>(threadIdx.x) + kRaceThreads * gi);
    if (i0 + 8 <= end && (reinterpret_cast<uintptr_t>(rowp + i0) & 15u) == 0) {
      unpack_bf16x8(*reinterpret_cast<const uint4*>(rowp + i0), x[gi]);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) x[gi][e] = i0 + e < end ? to_f(rowp[i0 + e]) : __int_as_float(0x7fc00000);
    }
  }
  // the raw logits' maximum over the CTA (NaN and the padding ignored), then their sum of exp against it
  float rm = -INFINITY;
#pragma unroll
  for (int gi = 0; gi < kGroups; ++gi)
#pragma unroll
    for (int e = 0; e < 8; ++e) rm = fmaxf(rm, x[gi][e]);
  rm = block_max_f(rm, red_max);
  RaceFold a{0.0f, 0ull, 0ull, -INFINITY};
  if (rm != -INFINITY) {
#pragma unroll
    for (int gi = 0; gi < kGroups; ++gi)
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (!isnan(x[gi][e])) a.rs += __expf(x[gi][e] - rm);
  }
  if (p.penalties) {
#pragma unroll
    for (int gi = 0; gi < kGroups; ++gi)
#pragma unroll
      for (int e = 0; e < 8; ++e) penalize(x[gi][e], cnt[8 * (threadIdx.x + kRaceThreads * gi) + e], p);
  }
  const float inv_t = p.greedy ? 1.0f : 1.0f / p.temperature;
#pragma unroll
  for (int gi = 0; gi < kGroups; ++gi) {
    const int32_t i0 = begin + 8 * (static_cast<int32_t>(threadIdx.x) + kRaceThreads * gi);
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (!isnan(x[gi][e])) a.g = max(a.g, static_cast<unsigned long long>(cand_key(x[gi][e], i0 + e)));
    if (!p.greedy && i0 < end) {
      const kern_philox::U32x4 w0 = kern_philox::race_words(p.seed, p.counter, static_cast<uint32_t>(i0) / 4);
      const kern_philox::U32x4 w1 = kern_philox::race_words(p.seed, p.counter, static_cast<uint32_t>(i0) / 4 + 1);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float l = scaled(x[gi][e], inv_t);
        a.lmax = fmaxf(a.lmax, l);
        if (l != -INFINITY)
          a.k = max(a.k, static_cast<unsigned long long>(
                             cand_key(l - log_exponential(e < 4 ? w0.v[e] : w1.v[e - 4]), i0 + e)));
      }
    }
  }
  a = block_fold(a, red);
  RacePart* row_parts = reinterpret_cast<RacePart*>(parts) + static_cast<int64_t>(row) * nch;
  if (threadIdx.x == 0) {
    row_parts[chunk] = {rm, a.rs, a.g, a.k, a.lmax, 0.0f};
    __threadfence();
    last = atomicAdd(&arrivals[row], 1) == nch - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();  // every other chunk's partial is visible
  // The row: the chunks' maximum first, then their sums against it and the keys, in chunk order
  // per thread and the tree's order across threads.
  float crm = -INFINITY;
  for (int c = threadIdx.x; c < nch; c += kRaceThreads) crm = fmaxf(crm, __ldcg(&row_parts[c].rm));
  const float row_rm = block_max_f(crm, red_max);
  RaceFold b{0.0f, 0ull, 0ull, -INFINITY};
  for (int c = threadIdx.x; c < nch; c += kRaceThreads) {
    const ulonglong2* src = reinterpret_cast<const ulonglong2*>(row_parts + c);
    const ulonglong2 u = __ldcg(src), v = __ldcg(src + 1);
    const float cm = __uint_as_float(static_cast<uint32_t>(u.x)), cs = __uint_as_float(static_cast<uint32_t>(u.x >> 32));
    fold(b, {cm == -INFINITY ? 0.0f : cs * __expf(cm - row_rm), u.y, v.x, __uint_as_float(static_cast<uint32_t>(v.y))});
  }
  b = block_fold(b, red);
  const int32_t tok_g = b.g == 0 ? 0 : cand_id(b.g);  // greedy, or no finite scaled logit
  const bool race = !p.greedy && b.lmax != -INFINITY;
  const int32_t tok = race ? (b.k == 0 ? 0 : cand_id(b.k)) : tok_g;
  bool done = !race || b.k != 0;
  if (race && done && p.use_minp) {  // the winner's l, penalized as above
    float c = 0.0f;
    if (p.penalties)
      for (int64_t j = threadIdx.x; j < p.history_len; j += kRaceThreads) c += h[j] == tok ? 1.0f : 0.0f;
    c = block_fold({c, 0ull, 0ull, -INFINITY}, red).rs;  // a count: exact below 2^24
    float xw = to_f(rowp[tok]);
    penalize(xw, static_cast<uint32_t>(c), p);
    done = scaled(xw, inv_t) >= b.lmax + logf(p.min_p);
  }
  if (threadIdx.x != 0) return;
  arrivals[row] = 0;
  route[row] = done ? 1 : 0;
  if (!done) return;
  tokens[row] = tok;
  logprobs[static_cast<int64_t>(row) * (1 + kMaxLogprobs)] = to_f(rowp[tok]) - (row_rm + logf(b.rs));
}
