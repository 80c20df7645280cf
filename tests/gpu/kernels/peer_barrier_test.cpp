// The peer barrier (kernels/peer.cu, kern_peer_barrier; issue 20) with the members of a group as
// streams of one GPU: each member's flags are a device buffer of `ranks` words and every member's
// peer array lists them all. Checked: members that all arrive pass with error 0 and every flag at
// the generation; a member left out makes the others report it (1 + its rank) after the timeout,
// within 2 s, and the host turns that into an error naming the rank; generations that wrap around
// 2^32 still pass. Timed: a captured barrier of 2 and of 4 members (graphs of 20 barriers launched
// on every member's stream at once), against a lone member (ranks 1: launch, store and load).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness.hpp"

namespace kern_gpu_test {
namespace {

struct Group {
  int ranks;
  std::vector<std::unique_ptr<Device<uint32_t>>> flags, gen;
  std::vector<std::unique_ptr<Device<int32_t>>> error;
  std::unique_ptr<Device<unsigned long long>> peers;  // the same array serves every member here
  std::vector<cudaStream_t> streams;

  explicit Group(int n) : ranks(n) {
    std::vector<unsigned long long> addrs;
    for (int r = 0; r < n; ++r) {
      flags.push_back(std::make_unique<Device<uint32_t>>(std::vector<uint32_t>(n, 0)));
      gen.push_back(std::make_unique<Device<uint32_t>>(std::vector<uint32_t>{0}));
      error.push_back(std::make_unique<Device<int32_t>>(1));
      addrs.push_back(reinterpret_cast<unsigned long long>(flags.back()->get()));
      cudaStream_t s;
      check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
      streams.push_back(s);
    }
    peers = std::make_unique<Device<unsigned long long>>(addrs);
  }
  ~Group() {
    for (cudaStream_t s : streams) cudaStreamDestroy(s);
  }
  void enqueue(Fatbin& fb, int r, long long timeout_ns, cudaStream_t s) {
    fb.enqueue("kern_peer_barrier", s, dim3(1), dim3(32), peers->get(), r, ranks, gen[r]->get(), error[r]->get(),
               timeout_ns);
  }
  void sync() {
    for (cudaStream_t s : streams) check_cuda(cudaStreamSynchronize(s), "barrier");
  }
};

// What the host makes of a member's error word.
void raise_barrier_error(int rank, int32_t code) {
  if (code != 0)
    throw std::runtime_error("peer barrier: rank " + std::to_string(rank) + " timed out waiting for rank " +
                             std::to_string(code - 1));
}

TEST(PeerBarrierGpu, EveryMemberPassesWhenAllArrive) {
  Fatbin fb("peer");
  for (int n : {1, 2, 4}) {
    Group g(n);
    for (int round = 1; round <= 3; ++round) {
      for (int r = n - 1; r >= 0; --r) g.enqueue(fb, r, 2'000'000'000LL, g.streams[r]);  // the last rank first
      g.sync();
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(g.error[r]->download()[0], 0) << n << " ranks, rank " << r;
        EXPECT_EQ(g.gen[r]->download()[0], static_cast<uint32_t>(round));
        const std::vector<uint32_t> f = g.flags[r]->download();
        for (int s = 0; s < n; ++s) EXPECT_EQ(f[s], static_cast<uint32_t>(round)) << "rank " << r << " slot " << s;
      }
    }
  }
}

TEST(PeerBarrierGpu, GenerationsWrapAround) {
  Fatbin fb("peer");
  Group g(2);
  for (int r = 0; r < 2; ++r) {
    g.gen[r]->upload({0xfffffffeu});
    g.flags[r]->upload({0xfffffffeu, 0xfffffffeu});
  }
  for (int round = 0; round < 3; ++round) {
    for (int r = 0; r < 2; ++r) g.enqueue(fb, r, 2'000'000'000LL, g.streams[r]);
    g.sync();
    for (int r = 0; r < 2; ++r) EXPECT_EQ(g.error[r]->download()[0], 0) << "round " << round;
  }
  EXPECT_EQ(g.gen[0]->download()[0], 1u);  // 0xfffffffe + 3
}

TEST(PeerBarrierGpu, AMemberLeftOutIsReportedWithinTwoSeconds) {
  Fatbin fb("peer");
  Group g(4);
  const auto t0 = std::chrono::steady_clock::now();
  for (int r : {0, 1, 3}) g.enqueue(fb, r, 1'000'000'000LL, g.streams[r]);  // rank 2 never arrives
  g.sync();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int r : {0, 1, 3}) {
    const int32_t code = g.error[r]->download()[0];
    EXPECT_EQ(code, 3) << "rank " << r << " should name rank 2";
    try {
      raise_barrier_error(r, code);
      ADD_FAILURE() << "no error for rank " << r;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("timed out waiting for rank 2"), std::string::npos) << e.what();
      if (r == 0) std::printf("[peer-barrier] %s after %.3f s\n", e.what(), s);
    }
  }
  EXPECT_LT(s, 2.0);
  EXPECT_GE(s, 0.99);
  // Rank 2's own word in the others' flags was never written; theirs in rank 2's were.
  EXPECT_EQ(g.flags[0]->download()[2], 0u);
  EXPECT_EQ(g.flags[2]->download()[0], 1u);
}

// Median microseconds per barrier: each member's stream replays a graph of 20 barriers, all members
// started together (every stream waits for one event), timed from that event to the last member's end.
double captured_barrier_us(Fatbin& fb, Group& g) {
  constexpr int kPer = 20, kReplays = 15;
  std::vector<cudaGraphExec_t> execs(g.ranks);
  for (int r = 0; r < g.ranks; ++r) {
    cudaGraph_t graph;
    check_cuda(cudaStreamBeginCapture(g.streams[r], cudaStreamCaptureModeThreadLocal), "capture");
    for (int i = 0; i < kPer; ++i) g.enqueue(fb, r, 2'000'000'000LL, g.streams[r]);
    check_cuda(cudaStreamEndCapture(g.streams[r], &graph), "end capture");
    check_cuda(cudaGraphInstantiate(&execs[r], graph, 0), "instantiate");
    cudaGraphDestroy(graph);
  }
  cudaEvent_t start, done;
  check_cuda(cudaEventCreate(&start), "event");
  check_cuda(cudaEventCreate(&done), "event");
  std::vector<cudaEvent_t> ends(g.ranks);
  for (auto& e : ends) check_cuda(cudaEventCreate(&e), "event");
  std::vector<double> us;
  for (int rep = 0; rep < kReplays + 1; ++rep) {
    check_cuda(cudaEventRecord(start, g.streams[0]), "record");
    for (int r = 1; r < g.ranks; ++r) check_cuda(cudaStreamWaitEvent(g.streams[r], start, 0), "wait");
    for (int r = 0; r < g.ranks; ++r) {
      check_cuda(cudaGraphLaunch(execs[r], g.streams[r]), "launch");
      check_cuda(cudaEventRecord(ends[r], g.streams[r]), "record");
    }
    for (int r = 1; r < g.ranks; ++r) check_cuda(cudaStreamWaitEvent(g.streams[0], ends[r], 0), "wait");
    check_cuda(cudaEventRecord(done, g.streams[0]), "record");
    check_cuda(cudaEventSynchronize(done), "sync");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, start, done), "elapsed");
    if (rep > 0) us.push_back(1e3 * ms / kPer);
  }
  for (int r = 0; r < g.ranks; ++r) EXPECT_EQ(g.error[r]->download()[0], 0);
  for (auto e : ends) cudaEventDestroy(e);
  cudaEventDestroy(start);
  cudaEventDestroy(done);
  for (auto x : execs) cudaGraphExecDestroy(x);
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// The one-shot all-reduce (kern_allreduce_peer_bf16) over 1, 2 and 3 "ranks" (buffers of one GPU): each
// element is the f32 sum of the ranks' elements in rank order, rounded once to bf16, so it is within half
// a bf16 ulp (plus the f32 sum's rounding) of the float64 sum; a count not covering the buffer leaves
// the rest untouched; the same inputs give the same bits.
TEST(PeerAllReduceGpu, SumsEveryRanksPartsInRankOrderAgainstFloat64) {
  Fatbin fb("peer");
  std::mt19937_64 rng(5);
  for (int ranks : {1, 2, 3}) {
    const std::size_t n = 8 * 5000 + 8 * 3;  // not a multiple of the grid's threads
    std::vector<std::vector<bf16_bits>> parts;
    std::vector<std::unique_ptr<Device<bf16_bits>>> bufs;
    std::vector<unsigned long long> addrs;
    for (int r = 0; r < ranks; ++r) {
      parts.push_back(random_bf16(rng, n, -4.0f, 4.0f));
      bufs.push_back(std::make_unique<Device<bf16_bits>>(parts.back()));
      addrs.push_back(reinterpret_cast<unsigned long long>(bufs.back()->get()));
    }
    Device<unsigned long long> peers(addrs);
    Device<bf16_bits> out(n), again(n);
    const long long count = static_cast<long long>(n - 8);  // the last 8 elements stay poisoned
    fb.launch("kern_allreduce_peer_bf16", dim3(264), dim3(256), peers.get(), ranks, out.get(), count);
    fb.launch("kern_allreduce_peer_bf16", dim3(7), dim3(64), peers.get(), ranks, again.get(), count);
    const std::vector<bf16_bits> got = out.download(), got2 = again.download();
    for (std::size_t i = 0; i < n; ++i) {
      if (i >= static_cast<std::size_t>(count)) {
        ASSERT_TRUE(bf16_is_nan(got[i])) << "element " << i << " past the count was written";
        continue;
      }
      ASSERT_EQ(got[i], got2[i]) << "grid-dependent bits at " << i;
      double sum = 0;
      float f = 0;
      for (int r = 0; r < ranks; ++r) {
        sum += bf16_to_float(parts[r][i]);
        f += bf16_to_float(parts[r][i]);
      }
      ASSERT_EQ(got[i], float_to_bf16(f)) << "ranks " << ranks << " element " << i;  // rank order, one rounding
      const double ulp = std::ldexp(1.0, std::ilogb(std::max(std::abs(sum), 1e-30)) - 7);
      ASSERT_LE(std::abs(static_cast<double>(bf16_to_float(got[i])) - sum), 0.5 * ulp + 1e-6 * std::abs(sum)) << i;
    }
  }
}

TEST(PerfGpu, PeerBarrier) {
  Fatbin fb("peer");
  for (int n : {1, 2, 4}) {
    Group g(n);
    report("peer barrier, " + std::to_string(n) + " member(s) as streams of one GPU, captured, us per barrier",
           captured_barrier_us(fb, g));
  }
}

}  // namespace
}  // namespace kern_gpu_test
