// Stored types for the prefix index tests: distinct resident and parked types, as in production.
#pragma once

#include <cstdint>

namespace kern::pool::testing {

struct Item {
  std::uint64_t len = 0;
  bool slot = false;
  std::uint64_t id = 0;
  std::uint64_t tokens() const { return len; }
  bool has_slot() const { return slot; }
};

struct Far {
  Item of;
  std::uint64_t tokens() const { return of.len; }
  bool has_slot() const { return of.slot; }
};

}  // namespace kern::pool::testing
