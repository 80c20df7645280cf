// An OpenAI-style API error: the HTTP status, and the body {"error": {message, type, param, code}}
// every OpenAI-compatible endpoint answers with.
#pragma once

#include <string>
#include <string_view>

namespace kern::serve {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";  // OpenAI's error type for `status`
  std::string param;                           // offending request field ("" when none)
  std::string code;                            // machine-readable code ("" when none)
};

// {"error": {"message", "type", "param", "code"}}; param and code are null when empty.
std::string error_body(const ApiError& error);

// The errors by status, with OpenAI's type for each.
ApiError bad_request(std::string message, std::string param = {});           // 400 invalid_request_error
ApiError unauthorized(std::string message);                                  // 401 authentication_error, code invalid_api_key
ApiError not_found(std::string message, std::string param = {}, std::string code = {});  // 404 not_found_error
ApiError model_not_found(std::string_view model);                            // 404, param model, code model_not_found
ApiError rate_limited(std::string message);                                  // 429 rate_limit_error
ApiError server_error(std::string message);                                  // 500 server_error
ApiError service_unavailable(std::string message);                           // 503 service_unavailable

}  // namespace kern::serve
