// driver::plan_ranks and parse_gpu_list (kern run / kern bench --gpus): which GPUs hold which ranks,
// and the refusals, before anything loads.
#include <gtest/gtest.h>

#include "kern/base/error.hpp"
#include "kern/driver/ranks.hpp"

namespace kern::driver {
namespace {

core::Manifest with_topology(std::map<std::string, std::uint64_t> groups) {
  core::Manifest m;
  m.topology = std::move(groups);
  m.states["kv"].bytes_per_token = 64;
  return m;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Api);
    return e.what();
  }
  return "(no error)";
}

TEST(Ranks, ParsesGpuLists) {
  EXPECT_EQ(parse_gpu_list("0", "--gpus"), (std::vector<int>{0}));
  EXPECT_EQ(parse_gpu_list("3,1,0,0", "--gpus"), (std::vector<int>{3, 1, 0, 0}));
  for (const char* bad : {"", ",", "0,", ",1", "a", "1,b", "-1", "0x1", "1 ,2", "99999999999"})
    EXPECT_NE(error_of([&] { parse_gpu_list(bad, "--gpus"); }).find("--gpus"), std::string::npos) << bad;
}

TEST(Ranks, OneRankManifestsRunOnOneGpu) {
  const core::Manifest m = with_topology({{"tp", 1}});
  RankPlan p = plan_ranks(m, {}, 2);
  EXPECT_EQ(p.group, "");
  EXPECT_EQ(p.gpus, (std::vector<int>{2}));
  p = plan_ranks(m, {5}, 0);
  EXPECT_EQ(p.gpus, (std::vector<int>{5}));
  EXPECT_NE(error_of([&] { plan_ranks(m, {0, 1}, 0); }).find("no topology group of more than one rank"),
            std::string::npos);
}

TEST(Ranks, AGroupNeedsOneGpuPerRankInRankOrder) {
  const core::Manifest m = with_topology({{"solo", 1}, {"tp", 2}});
  const RankPlan p = plan_ranks(m, {1, 0}, 0);
  EXPECT_EQ(p.group, "tp");
  EXPECT_EQ(p.gpus, (std::vector<int>{1, 0}));
  EXPECT_EQ(plan_ranks(m, {0, 0}, 0).gpus, (std::vector<int>{0, 0}));  // two ranks on one GPU
  EXPECT_NE(error_of([&] { plan_ranks(m, {}, 0); }).find("give --gpus with 2"), std::string::npos);
  EXPECT_NE(error_of([&] { plan_ranks(m, {0}, 0); }).find("group tp has 2 ranks"), std::string::npos);
  EXPECT_NE(error_of([&] { plan_ranks(m, {0, 1, 2}, 0); }).find("lists 3 GPUs"), std::string::npos);
}

TEST(Ranks, RefusesTwoGroupsAndPerSequenceStates) {
  EXPECT_NE(error_of([&] { plan_ranks(with_topology({{"pp", 2}, {"tp", 2}}), {0, 1}, 0); }).find("one group only"),
            std::string::npos);
  core::Manifest m = with_topology({{"tp", 2}});
  m.states["conv"].bytes_per_seq = 128;
  EXPECT_NE(error_of([&] { plan_ranks(m, {0, 1}, 0); }).find("state conv is per sequence"), std::string::npos);
  m.topology["tp"] = 1;
  EXPECT_EQ(plan_ranks(m, {0}, 0).gpus, (std::vector<int>{0}));  // one rank: its own pool decides
}

// An eager program on several ranks of one process: every call of every rank exactly once, each
// rank's calls in order, call i queued on every rank before call i + 1 on any, rank 0 last in a call.
TEST(Ranks, EagerLaunchOrderGoesCallByCallOverTheRanks) {
  EXPECT_EQ(eager_launch_order(2, 3),
            (std::vector<RankCall>{{1, 0}, {2, 0}, {0, 0}, {1, 1}, {2, 1}, {0, 1}}));
  EXPECT_EQ(eager_launch_order(3, 1), (std::vector<RankCall>{{0, 0}, {0, 1}, {0, 2}}));
  EXPECT_TRUE(eager_launch_order(0, 2).empty());
  EXPECT_TRUE(eager_launch_order(4, 0).empty());
  const auto order = eager_launch_order(65, 2);
  ASSERT_EQ(order.size(), 130u);
  std::vector<std::size_t> next(2, 0);
  std::size_t done_below = 0;  // calls queued on every rank
  for (const RankCall& rc : order) {
    EXPECT_EQ(rc.call, next[rc.rank]++);           // each rank's calls in order, none twice
    EXPECT_LE(rc.call, done_below);                // no rank runs ahead of a call another lacks
    if (rc.rank == 0) done_below = rc.call + 1;    // rank 0 closes each call
  }
  EXPECT_EQ(next, (std::vector<std::size_t>{65, 65}));
}

}  // namespace
}  // namespace kern::driver
