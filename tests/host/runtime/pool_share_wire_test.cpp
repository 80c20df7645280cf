// The pool-share transport without a GPU (src/runtime/pool_share_wire.hpp), with memfds standing in
// for the chunks' exported descriptors: 130 chunks travel as the description and three messages
// (64, 64, 2), each arriving descriptor reads back its chunk's bytes in chunk order, and nothing
// leaks; every way a peer can break the sequence is an Io error, never a hang or a leak.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "fd_helpers.hpp"
#include "kern/base/error.hpp"
#include "kern/base/fd_passing.hpp"
#include "runtime/pool_share_wire.hpp"

namespace kern::runtime {
namespace {

using namespace std::chrono_literals;
using kern::testing::make_memfd;
using kern::testing::open_fds;
using kern::testing::read_fd;

pool::PoolShare share_of(std::uint64_t chunks) {
  pool::PoolShare s;
  s.chunk_bytes = 2 << 20;
  s.chunks = chunks;
  pool::SharedArena a;
  a.state = "kv";
  a.object_bytes = 65536;
  for (std::uint64_t c = 0; c < chunks; ++c) a.chunks.push_back(static_cast<std::int64_t>(c));
  a.chunks.push_back(-1);
  s.arenas.push_back(a);
  return s;
}

std::string contents(std::size_t c) { return "chunk " + std::to_string(c); }

TEST(PoolShareWire, ADescriptionAndItsDescriptorsInBatchesOf64) {
  const std::size_t before = open_fds();
  {
    auto [a, b] = unix_socket_pair();
    const pool::PoolShare sent = share_of(130);
    std::size_t exported = 0;
    std::thread sender([&, fd = a.get()] {
      send_share(fd, sent, [&](std::size_t c) { ++exported; return UniqueFd(make_memfd(contents(c))); }, 5s);
    });
    std::vector<std::string> got;
    const pool::PoolShare received = receive_share(
        b.get(),
        [&](const pool::PoolShare& s, std::size_t c, int fd) {
          EXPECT_EQ(s.chunk_bytes, sent.chunk_bytes);
          EXPECT_EQ(c, got.size());
          got.push_back(read_fd(fd));
        },
        5s);
    sender.join();
    EXPECT_EQ(received, sent);
    EXPECT_EQ(exported, 130u);
    ASSERT_EQ(got.size(), 130u);
    for (std::size_t c = 0; c < got.size(); ++c) EXPECT_EQ(got[c], contents(c));
  }
  EXPECT_EQ(open_fds(), before) << "a descriptor leaked";
}

TEST(PoolShareWire, ADescriptionOfNoChunksNeedsNoFurtherMessage) {
  auto [a, b] = unix_socket_pair();
  pool::PoolShare s = share_of(0);
  s.arenas[0].chunks = {-1, -1};
  send_share(a.get(), s, [](std::size_t) -> UniqueFd { throw std::logic_error("no chunk to export"); }, 5s);
  std::size_t calls = 0;
  EXPECT_EQ(receive_share(b.get(), [&](const pool::PoolShare&, std::size_t, int) { ++calls; }, 5s), s);
  EXPECT_EQ(calls, 0u);
}

// The receiver's error (or "") after the sender wrote `messages` (payload, descriptor count) and closed.
std::string receive_after(const std::vector<std::pair<std::string, int>>& messages) {
  auto [a, b] = unix_socket_pair();
  for (const auto& [payload, n] : messages) {
    std::vector<UniqueFd> owned;
    std::vector<int> fds;
    for (int i = 0; i < n; ++i) {
      owned.emplace_back(make_memfd("x"));
      fds.push_back(owned.back().get());
    }
    send_fd_message(a.get(), kern::testing::bytes_of(payload), fds, 5s);
  }
  a.reset();
  try {
    (void)receive_share(b.get(), [](const pool::PoolShare&, std::size_t, int) {}, 2s);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io) << e.what();
    return e.what();
  }
  return "";
}

TEST(PoolShareWire, EveryBrokenSequenceIsAnIoErrorAndLeaksNothing) {
  const std::size_t before = open_fds();
  const std::string three = pool::write_pool_share(share_of(3));
  EXPECT_EQ(receive_after({{three, 0}, {"kernfds1", 3}}), "");
  EXPECT_NE(receive_after({}).find("closed before sending a description"), std::string::npos);
  EXPECT_NE(receive_after({{three, 1}}).find("1 descriptors came with the description"), std::string::npos);
  EXPECT_NE(receive_after({{"{]", 0}}).find("pool share"), std::string::npos);
  EXPECT_NE(receive_after({{three, 0}}).find("closed after 0 of 3"), std::string::npos);
  EXPECT_NE(receive_after({{three, 0}, {"kernfds1", 2}}).find("closed after 2 of 3"), std::string::npos);
  EXPECT_NE(receive_after({{three, 0}, {"kernfdsX", 3}}).find("without the tag"), std::string::npos);
  EXPECT_NE(receive_after({{three, 0}, {"kernfds1", 4}}).find("a message of 4 descriptors when 3"), std::string::npos);
  EXPECT_NE(receive_after({{three, 0}, {"kernfds1", 0}}).find("a message of 0 descriptors"), std::string::npos);
  EXPECT_EQ(open_fds(), before) << "a descriptor leaked";
}

TEST(PoolShareWire, ASilentPeerTimesOut) {
  auto [a, b] = unix_socket_pair();
  send_fd_message(a.get(), kern::testing::bytes_of(pool::write_pool_share(share_of(2))), {}, 5s);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    (void)receive_share(b.get(), [](const pool::PoolShare&, std::size_t, int) {}, 200ms);
    ADD_FAILURE() << "no timeout";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
}

}  // namespace
}  // namespace kern::runtime
