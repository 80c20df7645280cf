// fd passing over AF_UNIX sockets, across fork(): memfds sent by a child are read back
// through the received descriptors; a peer vanishing mid-message errors instead of
// hanging; limits are enforced on both ends; nothing leaks on any path.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>

#include "kern/base/error.hpp"
#include "kern/base/fd_passing.hpp"
#include "fd_helpers.hpp"
#include "temp_dir.hpp"
#include "thrown.hpp"

namespace kern {
namespace {

using namespace std::chrono_literals;

using namespace kern::testing;  // fd_helpers.hpp

// Runs `child` in a forked process (its exit code: 0 when it returned true); returns the pid.
template <typename F>
pid_t fork_child(F&& child) {
  pid_t pid = ::fork();
  if (pid == 0) {
    bool ok = false;
    try {
      ok = child();
    } catch (...) {
    }
    ::_exit(ok ? 0 : 1);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int st = 0;
  if (::waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

TEST(FdFrame, HeaderRoundTripsAndRejectsGarbage) {
  FdMessageLimits lim{.max_payload = 100, .max_fds = 4};
  auto b = encode_fd_frame_header({.payload_bytes = 100, .fd_count = 4});
  FdFrameHeader h = parse_fd_frame_header(b, lim);
  EXPECT_EQ(h.payload_bytes, 100u);
  EXPECT_EQ(h.fd_count, 4u);

  auto over = encode_fd_frame_header({.payload_bytes = 101, .fd_count = 0});
  Error e = test::thrown([&] { parse_fd_frame_header(over, lim); });
  EXPECT_EQ(e.kind(), ErrorKind::Io);
  EXPECT_NE(std::string(e.what()).find("101 bytes is over the limit of 100"), std::string::npos) << e.what();
  auto fds = encode_fd_frame_header({.payload_bytes = 0, .fd_count = 5});
  EXPECT_EQ(test::thrown([&] { parse_fd_frame_header(fds, lim); }).kind(), ErrorKind::Io);
  auto bad = b;
  bad[0] = std::byte{0};
  EXPECT_NE(std::string(test::thrown([&] { parse_fd_frame_header(bad, lim); }).what()).find("magic"), std::string::npos);
  auto reserved = b;
  reserved[15] = std::byte{1};
  EXPECT_EQ(test::thrown([&] { parse_fd_frame_header(reserved, lim); }).kind(), ErrorKind::Io);
}

class FdPassing : public ::testing::TestWithParam<UnixSocketType> {};

TEST_P(FdPassing, ChildSendsMemfdsParentReadsThem) {
  const std::size_t before = open_fds();
  {
    auto sockets_1 = unix_socket_pair(GetParam());
    UniqueFd& parent = sockets_1.first;
    UniqueFd& child = sockets_1.second;
    pid_t pid = fork_child([&, c = child.get()] {
      int a = make_memfd("first exported pool");
      int b = make_memfd("second");
      int d = make_memfd(std::string(5000, 'x'));
      if (a < 0 || b < 0 || d < 0) return false;
      int one[] = {a};
      send_fd_message(c, bytes_of("one handle"), one, 5s);
      int three[] = {b, d, a};
      send_fd_message(c, bytes_of("three handles"), three, 5s);
      send_fd_message(c, bytes_of(""), {}, 5s);  // no fds, empty payload
      return true;
    });
    child.reset();
    auto m1 = recv_fd_message(parent.get(), 5s);
    ASSERT_TRUE(m1.has_value());
    EXPECT_EQ(str_of(m1->payload), "one handle");
    ASSERT_EQ(m1->fds.size(), 1u);
    EXPECT_EQ(read_fd(m1->fds[0].get()), "first exported pool");
    EXPECT_TRUE(::fcntl(m1->fds[0].get(), F_GETFD) & FD_CLOEXEC);

    auto m2 = recv_fd_message(parent.get(), 5s);
    ASSERT_TRUE(m2.has_value());
    EXPECT_EQ(str_of(m2->payload), "three handles");
    ASSERT_EQ(m2->fds.size(), 3u);
    EXPECT_EQ(read_fd(m2->fds[0].get()), "second");
    EXPECT_EQ(read_fd(m2->fds[1].get()), std::string(5000, 'x'));
    EXPECT_EQ(read_fd(m2->fds[2].get()), "first exported pool");
    // The same memfd sent twice arrives as two descriptors of one file.
    struct stat s1 {}, s2 {};
    ASSERT_EQ(::fstat(m1->fds[0].get(), &s1), 0);
    ASSERT_EQ(::fstat(m2->fds[2].get(), &s2), 0);
    EXPECT_EQ(s1.st_ino, s2.st_ino);

    auto m3 = recv_fd_message(parent.get(), 5s);
    ASSERT_TRUE(m3.has_value());
    EXPECT_TRUE(m3->payload.empty());
    EXPECT_TRUE(m3->fds.empty());
    EXPECT_EQ(wait_exit(pid), 0);
    // The child exited: a clean end between messages is nullopt, not an error.
    EXPECT_FALSE(recv_fd_message(parent.get(), 5s).has_value());
  }
  EXPECT_EQ(open_fds(), before);
}

TEST_P(FdPassing, OversizePayloadAndTooManyFdsRefusedOnBothEnds) {
  const std::size_t before = open_fds();
  {
    auto sockets_2 = unix_socket_pair(GetParam());
    UniqueFd& a = sockets_2.first;
    UniqueFd& b = sockets_2.second;
    FdMessageLimits small{.max_payload = 8, .max_fds = 1};
    std::string nine(9, 'p');
    EXPECT_EQ(test::thrown([&] { send_fd_message(a.get(), bytes_of(nine), {}, 1s, small); }).kind(), ErrorKind::Api);
    int m = make_memfd("z");
    int two[] = {m, m};
    EXPECT_EQ(test::thrown([&] { send_fd_message(a.get(), bytes_of("x"), two, 1s, small); }).kind(), ErrorKind::Api);

    // Sent under the default limits, received under small ones: refused, descriptors closed.
    send_fd_message(a.get(), bytes_of(nine), {}, 1s);
    Error e = test::thrown([&] { recv_fd_message(b.get(), 1s, small); });
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find("over the limit"), std::string::npos) << e.what();
    auto sockets_3 = unix_socket_pair(GetParam());
    UniqueFd& c = sockets_3.first;
    UniqueFd& d = sockets_3.second;
    send_fd_message(c.get(), bytes_of("x"), two, 1s);
    EXPECT_EQ(test::thrown([&] { recv_fd_message(d.get(), 1s, small); }).kind(), ErrorKind::Io);
    ::close(m);
  }
  EXPECT_EQ(open_fds(), before);
}

TEST_P(FdPassing, TimesOutWhenNothingArrives) {
  auto sockets_4 = unix_socket_pair(GetParam());  // the sending end stays open: a timeout, not EOF
  UniqueFd& b = sockets_4.second;
  auto t0 = std::chrono::steady_clock::now();
  Error e = test::thrown([&] { recv_fd_message(b.get(), 100ms); });
  EXPECT_EQ(e.kind(), ErrorKind::Io);
  EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

INSTANTIATE_TEST_SUITE_P(Sockets, FdPassing, ::testing::Values(UnixSocketType::Stream, UnixSocketType::SeqPacket),
                         [](const auto& info) { return info.param == UnixSocketType::Stream ? "Stream" : "SeqPacket"; });

// One sendmsg of `bytes` with `fds` (at most 2) as SCM_RIGHTS, bypassing send_fd_message's framing:
// for frames a well-behaved sender never writes.
ssize_t send_raw(int sock, std::span<std::byte> bytes, std::span<const int> fds) {
  char ctl[CMSG_SPACE(2 * sizeof(int))] = {};
  iovec iov{bytes.data(), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctl;
  msg.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
  std::memcpy(CMSG_DATA(cm), fds.data(), fds.size() * sizeof(int));
  return ::sendmsg(sock, &msg, 0);
}

// Stream only: a seqpacket record is all or nothing.
TEST(FdPassingStream, PeerClosingMidHeaderOrMidPayloadIsAnErrorNotAHang) {
  const std::size_t before = open_fds();
  for (int mode = 0; mode < 2; ++mode) {
    auto sockets_5 = unix_socket_pair(UnixSocketType::Stream);
    UniqueFd& parent = sockets_5.first;
    UniqueFd& child = sockets_5.second;
    pid_t pid = fork_child([&, c = child.get()] {
      auto h = encode_fd_frame_header({.payload_bytes = 100, .fd_count = 1});
      int m = make_memfd("in flight");
      if (mode == 0) return ::write(c, h.data(), 10) == 10;  // 10 of 16 header bytes, then exit
      // A full header carrying one fd, 20 of 100 payload bytes, then exit.
      const int one[] = {m};
      if (send_raw(c, h, one) != 16) return false;
      return ::write(c, std::string(20, 'q').data(), 20) == 20;
    });
    child.reset();
    ASSERT_EQ(wait_exit(pid), 0);
    Error e = test::thrown([&] { recv_fd_message(parent.get(), 5s); });
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    std::string want = mode == 0 ? "after 10 of 16 header bytes" : "after 20 of 100 payload bytes";
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
  EXPECT_EQ(open_fds(), before);  // the fd that arrived with the truncated message was closed
}

TEST(FdPassingStream, FdCountDisagreeingWithHeaderIsRefusedAndClosed) {
  const std::size_t before = open_fds();
  {
    auto sockets_6 = unix_socket_pair(UnixSocketType::Stream);
    UniqueFd& a = sockets_6.first;
    UniqueFd& b = sockets_6.second;
    auto h = encode_fd_frame_header({.payload_bytes = 0, .fd_count = 1});
    int m1 = make_memfd("1"), m2 = make_memfd("2");
    const int fds[] = {m1, m2};
    ASSERT_EQ(send_raw(a.get(), h, fds), 16);
    ::close(m1);
    ::close(m2);
    Error e = test::thrown([&] { recv_fd_message(b.get(), 1s); });
    EXPECT_NE(std::string(e.what()).find("header says 1 descriptors, 2 arrived"), std::string::npos) << e.what();
  }
  EXPECT_EQ(open_fds(), before);
}

TEST(FdPassingStream, LargePayloadCrossesSocketBuffer) {
  auto sockets_7 = unix_socket_pair(UnixSocketType::Stream);
  UniqueFd& parent = sockets_7.first;
  UniqueFd& child = sockets_7.second;
  std::string big(3 << 20, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 % 251);
  pid_t pid = fork_child([&, c = child.get()] {
    int m = make_memfd("big");
    int one[] = {m};
    send_fd_message(c, bytes_of(big), one, 10s, {.max_payload = 4 << 20});
    return true;
  });
  child.reset();
  auto msg = recv_fd_message(parent.get(), 10s, {.max_payload = 4 << 20});
  ASSERT_TRUE(msg.has_value());
  EXPECT_TRUE(str_of(msg->payload) == big);
  ASSERT_EQ(msg->fds.size(), 1u);
  EXPECT_EQ(read_fd(msg->fds[0].get()), "big");
  EXPECT_EQ(wait_exit(pid), 0);
}

TEST(FdPassingStream, SendToAClosedPeerIsAnErrorNotSigpipe) {
  auto sockets_8 = unix_socket_pair(UnixSocketType::Stream);
  UniqueFd& a = sockets_8.first;
  UniqueFd& b = sockets_8.second;
  b.reset();
  Error e = test::thrown([&] { send_fd_message(a.get(), bytes_of("hello"), {}, 1s); });
  EXPECT_EQ(e.kind(), ErrorKind::Io);
  EXPECT_NE(std::string(e.what()).find("peer closed"), std::string::npos) << e.what();
}

TEST(UnixSocket, ListenConnectOnPathAndAbstractName) {
  test::TempDir dir;
  const std::size_t before = open_fds();
  for (std::string path : {dir / "pool.sock", "@kern-test-" + std::to_string(::getpid())}) {
    for (auto type : {UnixSocketType::Stream, UnixSocketType::SeqPacket}) {
      if (path[0] != '@') std::filesystem::remove(path);
      UniqueFd listener = listen_unix(path, type);
      pid_t pid = fork_child([&] {
        UniqueFd c = connect_unix(path, type);
        int m = make_memfd("over a named socket");
        int one[] = {m};
        send_fd_message(c.get(), bytes_of(path), one, 5s);
        auto reply = recv_fd_message(c.get(), 5s);
        return reply && str_of(reply->payload) == "ack";
      });
      UniqueFd conn = accept_unix(listener.get(), 5s);
      auto m = recv_fd_message(conn.get(), 5s);
      ASSERT_TRUE(m.has_value());
      EXPECT_EQ(str_of(m->payload), path);
      ASSERT_EQ(m->fds.size(), 1u);
      EXPECT_EQ(read_fd(m->fds[0].get()), "over a named socket");
      send_fd_message(conn.get(), bytes_of("ack"), {}, 5s);
      EXPECT_EQ(wait_exit(pid), 0) << path;
    }
  }
  std::filesystem::remove(dir / "pool.sock");
  EXPECT_EQ(open_fds(), before);
  EXPECT_EQ(test::thrown([&] { connect_unix(dir / "nobody.sock"); }).kind(), ErrorKind::Io);
  EXPECT_EQ(test::thrown([&] { listen_unix(std::string(200, 'a')); }).kind(), ErrorKind::Io);
  UniqueFd l = listen_unix("@kern-test-idle-" + std::to_string(::getpid()));
  EXPECT_NE(std::string(test::thrown([&] { accept_unix(l.get(), 50ms); }).what()).find("timed out"), std::string::npos);
}

}  // namespace
}  // namespace kern
