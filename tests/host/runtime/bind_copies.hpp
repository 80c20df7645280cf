// Copy-list builders shared by the staging and weight-loader planning tests.
#pragma once

#include <cstdint>

#include "kern/weights/bind_plan.hpp"

namespace kern::runtime::test_copies {

inline weights::BindCopy contiguous(std::uint64_t src, std::uint64_t dst, std::uint64_t n) {
  return {.tensor = "t", .src_offset = src, .dst_offset = dst, .width = n, .src_pitch = n, .dst_pitch = n};
}

inline weights::BindCopy strided(std::uint64_t src, std::uint64_t dst, std::uint64_t width, std::uint64_t height,
                                 std::uint64_t sp, std::uint64_t dp) {
  return {.kind = weights::BindCopy::Kind::Strided,
          .tensor = "t",
          .src_offset = src,
          .dst_offset = dst,
          .width = width,
          .height = height,
          .src_pitch = sp,
          .dst_pitch = dp};
}

}  // namespace kern::runtime::test_copies
