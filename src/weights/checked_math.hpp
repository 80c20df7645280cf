// Overflow-checked u64 arithmetic for sizes read from untrusted files.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "kern/base/dtype.hpp"

namespace kern::weights {

inline std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<std::uint64_t> checked_add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// product(shape) × dtype size; nullopt on overflow. An empty shape is a scalar.
inline std::optional<std::uint64_t> shape_bytes(DType dtype, std::span<const std::uint64_t> shape) {
  std::optional<std::uint64_t> n = dtype_size(dtype);
  for (std::uint64_t d : shape) {
    n = checked_mul(*n, d);
    if (!n) return std::nullopt;
  }
  return n;
}

}  // namespace kern::weights
