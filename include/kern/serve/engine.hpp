// The engine: one thread that owns the model (a StepRunner over the Runtime) and the scheduler.
// HTTP threads only submit requests and read what their TokenSink is told; the engine thread
// plans a step, runs its prefill chunks and its decode call, commits the sampled tokens and tells
// each request's sink, in order: a step's tokens are told while the next step's decode call runs
// on the GPU (or before the next step's first call when it is not a decode call alone). A sink
// whose client went away is noticed once per step and its sequences end (their pages go back)
// before the next step is planned.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kern/driver/sampling.hpp"
#include "kern/serve/scheduler.hpp"
#include "kern/serve/step_runner.hpp"

namespace kern::serve {

// Told, on the engine thread, what happens to a request's samples. Must not block.
class TokenSink {
 public:
  virtual ~TokenSink() = default;
  // A sample's next token. Returning false ends that sample now as End::Stopped (a stop string).
  virtual bool on_token(std::uint64_t sample, std::int64_t token, const driver::TokenLogprobs* logprobs) = 0;
  // A sample ended (after its last on_token, if any). `cached`: prompt tokens the prefix index served.
  virtual void on_end(std::uint64_t sample, End why, std::uint64_t cached) = 0;
  // The engine failed; no more calls follow for this request.
  virtual void on_error(const std::string& message) = 0;
  // The first step that works on the request (a prefill chunk or a decode row) is being run.
  virtual void on_scheduled() {}
  // The prompt's log-probs (EngineRequest::prompt_logprobs): entry i is prompt token i + 1's given
  // the tokens before it (the first token has none). Called once, before the first on_token.
  virtual void on_prompt_logprobs(const std::vector<driver::TokenLogprobs>& /*logprobs*/) {}
  // Polled once per step: true when the client went away (every sample then ends Cancelled).
  virtual bool cancelled() const = 0;
};

struct EngineRequest {
  SeqSpec spec;
  driver::SamplingParams sampling;  // sample i of n draws with seed + i
  std::shared_ptr<TokenSink> sink;
  // Score the prompt (echo with log-probs): once its K/V are in place, every prompt position is run
  // as a decode row forced to the prompt's next token, `sampling.logprobs` top entries each, before
  // the first generated token (docs/serve.md, "Prompt log-probs").
  bool prompt_logprobs = false;
  // Nothing generated is told (max_tokens 0 with echo): the engine runs the request with one token to
  // generate (spec.max_new is set to 1) and tells its sink on_prompt_logprobs (if asked) and on_end.
  bool score_only = false;
};

struct EngineConfig {
  SchedulerConfig scheduler;
  std::uint64_t idle_wait_ms = 50;  // how long the idle thread sleeps between looks at its queues
};

struct EngineMetrics {
  std::uint64_t running = 0, waiting = 0;
  double kv_usage = 0.0;  // pages the running sequences hold / live pages (prefix-only pages count as free)
  std::uint64_t preemptions = 0, prefix_queries = 0, prefix_hits = 0, cached_tokens = 0;
  std::uint64_t prompt_tokens = 0, generation_tokens = 0, steps = 0, prefill_rows = 0;
  std::uint64_t pages_used = 0, pages_total = 0, pages_active = 0;
  // The host tier (--host-gib): prefix entries parked there, prompts woken from it, parked entries
  // dropped for room, and its bytes.
  std::uint64_t host_parks = 0, host_wakes = 0, host_dropped = 0, host_bytes_used = 0, host_bytes_total = 0;
  // Where the engine thread's steps went (wall seconds): the runner's prefill calls, its decode
  // calls, and the rest of a step (planning, committing, the sinks). decode_rows counts rows.
  double prefill_s = 0, decode_s = 0, host_s = 0;
  std::uint64_t prefill_calls = 0;  // the runner's prefill calls (each one chunk or several packed)
  std::uint64_t decode_calls = 0, decode_rows = 0;
  double mixed_s = 0;            // the runner's mixed calls (decode rows with chunks), not in prefill_s / decode_s
  // Of decode_s: the engine thread telling sinks the last step's tokens while a decode call ran (a
  // step that is one decode call alone overlaps that work with the GPU's; other steps do it first, in host_s).
  double overlap_s = 0;
  std::uint64_t mixed_calls = 0;  // steps whose chunks and decode rows ran as one forward (also decode calls)
};

class Engine {
 public:
  Engine(EngineConfig config, Pages& pages, StepRunner& runner);
  ~Engine();  // stops the thread (open requests get on_error)
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  enum class Submitted { Queued, QueueFull, Stopping };
  // Thread-safe. Error(Api) for a request the model cannot serve (sampling it cannot do).
  Submitted submit(EngineRequest request);
  // Several requests queued together or not at all (a completions request's batch of prompts): each
  // checked as submit checks it, then all of their samples against the waiting queue's room at once.
  Submitted submit_all(std::vector<EngineRequest> requests);
  void start();
  // Ends every open request with on_error(`why`) and joins the thread. Idempotent.
  void stop(const std::string& why = "the server is shutting down");
  std::uint64_t open_requests() const;  // submitted and not yet ended (thread-safe)
  EngineMetrics metrics() const;         // a snapshot taken after the last step (thread-safe)
  const SchedulerConfig& scheduler_config() const { return config_.scheduler; }

 private:
  struct Open {
    std::shared_ptr<TokenSink> sink;
    driver::SamplingParams sampling;
    std::uint64_t samples = 0;  // still live
    std::vector<SeqId> seqs;
    bool scheduled = false;
    bool score_prompt = false;  // prompt log-probs wanted and not yet told
    bool score_only = false;    // EngineRequest::score_only
  };
  void loop();
  void step();
  // The prompt log-probs of `seq`'s request (its K/V for positions below the prompt's last are in
  // place): forced decode rows in calls of at most the runner's bound. Returns the decode seconds.
  double score_prompt(SeqId seq, Open& o, std::uint64_t request);
  void take_submissions();
  // Tells the sinks the tokens committed so far (pending_), in order, and ends the samples they end.
  void deliver();
  void end_seq(SeqId seq, End why);
  // Runs a sink call; if it throws, that request alone fails (on_error, its sequences end).
  bool guarded(std::uint64_t request, const std::function<void()>& f);

  EngineConfig config_;
  Pages& pages_;
  StepRunner& runner_;
  Scheduler scheduler_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<EngineRequest> inbox_;
  bool stopping_ = false;
  std::atomic<std::uint64_t> open_{0};
  EngineMetrics metrics_;
  std::map<std::uint64_t, Open> open_requests_;  // engine thread only
  std::map<SeqId, std::pair<std::uint64_t, std::uint64_t>> seq_owner_;  // seq -> (request, sample)
  std::map<SeqId, std::uint64_t> cached_;  // prompt tokens the prefix index served, once it decodes
  std::uint64_t next_request_ = 1;
  bool defer_ends_ = false;  // between a step's plan and its commit (guarded, deliver)
  // Sequences of requests failed then, or stopped by their sink, ended in the scheduler after the commit.
  std::vector<std::pair<SeqId, End>> deferred_ends_;
  // A step's committed tokens, told to their sinks while the next step's decode call runs (deliver).
  struct Pending {
    SeqId seq = 0;
    std::int64_t token = 0;
    std::optional<End> end;
    std::optional<driver::TokenLogprobs> logprobs;
  };
  std::vector<Pending> pending_;
  std::uint64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  std::thread thread_;
};

}  // namespace kern::serve
