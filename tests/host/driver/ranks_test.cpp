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

}  // namespace
}  // namespace kern::driver
