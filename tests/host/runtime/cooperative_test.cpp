// The pure part of the load-time check behind `cooperative` launches: the peak var values, the
// grid's block count there, and the comparison with what the device holds at once.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kern/base/error.hpp"
#include "kern/runtime/vars.hpp"
#include "runtime/cooperative.hpp"
#include "thrown.hpp"

namespace kern::runtime {
namespace {

using ::testing::HasSubstr;

const std::string kWhere = "ops.decode_chain.impl.launches[2]";

using kern::test::thrown;

TEST(CooperativeFit, PassesUpToCapacityAndFailsOneAbove) {
  EXPECT_NO_THROW(check_cooperative_fit(kWhere, 132 * 2, 2, 132));  // exactly full (H100 SXM: 132 SMs)
  EXPECT_NO_THROW(check_cooperative_fit(kWhere, 1, 1, 1));
  EXPECT_NO_THROW(check_cooperative_fit(kWhere, 0, 1, 132));
  const Error e = thrown([] { check_cooperative_fit(kWhere, 132 * 2 + 1, 2, 132); });
  EXPECT_EQ(e.kind(), ErrorKind::Manifest);
  EXPECT_EQ(e.message(),
            "ops.decode_chain.impl.launches[2]: cooperative grid of 265 blocks exceeds the 264 blocks the device can "
            "hold at once (132 SMs x 2 per SM)");
}

TEST(CooperativeFit, LargeFiguresDoNotWrap) {
  // per_sm * sms in 64 bits: INT_MAX * INT_MAX does not fit an int.
  const std::uint64_t cap = std::uint64_t{2147483647} * 2147483647;
  EXPECT_NO_THROW(check_cooperative_fit(kWhere, cap, 2147483647, 2147483647));
  const Error e = thrown([&] { check_cooperative_fit(kWhere, cap + 1, 2147483647, 2147483647); });
  EXPECT_EQ(e.kind(), ErrorKind::Manifest);
  EXPECT_THAT(e.message(), HasSubstr("grid of 4611686014132420610 blocks exceeds the 4611686014132420609 blocks"));
}

TEST(CooperativeFit, ZeroOccupancyIsItsOwnError) {
  const Error e = thrown([] { check_cooperative_fit(kWhere, 1, 0, 132); });
  EXPECT_EQ(e.kind(), ErrorKind::Manifest);
  EXPECT_EQ(
      e.message(),
      "ops.decode_chain.impl.launches[2]: cooperative kernel cannot run at all: not one of its blocks fits on an SM "
      "(occupancy 0 for its block size and shared memory)");
}

TEST(CooperativeFit, NonsenseDriverFiguresAreCudaErrors) {
  for (const auto& figures : {std::pair{-1, 132}, std::pair{2, 0}, std::pair{2, -4}}) {
    const int per_sm = figures.first, sms = figures.second;
    const Error e = thrown([&] { check_cooperative_fit(kWhere, 1, per_sm, sms); });
    EXPECT_EQ(e.kind(), ErrorKind::Cuda) << per_sm << " " << sms;
    EXPECT_THAT(e.message(), ::testing::StartsWith(kWhere + ": the driver reports "));
  }
}

core::Manifest peak_vars() {
  core::Manifest m;
  m.vars["seqs"].max = 64;
  m.vars["tokens"].max = 2048;
  return m;
}

TEST(CooperativePeak, WhenMaxClampsOnlyItsVar) {
  const VarTable t(peak_vars());
  const std::uint32_t tokens = *t.index("tokens"), seqs = *t.index("seqs");
  auto p = launch_peak_vars(t.at_max(), tokens, 16);
  EXPECT_EQ(p[tokens], 16u);
  EXPECT_EQ(p[seqs], 64u);
  p = launch_peak_vars(t.at_max(), tokens, std::nullopt);  // `when` with a min only
  EXPECT_EQ(p[tokens], 2048u);
  p = launch_peak_vars(t.at_max(), tokens, 100000);  // above the var's max: the var's max
  EXPECT_EQ(p[tokens], 2048u);
  p = launch_peak_vars(t.at_max(), tokens, 0);  // never verified (vars start at 1): read as 1
  EXPECT_EQ(p[tokens], 1u);
  p = launch_peak_vars(t.at_max(), std::nullopt, std::nullopt);
  EXPECT_EQ(p, t.at_max());
}

core::Expr mul(core::Expr a, std::uint64_t f) { return core::Expr::mul(std::move(a), f); }

TEST(CooperativePeak, GridBlocksAtThePeak) {
  const VarTable t(peak_vars());
  const std::array<CompiledExpr, 3> grid = {
      CompiledExpr::compile(core::Expr::ceil_div(core::Expr::variable("tokens"), 16), t),
      CompiledExpr::compile(core::Expr::variable("seqs"), t), CompiledExpr::constant(3)};
  EXPECT_EQ(grid_blocks_at(grid, t.at_max().data(), kWhere), 128u * 64u * 3u);
  const auto peak = launch_peak_vars(t.at_max(), *t.index("tokens"), 40);
  EXPECT_EQ(grid_blocks_at(grid, peak.data(), kWhere), 3u * 64u * 3u);
}

TEST(CooperativePeak, OverflowingGridIsAManifestError) {
  const VarTable t(peak_vars());
  // Each axis fits u64, the product does not.
  const std::array<CompiledExpr, 3> grid = {CompiledExpr::compile(mul(core::Expr::variable("tokens"), 1ULL << 40), t),
                                            CompiledExpr::compile(mul(core::Expr::variable("seqs"), 1ULL << 20), t),
                                            CompiledExpr::constant(1)};
  Error e = thrown([&] { grid_blocks_at(grid, t.at_max().data(), kWhere); });
  EXPECT_EQ(e.kind(), ErrorKind::Manifest);
  EXPECT_EQ(e.message(), kWhere + ": the grid's block count overflows u64 at the var bounds");
  // One axis overflowing on its own names the axis.
  const std::array<CompiledExpr, 3> axis = {
      CompiledExpr::constant(1),
      CompiledExpr::compile(mul(mul(core::Expr::variable("tokens"), 1ULL << 40), 1ULL << 20), t),
      CompiledExpr::constant(1)};
  e = thrown([&] { grid_blocks_at(axis, t.at_max().data(), kWhere); });
  EXPECT_EQ(e.kind(), ErrorKind::Manifest);
  EXPECT_THAT(e.message(), ::testing::StartsWith(kWhere + ": grid[1] ("));
  EXPECT_THAT(e.message(), HasSubstr(") overflows at the var bounds"));
}

}  // namespace
}  // namespace kern::runtime
