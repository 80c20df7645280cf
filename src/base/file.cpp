#include "kern/base/file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "kern/base/error.hpp"

namespace kern::base {

File::File(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail(ErrorKind::Io, "cannot open {}: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    int e = errno;
    ::close(fd_);
    fd_ = -1;
    fail(ErrorKind::Io, "cannot stat {}: {}", path, std::strerror(e));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    fail(ErrorKind::Io, "{} is a directory, not a file", path);
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
}

File::File(File&& o) noexcept : path_(std::move(o.path_)), fd_(o.fd_), size_(o.size_) { o.fd_ = -1; }

File& File::operator=(File&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    fd_ = o.fd_;
    size_ = o.size_;
    o.fd_ = -1;
  }
  return *this;
}

File::~File() {
  if (fd_ >= 0) ::close(fd_);
}

void File::read_exact(void* dst, std::size_t n, std::uint64_t offset) const {
  auto* p = static_cast<char*>(dst);
  std::size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd_, p + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      fail(ErrorKind::Io, "read of {} bytes at offset {} in {} failed: {}", n, offset, path_, std::strerror(errno));
    }
    if (r == 0)
      fail(ErrorKind::Io, "{} ends at byte {}, {} bytes were wanted at offset {}", path_, offset + done, n, offset);
    done += static_cast<std::size_t>(r);
  }
}

std::string read_file(const std::string& path) {
  File f(path);
  std::string s(static_cast<std::size_t>(f.size()), '\0');
  if (!s.empty()) f.read_exact(s.data(), s.size(), 0);
  return s;
}

void write_file(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(ErrorKind::Io, "cannot create {}: {}", path, std::strerror(errno));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) fail(ErrorKind::Io, "cannot write {}: {}", path, std::strerror(errno));
}

}  // namespace kern::base
