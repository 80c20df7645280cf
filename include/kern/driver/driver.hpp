// kern-driver: greedy single-sequence generation over the serving protocol.
//
// The caller contract (docs/run.md): the first n−1 prompt tokens go through the chunk program
// in chunks of `chunk` rows, the last prompt token through the one-row program (the tightest
// fixed one-row program covering one group) for the first token; then one (1, 1) call per step.
// Only the input elements that changed are written (InputShadow: one ranged write per changed
// input), so a decode step writes token, position, slot and seq_len, plus the one new page-table
// entry when a new page begins; it runs and reads its token back with one synchronization, and
// the next step's position, slot, seq_len (and page entry) are written while it runs, so only the
// token is written between one step's wait and the next launch. Greedy argmax runs on the device: the driver reads the
// `tokens` fill output after each call. The driver names nothing itself: every buffer and program comes from
// manifest::Protocol. The sequence's pages come from the executor's state pool (one pool::Lease,
// extended a page at a time): its page-table rows and token slots are the lease's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kern/driver/input_shadow.hpp"
#include "kern/driver/sampling.hpp"
#include "kern/base/error.hpp"
#include "kern/core/protocol.hpp"
#include "kern/pool/pool.hpp"
#include "kern/runtime/vars.hpp"

namespace kern::driver {

// What one sequence can hold in a state pool (pool::Pool's unit(), row_pages(), total()).
struct SeqLimits {
  std::uint64_t unit = 1;         // tokens per page
  std::uint64_t row_pages = 0;    // pages one page-table row lists (the pool's pages without page tables)
  std::uint64_t total_pages = 0;  // live pages of the pool
  // Tokens one sequence can reach: min(row_pages, total_pages) * unit.
  std::uint64_t max_tokens() const { return std::min(row_pages, total_pages) * unit; }
};
SeqLimits limits_of(const pool::Pool& pool);

// A pure pool::Pool for `manifest` sized for `capacity` (pool::PoolConfig::from_capacity) with
// chunks of the smallest pooled object (one id per page): what a runtime loaded with that
// capacity grants a sequence (the same unit, row reach and pages). For a check made before the
// runtime loads (kern run) and for fake executors. nullopt when the manifest has no pooled state
// or capacity.tokens is absent or 0.
std::optional<pool::Pool> sized_pool(const core::Manifest& manifest, const pool::Capacity& capacity);

// What the driver needs from an executor (kern::Runtime through RuntimeExecutor; fakes in tests).
class Executor {
 public:
  virtual ~Executor() = default;
  virtual void write_input(std::string_view buffer, std::span<const std::byte> bytes, bool prefix) = 0;
  // Writes `bytes` at byte `offset` of an input, keeping its other bytes (the runtime checks the
  // range, element alignment and the domain of what is written).
  virtual void write_input_at(std::string_view buffer, std::uint64_t offset, std::span<const std::byte> bytes) = 0;
  virtual void run(std::string_view program, const core::Vars& vars) = 0;
  // Runs `program`, then fills `out` with the first out.size() bytes of output `buffer` (a decode
  // step: its 8-byte token); `before_wait` (may be empty) writes inputs of the next step while the
  // program runs. An executor may do all of it with one synchronization (the runtime: launch,
  // queued read, before_wait's copies, one wait). Default: run, read_output_prefix, before_wait.
  virtual void run_and_read(std::string_view program, const core::Vars& vars, std::string_view buffer,
                            std::span<std::byte> out, const std::function<void()>& before_wait) {
    run(program, vars);
    const std::vector<std::byte> got = read_output_prefix(buffer, out.size());
    if (got.size() < out.size())
      fail(ErrorKind::Api, "output {} holds {} bytes; {} were asked for", buffer, got.size(), out.size());
    std::copy(got.begin(), got.end(), out.begin());
    if (before_wait) before_wait();
  }
  virtual std::vector<std::byte> read_output(std::string_view buffer) = 0;
  virtual std::vector<std::byte> read_buffer(std::string_view name) = 0;
  // The first `bytes` bytes of an output (a decode step needs 8). Default: read all and cut.
  virtual std::vector<std::byte> read_output_prefix(std::string_view buffer, std::uint64_t bytes) {
    std::vector<std::byte> all = read_output(buffer);
    if (bytes < all.size()) all.resize(bytes);
    return all;
  }

  // ---- the state pool (kern::runtime::Runtime's lease API): a sequence's pages come from a lease
  // The pool's limits for one sequence; nullopt when the executor has no pool (no pooled states).
  virtual std::optional<SeqLimits> seq_limits() const = 0;
  // Fresh pages for `tokens` positions (Denied when they cannot be had now or ever).
  virtual pool::Granted<pool::Lease> lease(std::uint64_t tokens) = 0;
  // Grows `lease` to hold `tokens` positions; nullopt when granted.
  virtual std::optional<pool::Denied> extend(pool::Lease& lease, std::uint64_t tokens) = 0;
  // Waits until no remap is planned or in flight (after a Denied{Remapping}).
  virtual void settle() = 0;
};

// Makes `lease` hold `tokens` positions: a lease from `exec` when it holds none, else an extend;
// a Denied{Remapping} is answered by exec.settle() and one more try. nullopt when held.
std::optional<pool::Denied> hold_tokens(Executor& exec, pool::Lease& lease, std::uint64_t tokens);
// Error(Api) for `tokens` positions a pool with `limits` denied: one page-table row's reach for
// ExceedsRow (when there are page tables), else the KV capacity (ExceedsPool, Busy, ...).
[[noreturn]] void fail_positions(const SeqLimits& limits, bool page_tables, std::uint64_t tokens,
                                 const pool::Denied& denied);

// After a call: reads the protocol's `error` fill, when it has one, and fails (ErrorKind::Call) on
// the first non-zero word, naming it: "<what()> raised error flag <v> in <buffer>[<i>]". `what` is
// formatted only then.
void check_error_fill(const core::Protocol& protocol, Executor& exec, const std::function<std::string()>& what);

struct GeneratorOptions {
  std::uint64_t steps = 32;               // tokens to generate at most (≥ 1)
  std::uint64_t chunk = 512;              // prefill rows per call; capped by the chunk program's bound
  std::vector<std::int64_t> stop_tokens;  // generation stops after emitting one of these
  std::string logits_buffer;              // non-empty: read this output after every token-producing call
  SamplingParams sampling;                // greedy by default; anything else needs the sampling fills
  // The prompt's first generated token comes from the last prefill chunk when the chunk program
  // writes tokens (its lm_head and sampling op run on the chunk's last row) and every output read
  // after a token-producing call (logits buffer, log-probs); otherwise, or with this set, the
  // prompt's last position goes through the one-row step (kern serve's manifests, whose prefill
  // ends at the last layer). docs/perf.md, session 32.
  bool first_token_from_step = false;
};

enum class StopReason : std::uint8_t { Steps, StopToken };
std::string_view to_string(StopReason r);

// Hooks the caller uses for streaming, timing and logits dumps. Called in order.
class GenerationObserver {
 public:
  virtual ~GenerationObserver() = default;
  // Before the call that yields the first token: `prompt_tokens` positions of the prompt are in the
  // state (n − 1 when a one-row step yields it, else those before the last chunk).
  virtual void on_prefill_done(std::uint64_t prompt_tokens) {}
  // A token-producing call finished: `position` is the row it ran (the last prompt position, then
  // each generated token's position); `logits` is empty unless GeneratorOptions::logits_buffer.
  virtual void on_logits(std::uint64_t position, std::span<const float> logits) {}
  // The i-th generated token's log-probs (when SamplingParams asks for them), before on_token.
  virtual void on_logprobs(std::uint64_t index, const TokenLogprobs& logprobs) {}
  // The i-th generated token (0-based).
  virtual void on_token(std::uint64_t index, std::int64_t token) {}
};

struct GenerationResult {
  std::vector<std::int64_t> tokens;  // generated tokens (the stop token included)
  StopReason reason = StopReason::Steps;
  std::uint64_t chunk_calls = 0;  // prefill calls
  std::uint64_t step_calls = 0;   // (1, 1) calls (the first token's too when a one-row step yields it)
  std::uint64_t chunk_rows = 0;   // rows per prefill call actually used
};

// The smallest token capacity holding `tokens` positions, rounded up to the page unit of the
// protocol's page tables (`tokens` itself when there are none).
std::uint64_t capacity_for(const core::Protocol& protocol, std::uint64_t tokens);

// The float output read for logits when none is named: the one output without a fill role
// whose outer dim is the group axis; nullopt when there is not exactly one.
std::optional<std::string> find_logits_output(const core::Protocol& protocol);

class Generator {
 public:
  // Checks that the protocol can be driven for one sequence (token, position and seq_len fills,
  // a (1, 1) program emitting tokens, no per-sequence line tables, no tray axis), that the options
  // make sense and, with paged states, that the executor has a state pool (its seq_limits() are
  // read here, once). Error(Manifest) / Error(Api) otherwise.
  Generator(const core::Protocol& protocol, Executor& executor, GeneratorOptions options);

  // Runs one prompt (≥ 1 token) from an empty sequence. Error(Api) when prompt + steps cannot fit
  // the capacity, a page-table row or the position domain. May be called again for a new prompt
  // (the previous sequence's lease is dropped first).
  // `forced` (teacher forcing; kern test): when not empty, the i-th generated token is forced[i]
  // whatever the device produced (it is what is fed back, returned and passed to on_token), and
  // generation stops after min(steps, forced.size()) tokens or at a stop token among them.
  GenerationResult generate(std::span<const std::int64_t> prompt, GenerationObserver* observer = nullptr,
                            std::span<const std::int64_t> forced = {});
  // The Error(Api) generate() would raise for a prompt of this length (≥ 1), without running.
  void check_fits(std::uint64_t prompt_tokens) const;

  std::uint64_t chunk_rows() const { return chunk_rows_; }
  const core::Forward& step_program() const { return step_; }
  const std::optional<core::Forward>& chunk_program() const { return chunk_; }
  // Whether the last prefill chunk yields the first token (GeneratorOptions::first_token_from_step).
  bool first_token_from_chunk() const { return first_from_chunk_; }
  // Rows of a prompt of n tokens the chunk calls carry: all n when the last chunk yields the first
  // token, else n − 1 (the last goes through the one-row step).
  std::uint64_t chunked_rows(std::uint64_t n) const { return first_from_chunk_ ? n : n - 1; }
  // Positions a sequence can reach (the pool's pages, page-table reach and position domain).
  std::uint64_t max_positions() const { return max_positions_; }

 private:
  void write_fill(core::Fill role, const std::vector<std::int64_t>& values);
  // Holds pages for `end` positions (leases at the first call, then extends) and writes the
  // page-table entries that changed.
  void write_pages(std::uint64_t end);
  // Writes the inputs of rows at positions [first, first + rows) but their tokens: positions,
  // slots, valid flags, seq_len and cu_seqlens (only what changed).
  void write_rows(std::uint64_t first, std::uint64_t rows);
  // One call of `f` over rows `tokens` at positions [first, first + size); returns the token it
  // emitted when `emits` (else −1). `ahead` (emitting calls): a one-row step at position
  // first + size follows, and its inputs but the token are written while this call runs.
  std::int64_t call(const core::Forward& f, std::span<const std::int64_t> tokens, std::uint64_t first,
                    GenerationObserver* observer, bool emits, bool ahead);
  // The sampling fills for a call whose last row is at `position`, `generated` tokens into the answer.
  void write_sampling(std::uint64_t position, std::span<const std::int64_t> generated);
  // Checks the options' sampling settings against the fills the manifest has.
  void check_sampling() const;
  // Whether program `f` writes every output read after a token-producing call (the logits buffer,
  // log-probs) under these options.
  bool writes_what_a_step_is_read_for(const core::Forward& f) const;

  const core::Protocol& protocol_;
  Executor& exec_;
  GeneratorOptions options_;
  core::Forward step_;
  std::optional<core::Forward> chunk_;
  std::uint64_t chunk_rows_ = 1;
  bool first_from_chunk_ = false;
  std::uint64_t max_positions_ = 0;
  std::string max_positions_why_;
  bool paged_ = false;                     // the manifest has paged states: positions live in a lease
  SeqLimits limits_;                       // the pool's, when paged_
  pool::Lease lease_;                      // this sequence's pages (invalid until the first call)
  std::vector<std::vector<std::int64_t>> rows_;  // per page table: its row as the lease fills it
  std::vector<std::size_t> row_filled_;          // per page table: entries of rows_ filled
  std::uint64_t logits_width_ = 0;
  DType logits_dtype_ = DType::BF16;
  InputShadow inputs_;                // what each input buffer starts with; writes only what changed
  std::vector<std::int64_t> values_;  // per-call scratch (kept to avoid allocating per token)
  std::vector<std::int64_t> generated_;  // this answer's tokens so far (the `history` fill)
  std::optional<TokenLogprobs> logprobs_;  // the last emitting call's, when asked for
};

}  // namespace kern::driver
