// Reproducible random tensor bytes for the host tests (checkpoints, bind plans, load pipelines).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace kern::test {

inline std::vector<std::byte> random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng() & 0xff);
  return out;
}

}  // namespace kern::test
