#include "serve/request_fields.hpp"

#include <fmt/format.h>

#include <cmath>
#include <utility>

#include "kern/base/error.hpp"
#include "kern/base/json.hpp"

namespace kern::serve::detail {

namespace {

std::string_view type_name(const RequestJson& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

// Drops base's "request body: " prefix: the client knows what it sent.
std::string strict_message(const base::Error& e) {
  std::string m = e.message();
  constexpr std::string_view prefix = "request body: ";
  if (m.rfind(prefix, 0) == 0) m.erase(0, prefix.size());
  return "Invalid JSON body: " + m;
}

}  // namespace

void reject(std::string param, std::string message) {
  throw Rejected{bad_request(std::move(message), std::move(param))};
}

RequestJson read_body(std::string_view body, std::size_t max_depth) {
  base::StrictJsonOptions options;
  options.kind = base::ErrorKind::Api;
  options.what = "request body";
  options.max_depth = max_depth;
  try {
    (void)base::parse_json_strict(body, options);
  } catch (const base::Error& e) {
    reject({}, strict_message(e));
  }
  // The strict read accepted it, so this one cannot fail on the bytes; nlohmann's own DOM keeps
  // the last of duplicate keys, but there are none.
  RequestJson j = RequestJson::parse(body.begin(), body.end());
  if (!j.is_object()) reject({}, fmt::format("The request body must be a JSON object, not {}", type_name(j)));
  return j;
}

const RequestJson* field(const RequestJson& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<bool> get_bool(const RequestJson& object, const char* key) {
  const RequestJson* v = field(object, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) reject(key, fmt::format("'{}' must be a boolean, not {}", key, type_name(*v)));
  return v->get<bool>();
}

std::optional<std::string> get_string(const RequestJson& object, const char* key) {
  const RequestJson* v = field(object, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) reject(key, fmt::format("'{}' must be a string, not {}", key, type_name(*v)));
  return v->get<std::string>();
}

std::optional<double> get_number(const RequestJson& object, const char* key, Range r) {
  const RequestJson* v = field(object, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) reject(key, fmt::format("'{}' must be a number, not {}", key, type_name(*v)));
  const double x = v->get<double>();
  const bool below = r.lo_open ? !(x > r.lo) : !(x >= r.lo);
  const bool above = r.hi_open ? !(x < r.hi) : !(x <= r.hi);
  if (below || above)
    reject(key, fmt::format("'{}' must be in {}{}, {}{}, got {}", key, r.lo_open ? '(' : '[', r.lo, r.hi,
                            r.hi_open ? ')' : ']', x));
  return x;
}

std::int64_t as_integer(const RequestJson& v, const std::string& param, std::int64_t lo, std::int64_t hi) {
  std::int64_t x = 0;
  if (v.is_number_unsigned()) {
    const std::uint64_t u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi)) reject(param, fmt::format("'{}' must be at most {}, got {}", param, hi, u));
    x = static_cast<std::int64_t>(u);
  } else if (v.is_number_integer()) {
    x = v.get<std::int64_t>();
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || std::floor(d) != d)
      reject(param, fmt::format("'{}' must be an integer, got {}", param, d));
    // Compare as doubles first: converting an out-of-range double is undefined.
    if (d < static_cast<double>(lo)) reject(param, fmt::format("'{}' must be at least {}, got {}", param, lo, d));
    if (d > static_cast<double>(hi)) reject(param, fmt::format("'{}' must be at most {}, got {}", param, hi, d));
    if (d >= 9.2e18 || d <= -9.2e18) reject(param, fmt::format("'{}' is out of range, got {}", param, d));
    x = static_cast<std::int64_t>(d);
  } else {
    reject(param, fmt::format("'{}' must be an integer, not {}", param, type_name(v)));
  }
  if (x < lo) reject(param, fmt::format("'{}' must be at least {}, got {}", param, lo, x));
  if (x > hi) reject(param, fmt::format("'{}' must be at most {}, got {}", param, hi, x));
  return x;
}

std::optional<std::int64_t> get_integer(const RequestJson& object, const char* key, std::int64_t lo,
                                        std::int64_t hi) {
  const RequestJson* v = field(object, key);
  if (!v) return std::nullopt;
  return as_integer(*v, key, lo, hi);
}

std::vector<std::int32_t> as_token_ids(const RequestJson& value, const std::string& param, std::size_t max_count,
                                       std::int64_t vocab_size) {
  if (!value.is_array()) reject(param, fmt::format("'{}' must be an array of token ids, not {}", param, type_name(value)));
  if (value.size() > max_count)
    reject(param, fmt::format("'{}' has {} token ids, more than the limit of {}", param, value.size(), max_count));
  const std::int64_t hi = vocab_size > 0 ? vocab_size - 1 : std::numeric_limits<std::int32_t>::max();
  std::vector<std::int32_t> ids;
  ids.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) {
    const RequestJson& e = value[i];
    const std::string at = base::json_path_index(param, i);
    if (!e.is_number()) reject(at, fmt::format("'{}' must be a token id (an integer), not {}", at, type_name(e)));
    ids.push_back(static_cast<std::int32_t>(as_integer(e, at, 0, hi)));
  }
  return ids;
}

}  // namespace kern::serve::detail
