#include "kern/serve/api_error.hpp"

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <utility>

namespace kern::serve {

std::string error_body(const ApiError& error) {
  using J = nlohmann::ordered_json;
  J inner = J::object();
  inner["message"] = error.message;
  inner["type"] = error.type;
  inner["param"] = error.param.empty() ? J(nullptr) : J(error.param);
  inner["code"] = error.code.empty() ? J(nullptr) : J(error.code);
  J body = J::object();
  body["error"] = std::move(inner);
  // Messages quote request bytes; a byte that is not UTF-8 becomes U+FFFD instead of throwing.
  return body.dump(-1, ' ', false, J::error_handler_t::replace);
}

ApiError bad_request(std::string message, std::string param) {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param), {}};
}

ApiError unauthorized(std::string message) {
  return ApiError{401, std::move(message), "authentication_error", {}, "invalid_api_key"};
}

ApiError not_found(std::string message, std::string param, std::string code) {
  return ApiError{404, std::move(message), "not_found_error", std::move(param), std::move(code)};
}

ApiError model_not_found(std::string_view model) {
  return not_found(fmt::format("The model '{}' does not exist", model), "model", "model_not_found");
}

ApiError rate_limited(std::string message) {
  return ApiError{429, std::move(message), "rate_limit_error", {}, {}};
}

ApiError server_error(std::string message) { return ApiError{500, std::move(message), "server_error", {}, {}}; }

ApiError service_unavailable(std::string message) {
  return ApiError{503, std::move(message), "service_unavailable", {}, {}};
}

}  // namespace kern::serve
