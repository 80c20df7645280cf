// Refusals as values: the pool cannot do this now (or ever), and says what the caller should do.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "kern/base/error.hpp"

namespace kern::pool {

enum class DeniedKind {
  ExceedsRow,   // more tokens than one page-table row references: never fits; `limit` = tokens
  ExceedsPool,  // no layout of the budget can hold it: never fits
  Busy,         // fits, but what it needs is held: evict something and ask again
  Remapping,    // a remap is planned or in flight: ask again after it lands, evict nothing
  HostFull,     // the host tier has no room: drop a parked entry
};

struct Denied {
  DeniedKind kind;
  std::uint64_t limit = 0;  // ExceedsRow: the row limit in tokens

  std::string_view advice() const;
  std::string describe() const;
  friend bool operator==(const Denied&, const Denied&) = default;
};

std::string_view to_string(DeniedKind kind);

// Either the granted value or a Denied. value() on a denial is a caller bug (ErrorKind::Api).
template <typename T>
class Granted {
 public:
  Granted(T value) : v_(std::move(value)) {}
  Granted(Denied denied) : v_(denied) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  const Denied& denied() const {
    if (ok()) fail(ErrorKind::Api, "pool: denied() on a granted result");
    return std::get<1>(v_);
  }
  T& value() & {
    check();
    return std::get<0>(v_);
  }
  T&& value() && {
    check();
    return std::get<0>(std::move(v_));
  }

 private:
  void check() const {
    if (!ok()) fail(ErrorKind::Api, "pool: value() on a denied result ({})", std::get<1>(v_).describe());
  }
  std::variant<T, Denied> v_;
};

}  // namespace kern::pool
