// kern test's compare kernels (kernels/compare.cu): their launch shape and the result they write
// per row, stated once. The kernels write RowResult, the runtime's DeviceRowCompare
// (src/runtime/row_compare.cpp) launches with kThreads and reads RowResult back into
// core::PositionCompare (include/kern/core/ab_compare.hpp, whose fields these mirror). Plain C++
// (no CUDA type).
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace kern_compare {

constexpr int kThreads = 512;               // per CTA (one CTA per row); the kernels trap on another block size
constexpr int kTop = 20;                    // the top-k of the overlap
constexpr uint64_t kMaxVocab = 0x7fffffff;  // entries per row at most (ids are 31-bit; the sentinel id is above)

// One row's comparison, the fields of core::PositionCompare in their meaning (64 bytes, no padding).
struct RowResult {
  double kl;             // KL(P_ref || P_test) over the entries finite in both; 0 when there are none
  double max_abs_diff;   // max |test - ref| over the entries finite in both; 0 when there are none
  double margin_ref;     // ref's top-1 minus its top-2; 0 with fewer than 2 finite entries
  int64_t top1_ref;      // -1: ref has no finite entry
  int64_t top1_test;     // -1: test has no finite entry
  int64_t nonfinite;     // entries whose kind (finite, NaN, +inf, -inf) differs
  int64_t rank_in_test;  // -1: ref has no finite entry or test[top1_ref] is not finite
  int32_t top20_overlap;
  int32_t identical;  // 1: every entry bitwise equal
};
static_assert(sizeof(RowResult) == 64, "RowResult is 64 bytes");
static_assert(offsetof(RowResult, top1_ref) == 24 && offsetof(RowResult, top20_overlap) == 56 &&
                  offsetof(RowResult, identical) == 60,
              "RowResult has no padding");

}  // namespace kern_compare
