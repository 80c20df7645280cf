#include "kern/base/fd_passing.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "kern/base/error.hpp"

namespace kern::base {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kScmMaxFd = 253;

std::uint32_t get_u32(const std::byte* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}
void put_u32(std::byte* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}

// Waits until `sock` is ready for `events`; Io error at the deadline or on a poll failure.
void wait_ready(int sock, short events, Clock::time_point deadline, const char* doing) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left < 0) left = 0;
    pollfd pf{sock, events, 0};
    int p = ::poll(&pf, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
    if (p > 0) return;  // ready, or POLLHUP / POLLERR: the next call reports what happened
    if (p == 0) fail(ErrorKind::Io, "fd message: timed out {}", doing);
    if (errno != EINTR) fail(ErrorKind::Io, "fd message: poll while {}: {}", doing, std::strerror(errno));
  }
}

int socket_type(int sock) {
  int type = 0;
  socklen_t len = sizeof type;
  if (::getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &len) != 0)
    fail(ErrorKind::Io, "fd message: getsockopt(SO_TYPE) on fd {}: {}", sock, std::strerror(errno));
  if (type != SOCK_STREAM && type != SOCK_SEQPACKET)
    fail(ErrorKind::Io, "fd message: fd {} is neither a SOCK_STREAM nor a SOCK_SEQPACKET socket", sock);
  return type;
}

// Moves every SCM_RIGHTS descriptor of `msg` into `out` (owned from here on, even on error).
void take_fds(msghdr& msg, std::vector<UniqueFd>& out) {
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    std::size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const unsigned char* data = CMSG_DATA(c);
    for (std::size_t i = 0; i < n; ++i) {
      int fd;
      std::memcpy(&fd, data + i * sizeof(int), sizeof(int));
      out.emplace_back(fd);
    }
  }
}

// One recvmsg into `buf`, descriptors appended to `fds`; returns bytes read (0 at EOF).
std::size_t recv_some(int sock, std::byte* buf, std::size_t len, std::vector<UniqueFd>& fds, std::vector<char>& control,
                      Clock::time_point deadline, int& flags_out) {
  for (;;) {
    wait_ready(sock, POLLIN, deadline, "receiving");
    iovec iov{buf, len};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    ssize_t n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      fail(ErrorKind::Io, "fd message: recvmsg: {}", std::strerror(errno));
    }
    take_fds(msg, fds);
    flags_out = msg.msg_flags;
    if (msg.msg_flags & MSG_CTRUNC)
      fail(ErrorKind::Io, "fd message: more descriptors arrived than the limit allows (control data truncated)");
    return static_cast<std::size_t>(n);
  }
}

sockaddr_un unix_address(const std::string& path, socklen_t& len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  bool abstract = !path.empty() && path[0] == '@';
  std::string_view name = abstract ? std::string_view(path).substr(1) : std::string_view(path);
  if (name.empty()) fail(ErrorKind::Io, "unix socket: empty path");
  std::size_t room = sizeof a.sun_path - (abstract ? 1 : 1);  // abstract: leading NUL; path: trailing NUL
  if (name.size() > room) fail(ErrorKind::Io, "unix socket path {} is longer than {} bytes", path, room);
  if (abstract) {
    a.sun_path[0] = '\0';
    std::memcpy(a.sun_path + 1, name.data(), name.size());
    len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  } else {
    std::memcpy(a.sun_path, name.data(), name.size());
    len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() + 1);
  }
  return a;
}

int sock_type(UnixSocketType t) { return t == UnixSocketType::Stream ? SOCK_STREAM : SOCK_SEQPACKET; }

}  // namespace

FdFrameHeader parse_fd_frame_header(std::span<const std::byte, kFdFrameHeaderBytes> b, const FdMessageLimits& limits) {
  std::uint32_t magic = get_u32(b.data());
  if (magic != kFdFrameMagic) fail(ErrorKind::Io, "fd message: bad frame magic {:#010x} (want {:#010x})", magic, kFdFrameMagic);
  FdFrameHeader h{get_u32(b.data() + 4), get_u32(b.data() + 8)};
  std::uint32_t reserved = get_u32(b.data() + 12);
  if (reserved != 0) fail(ErrorKind::Io, "fd message: reserved header word is {:#x}, not 0", reserved);
  if (h.payload_bytes > limits.max_payload)
    fail(ErrorKind::Io, "fd message: payload of {} bytes is over the limit of {}", h.payload_bytes, limits.max_payload);
  if (h.fd_count > limits.max_fds || h.fd_count > kScmMaxFd)
    fail(ErrorKind::Io, "fd message: {} descriptors is over the limit of {}", h.fd_count,
         std::min(limits.max_fds, kScmMaxFd));
  return h;
}

std::array<std::byte, kFdFrameHeaderBytes> encode_fd_frame_header(const FdFrameHeader& h) {
  std::array<std::byte, kFdFrameHeaderBytes> b{};
  put_u32(b.data(), kFdFrameMagic);
  put_u32(b.data() + 4, h.payload_bytes);
  put_u32(b.data() + 8, h.fd_count);
  put_u32(b.data() + 12, 0);
  return b;
}

void send_fd_message(int sock, std::span<const std::byte> payload, std::span<const int> fds,
                     std::chrono::milliseconds timeout, const FdMessageLimits& limits) {
  if (payload.size() > limits.max_payload || payload.size() > UINT32_MAX)
    fail(ErrorKind::Api, "fd message: payload of {} bytes is over the limit of {}", payload.size(), limits.max_payload);
  if (fds.size() > limits.max_fds || fds.size() > kScmMaxFd)
    fail(ErrorKind::Api, "fd message: {} descriptors is over the limit of {}", fds.size(), std::min(limits.max_fds, kScmMaxFd));
  for (int fd : fds)
    if (fd < 0) fail(ErrorKind::Api, "fd message: descriptor {} is not valid", fd);
  const int type = socket_type(sock);
  const auto deadline = Clock::now() + timeout;
  auto header = encode_fd_frame_header({static_cast<std::uint32_t>(payload.size()), static_cast<std::uint32_t>(fds.size())});
  const std::size_t total = header.size() + payload.size();

  std::vector<char> control(fds.empty() ? 0 : CMSG_SPACE(fds.size() * sizeof(int)), 0);
  std::size_t sent = 0;
  while (sent < total) {
    wait_ready(sock, POLLOUT, deadline, "sending");
    iovec iov[2];
    int niov = 0;
    if (sent < header.size()) iov[niov++] = {header.data() + sent, header.size() - sent};
    std::size_t psent = sent > header.size() ? sent - header.size() : 0;
    if (psent < payload.size())
      iov[niov++] = {const_cast<std::byte*>(payload.data()) + psent, payload.size() - psent};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(niov);
    if (sent == 0 && !fds.empty()) {
      msg.msg_control = control.data();
      msg.msg_controllen = control.size();
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
      std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
    }
    ssize_t n = ::sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      if (errno == EPIPE || errno == ECONNRESET)
        fail(ErrorKind::Io, "fd message: the peer closed the connection after {} of {} bytes", sent, total);
      fail(ErrorKind::Io, "fd message: sendmsg of {} bytes with {} descriptors: {}", total, fds.size(), std::strerror(errno));
    }
    sent += static_cast<std::size_t>(n);
    if (type == SOCK_SEQPACKET && sent != total)
      fail(ErrorKind::Io, "fd message: seqpacket sendmsg sent {} of {} bytes", sent, total);
  }
}

std::optional<FdMessage> recv_fd_message(int sock, std::chrono::milliseconds timeout, const FdMessageLimits& limits) {
  const int type = socket_type(sock);
  const auto deadline = Clock::now() + timeout;
  const std::size_t max_fds = std::min(limits.max_fds, kScmMaxFd);
  // One spare slot so that a peer sending more than the limit shows as a count mismatch
  // or MSG_CTRUNC instead of silently fitting.
  std::vector<char> control(CMSG_SPACE((max_fds + 1) * sizeof(int)), 0);
  FdMessage m;
  std::array<std::byte, kFdFrameHeaderBytes> header{};
  int flags = 0;

  if (type == SOCK_SEQPACKET) {
    std::vector<std::byte> rec(kFdFrameHeaderBytes + limits.max_payload + 1);
    std::size_t n = recv_some(sock, rec.data(), rec.size(), m.fds, control, deadline, flags);
    if (n == 0 && m.fds.empty()) return std::nullopt;
    if (flags & MSG_TRUNC) fail(ErrorKind::Io, "fd message: record larger than the payload limit of {}", limits.max_payload);
    if (n < kFdFrameHeaderBytes) fail(ErrorKind::Io, "fd message: record of {} bytes is shorter than a header", n);
    std::memcpy(header.data(), rec.data(), kFdFrameHeaderBytes);
    FdFrameHeader h = parse_fd_frame_header(header, limits);
    if (n - kFdFrameHeaderBytes != h.payload_bytes)
      fail(ErrorKind::Io, "fd message: header says {} payload bytes, record holds {}", h.payload_bytes, n - kFdFrameHeaderBytes);
    if (m.fds.size() != h.fd_count)
      fail(ErrorKind::Io, "fd message: header says {} descriptors, {} arrived", h.fd_count, m.fds.size());
    m.payload.assign(rec.begin() + kFdFrameHeaderBytes, rec.begin() + static_cast<std::ptrdiff_t>(n));
    return m;
  }

  std::size_t got = 0;
  while (got < header.size()) {
    std::size_t n = recv_some(sock, header.data() + got, header.size() - got, m.fds, control, deadline, flags);
    if (n == 0) {
      if (got == 0 && m.fds.empty()) return std::nullopt;
      fail(ErrorKind::Io, "fd message: the peer closed the connection after {} of {} header bytes", got, header.size());
    }
    got += n;
  }
  FdFrameHeader h = parse_fd_frame_header(header, limits);
  if (m.fds.size() != h.fd_count)
    fail(ErrorKind::Io, "fd message: header says {} descriptors, {} arrived with it", h.fd_count, m.fds.size());
  m.payload.resize(h.payload_bytes);
  got = 0;
  while (got < m.payload.size()) {
    std::size_t n = recv_some(sock, m.payload.data() + got, m.payload.size() - got, m.fds, control, deadline, flags);
    if (n == 0)
      fail(ErrorKind::Io, "fd message: the peer closed the connection after {} of {} payload bytes", got, m.payload.size());
    got += n;
    if (m.fds.size() != h.fd_count) fail(ErrorKind::Io, "fd message: descriptors arrived inside a payload");
  }
  return m;
}

UniqueFd listen_unix(const std::string& path, UnixSocketType type, int backlog) {
  socklen_t len = 0;
  sockaddr_un a = unix_address(path, len);
  UniqueFd s(::socket(AF_UNIX, sock_type(type) | SOCK_CLOEXEC, 0));
  if (!s) fail(ErrorKind::Io, "unix socket: socket(): {}", std::strerror(errno));
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&a), len) != 0)
    fail(ErrorKind::Io, "unix socket: bind {}: {}", path, std::strerror(errno));
  if (::listen(s.get(), backlog) != 0) fail(ErrorKind::Io, "unix socket: listen {}: {}", path, std::strerror(errno));
  return s;
}

UniqueFd connect_unix(const std::string& path, UnixSocketType type) {
  socklen_t len = 0;
  sockaddr_un a = unix_address(path, len);
  UniqueFd s(::socket(AF_UNIX, sock_type(type) | SOCK_CLOEXEC, 0));
  if (!s) fail(ErrorKind::Io, "unix socket: socket(): {}", std::strerror(errno));
  int rc;
  do {
    rc = ::connect(s.get(), reinterpret_cast<sockaddr*>(&a), len);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) fail(ErrorKind::Io, "unix socket: connect {}: {}", path, std::strerror(errno));
  return s;
}

UniqueFd accept_unix(int listen_sock, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    wait_ready(listen_sock, POLLIN, deadline, "accepting a connection");
    int fd = ::accept4(listen_sock, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      // Blocking like connect_unix's end; every send/recv here polls with a deadline anyway.
      UniqueFd c(fd);
      int fl = ::fcntl(fd, F_GETFL);
      if (fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
      return c;
    }
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED) continue;
    fail(ErrorKind::Io, "unix socket: accept: {}", std::strerror(errno));
  }
}

std::pair<UniqueFd, UniqueFd> unix_socket_pair(UnixSocketType type) {
  int sv[2];
  if (::socketpair(AF_UNIX, sock_type(type) | SOCK_CLOEXEC, 0, sv) != 0)
    fail(ErrorKind::Io, "unix socket: socketpair: {}", std::strerror(errno));
  return {UniqueFd(sv[0]), UniqueFd(sv[1])};
}

}  // namespace kern::base
