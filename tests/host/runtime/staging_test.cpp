// The staging schedule covers every byte of every copy exactly once, within the chunk size.
#include <gtest/gtest.h>

#include <random>

#include "kern/runtime/staging.hpp"
#include "bind_copies.hpp"

namespace kern::runtime {
namespace {

using test_copies::contiguous;
using test_copies::strided;

// Simulates the pieces: for every destination byte, which source byte lands there.
std::vector<std::int64_t> simulate(const std::vector<weights::BindCopy>& copies, std::uint64_t chunk,
                                   std::uint64_t dst_bytes) {
  std::vector<std::int64_t> dst(dst_bytes, -1);
  for (const StagingPiece& p : plan_staging(copies, chunk)) {
    EXPECT_LE(p.bytes, chunk);
    const weights::BindCopy& c = copies[p.copy];
    if (p.strided) {
      EXPECT_EQ(p.bytes, (p.rows - 1) * c.src_pitch + p.width);
      for (std::uint64_t r = 0; r < p.rows; ++r)
        for (std::uint64_t b = 0; b < p.width; ++b) {
          auto& slot = dst[p.dst_offset + r * c.dst_pitch + b];
          EXPECT_EQ(slot, -1) << "byte written twice";
          slot = static_cast<std::int64_t>(p.src_offset + r * c.src_pitch + b);
        }
    } else {
      for (std::uint64_t b = 0; b < p.bytes; ++b) {
        auto& slot = dst[p.dst_offset + b];
        EXPECT_EQ(slot, -1);
        slot = static_cast<std::int64_t>(p.src_offset + b);
      }
    }
  }
  return dst;
}

std::vector<std::int64_t> expected(const std::vector<weights::BindCopy>& copies, std::uint64_t dst_bytes) {
  std::vector<std::int64_t> dst(dst_bytes, -1);
  for (const weights::BindCopy& c : copies)
    for (std::uint64_t r = 0; r < c.height; ++r)
      for (std::uint64_t b = 0; b < c.width; ++b)
        dst[c.dst_offset + r * c.dst_pitch + b] = static_cast<std::int64_t>(c.src_offset + r * c.src_pitch + b);
  return dst;
}

TEST(RuntimeStaging, ContiguousSplitsIntoChunks) {
  std::vector<weights::BindCopy> copies{contiguous(100, 0, 1000)};
  auto pieces = plan_staging(copies, 256);
  ASSERT_EQ(pieces.size(), 4u);
  EXPECT_EQ(pieces[3].bytes, 1000u - 768);
  EXPECT_EQ(simulate(copies, 256, 1000), expected(copies, 1000));
}

TEST(RuntimeStaging, StridedRowsShareOneReadPerPiece) {
  // 10 rows of 16 bytes out of rows 64 bytes apart: a chunk of 200 holds 3 rows' span (2*64+16)
  std::vector<weights::BindCopy> copies{strided(32, 0, 16, 10, 64, 16)};
  auto pieces = plan_staging(copies, 200);
  ASSERT_EQ(pieces.size(), 4u);
  EXPECT_TRUE(pieces[0].strided);
  EXPECT_EQ(pieces[0].rows, 3u);
  EXPECT_EQ(pieces[3].rows, 1u);
  EXPECT_EQ(simulate(copies, 200, 160), expected(copies, 160));
}

TEST(RuntimeStaging, RandomPlansCoverExactly) {
  std::mt19937_64 g(42);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<weights::BindCopy> copies;
    std::uint64_t dst = 0;
    const int n = 1 + static_cast<int>(g() % 4);
    for (int i = 0; i < n; ++i) {
      if (g() % 2) {
        std::uint64_t len = 1 + g() % 700;
        copies.push_back(contiguous(g() % 1000, dst, len));
        dst += len;
      } else {
        std::uint64_t w = 1 + g() % 90, h = 1 + g() % 12, sp = w + g() % 50;
        copies.push_back(strided(g() % 1000, dst, w, h, sp, w));
        dst += w * h;
      }
    }
    const std::uint64_t chunk = 1 + g() % 400;
    ASSERT_EQ(simulate(copies, chunk, dst), expected(copies, dst)) << "trial " << trial;
  }
}

}  // namespace
}  // namespace kern::runtime
