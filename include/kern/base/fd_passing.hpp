// Messages of (bytes, file descriptors) over a connected AF_UNIX socket, the descriptors
// carried as SCM_RIGHTS: how a process hands another the POSIX-fd handles of its exported
// VMM memory (docs/multi-gpu-handles.md "Passing POSIX-fd handles between processes").
//
// Wire form of one message: a 16-byte header, then the payload.
//   u32 magic 'KFD1' (0x3144464b, little endian) | u32 payload bytes | u32 fd count | u32 0
// The descriptors ride on the header's first byte (SOCK_STREAM) or on the one record
// (SOCK_SEQPACKET: header and payload are one record). Received descriptors are
// close-on-exec (MSG_CMSG_CLOEXEC); on any error every descriptor received so far is closed.
// Errors: Io (the OS refused, the peer vanished mid-message, a malformed or oversize frame,
// a timeout); Api for a send that breaks the limits.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kern/base/unique_fd.hpp"

namespace kern::base {

struct FdMessageLimits {
  std::size_t max_payload = std::size_t{1} << 20;  // bytes
  std::size_t max_fds = 64;                        // at most 253 (the kernel's SCM_MAX_FD)
};

struct FdMessage {
  std::vector<std::byte> payload;
  std::vector<UniqueFd> fds;
  std::string_view text() const { return {reinterpret_cast<const char*>(payload.data()), payload.size()}; }
};

inline constexpr std::uint32_t kFdFrameMagic = 0x3144464b;  // "KFD1"
inline constexpr std::size_t kFdFrameHeaderBytes = 16;

struct FdFrameHeader {
  std::uint32_t payload_bytes = 0;
  std::uint32_t fd_count = 0;
};
// Pure: the header of a frame, or an Io error naming what is wrong (magic, reserved word,
// payload or fd count over `limits`).
FdFrameHeader parse_fd_frame_header(std::span<const std::byte, kFdFrameHeaderBytes> bytes,
                                    const FdMessageLimits& limits);
std::array<std::byte, kFdFrameHeaderBytes> encode_fd_frame_header(const FdFrameHeader& h);

// Sends one message. `fds` stay owned by the caller (the kernel duplicates them into the
// peer). Api error when payload or fds break `limits`; Io error on timeout or a closed peer
// (never SIGPIPE).
void send_fd_message(int sock, std::span<const std::byte> payload, std::span<const int> fds,
                     std::chrono::milliseconds timeout, const FdMessageLimits& limits = {});
// The same with text as the payload (a wire form: an offer, a pool share).
inline void send_fd_text(int sock, std::string_view text, std::span<const int> fds, std::chrono::milliseconds timeout,
                         const FdMessageLimits& limits = {}) {
  send_fd_message(sock, std::as_bytes(std::span(text.data(), text.size())), fds, timeout, limits);
}
// Receives one message; nullopt when the peer closed the connection cleanly between
// messages. Io error on timeout, a peer that closed mid-message, a malformed frame, or a
// descriptor count that disagrees with the header.
std::optional<FdMessage> recv_fd_message(int sock, std::chrono::milliseconds timeout,
                                         const FdMessageLimits& limits = {});

// Unix-domain sockets. `path` is a filesystem path, or "@name" for Linux's abstract
// namespace (no file; gone when the last socket closes). Io errors; a path longer than
// sockaddr_un allows is refused.
enum class UnixSocketType { Stream, SeqPacket };
// Binds and listens; a filesystem path must not exist yet (remove a stale one first).
UniqueFd listen_unix(const std::string& path, UnixSocketType type = UnixSocketType::Stream, int backlog = 16);
UniqueFd connect_unix(const std::string& path, UnixSocketType type = UnixSocketType::Stream);
// Accepts one connection; Io error on timeout.
UniqueFd accept_unix(int listen_sock, std::chrono::milliseconds timeout);
// A connected pair (socketpair), both ends close-on-exec.
std::pair<UniqueFd, UniqueFd> unix_socket_pair(UnixSocketType type = UnixSocketType::Stream);

}  // namespace kern::base

// base is the vocabulary every layer speaks: its names are visible as kern::NAME.
namespace kern {
using namespace base;  // NOLINT(google-build-using-namespace)
}  // namespace kern
