// Response text built on the caller's thread (no Beast here): status line, headers, chunk frames.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "kern/http/server.hpp"

namespace kern::http::detail {

enum class Framing {
  Length,      // Content-Length: the body follows whole
  Chunked,     // Transfer-Encoding: chunked (HTTP/1.1 streams)
  UntilClose,  // neither: the body ends when the connection closes (streams to HTTP/1.0 clients)
};

// "OK", "Not Found", ...; "Unknown" for a code it does not name.
std::string_view reason_phrase(int status);

// The status line and headers, ending with the blank line. Throws Error(Api) on a status outside
// 100..599, a header name that is not an RFC 9110 token, CR / LF / NUL in a value, or an `extra`
// that sets Content-Length or Transfer-Encoding (the server frames the body itself). Connection
// headers in `extra` are dropped: `close` decides (see asks_close), and `keep_alive_10` adds
// "Connection: keep-alive" for an HTTP/1.0 client that asked to keep the connection.
std::string response_head(int status, std::string_view content_type, const Headers& extra, Framing framing,
                          std::size_t content_length, bool close, bool keep_alive_10);

// Whether `extra` holds "Connection: close" (any case).
bool asks_close(const Headers& extra);

// One chunk of a chunked body: hex size, CRLF, data, CRLF. The terminating chunk is kLastChunk.
std::string chunk_frame(std::string_view data);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

// A whole text/plain response the server gives on its own (400, 408, 413, 431, 500, 503).
std::string plain_response(int status, std::string_view text, bool close);

}  // namespace kern::http::detail
