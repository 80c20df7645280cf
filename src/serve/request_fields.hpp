// Reading typed fields of a request body: every fault becomes a 400 naming the field. Private to
// the serve layer. Parsers throw Rejected inside and turn it into their result at the boundary
// (guarded), so no exception ever leaves a parse_* function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kern/serve/openai_request.hpp"

namespace kern::serve::detail {

struct Rejected {
  ApiError error;
};

[[noreturn]] void reject(std::string param, std::string message);

// The body as an object: base::parse_json_strict first (syntax with line:column, duplicate keys,
// nesting, ill-formed UTF-8), then read again keeping the client's key order.
RequestJson read_body(std::string_view body, std::size_t max_depth);

// The value of `key`, or nullptr when it is absent or null (null means "not given").
const RequestJson* field(const RequestJson& object, const char* key);

std::optional<bool> get_bool(const RequestJson& object, const char* key);
std::optional<std::string> get_string(const RequestJson& object, const char* key);

struct Range {
  double lo;
  double hi;
  bool lo_open = false;  // (lo, ...
  bool hi_open = false;  // ..., hi)
};
std::optional<double> get_number(const RequestJson& object, const char* key, Range range);

// An integer (1.0 counts; 1.5 does not) in [lo, hi]; `param` names it in errors.
std::int64_t as_integer(const RequestJson& value, const std::string& param, std::int64_t lo, std::int64_t hi);
std::optional<std::int64_t> get_integer(const RequestJson& object, const char* key, std::int64_t lo,
                                        std::int64_t hi);

// An array of token ids, each in [0, vocab_size) (or [0, 2^31) without a vocabulary size).
std::vector<std::int32_t> as_token_ids(const RequestJson& value, const std::string& param, std::size_t max_count,
                                       std::int64_t vocab_size);

// Runs `parse` and turns what it throws into the error result.
template <class T, class F>
ParseResult<T> guarded(F&& parse) noexcept {
  try {
    return parse();
  } catch (const Rejected& r) {
    return r.error;
  } catch (const std::bad_alloc&) {
    return server_error("out of memory while reading the request");
  } catch (const std::exception& e) {
    return server_error(std::string("internal error while reading the request: ") + e.what());
  } catch (...) {
    return server_error("internal error while reading the request");
  }
}

}  // namespace kern::serve::detail
