// Reading JSON objects another process sent (an offer, a pool share): exact field sets, required
// fields and unsigned integers, every problem an Error(kind) "<what>: <path>: <why>". Stated once
// for the wire forms that share these rules.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "kern/base/error.hpp"
#include "kern/base/json.hpp"

namespace kern::base {

class JsonFields {
 public:
  JsonFields(ErrorKind kind, std::string what) : kind_(kind), what_(std::move(what)) {}
  [[noreturn]] void bad(const std::string& path, std::string_view why) const {
    fail(kind_, "{}: {}: {}", what_, path, why);
  }
  const Json& field(const Json& o, std::string_view key, const std::string& path) const {
    const auto it = o.find(key);
    if (it == o.end()) bad(path, fmt::format("missing field '{}'", key));
    return *it;
  }
  // `o` is an object holding no field but `allowed`.
  void only(const Json& o, std::initializer_list<std::string_view> allowed, const std::string& path) const {
    if (!o.is_object()) bad(path, "expected an object");
    for (const auto& [key, value] : o.items()) {
      bool known = false;
      for (std::string_view a : allowed) known = known || a == key;
      if (!known) bad(json_path_key(path, key), "unknown field");
    }
  }
  std::uint64_t u64(const Json& j, const std::string& path) const {
    if (!j.is_number_unsigned()) bad(path, "expected a non-negative integer");
    return j.get<std::uint64_t>();
  }

 private:
  ErrorKind kind_;
  std::string what_;
};

}  // namespace kern::base

// base is the vocabulary every layer speaks: its names are visible as kern::NAME.
namespace kern {
using namespace base;  // NOLINT(google-build-using-namespace)
}  // namespace kern
