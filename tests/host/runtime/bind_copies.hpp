// Copy-list builders shared by the staging and weight-loader planning tests.
#pragma once

#include <cstdint>

#include "kern/bind_plan.hpp"

namespace kern::runtime::test_copies {

inline BindCopy contiguous(std::uint64_t src, std::uint64_t dst, std::uint64_t n) {
  BindCopy c;
  c.tensor = "t";
  c.src_offset = src;
  c.dst_offset = dst;
  c.width = n;
  c.src_pitch = c.dst_pitch = n;
  return c;
}

inline BindCopy strided(std::uint64_t src, std::uint64_t dst, std::uint64_t width, std::uint64_t height,
                        std::uint64_t sp, std::uint64_t dp) {
  BindCopy c;
  c.kind = BindCopy::Kind::Strided;
  c.tensor = "t";
  c.src_offset = src;
  c.dst_offset = dst;
  c.width = width;
  c.height = height;
  c.src_pitch = sp;
  c.dst_pitch = dp;
  return c;
}

}  // namespace kern::runtime::test_copies
