#include "http/message.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "kern/base/error.hpp"

namespace kern::http {

std::optional<std::string> Request::header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (n.size() == name.size() && std::equal(n.begin(), n.end(), name.begin(), [](char a, char b) {
          return a == std::tolower(static_cast<unsigned char>(b));
        })) {
      return v;
    }
  }
  return std::nullopt;
}

namespace detail {
namespace {

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

bool is_token_char(char c) {
  if (std::isalnum(static_cast<unsigned char>(c))) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

void check_name(std::string_view name) {
  if (name.empty() || !std::all_of(name.begin(), name.end(), is_token_char)) {
    fail(ErrorKind::Api, "http: response header name '{}' is not a token", name);
  }
}

void check_value(std::string_view name, std::string_view value) {
  if (value.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos) {
    fail(ErrorKind::Api, "http: response header '{}' has CR, LF or NUL in its value", name);
  }
}

}  // namespace

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

bool asks_close(const Headers& extra) {
  return std::any_of(extra.begin(), extra.end(),
                     [](const auto& h) { return iequal(h.first, "connection") && iequal(h.second, "close"); });
}

std::string response_head(int status, std::string_view content_type, const Headers& extra, Framing framing,
                          std::size_t content_length, bool close, bool keep_alive_10) {
  if (status < 100 || status > 599) fail(ErrorKind::Api, "http: status {} is outside 100..599", status);
  check_value("content-type", content_type);
  std::string out = fmt::format("HTTP/1.1 {} {}\r\n", status, reason_phrase(status));
  if (!content_type.empty()) fmt::format_to(std::back_inserter(out), "Content-Type: {}\r\n", content_type);
  for (const auto& [name, value] : extra) {
    check_name(name);
    check_value(name, value);
    if (iequal(name, "content-length") || iequal(name, "transfer-encoding")) {
      fail(ErrorKind::Api, "http: response header '{}' is the server's to set", name);
    }
    if (iequal(name, "connection")) continue;
    fmt::format_to(std::back_inserter(out), "{}: {}\r\n", name, value);
  }
  switch (framing) {
    case Framing::Length: fmt::format_to(std::back_inserter(out), "Content-Length: {}\r\n", content_length); break;
    case Framing::Chunked: out += "Transfer-Encoding: chunked\r\n"; break;
    case Framing::UntilClose: break;
  }
  if (close) {
    out += "Connection: close\r\n";
  } else if (keep_alive_10) {
    out += "Connection: keep-alive\r\n";
  }
  out += "\r\n";
  return out;
}

std::string chunk_frame(std::string_view data) {
  std::string out = fmt::format("{:x}\r\n", data.size());
  out.reserve(out.size() + data.size() + 2);
  out += data;
  out += "\r\n";
  return out;
}

std::string plain_response(int status, std::string_view text, bool close) {
  std::string body = fmt::format("{}\n", text);
  return response_head(status, "text/plain; charset=utf-8", {}, Framing::Length, body.size(), close, false) + body;
}

}  // namespace detail
}  // namespace kern::http
