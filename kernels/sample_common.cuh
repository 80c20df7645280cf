// Device code both sampling kernels share (kernels/sample.cu: the one-pass race kernel and the
// cluster kernel): the sanitised row parameters, the penalty rule, and the fixed-order pairwise
// folds (argmax with ties to the lower id; online (max, sum of exp) pairs).
#pragma once

#include <float.h>
#include <stdint.h>

#include "common.cuh"

namespace kern_sample_dev {

using namespace kern_dev;

constexpr int kMaxLogprobs = 20;
// Logit-bias entries a row may carry (sampling_keys[r, 6]); they sit at the end of the row's history,
// (id, f32 bits) pairs, so a history count and a bias index share one u32 of the kernels' count
// arrays: the count in the low 24 bits, the entry's index + 1 in the high 8.
constexpr int kMaxBias = 255;
constexpr uint32_t kCountMask = (1u << 24) - 1;
constexpr int32_t kNoIndex = 0x7fffffff;
constexpr unsigned kFull = 0xffffffffu;

// Order-preserving map of a non-NaN f32 to u32 (-0 maps as +0) and its inverse.
__device__ __forceinline__ uint32_t fkey(float v) {
  uint32_t b = __float_as_uint(v);
  if (b == 0x80000000u) b = 0;
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float fkey_inv(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}
// A candidate: value key above, ~id below (a larger key is a larger value, then a lower id).
__device__ __forceinline__ uint64_t cand_key(float v, int32_t id) {
  return (static_cast<uint64_t>(fkey(v)) << 32) | (0xffffffffu - static_cast<uint32_t>(id));
}
__device__ __forceinline__ float cand_value(uint64_t k) { return fkey_inv(static_cast<uint32_t>(k >> 32)); }
__device__ __forceinline__ int32_t cand_id(uint64_t k) {
  return static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(k));
}

__device__ __forceinline__ void better(float& bv, int32_t& bi, float v, int32_t i) {
  if (v > bv || (v == bv && i < bi)) {
    bv = v;
    bi = i;
  }
}

// Online (max, sum of exp(x - max)) pairs; (-inf, 0) is the empty pair.
__device__ __forceinline__ void merge_ms(float& m, float& s, float om, float os) {
  const float nm = fmaxf(m, om);
  if (nm == -INFINITY) return;  // both empty
  s = (m == -INFINITY ? 0.0f : s * __expf(m - nm)) + (om == -INFINITY ? 0.0f : os * __expf(om - nm));
  m = nm;
}

__device__ __forceinline__ void tree_ms(float& m, float& s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) merge_ms(m, s, __shfl_xor_sync(kFull, m, o), __shfl_xor_sync(kFull, s, o));
}

__device__ __forceinline__ void tree_best(float& bv, int32_t& bi) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) better(bv, bi, __shfl_xor_sync(kFull, bv, o), __shfl_xor_sync(kFull, bi, o));
}

// The row's parameters, sanitised (every thread holds the same values).
struct Params {
  float temperature, top_p, min_p, repetition, presence, frequency;
  int64_t top_k, seed, counter, history_len;
  int n_logprobs;
  int32_t n_bias;  // logit-bias entries: (id, f32 bits) pairs in the history row's last 2 n_bias slots
  int32_t forced;  // >= 0: the row's token is this one (a prompt scored, not sampled); -1: none
  bool greedy, penalties, use_topk, use_topp, use_minp;
  // a row whose logits are adjusted before sampling (penalties or a bias): the kernels count per token
  __device__ bool adjusted() const { return penalties || n_bias > 0; }
};

__device__ Params read_params(const float* fp, const int64_t* ip, int32_t vocab, int32_t history_stride) {
  Params p;
  const float temperature = fp[0];
  p.greedy = !(temperature > 0.0f);  // NaN too
  p.temperature = p.greedy ? 0.0f : fminf(temperature, FLT_MAX);
  p.top_p = fp[1];
  p.min_p = fp[2];
  p.repetition = fp[3];
  p.presence = fp[4];
  p.frequency = fp[5];
  p.top_k = ip[0];
  p.seed = ip[1];
  p.counter = ip[2];
  p.history_len = ip[3];
  const int64_t n = ip[4];
  if (!(p.repetition > 0.0f) || !isfinite(p.repetition)) p.repetition = 1.0f;
  if (!isfinite(p.presence)) p.presence = 0.0f;
  if (!isfinite(p.frequency)) p.frequency = 0.0f;
  // the bias entries take the end of the history row; the generated ids what is before them (and a
  // count must fit 24 bits)
  const int32_t stride = max(history_stride, 0);
  p.n_bias = static_cast<int32_t>(max(int64_t{0}, min(ip[6], static_cast<int64_t>(min(kMaxBias, stride / 2)))));
  p.history_len = max(int64_t{0}, min(p.history_len, static_cast<int64_t>(min(stride - 2 * p.n_bias,
                                                                            static_cast<int32_t>(kCountMask)))));
  p.penalties = p.history_len > 0 && (p.repetition != 1.0f || p.presence != 0.0f || p.frequency != 0.0f);
  p.use_topk = p.top_k > 0 && p.top_k < vocab;
  p.use_topp = p.top_p < 1.0f;
  p.use_minp = p.min_p > 0.0f;
  if (p.use_minp) p.min_p = fminf(p.min_p, 1.0f);
  p.n_logprobs = static_cast<int>(max(int64_t{0}, min(n, static_cast<int64_t>(min(kMaxLogprobs, vocab)))));
  const int64_t f = ip[5];  // forced token + 1 (0: none; out of range: none)
  p.forced = f > 0 && f <= vocab ? static_cast<int32_t>(f - 1) : -1;
  return p;
}

// The scaled logit the kernels sample from: x / temperature, NaN -> -inf, at most FLT_MAX.
__device__ __forceinline__ float scaled(float x, float inv_t) {
  const float v = x * inv_t;
  return isnan(v) ? -INFINITY : fminf(v, FLT_MAX);
}

// History counts of the ids in [begin, begin + n), into cnt[pad + id - begin] (cnt zeroed by the
// caller, every thread of the block calling; a __syncthreads() after it makes them visible).
__device__ __forceinline__ void count_history(const int32_t* h, int64_t len, int32_t begin, int32_t n, int32_t pad,
                                              uint32_t* cnt) {
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
    const int32_t id = h[j];
    if (id >= begin && id < begin + n) atomicAdd(&cnt[pad + id - begin], 1u);
  }
}

// Marks the row's logit-bias entries with ids in [begin, begin + n) in cnt[pad + id - begin]: entry k
// sets (k + 1) << 24 (atomicOr beside count_history's adds, whose counts stay below 2^24; every
// thread of the block calling, cnt zeroed by the caller). Ids outside [0, vocab) match no slice.
__device__ __forceinline__ void mark_bias(const int32_t* bias, int32_t n_bias, int32_t begin, int32_t n, int32_t pad,
                                          uint32_t* cnt) {
  for (int k = threadIdx.x; k < n_bias; k += blockDim.x) {
    const int32_t id = bias[2 * k];
    if (id >= begin && id < begin + n) atomicOr(&cnt[pad + id - begin], static_cast<uint32_t>(k + 1) << 24);
  }
}

// The penalties of a token that occurs c > 0 times in the history (NaN stays NaN).
__device__ __forceinline__ void penalize(float& v, uint32_t c, const Params& p) {
  if (c == 0) return;
  v = v > 0.0f ? v / p.repetition : v * p.repetition;
  v -= p.frequency * static_cast<float>(c) + p.presence;
}

// A token's adjustments, as vLLM orders them: its logit bias (a finite value; an index past the
// row's entries, possible only where ids repeat, is none), then the penalties of its history count.
__device__ __forceinline__ void adjust(float& v, uint32_t c, const Params& p, const int32_t* bias) {
  const uint32_t k = c >> 24;
  if (k != 0 && k <= static_cast<uint32_t>(p.n_bias)) {
    const float b = __int_as_float(bias[2 * (k - 1) + 1]);
    if (isfinite(b)) v += b;
  }
  penalize(v, c & kCountMask, p);
}

}  // namespace kern_sample_dev
