// core::peer_kernels: which kernels receive a peer buffer (the runtime's multimem scan clears their
// modules at load), on the two-rank fixture and patched variants of it.
#include "kern/core/peer_kernels.hpp"

#include <gtest/gtest.h>

#include "verify_fixtures.hpp"

namespace kern::core {
namespace {

TEST(PeerKernels, TheKernelThatTakesThePeerArray) {
  const Manifest m = testing::parse_patched("tp2", "");
  EXPECT_EQ(peer_kernels(m), (std::vector<PeerKernel>{{"tp", "pick", "pick", "x_peers"}}));
  // Manifests without peer buffers have none.
  EXPECT_TRUE(peer_kernels(testing::parse_patched("qwen", "")).empty());
}

TEST(PeerKernels, OnlyLaunchesThatReadTheParam) {
  // pick's launch forwarding only params 1.. does not receive the peer array (param 0) ...
  const Manifest m = testing::parse_patched("tp2", R"([{"op":"add","path":"/ops/pick/impl/launches/0/args",
      "value":[{"param":1},{"param":2},{"param":3},{"param":4},{"param":5},{"param":6}]}])");
  EXPECT_TRUE(peer_kernels(m).empty());
  // ... one that reads it through a pack does, and a second launch of another entry is listed apart.
  const Manifest packed = testing::parse_patched("tp2", R"([
      {"op":"add","path":"/ops/pick/impl/launches/0/args","value":[{"pack":{"size":8,"fields":[{"at":0,"param":0}]}},
        {"param":1},{"param":2},{"param":3},{"param":4},{"param":5}]},
      {"op":"add","path":"/ops/pick/impl/launches/-","value":{"module":"tp","entry":"pick_again","block":[32,1,1],"grid":[1,1,1]}}])");
  EXPECT_EQ(peer_kernels(packed),
            (std::vector<PeerKernel>{{"tp", "pick", "pick", "x_peers"}, {"tp", "pick_again", "pick", "x_peers"}}));
}

}  // namespace
}  // namespace kern::core
