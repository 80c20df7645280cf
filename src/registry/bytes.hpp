// Bounds-checked little-endian reads over an artifact held in memory. Every out-of-range
// read throws Error(KernelArtifact) naming the artifact, so a lying file can never crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "kern/base/error.hpp"

namespace kern::registry {

class Bytes {
 public:
  Bytes(std::span<const std::byte> data, std::string_view what) : data_(data), what_(what) {}

  std::size_t size() const { return data_.size(); }
  std::string_view what() const { return what_; }
  std::span<const std::byte> all() const { return data_; }

  bool has(std::uint64_t offset, std::uint64_t n) const { return offset <= data_.size() && n <= data_.size() - offset; }

  // The sub-range [offset, offset + n); `field` names it in the error.
  std::span<const std::byte> slice(std::uint64_t offset, std::uint64_t n, std::string_view field) const {
    if (!has(offset, n))
      fail(ErrorKind::KernelArtifact, "{}: {} ({} bytes at offset {:#x}) runs past the end of the file ({} bytes)",
           what_, field, n, offset, data_.size());
    return data_.subspan(static_cast<std::size_t>(offset), static_cast<std::size_t>(n));
  }

  template <typename T>
  T read(std::uint64_t offset, std::string_view field) const {
    auto s = slice(offset, sizeof(T), field);
    T v;
    std::memcpy(&v, s.data(), sizeof(T));  // hosts are little-endian, like the formats
    return v;
  }
  std::uint8_t u8(std::uint64_t o, std::string_view f) const { return read<std::uint8_t>(o, f); }
  std::uint16_t u16(std::uint64_t o, std::string_view f) const { return read<std::uint16_t>(o, f); }
  std::uint32_t u32(std::uint64_t o, std::string_view f) const { return read<std::uint32_t>(o, f); }
  std::uint64_t u64(std::uint64_t o, std::string_view f) const { return read<std::uint64_t>(o, f); }

  // NUL-terminated string starting at `offset` inside [offset, limit); throws if unterminated.
  std::string_view cstr(std::uint64_t offset, std::uint64_t limit, std::string_view field) const {
    if (limit > data_.size()) limit = data_.size();
    if (offset >= limit)
      fail(ErrorKind::KernelArtifact, "{}: {} at offset {:#x} lies outside its table", what_, field, offset);
    const char* p = reinterpret_cast<const char*>(data_.data());
    const void* z = std::memchr(p + offset, 0, static_cast<std::size_t>(limit - offset));
    if (!z) fail(ErrorKind::KernelArtifact, "{}: {} at offset {:#x} is not NUL-terminated", what_, field, offset);
    return std::string_view(p + offset, static_cast<std::size_t>(static_cast<const char*>(z) - (p + offset)));
  }

 private:
  std::span<const std::byte> data_;
  std::string_view what_;
};

}  // namespace kern::registry
