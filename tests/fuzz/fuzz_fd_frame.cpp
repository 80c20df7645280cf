// fuzz-deps: kern_base
// fd-message framing: any byte stream a peer sends either yields messages or an Error(Io);
// never a crash, hang, sanitizer report or a message over the limits.
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "kern/base/error.hpp"
#include "kern/base/fd_passing.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace std::chrono_literals;
  const kern::FdMessageLimits limits{.max_payload = 4096, .max_fds = 4};
  if (size >= kern::kFdFrameHeaderBytes) {
    std::span<const std::byte, kern::kFdFrameHeaderBytes> head(reinterpret_cast<const std::byte*>(data),
                                                              kern::kFdFrameHeaderBytes);
    try {
      auto h = kern::parse_fd_frame_header(head, limits);
      if (h.payload_bytes > limits.max_payload || h.fd_count > limits.max_fds) std::abort();
    } catch (const kern::Error& e) {
      if (e.kind() != kern::ErrorKind::Io) std::abort();
    }
  }
  if (size > 16384) return 0;  // stays inside a socket buffer: one write, no reader thread
  for (auto type : {kern::UnixSocketType::Stream, kern::UnixSocketType::SeqPacket}) {
    auto [a, b] = kern::unix_socket_pair(type);
    if (size > 0 && ::write(a.get(), data, size) != static_cast<ssize_t>(size)) continue;
    a.reset();
    try {
      for (int i = 0; i < 64; ++i) {
        auto m = kern::recv_fd_message(b.get(), 1000ms, limits);
        if (!m) break;
        if (m->payload.size() > limits.max_payload || !m->fds.empty()) std::abort();
      }
    } catch (const kern::Error& e) {
      if (e.kind() != kern::ErrorKind::Io) std::abort();
    }
  }
  return 0;
}
