// The server: an acceptor and one Connection per socket, each on its own strand of one io_context
// run by Config::threads threads. Beast's parser reads requests; responses are text that
// message.cpp builds and a per-connection queue writes (docs/http.md).
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <thread>
#include <unordered_map>

#include "http/message.hpp"
#include "kern/base/error.hpp"
#include "kern/base/log.hpp"
#include "kern/http/server.hpp"

namespace kern::http {

namespace net = boost::asio;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using ErrorCode = boost::system::error_code;

namespace detail {

class Connection;

// Whether Exchanges may still post onto the I/O threads; stop() closes the gate before joining.
struct Gate {
  std::shared_mutex mu;
  bool shut = false;
};

// What every connection of one server shares. Outlives the io_context (declared before it).
struct Shared {
  Handler handler;
  Limits limits;
  std::shared_ptr<Gate> gate = std::make_shared<Gate>();
  std::atomic<std::size_t> open{0};
  std::mutex mu;
  std::unordered_map<std::uint64_t, std::weak_ptr<Connection>> connections;

  void add(std::uint64_t id, const std::shared_ptr<Connection>& c) {
    std::lock_guard lk(mu);
    connections.emplace(id, c);
    ++open;
  }
  void remove(std::uint64_t id) {
    std::lock_guard lk(mu);
    if (connections.erase(id) > 0) --open;
  }
};

}  // namespace detail

namespace {

int status_for_parse_error(const ErrorCode& ec) {
  if (ec == bhttp::error::header_limit) return 431;
  if (ec == bhttp::error::body_limit) return 413;
  return 400;
}

std::string endpoint_text(const tcp::endpoint& ep) {
  const auto addr = ep.address();
  return addr.is_v6() ? fmt::format("[{}]:{}", addr.to_string(), ep.port())
                      : fmt::format("{}:{}", addr.to_string(), ep.port());
}

}  // namespace

using detail::Connection;
using detail::Gate;
using detail::Shared;

struct Exchange::State {
  enum class Phase { Unanswered, Streaming, Finished };

  std::weak_ptr<Connection> connection;
  std::shared_ptr<Gate> gate;
  std::size_t max_queue = 0;
  bool keep_alive = true;  // the request allows the connection to be reused
  bool http11 = true;      // false: HTTP/1.0, streams are sent unframed and end with the connection

  std::atomic<bool> closed{false};
  std::atomic<std::size_t> queued{0};  // bytes handed to the connection and not yet written

  std::mutex mu;  // phase, notified, on_close; held while posting so posts keep the callers' order
  Phase phase = Phase::Unanswered;
  bool notified = false;
  std::function<void()> on_close;

  // Runs `f(connection)` on the connection's strand; false if the connection or the server is gone.
  template <class F>
  bool post(F&& f);
  // The connection closed while this exchange was its current one (on its strand).
  void notify_closed();
};

namespace detail {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, Shared& shared, std::uint64_t id)
      : socket_(std::move(socket)), timer_(socket_.get_executor()), shared_(shared), id_(id) {
    ErrorCode ec;
    const auto peer = socket_.remote_endpoint(ec);
    remote_ = ec ? std::string("?") : endpoint_text(peer);
    socket_.set_option(tcp::no_delay(true), ec);
  }
  ~Connection() {
    if (mode_ != Mode::Closed) {  // only when the io_context is torn down with handlers pending
      shared_.remove(id_);
      if (current_) current_->notify_closed();
    }
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  auto executor() { return socket_.get_executor(); }

  void start() {
    if (mode_ == Mode::Closed) return;
    log().debug("http: connection {} from {} opened", id_, remote_);
    new_request(shared_.limits.read_timeout);
    read();
  }

  // Appends a piece of the current exchange's response; `ends`: its last piece.
  void deliver(const Exchange::State* st, std::string data, bool ends, bool close) {
    if (mode_ == Mode::Closed || st != current_.get()) return;
    if (close) close_after_ = true;
    out_.push_back({std::move(data), true});
    if (ends) end_queued_ = true;
    pump();
  }

  // The current exchange cannot go on (stream queue over its limit, stream dropped unfinished).
  void abort(const Exchange::State* st, std::string_view why) {
    if (mode_ == Mode::Closed || st != current_.get()) return;
    close(why);
  }

  void close(std::string_view why) {
    if (mode_ == Mode::Closed) return;
    mode_ = Mode::Closed;
    log().debug("http: connection {} from {} closed ({})", id_, remote_, why);
    cancel_timer();
    ErrorCode ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    out_.clear();  // writing_ stays until its write completes
    shared_.remove(id_);
    if (auto st = std::move(current_)) st->notify_closed();
  }

 private:
  enum class Mode {
    Reading,    // parsing a request
    Answering,  // a request is with the handler or its response is being written
    Lingering,  // response written, send side shut: waiting briefly for the client's FIN
    Closed,
  };
  struct Piece {
    std::string data;
    bool charged;  // counted in the current exchange's queued bytes
  };

  void new_request(std::chrono::milliseconds wait) {
    mode_ = Mode::Reading;
    parser_.emplace();
    parser_->eager(true);
    parser_->header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(shared_.limits.max_header_bytes, UINT32_MAX)));
    parser_->body_limit(static_cast<std::uint64_t>(shared_.limits.max_body_bytes));
    request_started_ = false;
    continue_sent_ = false;
    arm_timer(wait);
  }

  // The socket reads into read_buf_, never into in_: the parser consumes from in_ while a read is
  // pending, and a flat_buffer emptied by consume() rewinds, so a region prepared earlier goes stale.
  void read() {
    socket_.async_read_some(net::buffer(read_buf_), [self = shared_from_this()](const ErrorCode& ec, std::size_t n) {
      self->on_read(ec, n);
    });
  }

  void on_read(const ErrorCode& ec, std::size_t n) {
    if (mode_ == Mode::Closed) return;
    if (ec) {
      if (mode_ == Mode::Lingering) {
        close("done");
      } else if (ec == net::error::eof) {
        close(mode_ == Mode::Reading && !request_started_ ? "client closed" : "client left mid-exchange");
      } else {
        close(ec.message());
      }
      return;
    }
    net::buffer_copy(in_.prepare(n), net::buffer(read_buf_.data(), n));
    in_.commit(n);
    if (mode_ == Mode::Lingering || close_after_) {
      in_.consume(in_.size());  // nothing more will be served on this connection
    } else if (mode_ == Mode::Reading) {
      parse();
    } else if (in_.size() > shared_.limits.max_header_bytes) {
      close("client sent too much while its response was pending");
    }
    if (mode_ != Mode::Closed) read();
  }

  // Feeds the buffered bytes to the parser; answers an error or hands a complete request on.
  void parse() {
    if (mode_ != Mode::Reading || in_.size() == 0) return;
    if (!request_started_) {
      request_started_ = true;
      arm_timer(shared_.limits.read_timeout);
    }
    ErrorCode ec;
    while (in_.size() > 0 && !parser_->is_done()) {
      const std::size_t used = parser_->put(in_.data(), ec);
      in_.consume(used);
      if (ec == bhttp::error::need_more) {
        ec = {};
        break;
      }
      if (ec || used == 0) break;
    }
    if (ec) {
      const int status = status_for_parse_error(ec);
      log().debug("http: connection {} from {}: bad request ({}): {}", id_, remote_, ec.message(), status);
      reject(status, status == 400 ? "malformed request" : status == 413 ? "request body too large"
                                                                           : "request header too large");
      return;
    }
    if (!parser_->is_done()) {
      if (parser_->is_header_done() && !continue_sent_ && parser_->get().version() >= 11 &&
          iequals(parser_->get()[bhttp::field::expect], "100-continue")) {
        continue_sent_ = true;
        out_.push_back({"HTTP/1.1 100 Continue\r\n\r\n", false});
        pump();
      }
      return;
    }
    dispatch();
  }

  void dispatch() {
    auto msg = parser_->release();
    parser_.reset();
    mode_ = Mode::Answering;
    cancel_timer();

    Request req;
    req.method = std::string(msg.method_string());
    req.target = std::string(msg.target());
    const auto q = req.target.find('?');
    req.path = req.target.substr(0, q);
    if (q != std::string::npos) req.query = req.target.substr(q + 1);
    for (const auto& f : msg) {
      std::string name(f.name_string());
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      req.headers.emplace_back(std::move(name), std::string(f.value()));
    }
    req.body = std::move(msg.body());
    req.remote = remote_;
    log().debug("http: connection {} from {}: {} {}", id_, remote_, req.method, req.target);

    auto st = std::make_shared<Exchange::State>();
    st->connection = weak_from_this();
    st->gate = shared_.gate;
    st->max_queue = shared_.limits.max_stream_queue;
    st->keep_alive = msg.keep_alive();
    st->http11 = msg.version() >= 11;
    current_ = st;
    auto exchange = std::make_shared<Exchange>(st);
    try {
      shared_.handler(std::move(req), exchange);
    } catch (const std::exception& e) {
      handler_failed(*exchange, *st, e.what());
    } catch (...) {
      handler_failed(*exchange, *st, "unknown exception");
    }
  }

  void handler_failed(Exchange& exchange, Exchange::State& st, std::string_view what) {
    log().error("http: handler failed on {}: {}", remote_, what);
    bool unanswered = false;
    {
      std::lock_guard lk(st.mu);
      unanswered = st.phase == Exchange::State::Phase::Unanswered;
    }
    if (unanswered) {
      try {
        exchange.respond(500, "text/plain; charset=utf-8", "internal server error\n");
        return;
      } catch (const std::exception& e) {
        log().error("http: could not answer 500 on {}: {}", remote_, e.what());
      }
    }
    close("handler failed");
  }

  // A response of the server's own (the handler never sees the request); the connection closes after it.
  void reject(int status, std::string_view text) {
    parser_.reset();
    mode_ = Mode::Answering;
    cancel_timer();
    close_after_ = true;
    in_.consume(in_.size());
    out_.push_back({detail::plain_response(status, text, true), false});
    end_queued_ = true;
    pump();
  }

  void pump() {
    if (writing_pending_ || mode_ == Mode::Closed) return;
    if (out_.empty()) {
      if (end_queued_) response_done();
      return;
    }
    writing_.assign(std::make_move_iterator(out_.begin()), std::make_move_iterator(out_.end()));
    out_.clear();
    std::vector<net::const_buffer> buffers;
    buffers.reserve(writing_.size());
    for (const auto& p : writing_) buffers.emplace_back(p.data.data(), p.data.size());
    writing_pending_ = true;
    net::async_write(socket_, buffers, [self = shared_from_this()](const ErrorCode& ec, std::size_t) {
      self->on_write(ec);
    });
  }

  void on_write(const ErrorCode& ec) {
    writing_pending_ = false;
    if (mode_ == Mode::Closed) return;
    if (ec) {
      close(fmt::format("write failed: {}", ec.message()));
      return;
    }
    std::size_t charged = 0;
    for (const auto& p : writing_) charged += p.charged ? p.data.size() : 0;
    if (current_ && charged > 0) current_->queued -= charged;
    writing_.clear();
    pump();
  }

  // The current response is written whole.
  void response_done() {
    end_queued_ = false;
    current_.reset();
    if (close_after_) {
      linger();
      return;
    }
    new_request(shared_.limits.idle_timeout);
    parse();  // bytes the client sent ahead
  }

  // Shuts the send side and waits a little for the client's FIN before closing, so that unread
  // request bytes do not make the kernel reset the connection before the client read the answer.
  void linger() {
    mode_ = Mode::Lingering;
    ErrorCode ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    arm_timer(std::min<std::chrono::milliseconds>(shared_.limits.read_timeout, std::chrono::seconds(1)));
  }

  void arm_timer(std::chrono::milliseconds d) {
    const std::uint64_t gen = ++timer_gen_;
    timer_.expires_after(d);
    timer_.async_wait([self = shared_from_this(), gen](const ErrorCode& ec) { self->on_timer(ec, gen); });
  }
  void cancel_timer() {
    ++timer_gen_;
    timer_.cancel();
  }
  void on_timer(const ErrorCode& ec, std::uint64_t gen) {
    if (ec || gen != timer_gen_ || mode_ == Mode::Closed) return;
    if (mode_ == Mode::Lingering) {
      close("done (client kept its side open)");
    } else if (mode_ == Mode::Reading) {
      if (request_started_) {
        log().debug("http: connection {} from {}: request not received in time", id_, remote_);
        reject(408, "request not received in time");
      } else {
        close("idle");
      }
    }
  }

  static bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
             return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
  }


  tcp::socket socket_;
  net::steady_timer timer_;
  Shared& shared_;
  std::uint64_t id_;
  std::string remote_;

  Mode mode_ = Mode::Reading;
  std::array<char, 8 << 10> read_buf_;
  boost::beast::flat_buffer in_;  // received, not yet parsed
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  bool request_started_ = false;  // a byte of the request being parsed has arrived
  bool continue_sent_ = false;
  std::uint64_t timer_gen_ = 0;   // a timer completion of an older generation is stale

  std::shared_ptr<Exchange::State> current_;
  std::deque<Piece> out_;
  std::vector<Piece> writing_;  // the pieces of the write in flight
  bool writing_pending_ = false;
  bool end_queued_ = false;   // the current response's last piece is in out_ or writing_
  bool close_after_ = false;  // close once the current response is written
};

}  // namespace detail

// ---- Exchange ----

template <class F>
bool Exchange::State::post(F&& f) {
  std::shared_lock lk(gate->mu);
  if (gate->shut) return false;
  auto c = connection.lock();
  if (!c) return false;
  net::post(c->executor(), [c, f = std::forward<F>(f)]() mutable { f(*c); });
  return true;
}

void Exchange::State::notify_closed() {
  closed = true;
  std::function<void()> f;
  {
    std::lock_guard lk(mu);
    if (notified) return;
    notified = true;
    if (phase != Phase::Finished) f = std::move(on_close);
    on_close = nullptr;
  }
  if (!f) return;
  try {
    f();
  } catch (const std::exception& e) {
    log().error("http: on_close callback threw: {}", e.what());
  } catch (...) {
    log().error("http: on_close callback threw");
  }
}

Exchange::Exchange(std::shared_ptr<State> state) : state_(std::move(state)) {}

Exchange::~Exchange() {
  State& s = *state_;
  try {
    std::lock_guard lk(s.mu);
    if (s.closed || s.phase == State::Phase::Finished) return;
    const State* st = state_.get();
    if (s.phase == State::Phase::Unanswered) {
      log().warn("http: handler dropped a request without answering it: 500");
      std::string text = detail::plain_response(500, "the request was dropped without an answer", !s.keep_alive);
      s.queued += text.size();
      s.post([st, text = std::move(text), close = !s.keep_alive](Connection& c) mutable {
        c.deliver(st, std::move(text), true, close);
      });
    } else {
      log().warn("http: a stream was dropped without finish(): connection closed");
      s.post([st](Connection& c) { c.abort(st, "stream dropped without finish()"); });
    }
    s.phase = State::Phase::Finished;
  } catch (const std::exception& e) {
    log().error("http: answering a dropped exchange failed: {}", e.what());
  }
}

void Exchange::respond(int status, std::string content_type, std::string body, Headers extra) {
  State& s = *state_;
  const bool close = !s.keep_alive || detail::asks_close(extra);
  std::string text = detail::response_head(status, content_type, extra, detail::Framing::Length, body.size(), close,
                                           !s.http11 && !close);
  text += body;
  std::lock_guard lk(s.mu);
  if (s.phase != State::Phase::Unanswered) {
    if (s.closed) return;
    fail(ErrorKind::Api, "http: respond() on an exchange already answered");
  }
  s.phase = State::Phase::Finished;
  if (s.closed) return;
  s.queued += text.size();
  s.post([st = state_.get(), text = std::move(text), close](Connection& c) mutable {
    c.deliver(st, std::move(text), true, close);
  });
}

bool Exchange::start_stream(int status, std::string content_type, Headers extra) {
  State& s = *state_;
  const bool close = !s.keep_alive || detail::asks_close(extra) || !s.http11;
  std::string head = detail::response_head(status, content_type, extra,
                                           s.http11 ? detail::Framing::Chunked : detail::Framing::UntilClose, 0, close,
                                           false);
  std::lock_guard lk(s.mu);
  if (s.phase != State::Phase::Unanswered) {
    if (s.closed) return false;
    fail(ErrorKind::Api, "http: start_stream() on an exchange already answered");
  }
  if (s.closed) return false;
  s.phase = State::Phase::Streaming;
  s.queued += head.size();
  return s.post([st = state_.get(), head = std::move(head), close](Connection& c) mutable {
    c.deliver(st, std::move(head), false, close);
  });
}

namespace {
// Counts n more bytes against a stream's queue; false (and the connection closing) over its limit.
// Under s.mu.
bool charge_stream(Exchange::State& s, std::size_t n) {
  if (s.queued.fetch_add(n) + n <= s.max_queue) return true;
  s.queued -= n;
  s.closed = true;
  log().warn("http: stream queue over {} bytes (the client does not read): connection closed", s.max_queue);
  s.post([st = &s](Connection& c) { c.abort(st, "stream queue over its limit"); });
  return false;
}
}  // namespace

bool Exchange::send(std::string chunk) {
  State& s = *state_;
  std::lock_guard lk(s.mu);
  if (s.closed) return false;
  if (s.phase != State::Phase::Streaming) fail(ErrorKind::Api, "http: send() outside a started, unfinished stream");
  if (chunk.empty()) return true;
  std::string piece = s.http11 ? detail::chunk_frame(chunk) : std::move(chunk);
  if (!charge_stream(s, piece.size())) return false;
  const State* st = state_.get();
  return s.post([st, piece = std::move(piece)](Connection& c) mutable { c.deliver(st, std::move(piece), false, false); });
}

bool Exchange::send_made(std::size_t reserve, std::function<std::string()> make) {
  State& s = *state_;
  std::lock_guard lk(s.mu);
  if (s.closed) return false;
  if (s.phase != State::Phase::Streaming) fail(ErrorKind::Api, "http: send_made() outside a started, unfinished stream");
  if (!charge_stream(s, reserve)) return false;
  // The state is held (not only named) because the made chunk's size replaces the reserve in it.
  return s.post([st = state_, reserve, http11 = s.http11, make = std::move(make)](Connection& c) mutable {
    std::string piece;
    try {
      piece = make();
    } catch (const std::exception& e) {
      st->queued -= reserve;
      log().error("http: a stream's chunk could not be made: {}", e.what());
      c.abort(st.get(), "a stream's chunk could not be made");
      return;
    }
    if (!piece.empty() && http11) piece = detail::chunk_frame(piece);
    st->queued += piece.size();
    st->queued -= reserve;
    if (!piece.empty()) c.deliver(st.get(), std::move(piece), false, false);
  });
}

void Exchange::finish() {
  State& s = *state_;
  std::lock_guard lk(s.mu);
  if (s.phase != State::Phase::Streaming) {
    if (s.closed) return;
    fail(ErrorKind::Api, "http: finish() outside a started, unfinished stream");
  }
  s.phase = State::Phase::Finished;
  if (s.closed) return;
  std::string last = s.http11 ? std::string(detail::kLastChunk) : std::string();
  s.post([st = state_.get(), last = std::move(last)](Connection& c) mutable { c.deliver(st, std::move(last), true, false); });
}

bool Exchange::closed() const { return state_->closed; }

void Exchange::on_close(std::function<void()> f) {
  State& s = *state_;
  {
    std::lock_guard lk(s.mu);
    if (!s.notified) {
      s.on_close = std::move(f);
      return;
    }
  }
  if (f) f();
}

// ---- Server ----

namespace {
thread_local const void* tl_io_server = nullptr;  // the Server::Impl whose I/O thread this is
}  // namespace

struct Server::Impl {
  Config config;
  Shared shared;
  net::io_context ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  tcp::acceptor acceptor;
  net::steady_timer accept_retry;
  std::uint16_t port = 0;
  std::vector<std::thread> threads;
  std::atomic<bool> listening{true};
  bool running = false;
  bool stopped = false;
  std::mutex mu;  // running, stopped, threads
  std::uint64_t next_id = 0;  // acceptor strand only

  Impl(Config c, Handler h)
      : config(std::move(c)),
        ioc(static_cast<int>(std::max(1u, config.threads))),
        acceptor(net::make_strand(ioc)),
        accept_retry(acceptor.get_executor()) {
    shared.handler = std::move(h);
    shared.limits = config.limits;
    ErrorCode ec;
    tcp::endpoint ep;
    const auto addr = net::ip::make_address(config.host, ec);
    if (!ec) {
      ep = tcp::endpoint(addr, config.port);
    } else {
      tcp::resolver resolver(ioc);
      const auto found = resolver.resolve(config.host, std::to_string(config.port), ec);
      if (ec || found.empty()) fail(ErrorKind::Io, "http: cannot resolve host '{}': {}", config.host, ec.message());
      ep = found.begin()->endpoint();
    }
    acceptor.open(ep.protocol(), ec);
    if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(ep, ec);
    if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
    if (ec) fail(ErrorKind::Io, "http: cannot listen on {}: {}", endpoint_text(ep), ec.message());
    port = acceptor.local_endpoint(ec).port();
    log().info("http: listening on {}:{}", config.host, port);
  }

  void accept() {
    acceptor.async_accept(net::make_strand(ioc),
                          [this](const ErrorCode& ec, tcp::socket s) { on_accept(ec, std::move(s)); });
  }

  void on_accept(const ErrorCode& ec, tcp::socket s) {
    if (!acceptor.is_open()) return;
    if (ec) {
      // Out of descriptors, say: try again shortly rather than spin.
      log().warn("http: accept failed: {}", ec.message());
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this](const ErrorCode& e) {
        if (!e) accept();
      });
      return;
    }
    if (shared.open >= shared.limits.max_connections) {
      log().warn("http: {} connections open, refusing one more with 503", shared.open.load());
      const std::string text = detail::plain_response(503, "too many connections", true);
      ErrorCode ignored;
      s.non_blocking(true, ignored);
      s.write_some(net::buffer(text), ignored);  // a fresh socket's empty send buffer takes it
      s.shutdown(tcp::socket::shutdown_send, ignored);
      s.close(ignored);
    } else {
      auto c = std::make_shared<Connection>(std::move(s), shared, ++next_id);
      shared.add(next_id, c);
      net::post(c->executor(), [c] { c->start(); });
    }
    accept();
  }

  void close_listener() {
    ErrorCode ec;
    acceptor.close(ec);
    accept_retry.cancel();
  }
};

Server::Server(Config config, Handler handler) : impl_(std::make_unique<Impl>(std::move(config), std::move(handler))) {}

Server::~Server() {
  try {
    stop();
  } catch (const std::exception& e) {
    log().error("http: stopping the server failed: {}", e.what());
  }
}

std::uint16_t Server::port() const { return impl_->port; }

std::size_t Server::open_connections() const { return impl_->shared.open; }

void Server::run() {
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  if (m.stopped) fail(ErrorKind::Api, "http: run() after stop()");
  if (m.running) return;
  m.running = true;
  m.work.emplace(m.ioc.get_executor());
  net::post(m.acceptor.get_executor(), [&m] {
    if (m.acceptor.is_open()) m.accept();
  });
  const unsigned n = std::max(1u, m.config.threads);
  for (unsigned i = 0; i < n; ++i) {
    m.threads.emplace_back([&m] {
      tl_io_server = &m;
      for (;;) {
        try {
          m.ioc.run();
          return;
        } catch (const std::exception& e) {
          log().error("http: I/O thread caught: {}", e.what());
        }
      }
    });
  }
}

void Server::stop_accepting() {
  Impl& m = *impl_;
  if (!m.listening.exchange(false)) return;
  bool running = false;
  {
    std::lock_guard lk(m.mu);
    running = m.running && !m.stopped;
  }
  if (!running) {
    m.close_listener();
    return;
  }
  auto done = std::make_shared<std::promise<void>>();
  net::dispatch(m.acceptor.get_executor(), [&m, done] {
    m.close_listener();
    done->set_value();
  });
  if (tl_io_server != &m) done->get_future().wait();
  log().info("http: no longer accepting on port {}", m.port);
}

void Server::stop() {
  Impl& m = *impl_;
  if (tl_io_server == &m) fail(ErrorKind::Api, "http: Server::stop() from one of its own I/O threads");
  {
    std::lock_guard lk(m.mu);
    if (m.stopped) return;
  }
  stop_accepting();
  {
    std::unique_lock lk(m.shared.gate->mu);
    m.shared.gate->shut = true;
  }
  std::vector<std::shared_ptr<Connection>> open;
  {
    std::lock_guard lk(m.shared.mu);
    for (auto& [id, w] : m.shared.connections) {
      if (auto c = w.lock()) open.push_back(std::move(c));
    }
  }
  for (auto& c : open) net::post(c->executor(), [c] { c->close("server stopping"); });
  open.clear();
  std::vector<std::thread> threads;
  {
    std::lock_guard lk(m.mu);
    m.stopped = true;
    m.work.reset();
    threads = std::move(m.threads);
  }
  for (auto& t : threads) t.join();
  log().debug("http: server on port {} stopped", m.port);
}

}  // namespace kern::http
