#include "kern/serve/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kern::serve {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  std::lock_guard<std::mutex> l(mu_);
  const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), v);
  ++counts_[static_cast<std::size_t>(it - bounds_.begin())];
  sum_ += v;
  ++n_;
}

std::uint64_t Histogram::count() const {
  std::lock_guard<std::mutex> l(mu_);
  return n_;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
  std::lock_guard<std::mutex> l(mu_);
  std::string out = fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  std::uint64_t cum = 0;
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cum);
  }
  cum += counts_.back();
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, cum, name, sum_, name, n_);
  return out;
}

namespace {
std::vector<double> latency_bounds() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
}
std::vector<double> token_bounds() {
  return {0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5};
}
}  // namespace

ServeMetrics::ServeMetrics()
    : ttft_(latency_bounds()), tpot_(token_bounds()), e2e_(latency_bounds()), queue_(latency_bounds()) {}

void ServeMetrics::observe(const RequestTimes& t) {
  ttft_.observe(t.ttft_s);
  e2e_.observe(t.e2e_s);
  queue_.observe(t.queue_s);
  if (t.output_tokens > 1 && t.decode_s > 0) tpot_.observe(t.decode_s / static_cast<double>(t.output_tokens - 1));
}

void ServeMetrics::count_request(bool ok) {
  std::lock_guard<std::mutex> l(mu_);
  ++(ok ? ok_ : failed_);
}

std::string ServeMetrics::render(const EngineMetrics& e, const std::string& model) const {
  const std::string lab = fmt::format("{{model_name=\"{}\"}}", model);
  std::string out;
  auto gauge = [&](const char* name, const char* help, double v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{}{} {}\n", name, help, name, name, lab, v);
  };
  auto counter = [&](const char* name, const char* help, std::uint64_t v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{}{} {}\n", name, help, name, name, lab, v);
  };
  gauge("kern:num_requests_running", "Sequences in the running batch.", static_cast<double>(e.running));
  gauge("kern:num_requests_waiting", "Sequences waiting to be admitted.", static_cast<double>(e.waiting));
  gauge("kern:kv_cache_usage_perc",
        "Fraction of KV pages the running requests hold (1 = full); pages only the prefix cache holds count as "
        "free, since an eviction gives them back.",
        e.kv_usage);
  gauge("kern:kv_cache_active_pages", "KV pages the running requests hold (shared pages once).",
        static_cast<double>(e.pages_active));
  gauge("kern:kv_cache_used_pages", "KV pages held (leases, checkpoints, the prefix index, the runner's padding page).",
        static_cast<double>(e.pages_used));
  gauge("kern:kv_cache_total_pages", "Live KV pages of the pool.", static_cast<double>(e.pages_total));
  counter("kern:prefix_cache_queries_total", "Prompts looked up in the prefix index.", e.prefix_queries);
  counter("kern:prefix_cache_hits_total", "Prompts that started from the prefix index.", e.prefix_hits);
  counter("kern:prefix_cache_hit_tokens_total", "Prompt tokens served by the prefix index.", e.cached_tokens);
  counter("kern:num_preemptions_total", "Running sequences that gave their pages back.", e.preemptions);
  counter("kern:host_tier_parks_total", "Cold prefix entries whose pages were copied to the host tier.", e.host_parks);
  counter("kern:host_tier_wakes_total", "Prompts that started from a parked prefix entry (pages copied back).",
          e.host_wakes);
  counter("kern:host_tier_dropped_total", "Parked prefix entries dropped to make host room.", e.host_dropped);
  gauge("kern:host_tier_usage_perc", "Fraction of the host tier held (0 without one).",
        e.host_bytes_total ? static_cast<double>(e.host_bytes_used) / static_cast<double>(e.host_bytes_total) : 0.0);
  counter("kern:prompt_tokens_total", "Prompt tokens submitted.", e.prompt_tokens);
  counter("kern:generation_tokens_total", "Tokens generated.", e.generation_tokens);
  counter("kern:engine_steps_total", "Scheduler steps run.", e.steps);
  counter("kern:engine_prefill_rows_total", "Prompt rows prefilled (prefix-cache hits not counted).", e.prefill_rows);
  counter("kern:engine_prefill_calls_total", "Prefill calls (each one chunk, or several requests' chunks packed).",
          e.prefill_calls);
  counter("kern:engine_decode_calls_total", "Decode calls (one per step that had running sequences).", e.decode_calls);
  counter("kern:engine_decode_rows_total", "Rows of the decode calls (before padding to a bucket).", e.decode_rows);
  counter("kern:engine_mixed_calls_total", "Steps whose chunks and decode rows ran as one forward.", e.mixed_calls);
  out += fmt::format("# HELP kern:engine_step_seconds_total Engine-thread wall time by phase: the runner's prefill "
                     "calls, its decode calls, its mixed calls and the rest of each step.\n"
                     "# TYPE kern:engine_step_seconds_total counter\n");
  for (const auto& [phase, v] : {std::pair<const char*, double>{"prefill", e.prefill_s}, {"decode", e.decode_s},
                                 {"mixed", e.mixed_s}, {"host", e.host_s}})
    out += fmt::format("kern:engine_step_seconds_total{{model_name=\"{}\",phase=\"{}\"}} {:.6f}\n", model, phase, v);
  out += fmt::format("# HELP kern:engine_overlap_seconds_total Of the decode calls' time: the engine thread telling "
                     "sinks the previous step's tokens while the call ran.\n"
                     "# TYPE kern:engine_overlap_seconds_total counter\n"
                     "kern:engine_overlap_seconds_total{} {:.6f}\n",
                     lab, e.overlap_s);
  {
    std::lock_guard<std::mutex> l(mu_);
    out += fmt::format(
        "# HELP kern:request_success_total Requests answered.\n# TYPE kern:request_success_total counter\n"
        "kern:request_success_total{} {}\n"
        "# HELP kern:request_failure_total Requests answered with an error after admission (clients that left not counted).\n"
        "# TYPE kern:request_failure_total counter\nkern:request_failure_total{} {}\n",
        lab, ok_, lab, failed_);
  }
  out += ttft_.render("kern:time_to_first_token_seconds", "Time from arrival to the first token.");
  out += tpot_.render("kern:time_per_output_token_seconds", "Mean time between a request's tokens after the first.");
  out += e2e_.render("kern:e2e_request_latency_seconds", "Time from arrival to the last token.");
  out += queue_.render("kern:request_queue_time_seconds", "Time from arrival to the first step that worked on it.");
  return out;
}

}  // namespace kern::serve
