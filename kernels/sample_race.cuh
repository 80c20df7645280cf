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
// row's arrival count for the next launch (arrivals start zeroed: op scratch is zeroed at load).
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

// One chunk's (or a fold's) partial result: 8 words (kern_sample::kRaceWords), as stored.
struct RacePart {
  float rm, rs;  // raw logits: max, sum of exp(x - max)
  float bv;      // greedy: the largest penalized logit and its id
  int32_t bi;
  float kv;  // the race: the largest key l - log E, its id and its l
  int32_t ki;
  float kl, lmax;  // ... and the largest l
};
static_assert(sizeof(RacePart) == 4 * kern_sample::kRaceWords, "the partial's stored size");

__device__ __forceinline__ RacePart race_empty() {
  return {-INFINITY, 0.0f, -INFINITY, kNoIndex, -INFINITY, kNoIndex, -INFINITY, -INFINITY};
}

__device__ __forceinline__ void better_key(RacePart& a, float v, int32_t i, float l) {
  if (v > a.kv || (v == a.kv && i < a.ki)) {
    a.kv = v;
    a.ki = i;
    a.kl = l;
  }
}

__device__ __forceinline__ void race_fold(RacePart& a, const RacePart& b) {
  merge_ms(a.rm, a.rs, b.rm, b.rs);
  better(a.bv, a.bi, b.bv, b.bi);
  better_key(a, b.kv, b.ki, b.kl);
  a.lmax = fmaxf(a.lmax, b.lmax);
}

__device__ __forceinline__ RacePart shfl_xor_part(const RacePart& a, int o) {
  RacePart b;
  b.rm = __shfl_xor_sync(kFull, a.rm, o);
  b.rs = __shfl_xor_sync(kFull, a.rs, o);
  b.bv = __shfl_xor_sync(kFull, a.bv, o);
  b.bi = __shfl_xor_sync(kFull, a.bi, o);
  b.kv = __shfl_xor_sync(kFull, a.kv, o);
  b.ki = __shfl_xor_sync(kFull, a.ki, o);
  b.kl = __shfl_xor_sync(kFull, a.kl, o);
  b.lmax = __shfl_xor_sync(kFull, a.lmax, o);
  return b;
}

// Fixed-order block fold: an xor tree in each warp, the warps' results through shared memory, the
// same tree over them in every warp; every thread returns the identical result.
__device__ __forceinline__ RacePart race_fold_block(RacePart a, RacePart* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) race_fold(a, shfl_xor_part(a, o));
  if (lane == 0) red[warp] = a;
  __syncthreads();
  RacePart b = lane < kRaceWarps ? red[lane] : race_empty();
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) race_fold(b, shfl_xor_part(b, o));
  __syncthreads();  // red is free again
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

extern "C" __global__ void __launch_bounds__(kern_sample::kRaceThreads)
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
  if (p.use_topk || p.use_topp || p.n_logprobs > 0) {  // the cluster kernel's row (uniform over the row's CTAs)
    if (chunk == 0 && threadIdx.x == 0) route[row] = 0;
    return;
  }
  __shared__ uint32_t cnt[kRaceChunk];
  __shared__ RacePart red[kRaceWarps];
  __shared__ int last;
  const int32_t begin = chunk * kRaceChunk, n = min(vocab - begin, kRaceChunk);
  const int32_t i0 = begin + 8 * static_cast<int32_t>(threadIdx.x);
  if (p.penalties) {
#pragma unroll
    for (int e = 0; e < 8; ++e) cnt[8 * threadIdx.x + e] = 0;
    __syncthreads();
    count_history(history + static_cast<int64_t>(row) * history_stride, p.history_len, begin, n, 0, cnt);
    __syncthreads();
  }
  const kern_dev::bf16* rowp = logits + static_cast<int64_t>(row) * vocab;
  float x[8];
  if (i0 + 8 <= begin + n && (reinterpret_cast<uintptr_t>(rowp + i0) & 15u) == 0) {
    unpack_bf16x8(*reinterpret_cast<const uint4*>(rowp + i0), x);
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) x[e] = i0 + e < begin + n ? to_f(rowp[i0 + e]) : __int_as_float(0x7fc00000);
  }
  RacePart a = race_empty();
  float gm = -INFINITY;
#pragma unroll
  for (int e = 0; e < 8; ++e) gm = fmaxf(gm, x[e]);  // NaN (and the padding) ignored
  if (gm != -INFINITY) {
    float gs = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (!isnan(x[e])) gs += __expf(x[e] - gm);
    a.rm = gm;
    a.rs = gs;
  }
  if (p.penalties) {
#pragma unroll
    for (int e = 0; e < 8; ++e) penalize(x[e], cnt[8 * threadIdx.x + e], p);
  }
#pragma unroll
  for (int e = 0; e < 8; ++e) better(a.bv, a.bi, x[e], i0 + e);
  if (!p.greedy) {
    const float inv_t = 1.0f / p.temperature;
    const kern_philox::U32x4 w0 = kern_philox::race_words(p.seed, p.counter, static_cast<uint32_t>(i0) / 4);
    const kern_philox::U32x4 w1 = kern_philox::race_words(p.seed, p.counter, static_cast<uint32_t>(i0) / 4 + 1);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float v = x[e] * inv_t;
      const float l = isnan(v) ? -INFINITY : fminf(v, FLT_MAX);
      a.lmax = fmaxf(a.lmax, l);
      if (l != -INFINITY) better_key(a, l - log_exponential(e < 4 ? w0.v[e] : w1.v[e - 4]), i0 + e, l);
    }
  }
  a = race_fold_block(a, red);
  RacePart* row_parts = reinterpret_cast<RacePart*>(parts) + static_cast<int64_t>(row) * nch;
  if (threadIdx.x == 0) {
    row_parts[chunk] = a;
    __threadfence();
    last = atomicAdd(&arrivals[row], 1) == nch - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();  // every other chunk's partial is visible
  RacePart b = race_empty();
  for (int c = threadIdx.x; c < nch; c += kRaceThreads) {
    const float4* src = reinterpret_cast<const float4*>(row_parts + c);
    const float4 u = __ldcg(src), v = __ldcg(src + 1);
    const RacePart q = {u.x, u.y, u.z, __float_as_int(u.w), v.x, __float_as_int(v.y), v.z, v.w};
    race_fold(b, q);
  }
  b = race_fold_block(b, red);
  if (threadIdx.x != 0) return;
  arrivals[row] = 0;
  int32_t tok = b.bi == kNoIndex ? 0 : b.bi;  // greedy, or no finite scaled logit
  bool done = true;
  if (!p.greedy && b.lmax != -INFINITY) {
    tok = b.ki;
    done = b.ki != kNoIndex && (!p.use_minp || b.kl >= b.lmax + logf(p.min_p));
  }
  route[row] = done ? 1 : 0;
  if (!done) return;
  tokens[row] = tok;
  logprobs[static_cast<int64_t>(row) * (1 + kMaxLogprobs)] = to_f(rowp[tok]) - (b.rm + logf(b.rs));
}
