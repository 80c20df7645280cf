// Ways of cutting a text into streamed pieces, for the parsers' property tests: every single cut,
// every pair of cuts (short texts), one byte at a time, and seeded random multi-cuts. Plus log
// helpers: capture kern::log() warnings, or silence them for loops that log on every run.
#pragma once

#include <spdlog/sinks/ostream_sink.h>

#include <cstddef>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "kern/base/log.hpp"

namespace kern::test {

using Pieces = std::vector<std::string_view>;

inline Pieces cut_at(std::string_view text, const std::vector<std::size_t>& cuts) {
  Pieces pieces;
  std::size_t at = 0;
  for (std::size_t c : cuts) {
    pieces.push_back(text.substr(at, c - at));
    at = c;
  }
  pieces.push_back(text.substr(at));
  return pieces;
}

// Calls fn(pieces) for each way of cutting `text` listed above. Pairs of cuts only when
// text.size() <= pair_limit.
template <typename Fn>
void for_each_split(std::string_view text, Fn&& fn, std::size_t pair_limit = 160, int random_runs = 200) {
  const std::size_t n = text.size();
  fn(Pieces{text});
  for (std::size_t i = 0; i <= n; ++i) fn(cut_at(text, {i}));
  if (n <= pair_limit) {
    for (std::size_t i = 1; i < n; ++i) {
      for (std::size_t j = i + 1; j < n; ++j) fn(cut_at(text, {i, j}));
    }
  }
  std::vector<std::size_t> every;
  for (std::size_t i = 1; i < n; ++i) every.push_back(i);
  fn(cut_at(text, every));
  std::mt19937 rng(static_cast<unsigned>(n) * 7919u + 1u);
  for (int run = 0; run < random_runs; ++run) {
    std::vector<std::size_t> cuts;
    std::uniform_int_distribution<int> step(0, 8);
    for (std::size_t at = static_cast<std::size_t>(step(rng)); at < n; at += static_cast<std::size_t>(step(rng))) {
      cuts.push_back(at);  // a step of 0 makes an empty piece
    }
    fn(cut_at(text, cuts));
  }
}

// kern::log() messages while alive.
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_)) {
    sink_->set_pattern("%l: %v");
    log().sinks().push_back(sink_);
  }
  ~LogCapture() { std::erase(log().sinks(), sink_); }
  std::string text() const { return stream_.str(); }

 private:
  std::ostringstream stream_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

// kern::log() below error while alive.
class QuietLog {
 public:
  QuietLog() : level_(log().level()) { log().set_level(spdlog::level::err); }
  ~QuietLog() { log().set_level(level_); }

 private:
  spdlog::level::level_enum level_;
};

}  // namespace kern::test
