// kern serve's /metrics: Prometheus text format (version 0.0.4) under the names vLLM users graph
// (kern:num_requests_running, kern:time_to_first_token_seconds, ...). Histograms and counters are
// thread-safe; the engine's own figures come in as an EngineMetrics snapshot.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "kern/serve/engine.hpp"

namespace kern::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);  // upper bounds, ascending; +Inf is implicit
  void observe(double v);
  // `name_bucket{le="..."} n` lines, `name_sum`, `name_count`.
  std::string render(const std::string& name, const std::string& help) const;
  std::uint64_t count() const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<std::uint64_t> counts_;  // per bucket (not cumulative)
  double sum_ = 0;
  std::uint64_t n_ = 0;
};

struct RequestTimes {
  double queue_s = 0, ttft_s = 0, e2e_s = 0;
  std::uint64_t output_tokens = 0;  // over all samples
  double decode_s = 0;              // last token minus first, over the first sample
};

class ServeMetrics {
 public:
  ServeMetrics();
  void observe(const RequestTimes& t);
  void count_request(bool ok);
  std::string render(const EngineMetrics& engine, const std::string& model) const;

 private:
  Histogram ttft_, tpot_, e2e_, queue_;
  mutable std::mutex mu_;
  std::uint64_t ok_ = 0, failed_ = 0;
};

}  // namespace kern::serve
