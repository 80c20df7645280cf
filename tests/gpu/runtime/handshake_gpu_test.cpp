// The multi-GPU handshake's runtime half (Runtime::offer / connect / connect_local; issue 20) with
// two ranks of one group in one process on one GPU: programs refuse to run until connect fills the
// peer buffers; after it each rank writes into both ranks' exported buffers through its peer array
// and reads the other's word back; a rank that loaded another manifest text, a second connect and
// a connect without an offer are refused.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include <chrono>

#include "gpu_fixture.hpp"
#include "kern/base/sha256.hpp"

namespace kern::gputest {
namespace {

std::string manifest(const std::string& model = "handshake") {
  return R"({
  "schema_version": 5,
  "model": ")" + model + R"(",
  "topology": {"groups": {"tp": 2}},
  "buffers": {
    "flags": {"dtype": "u32", "shape": [64], "kind": "output", "export": true},
    "peers": {"dtype": "u64", "shape": [2], "kind": "peer", "of": "flags", "group": "tp"},
    "value": {"dtype": "u32", "shape": [1], "kind": "input"}
  },
  "modules": {"k": {"source": "runtime_test_kernels", "sha256": "@SHA@"}},
  "ops": {
    "poke": {"params": ["in buffer<u64>", "i32", "i32", "in buffer<u32>"],
             "impl": {"launches": [{"module": "k", "entry": "peer_poke", "block": [32, 1, 1], "grid": [1, 1, 1]}]}}
  },
  "programs": {
    "poke": {"calls": [{"op": "poke", "args": [{"buf": "peers"}, {"rank": "tp"}, {"i32": 2}, {"buf": "value"}]}]}
  }
})";
}

std::unique_ptr<runtime::Runtime> rank(const std::string& text, std::uint64_t r) {
  ::setenv("KERN_NO_FABRIC", "1", 1);
  runtime::RuntimeOptions o;
  o.ranks["tp"] = r;
  auto rt = load(verified(text), o);
  rt->load_weights(weights::HostTensors{});
  return rt;
}

void poke(runtime::Runtime& rt, std::uint32_t v) {
  const std::vector<std::uint32_t> value{v};
  rt.write_input("value", as_bytes(value));
  rt.run("poke", {});
}

TEST(HandshakeGpu, TwoRanksInOneProcessWriteThroughTheirPeerArrays) {
  auto r0 = rank(manifest(), 0), r1 = rank(manifest(), 1);
  EXPECT_FALSE(r0->connected());
  expect_error([&] { poke(*r0, 1); }, ErrorKind::Api, "peer buffer peers not ready");
  expect_error([&] { r0->connect({}); }, ErrorKind::Api, "call offer() first");
  std::array<runtime::Runtime*, 2> both{r0.get(), r1.get()};
  runtime::Runtime::connect_local(both);
  EXPECT_TRUE(r0->connected());
  EXPECT_TRUE(r1->connected());
  poke(*r0, 0xa0a0a0a0u);
  poke(*r1, 0x0b0b0b0bu);
  r0->synchronize();
  r1->synchronize();
  for (auto* rt : both) {
    const auto flags = from_bytes<std::uint32_t>(rt->read_output("flags"));
    ASSERT_EQ(flags.size(), 64u);
    EXPECT_EQ(flags[0], 0xa0a0a0a0u) << "rank 0's word";
    EXPECT_EQ(flags[1], 0x0b0b0b0bu) << "rank 1's word";
    for (std::size_t i = 2; i < flags.size(); ++i) EXPECT_EQ(flags[i], 0u) << i;
  }
  // The peer arrays hold the rank's own buffer and the import of the other's, not the same address.
  const auto p0 = from_bytes<std::uint64_t>(r0->read_buffer("peers"));
  const auto p1 = from_bytes<std::uint64_t>(r1->read_buffer("peers"));
  EXPECT_EQ(p0[0], r0->device_address("flags"));
  EXPECT_EQ(p1[1], r1->device_address("flags"));
  EXPECT_NE(p0[1], r1->device_address("flags")) << "rank 1's buffer is reached through rank 0's own mapping";
  std::printf("[handshake] rank 0 peers %llx %llx, rank 1 peers %llx %llx\n", static_cast<unsigned long long>(p0[0]),
              static_cast<unsigned long long>(p0[1]), static_cast<unsigned long long>(p1[0]),
              static_cast<unsigned long long>(p1[1]));
  expect_error([&] { runtime::Runtime::connect_local(both); }, ErrorKind::Api, "connected already");
}

TEST(HandshakeGpu, RanksThatLoadedDifferentManifestTextsAreRefused) {
  auto r0 = rank(manifest(), 0), r1 = rank(manifest("handshake-b"), 1);
  std::array<runtime::Runtime*, 2> both{r0.get(), r1.get()};
  expect_error([&] { runtime::Runtime::connect_local(both); }, ErrorKind::Api, "another manifest");
  EXPECT_FALSE(r0->connected());
  expect_error([&] { poke(*r0, 1); }, ErrorKind::Api, "not ready");
}

TEST(HandshakeGpu, AMissingRankIsRefused) {
  auto r0 = rank(manifest(), 0);
  std::array<runtime::Runtime*, 1> one{r0.get()};
  expect_error([&] { runtime::Runtime::connect_local(one); }, ErrorKind::Api, "missing rank 1");
}

// kern's peer barrier (kernels/peer.cu) through the runtime: two ranks' manifests name the
// production fatbin, connect fills their peer arrays, and the barrier program runs on both ranks
// three times, then on rank 0 alone, which reports rank 1 (error word 2) after its 1 s timeout. (Its
// captured cost is PerfGpu.PeerBarrier's, kernel alone.)
std::string barrier_manifest() {
  return R"({
  "schema_version": 5,
  "model": "barrier",
  "topology": {"groups": {"tp": 2}},
  "buffers": {
    "flags": {"dtype": "u32", "shape": [2], "kind": "output", "export": true},
    "peers": {"dtype": "u64", "shape": [2], "kind": "peer", "of": "flags", "group": "tp"},
    "gen": {"dtype": "u32", "shape": [1], "kind": "carry"},
    "error": {"dtype": "i32", "shape": [1], "kind": "output"}
  },
  "modules": {"peer": {"source": "peer", "sha256": "@SHA@"}},
  "ops": {
    "barrier": {"params": ["in buffer<u64>", "i32", "i32", "inout buffer<u32>", "out buffer<i32>", "i64"],
                "impl": {"launches": [{"module": "peer", "entry": "kern_peer_barrier", "block": [32, 1, 1], "grid": [1, 1, 1]}]}}
  },
  "programs": {
    "barrier": {"calls": [{"op": "barrier", "args": [{"buf": "peers"}, {"rank": "tp"}, {"i32": 2},
                {"buf": "gen"}, {"buf": "error"}, {"i64": 1000000000}]}]}
  }
})";
}

TEST(HandshakeGpu, ThePeerBarrierRunsThroughTheRuntime) {
  ::setenv("KERN_NO_FABRIC", "1", 1);
  const std::string dir = production_kernels_dir();
  const core::Verified v = verified(barrier_manifest(), sha256_file_hex(dir + "/peer.fatbin"));
  std::vector<std::unique_ptr<runtime::Runtime>> ranks;
  for (std::uint64_t r = 0; r < 2; ++r) {
    runtime::RuntimeOptions o;
    o.ranks["tp"] = r;
    ranks.push_back(load(v, o, dir));
    ranks.back()->load_weights(weights::HostTensors{});
  }
  std::array<runtime::Runtime*, 2> both{ranks[0].get(), ranks[1].get()};
  runtime::Runtime::connect_local(both);
  for (int i = 0; i < 3; ++i) {  // neither launch blocks; both ranks meet in the kernel
    both[0]->launch("barrier", {});
    both[1]->launch("barrier", {});
    both[0]->synchronize();
    both[1]->synchronize();
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(from_bytes<std::int32_t>(both[r]->read_output("error"))[0], 0) << "rank " << r;
    const auto flags = from_bytes<std::uint32_t>(both[r]->read_output("flags"));
    EXPECT_EQ(flags[0], 3u) << "rank " << r;
    EXPECT_EQ(flags[1], 3u) << "rank " << r;
  }
  const auto t0 = std::chrono::steady_clock::now();
  both[0]->run("barrier", {});  // rank 1 stays away
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(from_bytes<std::int32_t>(both[0]->read_output("error"))[0], 2) << "rank 0 names rank 1";
  EXPECT_LT(s, 2.0);
  std::printf("[handshake] rank 0 alone: error word 2 (timed out waiting for rank 1) after %.3f s\n", s);
}

}  // namespace
}  // namespace kern::gputest
