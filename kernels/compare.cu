// kern test's compare kernels (issue 19, docs/test.md): one position of the reference manifest's
// logits and the candidate's, reduced on the device to what the verdict needs, so that logits never
// cross to the host. The semantics are core::compare_rows's (src/core/ab_compare.cpp, the float64
// host reference the GPU tests check these against), entry for entry:
//   kinds: finite, NaN, +inf, -inf; `nonfinite` counts the entries whose kinds differ;
//   identical: every entry bitwise equal (bf16 compared as its f32 expansion, which is the same);
//   the order of a row's finite entries: larger value first, ties (-0 == +0 included) to the lower id;
//   top1 / the top-20 of each side: the first entries of that order (-1 / none without finite ones);
//   margin_ref: ref's first minus its second, in f64 (0 with fewer than 2);
//   rank_in_test: the finite test entries strictly before test[top1_ref] in test's order; -1 when
//     ref has no finite entry or test[top1_ref] is not finite;
//   over the entries finite in both (none: kl = max_abs_diff = 0): max |test - ref| in f64, and
//   KL(P_ref || P_test) = sum p_ref (log p_ref - log p_test) with f64 log-softmaxes of both rows
//   taken over that set (max-shifted as the host does), clamped below at 0.
// One CTA of kThreads threads per row (grid.x = rows), three passes over the row: (1) kinds,
// identity, the maxima, max |diff| and ref's top-20; (2) the two exp sums, test's top-20 and the
// rank; (3) the KL sum. A top-20 is each thread's own sorted list of its strided entries (in
// registers), merged by 20 block-wide selections of the best head. Every reduction has a fixed
// shape (warp butterflies, then the warps in order), so a row's result depends on the row alone.
// f32 and double arithmetic is IEEE (no fast math); the f64 exp / log and the summation order are
// the only differences from the host (kl within ~1e-15 relative; every other field exact).
#include <math.h>
#include <stdint.h>

#include "compare_layout.cuh"

namespace {

using kern_compare::kThreads;
using kern_compare::kTop;
using kern_compare::RowResult;

constexpr int kWarps = kThreads / 32;
constexpr uint32_t kNoId = 0xffffffffu;  // a list's empty slot: (-inf, kNoId) comes after every finite entry
static_assert(kThreads % 32 == 0 && kWarps <= 32, "whole warps, at most 1024 threads");

// a before b in a row's order: larger first, ties to the lower id
__device__ __forceinline__ bool before(float av, uint32_t ai, float bv, uint32_t bi) {
  return av > bv || (av == bv && ai < bi);
}

// 0 finite, 1 NaN, 2 +inf, 3 -inf, from an f32's bits (compare_rows' kind_of)
__device__ __forceinline__ int kind_of(uint32_t bits) {
  if ((bits & 0x7f800000u) != 0x7f800000u) return 0;
  if ((bits & 0x007fffffu) != 0) return 1;
  return (bits >> 31) != 0 ? 3 : 2;
}

// An element's f32 bits: a bf16 is the upper half of its f32.
__device__ __forceinline__ uint32_t f32_bits(uint16_t raw) { return static_cast<uint32_t>(raw) << 16; }
__device__ __forceinline__ uint32_t f32_bits(uint32_t raw) { return raw; }

struct SumU32 {
  __device__ uint32_t operator()(uint32_t a, uint32_t b) const { return a + b; }
};
struct SumF64 {
  __device__ double operator()(double a, double b) const { return a + b; }
};
struct MaxF32 {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct MaxF64 {
  __device__ double operator()(double a, double b) const { return fmax(a, b); }
};

// The block's reduction of v; every thread gets it. A butterfly in each warp, then the warps in order.
template <typename T, typename Op>
__device__ __forceinline__ T block_reduce(T v, Op op) {
  __shared__ T partial[kWarps];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  T r = partial[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) r = op(r, partial[w]);
  __syncthreads();  // partial may be reused by the next call
  return r;
}

// One thread's first kTop finite entries in the order, best first (fully unrolled: registers).
struct TopList {
  float v[kTop];
  uint32_t id[kTop];

  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int k = 0; k < kTop; ++k) v[k] = -INFINITY, id[k] = kNoId;
  }
  // A thread offers its entries in increasing id, but the list does not rely on it.
  __device__ __forceinline__ void offer(float x, uint32_t i) {
    if (!before(x, i, v[kTop - 1], id[kTop - 1])) return;
    v[kTop - 1] = x;
    id[kTop - 1] = i;
#pragma unroll
    for (int k = kTop - 1; k > 0; --k) {
      if (before(v[k], id[k], v[k - 1], id[k - 1])) {
        const float tv = v[k];
        const uint32_t ti = id[k];
        v[k] = v[k - 1], id[k] = id[k - 1];
        v[k - 1] = tv, id[k - 1] = ti;
      }
    }
  }
  __device__ __forceinline__ void pop() {
#pragma unroll
    for (int k = 0; k + 1 < kTop; ++k) v[k] = v[k + 1], id[k] = id[k + 1];
    v[kTop - 1] = -INFINITY;
    id[kTop - 1] = kNoId;
  }
};

// The block's first kTop entries in the order, from every thread's list (consumed), into
// out_v / out_id (shared; visible after the next __syncthreads). Returns how many (every thread).
__device__ __forceinline__ int merge_top(TopList& list, float* out_v, uint32_t* out_id) {
  __shared__ float wv[kWarps];
  __shared__ uint32_t wi[kWarps];
  int n = 0;
  for (int k = 0; k < kTop; ++k) {
    float bv = list.v[0];
    uint32_t bi = list.id[0];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const uint32_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (before(ov, oi, bv, bi)) bv = ov, bi = oi;
    }
    if ((threadIdx.x & 31) == 0) wv[threadIdx.x >> 5] = bv, wi[threadIdx.x >> 5] = bi;
    __syncthreads();
    bv = wv[0];
    bi = wi[0];
#pragma unroll
    for (int w = 1; w < kWarps; ++w)
      if (before(wv[w], wi[w], bv, bi)) bv = wv[w], bi = wi[w];
    __syncthreads();
    if (bi == kNoId) break;  // no finite entry left anywhere (the same for every thread)
    if (list.id[0] == bi) list.pop();
    if (threadIdx.x == 0) out_v[k] = bv, out_id[k] = bi;
    n = k + 1;
  }
  return n;
}

template <typename Raw>
__device__ __forceinline__ void compare_row(const Raw* __restrict__ ref_rows, uint64_t ref_stride,
                                            const Raw* __restrict__ test_rows, uint64_t test_stride, uint64_t vocab64,
                                            RowResult* __restrict__ out) {
  if (blockDim.x != kThreads || blockDim.y != 1 || blockDim.z != 1) __trap();
  if (vocab64 == 0 || vocab64 > kern_compare::kMaxVocab) __trap();
  const uint32_t vocab = static_cast<uint32_t>(vocab64);
  const uint64_t row = blockIdx.x;
  const Raw* ref = ref_rows + row * ref_stride;
  const Raw* test = test_rows + row * test_stride;
  __shared__ float top_ref_v[kTop], top_test_v[kTop];
  __shared__ uint32_t top_ref_id[kTop], top_test_id[kTop];
  TopList list;

  // (1) kinds, identity, the maxima and max |diff| over the entries finite in both, ref's top-20
  bool same = true;
  uint32_t nonfinite = 0;
  float mr = -INFINITY, mt = -INFINITY;
  double max_abs_diff = 0.0;
  list.clear();
  for (uint32_t i = threadIdx.x; i < vocab; i += kThreads) {
    const uint32_t rb = f32_bits(ref[i]), tb = f32_bits(test[i]);
    const float rf = __uint_as_float(rb), tf = __uint_as_float(tb);
    same = same && rb == tb;
    const int kr = kind_of(rb), kt = kind_of(tb);
    if (kr == 0) list.offer(rf, i);
    if (kr != kt) {
      ++nonfinite;
      continue;
    }
    if (kr != 0) continue;
    mr = fmaxf(mr, rf);
    mt = fmaxf(mt, tf);
    max_abs_diff = fmax(max_abs_diff, fabs(static_cast<double>(tf) - static_cast<double>(rf)));
  }
  const bool identical = __syncthreads_and(same ? 1 : 0) != 0;
  nonfinite = block_reduce(nonfinite, SumU32{});
  mr = block_reduce(mr, MaxF32{});
  mt = block_reduce(mt, MaxF32{});
  max_abs_diff = block_reduce(max_abs_diff, MaxF64{});
  const int n_ref = merge_top(list, top_ref_v, top_ref_id);
  __syncthreads();
  const bool any_both = mr > -INFINITY;  // some entry is finite in both (every finite value exceeds -inf)

  // (2) the exp sums over the entries finite in both, test's top-20, the rank of ref's top-1 in test
  const uint32_t ref_top1 = n_ref > 0 ? top_ref_id[0] : 0;
  const uint32_t at_top1 = n_ref > 0 ? f32_bits(test[ref_top1]) : 0;
  const bool ranked = n_ref > 0 && kind_of(at_top1) == 0;
  const float test_at_top1 = __uint_as_float(at_top1);
  const double mrd = mr, mtd = mt;
  double zr = 0.0, zt = 0.0;
  uint32_t rank = 0;
  list.clear();
  for (uint32_t i = threadIdx.x; i < vocab; i += kThreads) {
    const uint32_t tb = f32_bits(test[i]);
    if (kind_of(tb) != 0) continue;
    const float tf = __uint_as_float(tb);
    list.offer(tf, i);
    if (ranked && before(tf, i, test_at_top1, ref_top1)) ++rank;
    const uint32_t rb = f32_bits(ref[i]);
    if (kind_of(rb) != 0) continue;
    zr += exp(static_cast<double>(__uint_as_float(rb)) - mrd);
    zt += exp(static_cast<double>(tf) - mtd);
  }
  zr = block_reduce(zr, SumF64{});
  zt = block_reduce(zt, SumF64{});
  rank = block_reduce(rank, SumU32{});
  const int n_test = merge_top(list, top_test_v, top_test_id);
  __syncthreads();

  // (3) KL(P_ref || P_test) over the entries finite in both (zr, zt >= 1 then: each holds exp(0))
  double kl = 0.0;
  if (any_both) {  // the same for every thread: the reduction inside is block-uniform
    const double lzr = mrd + log(zr), lzt = mtd + log(zt);
    for (uint32_t i = threadIdx.x; i < vocab; i += kThreads) {
      const uint32_t rb = f32_bits(ref[i]), tb = f32_bits(test[i]);
      if (kind_of(rb) != 0 || kind_of(tb) != 0) continue;
      const double lr = static_cast<double>(__uint_as_float(rb)) - lzr;
      const double lt = static_cast<double>(__uint_as_float(tb)) - lzt;
      kl += exp(lr) * (lr - lt);
    }
    kl = block_reduce(kl, SumF64{});
  }

  if (threadIdx.x == 0) {
    RowResult r;
    r.kl = fmax(0.0, kl);  // rounding can leave a tiny negative sum for equal rows
    r.max_abs_diff = max_abs_diff;
    r.margin_ref = n_ref >= 2 ? static_cast<double>(top_ref_v[0]) - static_cast<double>(top_ref_v[1]) : 0.0;
    r.top1_ref = n_ref > 0 ? static_cast<int64_t>(top_ref_id[0]) : -1;
    r.top1_test = n_test > 0 ? static_cast<int64_t>(top_test_id[0]) : -1;
    r.nonfinite = nonfinite;
    r.rank_in_test = ranked ? static_cast<int64_t>(rank) : -1;
    int overlap = 0;
    for (int a = 0; a < n_ref; ++a)
      for (int b = 0; b < n_test; ++b) overlap += top_ref_id[a] == top_test_id[b] ? 1 : 0;
    r.top20_overlap = overlap;
    r.identical = identical ? 1 : 0;
    out[row] = r;
  }
}

}  // namespace

// grid (rows, 1, 1), block (kern_compare::kThreads, 1, 1). Row r of ref is ref[r*ref_stride ..
// + vocab), of test test[r*test_stride .. + vocab) (strides in elements); out[r] its result.
// 0 < vocab <= kern_compare::kMaxVocab.
extern "C" __global__ void __launch_bounds__(kern_compare::kThreads)
    kern_compare_rows_bf16(const uint16_t* __restrict__ ref, uint64_t ref_stride, const uint16_t* __restrict__ test,
                           uint64_t test_stride, uint64_t vocab, RowResult* __restrict__ out) {
  compare_row(ref, ref_stride, test, test_stride, vocab, out);
}

extern "C" __global__ void __launch_bounds__(kern_compare::kThreads)
    kern_compare_rows_f32(const uint32_t* __restrict__ ref, uint64_t ref_stride, const uint32_t* __restrict__ test,
                          uint64_t test_stride, uint64_t vocab, RowResult* __restrict__ out) {
  compare_row(ref, ref_stride, test, test_stride, vocab, out);
}
