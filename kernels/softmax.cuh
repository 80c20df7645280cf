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

}  // namespace kern_dev
