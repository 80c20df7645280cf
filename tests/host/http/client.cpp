#include "client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace kern::http::test_client {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

[[noreturn]] void sys_fail(const char* what) { throw std::runtime_error(std::string(what) + ": " + std::strerror(errno)); }

}  // namespace

std::optional<std::string> Response::header(std::string_view name) const {
  const std::string want = lower(name);
  for (const auto& [n, v] : headers) {
    if (n == want) return v;
  }
  return std::nullopt;
}

bool ResponseParser::feed(std::string_view data) {
  buf_.append(data);
  while (stage_ != Stage::Done && step()) {
  }
  return done();
}

bool ResponseParser::eof() {
  if (stage_ == Stage::UntilClose) {
    response_.body += buf_;
    buf_.clear();
    stage_ = Stage::Done;
  }
  return done();
}

Response ResponseParser::take() {
  Response out = std::move(response_);
  response_ = {};
  stage_ = Stage::Head;
  while (stage_ != Stage::Done && step()) {
  }
  return out;
}

bool ResponseParser::step() {
  switch (stage_) {
    case Stage::Head: {
      const auto end = buf_.find("\r\n\r\n");
      if (end == std::string::npos) return false;
      const std::string head = buf_.substr(0, end);
      buf_.erase(0, end + 4);
      response_ = {};
      auto line_end = head.find("\r\n");
      const std::string status_line = head.substr(0, line_end);
      if (status_line.rfind("HTTP/1.", 0) != 0 || status_line.size() < 12) {
        throw std::runtime_error("bad status line: " + status_line);
      }
      response_.status = std::stoi(status_line.substr(9, 3));
      while (line_end != std::string::npos) {
        const auto start = line_end + 2;
        line_end = head.find("\r\n", start);
        const std::string line = head.substr(start, line_end == std::string::npos ? std::string::npos : line_end - start);
        const auto colon = line.find(':');
        if (colon == std::string::npos) throw std::runtime_error("bad header line: " + line);
        response_.headers.emplace_back(lower(line.substr(0, colon)), trim(line.substr(colon + 1)));
      }
      if (response_.status >= 100 && response_.status < 200) return true;  // interim: the real one follows
      const auto te = response_.header("transfer-encoding");
      const auto cl = response_.header("content-length");
      if (te && lower(*te) == "chunked") {
        response_.chunked = true;
        stage_ = Stage::ChunkSize;
      } else if (cl) {
        remaining_ = std::stoul(*cl);
        stage_ = Stage::Length;
      } else {
        stage_ = Stage::UntilClose;
      }
      return true;
    }
    case Stage::Length: {
      const std::size_t n = std::min(remaining_, buf_.size());
      response_.body.append(buf_, 0, n);
      buf_.erase(0, n);
      remaining_ -= n;
      if (remaining_ == 0) stage_ = Stage::Done;
      return stage_ == Stage::Done;
    }
    case Stage::ChunkSize: {
      const auto end = buf_.find("\r\n");
      if (end == std::string::npos) return false;
      remaining_ = std::stoul(buf_.substr(0, end), nullptr, 16);
      buf_.erase(0, end + 2);
      if (remaining_ == 0) {
        stage_ = Stage::ChunkEnd;
      } else {
        response_.chunks.emplace_back();
        stage_ = Stage::ChunkData;
      }
      return true;
    }
    case Stage::ChunkData: {
      if (buf_.size() < remaining_ + 2) return false;
      if (buf_.compare(remaining_, 2, "\r\n") != 0) throw std::runtime_error("chunk not followed by CRLF");
      response_.chunks.back().assign(buf_, 0, remaining_);
      response_.body.append(buf_, 0, remaining_);
      buf_.erase(0, remaining_ + 2);
      stage_ = Stage::ChunkSize;
      return true;
    }
    case Stage::ChunkEnd: {
      if (buf_.size() < 2) return false;
      if (buf_.compare(0, 2, "\r\n") != 0) throw std::runtime_error("trailers are not expected");
      buf_.erase(0, 2);
      stage_ = Stage::Done;
      return false;
    }
    case Stage::UntilClose:
      response_.body += buf_;
      buf_.clear();
      return false;
    case Stage::Done:
      return false;
  }
  return false;
}

Client::Client(std::uint16_t port, int rcvbuf) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) sys_fail("socket");
  if (rcvbuf > 0 && ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf) != 0) sys_fail("SO_RCVBUF");
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const int e = errno;
    ::close(fd_);
    fd_ = -1;
    errno = e;
    sys_fail("connect");
  }
}

Client::~Client() { close(); }

void Client::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Client::send(std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      sys_fail("send");
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

bool Client::read_some(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return false;
  pollfd p{fd_, POLLIN, 0};
  const int r = ::poll(&p, 1, static_cast<int>(left.count()));
  if (r < 0 && errno == EINTR) return true;
  if (r < 0) sys_fail("poll");
  if (r == 0) return false;
  char buf[16384];
  const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
  if (n < 0 && errno == EINTR) return true;
  if (n <= 0) {
    eof_ = true;
    return true;
  }
  parser_.feed(std::string_view(buf, static_cast<std::size_t>(n)));
  return true;
}

Response Client::read(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!parser_.done()) {
    if (eof_) {
      if (parser_.eof()) break;
      throw std::runtime_error("connection closed before a whole response");
    }
    if (!read_some(deadline)) throw std::runtime_error("timed out waiting for a response");
  }
  return parser_.take();
}

const Response& Client::read_until_chunks(std::size_t chunks, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!parser_.done() && !(parser_.head_done() && parser_.current().chunks.size() >= chunks)) {
    if (eof_) throw std::runtime_error("connection closed mid-stream");
    if (!read_some(deadline)) throw std::runtime_error("timed out waiting for chunks");
  }
  return parser_.current();
}

bool Client::wait_eof(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!eof_) {
    if (!read_some(deadline)) return false;
  }
  return true;
}

std::string request_text(std::string_view method, std::string_view target, std::string_view body,
                         std::string_view extra_headers) {
  std::string out;
  out.append(method).append(" ").append(target).append(" HTTP/1.1\r\nHost: localhost\r\n");
  out.append(extra_headers);
  if (!body.empty()) out.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  out.append("\r\n").append(body);
  return out;
}

std::size_t raise_fd_limit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
    ::getrlimit(RLIMIT_NOFILE, &lim);
  }
  return static_cast<std::size_t>(lim.rlim_cur);
}

}  // namespace kern::http::test_client
