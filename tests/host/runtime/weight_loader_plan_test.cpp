// plan_load packs pieces into slab fills and reads: every destination byte comes from the right
// source byte exactly once, within slab bounds, aligned, in plan order; loader env options.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

#include "kern/base/error.hpp"
#include "kern/runtime/staging.hpp"
#include "bind_copies.hpp"
#include "kern/runtime/weight_loader.hpp"

namespace kern::runtime {
namespace {

using test_copies::contiguous;
using test_copies::strided;

// Per target: for every destination byte, the source offset that lands there (-1: none).
using Image = std::vector<std::vector<std::int64_t>>;

Image expected(const std::vector<std::vector<weights::BindCopy>>& targets, const std::vector<std::uint64_t>& sizes) {
  Image out;
  for (std::size_t t = 0; t < targets.size(); ++t) {
    out.emplace_back(sizes[t], -1);
    for (const weights::BindCopy& c : targets[t])
      for (std::uint64_t r = 0; r < c.height; ++r)
        for (std::uint64_t b = 0; b < c.width; ++b)
          out[t][c.dst_offset + r * c.dst_pitch + b] = static_cast<std::int64_t>(c.src_offset + r * c.src_pitch + b);
  }
  return out;
}

// Executes the plan symbolically: reads put source offsets into a slab image, pieces move them
// to destinations the way the device sink does. Checks the plan's structural promises on the way.
Image simulate(const LoadPlan& plan, const std::vector<std::vector<weights::BindCopy>>& targets,
               const std::vector<std::uint64_t>& sizes) {
  Image out;
  for (std::uint64_t n : sizes) out.emplace_back(n, -1);
  std::pair<std::size_t, std::size_t> last{0, 0};
  bool first = true;
  for (const SlabFill& fill : plan.fills) {
    EXPECT_FALSE(fill.pieces.empty());
    EXPECT_LE(fill.bytes, plan.layout.slab_bytes);
    std::vector<std::int64_t> slab(plan.layout.slab_bytes, -1);
    std::vector<int> written(plan.layout.slab_bytes, 0);
    for (const SlabRead& rd : fill.reads) {
      EXPECT_LE(rd.bytes, plan.layout.read_bytes);
      EXPECT_GT(rd.bytes, 0u);
      const SlabPiece& p = fill.pieces.at(rd.piece);
      EXPECT_GE(rd.slab_offset, p.slab_offset);
      EXPECT_LE(rd.slab_offset + rd.bytes, p.slab_offset + p.piece.bytes);
      EXPECT_EQ(rd.src_offset - p.piece.src_offset, rd.slab_offset - p.slab_offset);
      for (std::uint64_t b = 0; b < rd.bytes; ++b) {
        slab.at(rd.slab_offset + b) = static_cast<std::int64_t>(rd.src_offset + b);
        ++written.at(rd.slab_offset + b);
      }
    }
    for (const SlabPiece& sp : fill.pieces) {
      EXPECT_EQ(sp.slab_offset % plan.layout.align, 0u);
      EXPECT_LE(sp.slab_offset + sp.piece.bytes, fill.bytes);
      const std::pair<std::size_t, std::size_t> at{sp.target, sp.piece.copy};
      EXPECT_TRUE(first || at >= last) << "pieces out of plan order";
      first = false;
      last = at;
      for (std::uint64_t b = 0; b < sp.piece.bytes; ++b)
        EXPECT_EQ(written[sp.slab_offset + b], 1) << "slab byte read " << written[sp.slab_offset + b] << " times";
      const weights::BindCopy& c = targets[sp.target][sp.piece.copy];
      const StagingPiece& p = sp.piece;
      auto put = [&](std::uint64_t dst, std::uint64_t slab_at) {
        auto& slot = out[sp.target].at(dst);
        EXPECT_EQ(slot, -1) << "destination byte written twice";
        slot = slab.at(slab_at);
      };
      if (!p.strided) {
        for (std::uint64_t b = 0; b < p.bytes; ++b) put(p.dst_offset + b, sp.slab_offset + b);
      } else {
        for (std::uint64_t r = 0; r < p.rows; ++r)
          for (std::uint64_t b = 0; b < p.width; ++b)
            put(p.dst_offset + r * c.dst_pitch + b, sp.slab_offset + r * c.src_pitch + b);
      }
    }
  }
  return out;
}

TEST(WeightLoaderPlan, SmallPiecesShareAFillAndAlign) {
  std::vector<std::vector<weights::BindCopy>> targets{{contiguous(0, 0, 10), contiguous(50, 10, 10)},
                                                      {contiguous(0, 0, 30)}};
  LoadLayout layout{128, 16, 32};
  const LoadPlan plan = plan_load(targets, layout);
  ASSERT_EQ(plan.fills.size(), 1u);
  ASSERT_EQ(plan.fills[0].pieces.size(), 3u);
  EXPECT_EQ(plan.fills[0].pieces[0].slab_offset, 0u);
  EXPECT_EQ(plan.fills[0].pieces[1].slab_offset, 32u);
  EXPECT_EQ(plan.fills[0].pieces[2].slab_offset, 64u);
  EXPECT_EQ(plan.fills[0].bytes, 94u);
  EXPECT_EQ(plan.read_count, 4u);  // 10, 10, 16 + 14
  EXPECT_EQ(plan.payload_bytes, 50u);
  EXPECT_EQ(plan.max_fill_bytes(), 94u);
  EXPECT_EQ(simulate(plan, targets, {20, 30}), expected(targets, {20, 30}));
}

TEST(WeightLoaderPlan, TensorSpanningSeveralSlabs) {
  std::vector<std::vector<weights::BindCopy>> targets{{contiguous(7, 0, 1000)}};
  const LoadPlan plan = plan_load(targets, LoadLayout{256, 100, 1});
  ASSERT_EQ(plan.fills.size(), 4u);
  EXPECT_EQ(plan.fills[3].bytes, 1000u - 3 * 256);
  EXPECT_EQ(plan.fills[0].reads.size(), 3u);  // 100 + 100 + 56
  EXPECT_EQ(simulate(plan, targets, {1000}), expected(targets, {1000}));
}

TEST(WeightLoaderPlan, PieceThatDoesNotFitStartsANewFill) {
  // 200 + (align 64 -> 256) would pass the 300-byte slab: the second copy opens fill 1.
  std::vector<std::vector<weights::BindCopy>> targets{{contiguous(0, 0, 200), contiguous(1000, 200, 100)}};
  const LoadPlan plan = plan_load(targets, LoadLayout{300, 1000, 64});
  ASSERT_EQ(plan.fills.size(), 2u);
  EXPECT_EQ(plan.fills[1].pieces[0].slab_offset, 0u);
  EXPECT_EQ(simulate(plan, targets, {300}), expected(targets, {300}));
}

TEST(WeightLoaderPlan, StridedSpansReadWhole) {
  // rows of 16 bytes 64 apart, into a buffer 48 bytes per row (interleave-like dst pitch)
  std::vector<std::vector<weights::BindCopy>> targets{{strided(32, 0, 16, 10, 64, 48), strided(0, 16, 32, 10, 32, 48)}};
  const LoadPlan plan = plan_load(targets, LoadLayout{200, 50, 8});
  EXPECT_EQ(plan.payload_bytes, 480u);
  // A: pieces of 3,3,3,1 rows (spans 144,144,144,16); B: 6 and 4 rows (192, 128): gaps are read too
  EXPECT_EQ(plan.read_bytes, 3 * 144u + 16 + 192 + 128);
  EXPECT_EQ(simulate(plan, targets, {480}), expected(targets, {480}));
}

TEST(WeightLoaderPlan, RandomPlansCoverExactly) {
  std::mt19937_64 g(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<std::vector<weights::BindCopy>> targets;
    std::vector<std::uint64_t> sizes;
    const int nt = 1 + static_cast<int>(g() % 4);
    for (int t = 0; t < nt; ++t) {
      std::vector<weights::BindCopy> copies;
      std::uint64_t dst = 0;
      const int n = static_cast<int>(g() % 4);  // a target may have no staged copies
      for (int i = 0; i < n; ++i) {
        if (g() % 2) {
          const std::uint64_t len = 1 + g() % 700;
          copies.push_back(contiguous(g() % 1000, dst, len));
          dst += len;
        } else {
          const std::uint64_t w = 1 + g() % 90, h = 2 + g() % 12, sp = w + g() % 50;
          copies.push_back(strided(g() % 1000, dst, w, h, sp, w));
          dst += w * h;
        }
      }
      targets.push_back(std::move(copies));
      sizes.push_back(dst);
    }
    LoadLayout layout;
    layout.slab_bytes = 1 + g() % 600;
    layout.read_bytes = 1 + g() % 300;
    layout.align = std::uint64_t{1} << (g() % 7);
    while (layout.align > layout.slab_bytes) layout.align >>= 1;
    const LoadPlan plan = plan_load(targets, layout);
    ASSERT_EQ(simulate(plan, targets, sizes), expected(targets, sizes)) << "trial " << trial;
    std::uint64_t payload = 0;
    for (const auto& t : targets)
      for (const auto& c : t) payload += c.bytes();
    EXPECT_EQ(plan.payload_bytes, payload);
  }
}

TEST(WeightLoaderPlan, EmptyTargetsGiveNoFills) {
  std::vector<std::vector<weights::BindCopy>> targets{{}, {}};
  EXPECT_TRUE(plan_load(targets, LoadLayout{}).fills.empty());
}

TEST(WeightLoaderPlan, UnusableLayoutsAreApiErrors) {
  std::vector<std::vector<weights::BindCopy>> targets{{contiguous(0, 0, 10)}};
  for (const LoadLayout& bad : {LoadLayout{0, 1, 1}, LoadLayout{64, 0, 1}, LoadLayout{64, 8, 3}, LoadLayout{64, 8, 128},
                                LoadLayout{64, 8, 0}}) {
    try {
      (void)plan_load(targets, bad);
      ADD_FAILURE() << "expected Error(Api) for slab " << bad.slab_bytes << " read " << bad.read_bytes << " align "
                    << bad.align;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Api) << e.what();
    }
  }
}

TEST(WeightLoaderPlan, TwoDimensionalCopyLimits) {
  EXPECT_TRUE(fits_2d_copy(strided(0, 0, 16, 4, 64, 16)));
  EXPECT_TRUE(fits_2d_copy(strided(0, 0, 16, 4, (1ull << 31) - 1, 16)));
  EXPECT_FALSE(fits_2d_copy(strided(0, 0, 16, 4, 1ull << 31, 16)));
  EXPECT_FALSE(fits_2d_copy(strided(0, 0, 16, 4, 64, 1ull << 32)));
  EXPECT_FALSE(fits_2d_copy(strided(0, 0, 80, 4, 64, 80)));  // width past the source pitch
}

TEST(WeightLoaderOptions, EnvironmentOverrides) {
  std::map<std::string, std::string> env{{"KERN_LOAD_THREADS", "3"},
                                         {"KERN_LOAD_SLABS", "4"},
                                         {"KERN_LOAD_SLAB_MIB", "16"},
                                         {"KERN_LOAD_READ_MIB", "2"},
                                         {"KERN_LOAD_2D", "0"}};
  auto get = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  LoaderOptions o = loader_options_from_env({}, get);
  EXPECT_EQ(o.threads, 3u);
  EXPECT_EQ(o.slabs, 4u);
  EXPECT_EQ(o.layout.slab_bytes, 16ull << 20);
  EXPECT_EQ(o.layout.read_bytes, 2ull << 20);
  EXPECT_FALSE(o.copy_2d);

  LoaderOptions none = loader_options_from_env({}, [](const char*) -> const char* { return nullptr; });
  EXPECT_EQ(none.threads, 0u);
  EXPECT_EQ(none.slabs, 8u);
  EXPECT_TRUE(none.copy_2d);
  EXPECT_GE(default_load_threads(), 1u);
  EXPECT_LE(default_load_threads(), 16u);

  for (const char* bad : {"0", "257", "", "4x", "-1", " 4", "99999999999999999999999"}) {
    env = {{"KERN_LOAD_THREADS", bad}};
    try {
      (void)loader_options_from_env({}, get);
      ADD_FAILURE() << "accepted KERN_LOAD_THREADS=" << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Api);
      EXPECT_NE(std::string(e.what()).find("KERN_LOAD_THREADS"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace kern::runtime
