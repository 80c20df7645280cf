// kern bench: the arithmetic and the report (pure), and the measurements on one GPU.
//
// Pure part (bench_model.cpp, bench_report.cpp; host-tested): bytes one decode step must move,
// model FLOPs of a prefill, medians, floors and ratios, the targets of issue 5, the table and
// the JSON document, and the PyTorch peer's JSON. Measuring part (bench_measure.cpp; built with
// the runtime): ceilings, decode replays at a context, the host loop per token, prefill, per-call
// times, start-up of a child `kern run`. See docs/perf.md.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kern/base/json.hpp"
#include "kern/bench/pool_bench.hpp"
#include "kern/models/qwen3_shape.hpp"

namespace kern::bench {

// KV-cache bytes per token over all layers (K and V, bf16).
std::uint64_t kv_bytes_per_token(const models::Qwen3Shape& s);
// Weight bytes one decode step reads: every layer's matrices and norms, the final norm, the
// whole lm_head, one embedding row; bf16, except the layers' matrices at `matrix_bytes` per element
// (1 for kern gen --fp8's e4m3 layer weights; their per-tensor scales are not counted).
std::uint64_t decode_weight_bytes(const models::Qwen3Shape& s, std::uint64_t matrix_bytes = 2);
// KV bytes one decode step at `context` tokens reads (every cached position, K and V).
std::uint64_t decode_kv_bytes(const models::Qwen3Shape& s, std::uint64_t context);
// Model FLOPs of a prefill of `tokens` tokens producing one next token: 2 × rows × the layers'
// matrix elements, causal attention (QKᵀ and PV over positions ≤ each row's), and the lm_head for
// the last row only. Independent of the chunking.
double prefill_flops(const models::Qwen3Shape& s, std::uint64_t tokens);
double gemm_flops(std::uint64_t m, std::uint64_t n, std::uint64_t k);

// Median (mean of the two middle values for an even count). Error(Api) on an empty list.
double median(std::vector<double> v);

struct Ceilings {
  std::uint64_t copy_bytes = 0;  // bytes of one device-to-device copy
  double copy_ms = 0;            // median GPU ms of one copy
  double copy_gbps = 0;          // (read + written) bytes / s / 1e9 = 2 × copy_bytes / copy_ms
  std::uint64_t gemm_m = 0, gemm_n = 0, gemm_k = 0;
  double gemm_ms = 0;
  double gemm_tflops = 0;
  CopyCeiling h2d, d2h;  // pinned host -> device and device -> host (bytes 0: not measured)
};
// Ceilings from measured medians. Error(Api) for a zero time or size.
Ceilings make_ceilings(std::uint64_t copy_bytes, double copy_ms, std::uint64_t m, std::uint64_t n, std::uint64_t k,
                       double gemm_ms);

struct DecodePoint {
  std::uint64_t context = 0;
  std::size_t replays = 0;
  double gpu_step_us = 0;  // median GPU time of one graph replay
  double e2e_us = 0;       // median host time per token (writes, replay, sync, readback); 0 if not measured
  std::uint64_t weight_bytes = 0, kv_bytes = 0, bytes = 0;
  double floor_us = 0;  // bytes / copy bandwidth
  double ratio = 0;     // gpu_step_us / floor_us
};
// Error(Api) when a sample list is empty or the bandwidth is not positive.
// `matrix_bytes` as decode_weight_bytes'.
DecodePoint make_decode_point(const models::Qwen3Shape& s, std::uint64_t context, const std::vector<double>& step_ms,
                              const std::vector<double>& e2e_ms, double copy_gbps, std::uint64_t matrix_bytes = 2);

struct PrefillPoint {
  std::uint64_t tokens = 0, chunk = 0;
  double ms = 0;  // median time to the first token
  double tokens_per_s = 0;
  double flops = 0, tflops = 0;
  double gemm_fraction = 0;  // tflops / the measured GEMM ceiling (0 when no ceiling)
};
PrefillPoint make_prefill_point(const models::Qwen3Shape& s, std::uint64_t tokens, std::uint64_t chunk,
                                const std::vector<double>& ms, double gemm_tflops);

struct OpShare {
  std::string op;
  std::uint64_t calls = 0;
  double us = 0;     // summed median GPU time of its calls in one step
  double share = 0;  // of the step's summed call time
};
// (op, ms) per call -> per-op totals, largest first (name order on ties).
std::vector<OpShare> op_shares(const std::vector<std::pair<std::string, double>>& call_ms);

// Decode at batch B (kern serve's step: every sequence at the same context, one row each).
struct BatchedPoint {
  std::uint64_t batch = 0, context = 0, bucket = 0;  // bucket: the graph's group count
  double gpu_step_us = 0;  // median graph replay
  double call_us = 0;      // median wall time of the serve runner's decode call (inputs, replay, readback)
  std::uint64_t bytes = 0;  // weights + batch x KV at the context
  double floor_us = 0, ratio = 0;  // bytes / copy bandwidth; gpu_step_us / floor_us
  double tokens_per_s = 0;         // batch / call time
  std::vector<OpShare> ops;        // per-op profile (empty: not profiled)
};
// Error(Api) when a sample list is empty or the bandwidth is not positive.
BatchedPoint make_batched_point(const models::Qwen3Shape& s, std::uint64_t batch, std::uint64_t context,
                                std::uint64_t bucket, const std::vector<double>& step_ms,
                                const std::vector<double>& call_ms, double copy_gbps, std::uint64_t matrix_bytes = 2);

// The per-op profile of one prefill of `tokens` tokens (chunk = prompt): the prefill program's
// one call over its first `rows` = tokens − 1 rows (the last token's one-row step is not in it).
struct PrefillOps {
  std::uint64_t tokens = 0;
  std::uint64_t rows = 0;
  std::vector<OpShare> ops;
};

struct Startup {
  bool measured = false;
  std::string note;           // why not, when not measured
  double first_token_ms = 0;  // child process start -> first stdout byte (warm page cache)
  std::uint64_t weight_bytes = 0;
  double weight_ms = 0;
  double weight_gbps = 0;
};

// What the PyTorch peer measured (the subset of kern's keys it reports).
struct Peer {
  bool ran = false;
  std::string note;                   // why it did not run, or its device / torch version
  std::vector<DecodePoint> decode;    // context, gpu_step_us, e2e_us
  std::vector<PrefillPoint> prefill;  // tokens, chunk, ms, tokens_per_s
};
// Parses the peer's JSON document. Error(Api) naming the field for a malformed one.
Peer parse_peer_json(const std::string& text, const std::string& what);

struct Target {
  std::string name;
  std::string rule;  // e.g. "<= 1.20"
  double measured = 0;
  bool pass = false;
};

struct Report {
  std::string date, machine, command, model;
  models::Qwen3Shape shape;  // the checkpoint's, from its config.json (only the sizes are used here)
  Ceilings ceilings;
  std::vector<DecodePoint> decode;
  std::vector<BatchedPoint> batched;  // --batches (none: no section, no JSON key)
  std::vector<PrefillPoint> prefill;
  Startup startup;
  std::vector<OpShare> ops;
  std::uint64_t op_context = 0;         // context of the per-op profile
  std::vector<PrefillOps> prefill_ops;  // per-op profiles of prefills (none: no section, no JSON key)
  PoolFigures pool;                     // issue 16 (not measured: a note, no targets)
  Peer peer;
  // kern bench --gpus (issue 20): the same shape generated with --tp N, every rank in this process.
  struct TensorParallel {
    std::uint64_t ranks = 0;
    std::string gpus;       // "0,1": rank r's GPU
    std::string allreduce;  // which all-reduce each call size takes
    std::uint64_t context = 0;
    double decode_e2e_us = 0;    // median host µs per token at the context (kern run's per-token work)
    double one_rank_e2e_us = 0;  // the one-GPU manifest's e2e at the same context (0: not measured)
    std::vector<PrefillPoint> prefill;  // whole prompts in one chunk
  };
  std::optional<TensorParallel> tensor_parallel;  // none: no section, no JSON key
};

// Issue 18's targets for the report's shape (the 4B shape's list; the 0.6B and 8B shapes' decode
// limits, 1.6 and 1.2 × the floor; a shape that is no preset gets the 4B list), issue 5's host-loop
// and start-up limits, then issue 16's (pool_targets), for what the report holds (a target whose
// figure is missing is left out).
std::vector<Target> evaluate_targets(const Report& r);
// The targets section's heading: which shape's list it is.
std::string targets_heading(const Report& r);
// The human table (stdout).
std::string format_table(const Report& r);
// The JSON document (--json): every figure, the targets and the peer's figures and ratios.
nlohmann::ordered_json to_json(const Report& r);

// "128,1024" -> {128, 1024}; Error(Api) naming `what` for an empty or non-positive item.
std::vector<std::uint64_t> parse_sizes(const std::string& text, const std::string& what);

}  // namespace kern::bench

// ---- Decode inputs at a chosen context (bench_inputs.cpp; over any driver::Executor) ----

namespace kern::core {
class Protocol;
}  // namespace kern::core
namespace kern::driver {
class Executor;
}

namespace kern::bench {

// One sequence's decode step at any context without a prefill: writes the protocol's inputs
// directly (token, position, that position's slot, the page-table rows covering the positions,
// seq_len, cu_seqlens) as changed prefixes, the way kern run's generator does per step. The
// pages come from one lease of the executor's state pool, extended a page at a time.
class DecodeInputs {
 public:
  // Error(Manifest) without a one-row program writing the 'tokens' fill, without token /
  // position / seq_len fills, or with line tables or a tray axis; Error(Api) with paged states
  // and an executor without a state pool.
  DecodeInputs(const core::Protocol& protocol, driver::Executor& executor);
  ~DecodeInputs();
  DecodeInputs(const DecodeInputs&) = delete;
  DecodeInputs& operator=(const DecodeInputs&) = delete;

  const std::string& step_program() const;
  // The var table of one step whose sequence holds `context` tokens.
  std::map<std::string, std::uint64_t> step_vars(std::uint64_t context) const;
  // Drops the lease (the pages go back to the pool) and forgets what the inputs hold, then writes
  // the inputs of a step at position context − 1. Error(Api) for context 0 or past the capacity /
  // a table row.
  void start(std::uint64_t context, std::int64_t token);
  // Writes the inputs of a step at position `pos` (≥ the last position written) that changed:
  // token, position, slot, seq_len, and the new page-table entry when a page begins.
  void write(std::uint64_t pos, std::int64_t token);
  // Writes the inputs of a step at `pos` but its token (what a step writes ahead for the next).
  void write_ahead(std::uint64_t pos);
  // One host step at position `pos`: write(pos, token) (with `ahead` before it only the token is
  // left to write), then the step program runs and group 0's token (8 bytes for i64) comes back
  // with one synchronization (Executor::run_and_read); with `ahead` the inputs of a step at pos + 1
  // but its token are written while the program runs (kern run's loop), so pos + 2 positions must
  // fit. Error(Call) for a negative token.
  std::int64_t step(std::uint64_t pos, std::int64_t token, bool ahead = true);
  // The output holding the emitted tokens.
  const std::string& tokens_buffer() const;

 private:
  struct State;
  State* s_;
};

}  // namespace kern::bench

// ---- Measuring (bench_measure.cpp; needs the runtime and a GPU) ----

namespace kern::runtime {
class Runtime;
}

namespace kern::bench {

// Device-to-device copy of `copy_bytes`, a bf16 GEMM m = n = k = `gemm_size`, and (pinned_bytes
// > 0) a host -> device and a device -> host copy of `pinned_bytes` of pinned host memory
// (cuMemHostAlloc) on GPU `gpu`, each timed with events, `reps` times after a warm-up; medians.
Ceilings measure_ceilings(int gpu, std::uint64_t copy_bytes, std::uint64_t gemm_size, std::size_t reps,
                          std::uint64_t pinned_bytes = 0);

// Median µs per token of each host-loop phase (DecodeBench::phases).
struct HostPhases {
  std::size_t steps = 0;
  double write_us = 0;   // the token's write (domain check, staging, H2D queued): the rest is ahead
  double launch_us = 0;  // Runtime::launch: var assignment, cuGraphLaunch
  double ahead_us = 0;   // the next step's inputs but the token, written while the program runs
  double wait_us = 0;    // the token's D2H queued, the one wait (program, copies, readback), wake-up
  double total_us = 0;
};

// One sequence's decode step at a chosen context, driven through the protocol without a prefill:
// the inputs are written directly (token, position context − 1, its slot, the page-table rows
// covering the context, seq_len = context).
class DecodeBench {
 public:
  // Error(Manifest) when the protocol has no one-row token-emitting program. How far the context
  // can go is the runtime's state pool's (Executor::seq_limits).
  DecodeBench(const core::Protocol& protocol, runtime::Runtime& runtime);
  ~DecodeBench();
  DecodeBench(const DecodeBench&) = delete;
  DecodeBench& operator=(const DecodeBench&) = delete;

  // Writes one step's inputs at `context` (≥ 1). Error(Api) past the capacity.
  void set_context(std::uint64_t context, std::int64_t token);
  // GPU ms of `replays` back-to-back graph replays at the context set last.
  std::vector<double> gpu_step_ms(std::size_t replays);
  // Host ms per token of `steps` decode steps, each at exactly the context set last, so that it
  // compares with gpu_step_ms: before each (untimed) the sequence is put back to context − 1 tokens
  // with the step's inputs but the token in place (what the previous step of kern run's loop writes
  // ahead while it runs) and waited for; the timed step is kern run's per-token work: the token
  // written, the step program launched, the next step's inputs written meanwhile, the token read
  // back with one synchronization. (A continuous loop's context grows by one per token, and the
  // GPU step with it: see loop_ms.) A context of 1: loop_ms.
  std::vector<double> e2e_ms(std::size_t steps);
  // Host ms per token of `steps` consecutive steps from the context set last, each feeding back
  // the token the previous one produced (the context grows to context + steps − 1), as kern run's
  // loop does.
  std::vector<double> loop_ms(std::size_t steps);
  // The host loop's phases, median µs per token over `steps` consecutive steps from the context set
  // last, in kern run's order (token written, launch, next inputs written ahead, the token read
  // with the one wait), through Runtime::launch and read_output instead of run_and_read.
  HostPhases phases(std::size_t steps);
  // (op, ms) per call of one eager step at the context set last.
  std::vector<std::pair<std::string, double>> call_ms(std::size_t reps);

 private:
  // With KERN_BENCH_HOSTLOOP_DETAIL set (not "0"), e2e_ms also prints to stderr one line per
  // context: replays, its own figure, loop_ms and phases, each minus the GPU step.
  void print_hostloop_detail(const std::vector<double>& fixed_ms, std::size_t steps);

  struct State;
  State* s_;
};

// Wall ms of `reps` prefills of `tokens` tokens (after one warm-up) through kern run's generator
// (chunks of `chunk` rows; the first token from the last chunk, or with `first_token_from_step`
// from the one-row call after chunks of the first tokens − 1 rows: driver::GeneratorOptions).
std::vector<double> measure_prefill_ms(const core::Protocol& protocol, runtime::Runtime& runtime, std::uint64_t tokens,
                                       std::uint64_t chunk, std::uint64_t vocab, std::size_t reps,
                                       bool first_token_from_step = false);
// The same through any executor (kern bench --gpus: every rank of a tensor-parallel manifest).
std::vector<double> measure_prefill_ms(const core::Protocol& protocol, driver::Executor& executor, std::uint64_t tokens,
                                       std::uint64_t chunk, std::uint64_t vocab, std::size_t reps,
                                       bool first_token_from_step = false);
// DecodeBench::e2e_ms through any executor: `steps` timed steps at `context` (≥ 2), `wait` waiting for
// everything the executor launched (before each timed step). With an `error` fill, its words are read
// after each step (untimed) and a non-zero one fails the measurement (ErrorKind::Call).
std::vector<double> decode_e2e_ms(const core::Protocol& protocol, driver::Executor& executor,
                                  const std::function<void()>& wait, std::uint64_t context, std::int64_t token,
                                  std::size_t steps);

// The calls of the prefill program's one call in a prefill of `tokens` tokens with chunk =
// tokens, as measure_prefill_ms runs it: just before that call runs (its inputs written by kern
// run's generator), Runtime::time_calls runs it eagerly `reps` times after a warm-up with events
// around each call; then the generation goes on as usual. `rows` is that call's row count.
// Error(Api) / Error(Manifest) when the prompt's rows do not fit one call of the prefill program
// (one_call_prefill_program).
struct PrefillCallTimes {
  std::uint64_t rows = 0;
  std::vector<std::pair<std::string, double>> ms;  // (op, ms) per call
};
PrefillCallTimes prefill_call_ms(const core::Protocol& protocol, runtime::Runtime& runtime, std::uint64_t tokens,
                                 std::uint64_t vocab, std::size_t reps, bool first_token_from_step = false);

// Runs `argv` (argv[0] = the executable) and returns the wall ms from just before the fork to
// the child's first stdout byte; the rest of its output is read and dropped, its stderr goes to
// `stderr_path`. nullopt with `why` set when it writes nothing, exits non-zero or exceeds
// `timeout_s`.
std::optional<double> time_to_first_output(const std::vector<std::string>& argv, const std::string& stderr_path,
                                           int timeout_s, std::string& why);

// Runs `argv` with its stdout sent to this process's stderr; returns its exit status (127 when
// it cannot be started), or −1 after `timeout_s` (it is then killed).
int run_child(const std::vector<std::string>& argv, int timeout_s);

}  // namespace kern::bench
