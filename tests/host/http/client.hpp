// A small blocking HTTP/1.1 client over raw POSIX sockets for the server tests, with an
// incremental response parser that the 1,000-stream test also drives from a poll() loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kern::http::test_client {

struct Response {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;                                         // de-chunked
  std::vector<std::string> chunks;                          // the chunks as framed (chunked responses)
  bool chunked = false;

  std::optional<std::string> header(std::string_view name) const;
};

// Parses responses from bytes as they arrive; interim 1xx responses are skipped.
class ResponseParser {
 public:
  // Appends bytes; true once a whole response is parsed. Bytes past it are kept for the next one.
  bool feed(std::string_view data);
  // The connection ended: completes a response whose body runs until close. True if one is complete.
  bool eof();
  bool done() const { return stage_ == Stage::Done; }
  bool head_done() const { return stage_ != Stage::Head; }
  const Response& current() const { return response_; }
  Response take();  // the parsed response; the parser starts on the next one

 private:
  enum class Stage { Head, Length, ChunkSize, ChunkData, ChunkEnd, UntilClose, Done };
  bool step();  // one step over buf_; false when it needs more bytes

  std::string buf_;
  Stage stage_ = Stage::Head;
  Response response_;
  std::size_t remaining_ = 0;
};

class Client {
 public:
  // Connects to 127.0.0.1:port; `rcvbuf` > 0 sets SO_RCVBUF before connecting. Throws on failure.
  explicit Client(std::uint16_t port, int rcvbuf = 0);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  int fd() const { return fd_; }
  void send(std::string_view data);
  // The next whole response; throws std::runtime_error on timeout, or on EOF before it is complete.
  Response read(std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Reads until the response's head and at least `chunks` chunks have arrived (a stream in progress).
  const Response& read_until_chunks(std::size_t chunks, std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // True if the server closes the connection within `timeout` (bytes before the EOF are discarded).
  bool wait_eof(std::chrono::milliseconds timeout);
  void close();

 private:
  // Reads once (waiting up to `timeout`); false on timeout; sets eof_ at EOF or a reset.
  bool read_some(std::chrono::steady_clock::time_point deadline);

  int fd_ = -1;
  bool eof_ = false;
  ResponseParser parser_;
};

// "METHOD target HTTP/1.1" with Host, the extra header lines given and a Content-Length when `body` is not empty.
std::string request_text(std::string_view method, std::string_view target, std::string_view body = {},
                         std::string_view extra_headers = {});

// Raises RLIMIT_NOFILE's soft limit to the hard one; returns the soft limit now in force.
std::size_t raise_fd_limit();

}  // namespace kern::http::test_client
