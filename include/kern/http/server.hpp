// A generic asynchronous HTTP/1.1 server (Boost.Beast's parser on Boost.Asio; none of it visible here).
// Few I/O threads hold many connections: each connection lives on its own strand, answers are
// queued per connection, and a handler may answer from any thread, now or later (docs/http.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kern::http {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method;  // as sent: "GET", "POST", ...
  std::string target;  // the request target as sent: "/v1/models?x=1"
  std::string path;    // target before '?'
  std::string query;   // target after '?' (empty without one)
  Headers headers;     // in order received; names lower-cased
  std::string body;    // de-chunked
  std::string remote;  // peer "address:port"

  // The first header of that name (any case), if any.
  std::optional<std::string> header(std::string_view name) const;
};

struct Limits {
  std::size_t max_header_bytes = 16 << 10;       // request line + headers; beyond: 431
  std::size_t max_body_bytes = 8 << 20;          // announced or received body; beyond: 413
  std::chrono::milliseconds read_timeout{10000};  // a request not fully received by then: 408, closed
  std::chrono::milliseconds idle_timeout{60000};  // keep-alive connection waiting for its next request
  std::size_t max_stream_queue = 16 << 20;       // bytes queued and not yet written, per exchange
  std::size_t max_connections = 4096;            // beyond: 503 and closed at once
};

// One request's answer. Thread-safe: any thread may call it, any time after the handler got it.
// Exactly one of respond() or start_stream() (then send()* and finish()) answers it; answering
// twice, send() before start_stream() or a malformed header throws Error(Api). Calls made after the
// client went away do nothing (start_stream and send return false).
// Dropping the last reference without answering answers 500; dropping a stream without finish()
// closes the connection (the client sees a truncated chunked body, not a complete one).
class Exchange {
 public:
  struct State;  // the server's side; opaque
  explicit Exchange(std::shared_ptr<State> state);
  ~Exchange();
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  // The whole response, with Content-Length. `extra` must not set Content-Length or
  // Transfer-Encoding; "Connection: close" in it closes the connection after this response.
  void respond(int status, std::string content_type, std::string body, Headers extra = {});
  // Starts a chunked response (SSE: content type text/event-stream, extra Cache-Control: no-cache).
  // False if the client is already gone.
  bool start_stream(int status, std::string content_type, Headers extra = {});
  // Queues one chunk (an empty one is skipped); written in order. False once the client is gone or
  // the queue of unwritten bytes exceeds Limits::max_stream_queue (the connection is then closed).
  bool send(std::string chunk);
  // The same for a chunk made later, on the connection's I/O thread, in order with every other send:
  // `make` runs there (it must be thread-safe and must not block; what it captures must outlive it),
  // its result is queued as send() would (an empty one is skipped), and an exception it throws closes
  // the connection. `reserve` bytes (an estimate of the chunk) count against the stream queue's limit
  // until it is made, then its real size does. Lets the thread that produces a stream's content leave
  // the formatting to the I/O threads.
  bool send_made(std::size_t reserve, std::function<std::string()> make);
  // Ends the stream (terminating chunk); the connection may then serve another request.
  void finish();
  // The client went away (or the connection failed) before this exchange was finished.
  bool closed() const;
  // `f` runs once, on an I/O thread, when the client goes away before the exchange was finished
  // (answered whole or finish() called); at once, on this thread, if that already happened.
  // A second call replaces a callback that has not run yet.
  void on_close(std::function<void()> f);

 private:
  std::shared_ptr<State> state_;
};

// Runs on an I/O thread, on several at once for different connections: must be thread-safe and
// must not block (hand slow work to another thread with the Exchange). An exception it throws
// answers 500 (or closes a stream already started).
using Handler = std::function<void(Request, std::shared_ptr<Exchange>)>;

struct Config {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8000;  // 0: an ephemeral port (see Server::port())
  unsigned threads = 2;       // I/O threads
  Limits limits;
};

class Server {
 public:
  // Binds and listens; Error(Io) if the address cannot be resolved or bound.
  Server(Config config, Handler handler);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  std::uint16_t port() const;  // the bound port
  void run();                  // starts accepting on `threads` I/O threads; returns at once
  void stop_accepting();       // closes the listener; open connections and exchanges go on
  // Closes every connection (open exchanges see on_close), joins the I/O threads. Idempotent.
  // Not from an I/O thread (a handler or an on_close callback).
  void stop();
  std::size_t open_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kern::http
