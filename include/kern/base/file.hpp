// Small file helpers: whole-file reads, exact positional reads. Failures are Error(Io).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kern::base {

std::string read_file(const std::string& path);
void write_file(const std::string& path, std::string_view bytes);

// An open read-only file descriptor, closed on destruction.
class File {
 public:
  explicit File(const std::string& path);
  File(File&& o) noexcept;
  File& operator=(File&& o) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File();

  std::uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  // Reads exactly `n` bytes at `offset` (pread, retried on short reads); Io error otherwise.
  void read_exact(void* dst, std::size_t n, std::uint64_t offset) const;

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

}  // namespace kern::base

// base is the vocabulary every layer speaks: its names are visible as kern::NAME.
namespace kern {
using namespace base;  // NOLINT(google-build-using-namespace)
}  // namespace kern
