// Online softmax in log2 units (scores pre-multiplied by scale · log2 e, exp2f), flash-attention
// style: a running max m, a running sum l and an unnormalised accumulator o.
#pragma once

#include "common.cuh"

namespace kern_dev {

constexpr float kLog2e = 1.4426950408889634f;

// Moves a row's state to the new max m_new: returns alpha = exp2(m - base) and sets m = m_new,
// l *= alpha; the caller rescales its accumulator by alpha. base is m_new, or 0 when the row may
// still have seen no key (m_new = -inf: alpha = exp2(-inf) = 0 while m is -inf).
__device__ __forceinline__ float online_rescale(float& m, float& l, float m_new, float base) {
  const float alpha = exp2f(m - base);
  m = m_new;
  l *= alpha;
  return alpha;
}
__device__ __forceinline__ float online_rescale(float& m, float& l, float m_new) {
  return online_rescale(m, l, m_new, m_new);
}

// One part of a row's softmax over disjoint key ranges (a warp's keys, a split's pages): its max
// m (-inf when it saw no key), its sum l and its unnormalised output o, as the merge reads them.
struct SoftmaxPart {
  float m, o, l;
};
struct SoftmaxMerged {
  float m;    // the max over the parts (-inf when no part saw a key)
  float num;  // sum of exp2(m_i - m) o_i
  float den;  // sum of exp2(m_i - m) l_i (0 when no part saw a key)
};
// Merges kParts parts read through part(i), always in part order, so the result does not depend
// on how the parts were scheduled. A part that saw no key weighs exp2(-inf) = 0.
template <int kParts, class Part>
__device__ __forceinline__ SoftmaxMerged merge_parts(Part part) {
  SoftmaxMerged r{-INFINITY, 0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < kParts; ++i) r.m = fmaxf(r.m, part(i).m);
  if (r.m != -INFINITY) {
#pragma unroll
    for (int i = 0; i < kParts; ++i) {
      const SoftmaxPart p = part(i);
      const float f = exp2f(p.m - r.m);
      r.num += f * p.o;
      r.den += f * p.l;
    }
  }
  return r;
}
// The weight a part with max m and sum l carries in a merge whose max is m_all: l exp2(m - m_all).
__device__ __forceinline__ float part_weight(float m, float l, float m_all) { return l * exp2f(m - m_all); }

}  // namespace kern_dev
