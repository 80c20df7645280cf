// Input domains resolved to numbers, and the O(n) check write_input runs (pure).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "kern/base/dtype.hpp"
#include "kern/core/manifest.hpp"

namespace kern::runtime {

// Memory a domain's index bounds are resolved against.
struct Capacity {
  std::uint64_t tokens = 0;  // token slots of paged states
  std::uint64_t seqs = 0;    // live sequences of per-seq states (slot 0 is reserved on top)
};

struct DomainRule {
  std::string buffer;
  DType dtype = DType::U8;
  bool is_float = false;
  // Integer bounds (inclusive), as 128-bit to cover u64 and i64.
  std::optional<__int128> imin, imax;
  std::optional<double> fmin, fmax;
  bool monotone = false;
  std::string why_max;  // e.g. "row count of embed" for messages
};

// Resolves the domain of input `name` (may be absent: then only finiteness of floats).
// Expression bounds are taken at var max.
DomainRule resolve_domain(const core::Manifest& m, const std::string& name, const core::Buffer& b,
                          const Capacity& capacity);

// Error(Domain) naming buffer, element index, value and the violated bound.
void check_domain(const DomainRule& rule, std::span<const std::byte> bytes);

}  // namespace kern::runtime
