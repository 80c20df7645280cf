// The NCCL collective externs through the runtime (issue 20) with a one-rank group, the most one GPU
// allows (NCCL refuses two ranks on one device): the group joins at load; allreduce, alltoall and
// allgather of one rank copy their input (f32 and bf16); a count past its buffers is refused before
// NCCL sees it. A two-rank group's programs refuse to run until connect has joined it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_fixture.hpp"

namespace kern::gputest {
namespace {

std::string manifest(int ranks) {
  std::string m = R"JSON({
  "schema_version": 5,
  "model": "nccl-one-rank",
  "topology": {"groups": {"tp": 1}},
  "buffers": {
    "x": {"dtype": "f32", "shape": [1024], "kind": "input"},
    "sum": {"dtype": "f32", "shape": [1024], "kind": "output"},
    "all": {"dtype": "f32", "shape": [1024], "kind": "output"},
    "xb": {"dtype": "bf16", "shape": [256], "kind": "input"},
    "xb_out": {"dtype": "bf16", "shape": [256], "kind": "output"}
  },
  "modules": {},
  "ops": {
    "allreduce": {"params": ["in buffer<f32>", "out buffer<f32>", "i32"],
      "impl": {"launches": [{"entry": "extern:nccl_allreduce_f32", "params": ["in buffer<f32>", "out buffer<f32>", "i32", "i32"],
                             "args": [{"param": 0}, {"param": 1}, {"param": 2}, {"rank": "tp"}]}]}},
    "alltoall": {"params": ["in buffer<f32>", "out buffer<f32>", "i32"],
      "impl": {"launches": [{"entry": "extern:nccl_alltoall_f32", "params": ["in buffer<f32>", "out buffer<f32>", "i32", "i32"],
                             "args": [{"param": 0}, {"param": 1}, {"param": 2}, {"rank": "tp"}]}]}},
    "allgather_bf16": {"params": ["in buffer<bf16>", "out buffer<bf16>", "i32"],
      "impl": {"launches": [{"entry": "extern:nccl_allgather_bf16", "params": ["in buffer<bf16>", "out buffer<bf16>", "i32", "i32"],
                             "args": [{"param": 0}, {"param": 1}, {"param": 2}, {"rank": "tp"}]}]}}
  },
  "programs": {
    "collectives": {"calls": [
      {"op": "allreduce", "args": [{"buf": "x"}, {"buf": "sum"}, {"i32": 1024}]},
      {"op": "alltoall", "args": [{"buf": "x"}, {"buf": "all"}, {"i32": 1024}]},
      {"op": "allgather_bf16", "args": [{"buf": "xb"}, {"buf": "xb_out"}, {"i32": 256}]}
    ]}
  }
}
)JSON";
  if (ranks != 1) m.replace(m.find(R"("tp": 1)"), 7, "\"tp\": " + std::to_string(ranks));
  return m;
}

TEST(RuntimeGpuNccl, OneRankCollectivesCopyTheirInput) {
  runtime::RuntimeOptions o;
  auto rt = load(verified(manifest(1)), o);
  rt->load_weights(weights::HostTensors{});
  EXPECT_TRUE(rt->connected());
  const std::vector<float> x = random_f32(1024, 31);
  const std::vector<std::uint16_t> xb = random_bf16(256, 32);
  for (int round = 0; round < 2; ++round) {
    rt->write_input("x", as_bytes(x));
    rt->write_input("xb", as_bytes(xb));
    rt->run("collectives", {});
    EXPECT_EQ(from_bytes<float>(rt->read_output("sum")), x) << "allreduce over one rank";
    EXPECT_EQ(from_bytes<float>(rt->read_output("all")), x) << "alltoall over one rank";
    EXPECT_EQ(from_bytes<std::uint16_t>(rt->read_output("xb_out")), xb) << "allgather over one rank";
  }
}

TEST(RuntimeGpuNccl, ACountPastItsBuffersIsRefusedBeforeNcclSeesIt) {
  std::string m = manifest(1);
  const std::string from = R"({"op": "allreduce", "args": [{"buf": "x"}, {"buf": "sum"}, {"i32": 1024}]})";
  m.replace(m.find(from), from.size(), R"({"op": "allreduce", "args": [{"buf": "x"}, {"buf": "sum"}, {"i32": 1025}]})");
  auto rt = load(verified(m), runtime::RuntimeOptions{});
  rt->load_weights(weights::HostTensors{});
  expect_error([&] { rt->run("collectives", {}); }, ErrorKind::Api, "send holds 4096 bytes");
}

TEST(RuntimeGpuNccl, ALargerGroupWaitsForConnect) {
  runtime::RuntimeOptions o;
  o.ranks["tp"] = 1;
  auto rt = load(verified(manifest(2)), o);
  rt->load_weights(weights::HostTensors{});
  EXPECT_FALSE(rt->connected());
  expect_error([&] { rt->run("collectives", {}); }, ErrorKind::Api, "NCCL group tp not ready");
  // Rank 1 leads nothing: its offer carries no NCCL id.
  EXPECT_TRUE(rt->offer().offer.nccl.empty());
}

}  // namespace
}  // namespace kern::gputest
