// kern::http::Server against a real client over TCP: whole responses and keep-alive, chunked
// streams answered on the I/O thread and from others, 1,000 streams open at once on two I/O
// threads, what each kind of bad input gets, clients that leave or do not read, handler failures,
// and draining.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>
#include <sys/socket.h>

#include "client.hpp"
#include "kern/base/error.hpp"
#include "kern/http/server.hpp"

namespace kern::http {
namespace {

using namespace std::chrono_literals;
using test_client::Client;
using test_client::request_text;
using test_client::Response;
using Clock = std::chrono::steady_clock;

template <class P>
bool eventually(P pred, std::chrono::milliseconds timeout = 2000ms) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return pred();
}

Config local_config(Limits limits = {}) {
  Config c;
  c.host = "127.0.0.1";
  c.port = 0;
  c.threads = 2;
  c.limits = limits;
  return c;
}

// Exchanges handed over by handlers, kept for the test body.
class Held {
 public:
  void put(std::shared_ptr<Exchange> e) {
    std::lock_guard lk(mu_);
    items_.push_back(std::move(e));
    cv_.notify_all();
  }
  std::shared_ptr<Exchange> wait(std::size_t index, std::chrono::milliseconds timeout = 5000ms) {
    std::unique_lock lk(mu_);
    if (!cv_.wait_for(lk, timeout, [&] { return items_.size() > index; })) return nullptr;
    return items_[index];
  }
  std::size_t size() {
    std::lock_guard lk(mu_);
    return items_.size();
  }
  std::vector<std::shared_ptr<Exchange>> all() {
    std::lock_guard lk(mu_);
    return items_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Exchange>> items_;
};

// A thread that runs posted jobs in order (the engine's stand-in).
class Worker {
 public:
  Worker() : thread_([this] { loop(); }) {}
  ~Worker() {
    {
      std::lock_guard lk(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void post(std::function<void()> f) {
    {
      std::lock_guard lk(mu_);
      jobs_.push_back(std::move(f));
    }
    cv_.notify_all();
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> f;
      {
        std::unique_lock lk(mu_);
        cv_.wait(lk, [&] { return done_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        f = std::move(jobs_.front());
        jobs_.pop_front();
      }
      f();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool done_ = false;
  std::thread thread_;
};

void echo(const Request& req, Exchange& ex) {
  ex.respond(200, "text/plain", req.method + " " + req.path + " " + req.query + " " +
                                    req.header("X-TEST").value_or("-") + " " + req.body,
             {{"X-Served", "yes"}});
}

TEST(HttpServer, WholeResponsesReuseTheConnection) {
  std::mutex mu;
  std::vector<std::string> remotes;
  Server server(local_config(), [&](Request req, std::shared_ptr<Exchange> ex) {
    {
      std::lock_guard lk(mu);
      remotes.push_back(req.remote);
    }
    echo(req, *ex);
  });
  ASSERT_NE(server.port(), 0);
  server.run();
  Client c(server.port());
  c.send(request_text("GET", "/a/b?x=1&y=2", "", "X-Test: T1\r\n"));
  Response r = c.read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "GET /a/b x=1&y=2 T1 ");
  EXPECT_EQ(r.header("content-length"), std::to_string(r.body.size()));
  EXPECT_EQ(r.header("content-type"), "text/plain");
  EXPECT_EQ(r.header("x-served"), "yes");
  EXPECT_FALSE(r.header("connection").has_value());

  c.send(request_text("POST", "/p", "hello body"));
  r = c.read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "POST /p  - hello body");

  // A chunked request body arrives de-chunked.
  c.send("POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
  r = c.read();
  EXPECT_EQ(r.body, "POST /chunked  - hello world");
  EXPECT_EQ(server.open_connections(), 1u);

  std::lock_guard lk(mu);
  ASSERT_EQ(remotes.size(), 3u);
  EXPECT_EQ(remotes[0], remotes[1]);  // the same client port: the connection was reused
  EXPECT_EQ(remotes[1], remotes[2]);
  EXPECT_EQ(remotes[0].rfind("127.0.0.1:", 0), 0u) << remotes[0];
}

TEST(HttpServer, ConnectionCloseIsHonoured) {
  Server server(local_config(), [](Request req, std::shared_ptr<Exchange> ex) {
    if (req.path == "/server-closes") {
      ex->respond(200, "text/plain", "bye", {{"Connection", "close"}});
    } else {
      echo(req, *ex);
    }
  });
  server.run();
  {
    Client c(server.port());
    c.send(request_text("GET", "/", "", "Connection: close\r\n"));
    const Response r = c.read();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.header("connection"), "close");
    EXPECT_TRUE(c.wait_eof(2000ms));
  }
  {
    Client c(server.port());
    c.send(request_text("GET", "/server-closes"));
    const Response r = c.read();
    EXPECT_EQ(r.body, "bye");
    EXPECT_EQ(r.header("connection"), "close");
    EXPECT_TRUE(c.wait_eof(2000ms));
  }
  {
    // HTTP/1.0 without keep-alive: closed after the response.
    Client c(server.port());
    c.send("GET /old HTTP/1.0\r\n\r\n");
    EXPECT_EQ(c.read().status, 200);
    EXPECT_TRUE(c.wait_eof(2000ms));
  }
  EXPECT_TRUE(eventually([&] { return server.open_connections() == 0; }));
}

TEST(HttpServer, StreamDeliversManyChunksInOrder) {
  constexpr int kChunks = 500;
  Server server(local_config(), [](Request req, std::shared_ptr<Exchange> ex) {
    if (req.path != "/stream") {
      echo(req, *ex);
      return;
    }
    ASSERT_TRUE(ex->start_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}}));
    for (int i = 0; i < kChunks; ++i) EXPECT_TRUE(ex->send("data: " + std::to_string(i) + "\n\n"));
    EXPECT_TRUE(ex->send(""));  // skipped: an empty chunk would end the stream
    ex->finish();
  });
  server.run();
  Client c(server.port());
  c.send(request_text("GET", "/stream"));
  const Response r = c.read();
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.chunked);
  EXPECT_EQ(r.header("content-type"), "text/event-stream");
  EXPECT_EQ(r.header("cache-control"), "no-cache");
  EXPECT_FALSE(r.header("content-length").has_value());
  ASSERT_EQ(r.chunks.size(), static_cast<std::size_t>(kChunks));
  for (int i = 0; i < kChunks; ++i) EXPECT_EQ(r.chunks[i], "data: " + std::to_string(i) + "\n\n");
  // The connection serves another request after the terminating chunk.
  c.send(request_text("GET", "/after"));
  EXPECT_EQ(c.read().body, "GET /after  - ");

  // An HTTP/1.0 client gets the stream unframed, ended by the connection's close.
  Client old(server.port());
  old.send("GET /stream HTTP/1.0\r\n\r\n");
  const Response r10 = old.read();
  EXPECT_FALSE(r10.chunked);
  EXPECT_EQ(r10.body.rfind("data: 0\n\ndata: 1\n\n", 0), 0u);
  EXPECT_EQ(r10.body.size(), r.body.size());
}

// Chunks made on the I/O thread (send_made) keep their place among plain sends; an empty one is
// skipped; a maker that throws closes the connection instead of writing a half stream.
TEST(HttpServer, MadeChunksKeepTheirOrderAndAThrowingMakerClosesTheConnection) {
  Server server(local_config(), [&](Request req, std::shared_ptr<Exchange> ex) {
    ASSERT_TRUE(ex->start_stream(200, "text/event-stream"));
    for (int i = 0; i < 40; ++i) {
      if (i % 3 == 0) {
        EXPECT_TRUE(ex->send("plain " + std::to_string(i) + "\n"));
      } else {
        EXPECT_TRUE(ex->send_made(16, [i] { return "made " + std::to_string(i) + "\n"; }));
      }
    }
    EXPECT_TRUE(ex->send_made(16, [] { return std::string(); }));  // nothing written
    if (req.path == "/throws") {
      EXPECT_TRUE(ex->send_made(16, []() -> std::string { throw std::runtime_error("no chunk"); }));
      return;  // never finished: the connection closes
    }
    ex->finish();
  });
  server.run();
  Client c(server.port());
  c.send(request_text("GET", "/stream"));
  const Response r = c.read();
  ASSERT_EQ(r.chunks.size(), 40u);
  for (int i = 0; i < 40; ++i)
    EXPECT_EQ(r.chunks[i], (i % 3 == 0 ? "plain " : "made ") + std::to_string(i) + "\n");

  Client t(server.port());
  t.send(request_text("GET", "/throws"));
  EXPECT_TRUE(t.wait_eof(2000ms));
  EXPECT_TRUE(eventually([&] { return server.open_connections() <= 1; }));
}

TEST(HttpServer, AnswersFromAnotherThread) {
  Worker engine;
  std::atomic<std::thread::id> io_thread{};
  Server server(local_config(), [&](Request req, std::shared_ptr<Exchange> ex) {
    io_thread = std::this_thread::get_id();
    engine.post([req = std::move(req), ex] {
      if (req.path == "/stream") {
        ASSERT_TRUE(ex->start_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}}));
        for (int i = 0; i < 60; ++i) {
          if (i % 20 == 0) std::this_thread::sleep_for(5ms);
          EXPECT_TRUE(ex->send("event " + std::to_string(i) + "\n"));
        }
        ex->finish();
      } else {
        std::this_thread::sleep_for(20ms);
        ex->respond(201, "application/json", "{\"later\":true}");
      }
    });
  });
  server.run();
  Client c(server.port());
  c.send(request_text("GET", "/stream"));
  const Response s = c.read();
  ASSERT_EQ(s.chunks.size(), 60u);
  for (int i = 0; i < 60; ++i) EXPECT_EQ(s.chunks[i], "event " + std::to_string(i) + "\n");
  c.send(request_text("POST", "/whole", "{}"));
  const Response w = c.read();
  EXPECT_EQ(w.status, 201);
  EXPECT_EQ(w.body, "{\"later\":true}");
  EXPECT_NE(io_thread.load(), std::this_thread::get_id());
}

TEST(HttpServer, ThousandConcurrentStreamsOnTwoThreads) {
  constexpr std::size_t kStreams = 1000;
  constexpr int kRounds = 20;
  const std::size_t fds = test_client::raise_fd_limit();
  if (fds < 2 * kStreams + 100) {
    GTEST_SKIP() << "RLIMIT_NOFILE hard limit " << fds << " is below the " << 2 * kStreams + 100
                 << " descriptors 1,000 client and 1,000 server sockets need (raise `ulimit -Hn`)";
  }
  Held held;
  std::mutex tags_mu;
  std::map<const Exchange*, std::string> tags;  // exchange -> its client's index, from the query
  Server server(local_config(), [&](Request req, std::shared_ptr<Exchange> ex) {
    ex->start_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
    {
      std::lock_guard lk(tags_mu);
      tags[ex.get()] = req.query.substr(2);  // "i=N"
    }
    held.put(std::move(ex));
  });
  server.run();

  const auto t0 = Clock::now();
  std::vector<std::unique_ptr<Client>> clients;
  clients.reserve(kStreams);
  for (std::size_t i = 0; i < kStreams; ++i) {
    clients.push_back(std::make_unique<Client>(server.port()));
    clients.back()->send(request_text("GET", "/v1/stream?i=" + std::to_string(i)));
  }

  // The engine: once every stream is open, chunks round-robin to all of them, then finish.
  std::atomic<std::size_t> open_at_peak{0};
  std::atomic<bool> all_sends_ok{true};
  std::thread engine([&] {
    if (!held.wait(kStreams - 1, 20000ms)) return;
    open_at_peak = server.open_connections();
    const auto streams = held.all();
    std::vector<std::string> names;
    {
      std::lock_guard lk(tags_mu);
      for (const auto& s : streams) names.push_back(tags.at(s.get()));
    }
    for (int r = 0; r < kRounds; ++r) {
      for (std::size_t i = 0; i < streams.size(); ++i) {
        if (!streams[i]->send(names[i] + ":" + std::to_string(r) + "\n")) all_sends_ok = false;
      }
    }
    for (const auto& s : streams) s->finish();
  });

  std::vector<test_client::ResponseParser> parsers(kStreams);
  std::vector<Response> done(kStreams);
  std::vector<bool> finished(kStreams, false);
  std::size_t remaining = kStreams;
  std::vector<pollfd> polls(kStreams);
  const auto deadline = Clock::now() + 25s;
  char buf[8192];
  while (remaining > 0 && Clock::now() < deadline) {
    for (std::size_t i = 0; i < kStreams; ++i) polls[i] = {finished[i] ? -1 : clients[i]->fd(), POLLIN, 0};
    if (::poll(polls.data(), polls.size(), 1000) <= 0) continue;
    for (std::size_t i = 0; i < kStreams; ++i) {
      if (finished[i] || !(polls[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::recv(clients[i]->fd(), buf, sizeof buf, 0);
      if (n <= 0) {
        ADD_FAILURE() << "stream " << i << " closed before its end";
        finished[i] = true;
        --remaining;
        continue;
      }
      if (parsers[i].feed(std::string_view(buf, static_cast<std::size_t>(n)))) {
        done[i] = parsers[i].take();
        finished[i] = true;
        --remaining;
      }
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  engine.join();
  std::printf("[ timing ] %zu concurrent streams x %d chunks on 2 I/O threads: %.3f s (connect to last chunk)\n",
              kStreams, kRounds, seconds);
  ::testing::Test::RecordProperty("thousand_streams_seconds", std::to_string(seconds));

  ASSERT_EQ(remaining, 0u) << "streams still incomplete after 25 s";
  EXPECT_EQ(open_at_peak.load(), kStreams);
  EXPECT_TRUE(all_sends_ok);
  for (std::size_t i = 0; i < kStreams; ++i) {
    ASSERT_EQ(done[i].status, 200);
    ASSERT_EQ(done[i].chunks.size(), static_cast<std::size_t>(kRounds)) << "stream " << i;
    for (int r = 0; r < kRounds; ++r) {
      ASSERT_EQ(done[i].chunks[r], std::to_string(i) + ":" + std::to_string(r) + "\n");
    }
  }
  clients.clear();
  EXPECT_TRUE(eventually([&] { return server.open_connections() == 0; }, 5000ms));
}

// ---- bad input ----

class BadInput : public ::testing::Test {
 protected:
  void start(Limits limits) {
    server_ = std::make_unique<Server>(local_config(limits), [this](Request req, std::shared_ptr<Exchange> ex) {
      ++handled_;
      ex->respond(200, "text/plain", std::to_string(req.body.size()));
    });
    server_->run();
  }
  // Sends `text`, expects `status` and the connection closed after it.
  void expect_rejected(const std::string& text, int status) {
    Client c(server_->port());
    c.send(text);
    const Response r = c.read(3000ms);
    EXPECT_EQ(r.status, status) << text.substr(0, 80);
    EXPECT_EQ(r.header("connection"), "close");
    EXPECT_TRUE(c.wait_eof(3000ms));
  }
  void expect_still_serving() {
    Client c(server_->port());
    c.send(request_text("POST", "/", "abc"));
    const Response r = c.read();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "3");
  }
  std::unique_ptr<Server> server_;
  std::atomic<int> handled_{0};
};

TEST_F(BadInput, MalformedRequestsGet400) {
  start({});
  expect_rejected("GARBAGE\r\n\r\n", 400);
  expect_rejected("GET / HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n", 400);
  expect_rejected("POST / HTTP/1.1\r\nContent-Length: twelve\r\n\r\n", 400);
  expect_rejected("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400);
  expect_rejected(std::string("GET / HTTP/1.1\r\nX: a\0b\r\n\r\n", 26), 400);
  expect_rejected("GET / HTTP/1.2\r\nHost: x\r\n\r\n", 400);
  expect_rejected("GET / HTTP/2.0\r\nHost: x\r\n\r\n", 400);
  EXPECT_EQ(handled_, 0);
  expect_still_serving();
  EXPECT_TRUE(eventually([&] { return server_->open_connections() == 0; }));
}

TEST_F(BadInput, BodyOverLimitGets413WithoutSendingIt) {
  Limits limits;
  limits.max_body_bytes = 1024;
  start(limits);
  // Only the header is sent: the announced length alone earns the 413.
  expect_rejected("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n", 413);
  // A chunked body is counted as it arrives.
  expect_rejected("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n7d0\r\n" + std::string(2000, 'x') +
                      "\r\n0\r\n\r\n",
                  413);
  EXPECT_EQ(handled_, 0);
  Client c(server_->port());
  c.send(request_text("POST", "/", std::string(1024, 'y')));  // exactly the limit
  EXPECT_EQ(c.read().body, "1024");
  EXPECT_EQ(handled_, 1);
}

TEST_F(BadInput, HeadersOverLimitGet431) {
  start({});
  expect_rejected(request_text("GET", "/", "", "X-Big: " + std::string(20000, 'h') + "\r\n"), 431);
  // Sent without the blank line: the limit is hit before the header ends.
  expect_rejected("GET / HTTP/1.1\r\nX-Big: " + std::string(17000, 'h'), 431);
  EXPECT_EQ(handled_, 0);
  expect_still_serving();
}

TEST_F(BadInput, StalledRequestGets408AndIsClosed) {
  Limits limits;
  limits.read_timeout = 300ms;
  limits.idle_timeout = 300ms;
  start(limits);
  {
    Client c(server_->port());
    const auto t0 = Clock::now();
    c.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhalf");
    const Response r = c.read(3000ms);
    const auto waited = Clock::now() - t0;
    EXPECT_EQ(r.status, 408);
    EXPECT_GE(waited, 250ms);
    EXPECT_LT(waited, 2500ms);
    EXPECT_TRUE(c.wait_eof(3000ms));
  }
  {
    // A keep-alive connection with no next request is closed after idle_timeout.
    Client c(server_->port());
    c.send(request_text("GET", "/"));
    EXPECT_EQ(c.read().status, 200);
    EXPECT_TRUE(c.wait_eof(3000ms));
  }
  {
    // A connection that never sends a byte is closed too, without an answer.
    Client c(server_->port());
    EXPECT_TRUE(c.wait_eof(3000ms));
  }
  EXPECT_EQ(handled_, 1);
  EXPECT_TRUE(eventually([&] { return server_->open_connections() == 0; }));
}

TEST_F(BadInput, ExpectContinueGetsAnInterimResponse) {
  start({});
  Client c(server_->port());
  c.send("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
  pollfd p{c.fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 2000), 1);
  char buf[64];
  const ssize_t n = ::recv(c.fd(), buf, sizeof buf, 0);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, static_cast<std::size_t>(n)), "HTTP/1.1 100 Continue\r\n\r\n");
  c.send("hello");
  EXPECT_EQ(c.read().body, "5");
}

// ---- clients that leave or do not read ----

TEST(HttpServer, DisconnectMidStreamFiresOnClose) {
  Held held;
  std::promise<void> closed;
  auto closed_at = std::make_shared<std::atomic<Clock::rep>>(0);
  Server server(local_config(), [&](Request, std::shared_ptr<Exchange> ex) {
    ex->on_close([&closed, closed_at] {
      closed_at->store(Clock::now().time_since_epoch().count());
      closed.set_value();
    });
    ex->start_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
    ex->send("first\n");
    held.put(std::move(ex));
  });
  server.run();
  auto c = std::make_unique<Client>(server.port());
  c->send(request_text("GET", "/stream"));
  EXPECT_EQ(c->read_until_chunks(1).chunks.at(0), "first\n");
  const auto ex = held.wait(0);
  ASSERT_TRUE(ex);
  EXPECT_FALSE(ex->closed());
  EXPECT_EQ(server.open_connections(), 1u);
  const auto left = Clock::now();
  c.reset();  // the client goes away; the handler never calls send again
  ASSERT_EQ(closed.get_future().wait_for(1s), std::future_status::ready) << "on_close did not fire within 1 s";
  EXPECT_LT(Clock::time_point(Clock::duration(closed_at->load())) - left, 1s);
  EXPECT_TRUE(ex->closed());
  EXPECT_FALSE(ex->send("too late\n"));
  ex->finish();  // harmless after the close
  EXPECT_TRUE(eventually([&] { return server.open_connections() == 0; }, 1000ms));
  // Registered after the close: runs at once.
  bool late = false;
  ex->on_close([&] { late = true; });
  EXPECT_TRUE(late);
}

TEST(HttpServer, HandlerThatNeverAnswersDoesNotOutliveItsClient) {
  Held held;
  Server server(local_config(), [&](Request, std::shared_ptr<Exchange> ex) { held.put(std::move(ex)); });
  server.run();
  auto c = std::make_unique<Client>(server.port());
  c->send(request_text("POST", "/never", "x"));
  const auto ex = held.wait(0);
  ASSERT_TRUE(ex);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(server.open_connections(), 1u);  // no timeout while the handler holds the request
  std::atomic<bool> fired{false};
  ex->on_close([&] { fired = true; });
  c.reset();
  EXPECT_TRUE(eventually([&] { return server.open_connections() == 0; }, 1000ms));
  EXPECT_TRUE(eventually([&] { return fired.load(); }, 1000ms));
  EXPECT_TRUE(ex->closed());
  ex->respond(200, "text/plain", "nobody hears this");  // a no-op, not an error
}

TEST(HttpServer, SlowReaderIsCutOffWithoutStallingOthers) {
  Limits limits;
  limits.max_stream_queue = 256 << 10;
  Worker producer;
  std::promise<std::pair<bool, std::size_t>> result;  // the failed send's result, bytes accepted before it
  std::atomic<bool> on_close_fired{false};
  Server server(local_config(limits), [&](Request req, std::shared_ptr<Exchange> ex) {
    if (req.path != "/slow") {
      ex->respond(200, "text/plain", "fast");
      return;
    }
    ex->on_close([&] { on_close_fired = true; });
    ex->start_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
    producer.post([ex, &result] {
      const std::string chunk(16 << 10, 'z');
      std::size_t total = 0;
      bool ok = true;
      while (ok && total < (512u << 20)) {
        ok = ex->send(chunk);
        if (ok) total += chunk.size();
      }
      result.set_value({ok, total});
    });
  });
  server.run();
  Client slow(server.port(), 4096);
  slow.send(request_text("GET", "/slow"));  // and never reads

  const auto t0 = Clock::now();
  Client fast(server.port());
  fast.send(request_text("GET", "/fast"));
  EXPECT_EQ(fast.read(2000ms).body, "fast");
  EXPECT_LT(Clock::now() - t0, 2s);

  auto f = result.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready) << "the producer was never told to stop";
  const auto [ok, total] = f.get();
  EXPECT_FALSE(ok);
  // Kernel socket buffers absorb some, the queue at most its cap: far below what was offered.
  EXPECT_LT(total, 64u << 20);
  EXPECT_GE(total, limits.max_stream_queue - (16u << 10));
  EXPECT_TRUE(eventually([&] { return on_close_fired.load(); }, 1000ms));
  fast.close();
  EXPECT_TRUE(eventually([&] { return server.open_connections() == 0; }, 2000ms));
}

// ---- handler failures and misuse ----

TEST(HttpServer, HandlerFailuresAnswer500AndServingGoesOn) {
  Server server(local_config(), [](Request req, std::shared_ptr<Exchange> ex) {
    if (req.path == "/throw") throw std::runtime_error("handler bug");
    if (req.path == "/throw-mid-stream") {
      ex->start_stream(200, "text/event-stream");
      ex->send("partial\n");
      throw std::runtime_error("bug after the stream began");
    }
    if (req.path == "/drop") return;  // the exchange is dropped unanswered
    if (req.path == "/drop-stream") {
      ex->start_stream(200, "text/event-stream");
      return;
    }
    echo(req, *ex);
  });
  server.run();
  Client c(server.port());
  c.send(request_text("GET", "/throw"));
  Response r = c.read();
  EXPECT_EQ(r.status, 500);
  c.send(request_text("GET", "/drop"));
  EXPECT_EQ(c.read().status, 500);
  c.send(request_text("GET", "/ok"));  // the same connection goes on
  EXPECT_EQ(c.read().body, "GET /ok  - ");

  for (const char* path : {"/throw-mid-stream", "/drop-stream"}) {
    Client s(server.port());
    s.send(request_text("GET", path));
    EXPECT_THROW(s.read(), std::runtime_error) << path;  // closed without the terminating chunk
  }
  Client after(server.port());
  after.send(request_text("GET", "/ok"));
  EXPECT_EQ(after.read().status, 200);
}

TEST(HttpServer, MisuseThrowsApiErrors) {
  std::promise<std::vector<std::string>> seen;
  Server server(local_config(), [&](Request, std::shared_ptr<Exchange> ex) {
    std::vector<std::string> errors;
    auto attempt = [&](auto f) {
      try {
        f();
        errors.push_back("none");
      } catch (const Error& e) {
        errors.push_back(e.kind() == ErrorKind::Api ? "api" : "other");
      }
    };
    attempt([&] { ex->send("before start"); });
    attempt([&] { ex->respond(200, "text/plain", "x", {{"X-Evil", "a\r\nInjected: yes"}}); });
    attempt([&] { ex->respond(200, "text/plain", "x", {{"Content-Length", "5"}}); });
    attempt([&] { ex->respond(42, "text/plain", "x"); });
    ex->respond(200, "text/plain", "fine");
    attempt([&] { ex->respond(200, "text/plain", "again"); });
    attempt([&] { ex->start_stream(200, "text/event-stream"); });
    seen.set_value(errors);
  });
  server.run();
  Client c(server.port());
  c.send(request_text("GET", "/"));
  const Response r = c.read();
  EXPECT_EQ(r.body, "fine");
  EXPECT_FALSE(r.header("injected").has_value());
  auto f = seen.get_future();
  ASSERT_EQ(f.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(f.get(), (std::vector<std::string>{"api", "api", "api", "api", "api", "api"}));
}

// ---- lifecycle ----

TEST(HttpServer, StopAcceptingDrainsThenStopCloses) {
  Held drained;
  Held cut_off;
  Server server(local_config(), [&](Request req, std::shared_ptr<Exchange> ex) {
    if (req.path == "/stream") {
      ex->start_stream(200, "text/event-stream");
      (req.query == "drain" ? drained : cut_off).put(std::move(ex));
    } else {
      echo(req, *ex);
    }
  });
  server.run();
  Client draining(server.port());
  draining.send(request_text("GET", "/stream?drain"));
  Client cut(server.port());
  cut.send(request_text("GET", "/stream?cut"));
  const auto finishing = drained.wait(0);
  const auto unfinished = cut_off.wait(0);
  ASSERT_TRUE(finishing && unfinished);
  std::atomic<int> closes{0};
  finishing->on_close([&] { ++closes; });
  unfinished->on_close([&] { ++closes; });

  server.stop_accepting();
  EXPECT_THROW(Client late(server.port()), std::runtime_error);  // refused
  server.stop_accepting();                                       // idempotent

  // Open exchanges go on: a stream finishes, and its connection serves another request.
  EXPECT_TRUE(finishing->send("still here\n"));
  finishing->finish();
  const Response r = draining.read();
  ASSERT_EQ(r.chunks.size(), 1u);
  EXPECT_EQ(r.chunks[0], "still here\n");
  draining.send(request_text("GET", "/again"));
  EXPECT_EQ(draining.read().body, "GET /again  - ");
  EXPECT_EQ(server.open_connections(), 2u);

  server.stop();
  EXPECT_TRUE(draining.wait_eof(2000ms));
  EXPECT_TRUE(cut.wait_eof(2000ms));
  EXPECT_EQ(server.open_connections(), 0u);
  EXPECT_EQ(closes, 1);  // the unfinished stream saw its client cut off; the finished one did not
  EXPECT_TRUE(unfinished->closed());
  EXPECT_FALSE(unfinished->send("after stop"));
  server.stop();  // idempotent
}

TEST(HttpServer, EphemeralPortAndBindFailure) {
  Server a(local_config(), [](Request, std::shared_ptr<Exchange> ex) { ex->respond(204, "", ""); });
  ASSERT_NE(a.port(), 0);
  Config same = local_config();
  same.port = a.port();
  EXPECT_THROW(Server(same, [](Request, std::shared_ptr<Exchange>) {}), Error);
  a.run();
  Client c(a.port());
  c.send(request_text("GET", "/"));
  const Response r = c.read();
  EXPECT_EQ(r.status, 204);
  EXPECT_EQ(r.header("content-length"), "0");
  EXPECT_FALSE(r.header("content-type").has_value());
}

TEST(HttpServer, ConnectionsBeyondTheLimitGet503) {
  Limits limits;
  limits.max_connections = 2;
  Server server(local_config(limits), [](Request req, std::shared_ptr<Exchange> ex) { echo(req, *ex); });
  server.run();
  Client a(server.port());
  Client b(server.port());
  ASSERT_TRUE(eventually([&] { return server.open_connections() == 2; }));
  Client over(server.port());
  EXPECT_EQ(over.read().status, 503);
  a.send(request_text("GET", "/a"));
  EXPECT_EQ(a.read().status, 200);
}

}  // namespace
}  // namespace kern::http
