// Descriptor helpers shared by the host tests of fd passing and of the pool-share transport:
// counting this process's open descriptors (leak checks), memfds with known contents, reading one back.
#pragma once

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kern::testing {

inline std::size_t open_fds() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

inline std::span<const std::byte> bytes_of(std::string_view s) { return std::as_bytes(std::span(s.data(), s.size())); }
inline std::string str_of(const std::vector<std::byte>& b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

// A close-on-exec memfd holding `contents` (-1 when the OS refuses).
inline int make_memfd(std::string_view contents) {
  int fd = ::memfd_create("kern-test", MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (::write(fd, contents.data(), contents.size()) != static_cast<ssize_t>(contents.size())) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline std::string read_fd(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return "<fstat failed>";
  std::string s(static_cast<std::size_t>(st.st_size), '\0');
  if (::pread(fd, s.data(), s.size(), 0) != static_cast<ssize_t>(s.size())) return "<pread failed>";
  return s;
}

}  // namespace kern::testing
