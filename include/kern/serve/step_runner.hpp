// What the engine asks of a model for one scheduler step: prefill calls (each one chunk, or several
// sequences' chunks packed) and one decode call over many sequences. ProtocolRunner drives a
// manifest's programs through driver::Executor (the GPU); FakeRunner is a deterministic token source
// for tests without one.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "kern/core/protocol.hpp"
#include "kern/driver/driver.hpp"
#include "kern/driver/sampling.hpp"
#include "kern/pool/lease.hpp"

namespace kern::serve {

struct ChunkCall {
  const pool::Lease* lease = nullptr;
  std::span<const std::uint64_t> slots;  // token slots of positions [first, first + tokens)
  std::span<const std::int32_t> tokens;
  std::uint64_t first = 0;
};
struct DecodeCall {
  const pool::Lease* lease = nullptr;
  std::uint64_t slot = 0;  // token slot of `position`
  std::int32_t token = 0;  // fed at `position`
  std::uint64_t position = 0;
  const driver::SamplingParams* sampling = nullptr;
  // For penalized or biased sampling: the sequence (unique for the engine's life) and its generated
  // tokens so far, `token` last; the runner writes only what a row's `history` does not hold yet.
  std::uint64_t seq = 0;
  std::span<const std::int32_t> generated;
  // >= 0: a prompt position scored rather than decoded (echo with log-probs): the row's token is
  // this one (the prompt's next token) instead of a draw, and its K/V go to the runner's padding
  // page, not the sequence's (the prefill wrote those; `slot` is not used).
  std::int64_t forced = -1;
};
struct Sampled {
  std::int64_t token = 0;
  std::optional<driver::TokenLogprobs> logprobs;  // when the row's sampling asked for them
};

class StepRunner {
 public:
  virtual ~StepRunner() = default;
  // One prefill call over `chunks` (at least one, at most prefill_chunks(), of different sequences;
  // max_chunk() rows in all at most): their K/V written, nothing returned.
  virtual void prefill(std::span<const ChunkCall> chunks) = 0;
  void prefill(const ChunkCall& chunk) { prefill(std::span<const ChunkCall>(&chunk, 1)); }
  // One token per row, in order. `while_running` (may be empty) runs on the calling thread once the
  // call is launched and before the runner waits for it: host work that overlaps the GPU's (the
  // engine tells sinks the previous step's tokens there). It must not touch the runner.
  virtual std::vector<Sampled> decode(std::span<const DecodeCall> rows,
                                      const std::function<void()>& while_running = {}) = 0;
  virtual std::uint64_t max_rows() const = 0;   // sequences one decode call takes
  virtual std::uint64_t max_chunk() const = 0;  // rows one prefill call takes (over all its chunks)
  virtual std::uint64_t prefill_chunks() const { return 1; }  // chunks one prefill call packs
  // A mixed step: `rows` (decode rows, at least one) and `chunks` (at least one) as one forward,
  // the chunks' K/V written before any row reads them; one token per decode row, in order. Only
  // when mixed_chunks() > 0: at most that many chunks, and decode rows plus chunk rows at most
  // mixed_rows().
  virtual std::uint64_t mixed_chunks() const { return 0; }
  virtual std::uint64_t mixed_rows() const { return 0; }
  virtual std::vector<Sampled> mixed(std::span<const ChunkCall> chunks, std::span<const DecodeCall> rows);
  // Error(Api) naming what the model cannot do for these settings and up to `max_new` generated
  // tokens (penalties without a history fill, or over more tokens than it holds, ...); with
  // `prompt_logprobs`, also scoring the prompt (forced rows with log-probs).
  virtual void check(const driver::SamplingParams& sampling, std::uint64_t max_new,
                     bool prompt_logprobs = false) const = 0;
};

// The rows of a prefill call that keeps StepRunner::prefill's contract (1 to max_chunks chunks of
// different sequences, each of at least one row and a slot per row, max_rows rows in all);
// Error(Api) naming `who` otherwise. Both runners check their calls with it.
std::uint64_t prefill_call_rows(std::span<const ChunkCall> chunks, std::uint64_t max_chunks, std::uint64_t max_rows,
                                std::string_view who);

// The manifest's chunk program for prefill and its batch program of one row per group for decode,
// padded to a bucket of groups (powers of two up to the program's bound) so a graph is captured
// per bucket, not per batch size; padding rows run a one-token dummy sequence in `pad`'s page.
class ProtocolRunner final : public StepRunner {
 public:
  // `pad` must be a lease of at least one position; it stays the runner's.
  ProtocolRunner(const core::Protocol& protocol, driver::Executor& exec, pool::Lease pad, std::uint64_t max_rows);
  ~ProtocolRunner() override;
  using StepRunner::prefill;
  // The chunk program: one chunk per call, or as many as a packed program's groups.
  void prefill(std::span<const ChunkCall> chunks) override;
  std::uint64_t prefill_chunks() const override;
  std::vector<Sampled> decode(std::span<const DecodeCall> rows,
                              const std::function<void()>& while_running = {}) override;
  std::uint64_t max_rows() const override;
  std::uint64_t max_chunk() const override;
  // The manifest's mixed program (Protocol::mixed), when it has one: eager, one group per decode row
  // (no padding), then one per chunk.
  std::uint64_t mixed_chunks() const override;
  std::uint64_t mixed_rows() const override;
  std::vector<Sampled> mixed(std::span<const ChunkCall> chunks, std::span<const DecodeCall> rows) override;
  void check(const driver::SamplingParams& sampling, std::uint64_t max_new, bool prompt_logprobs = false) const override;
  std::uint64_t bucket(std::uint64_t rows) const;  // the padded group count for `rows` rows
  // One decode call per bucket over padding rows only, so every bucket's graph is captured before
  // the first request. Returns the buckets run.
  std::vector<std::uint64_t> warm_up();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// A model without a model: the token after `token` at `position` is fake_next(token, position)
// (for sampled rows mixed with the seed; a forced row's is its forced token), and every call takes
// `step_us` of wall time, from its start (a decode call's while_running runs inside it, as it would
// beside a GPU). Log-probs are made up but well-formed (descending, the chosen one first).
// A logit bias moves the fake token as it would a model's: the lowest id biased by 50 or more wins,
// and a token biased by -50 or less gives way to the next id that is not (fake_biased).
std::int64_t fake_next(std::int64_t token, std::uint64_t position, std::uint64_t vocab);
std::int64_t fake_biased(std::int64_t token, const driver::SamplingParams& sampling, std::uint64_t vocab);
class FakeRunner final : public StepRunner {
 public:
  // mixed_chunks > 0: it takes mixed steps too (the chunks, then the rows, as the two calls would).
  // prefill_chunks > 1: it packs that many chunks per prefill call.
  FakeRunner(std::uint64_t vocab, std::uint64_t max_rows, std::uint64_t max_chunk, std::uint64_t step_us = 0,
             std::uint64_t mixed_chunks = 0, std::uint64_t prefill_chunks = 1);
  using StepRunner::prefill;
  void prefill(std::span<const ChunkCall> chunks) override;
  std::uint64_t prefill_chunks() const override { return prefill_chunks_; }
  std::uint64_t prefill_calls() const { return prefill_calls_; }
  std::vector<Sampled> decode(std::span<const DecodeCall> rows,
                              const std::function<void()>& while_running = {}) override;
  std::uint64_t max_rows() const override { return max_rows_; }
  std::uint64_t max_chunk() const override { return max_chunk_; }
  std::uint64_t mixed_chunks() const override { return mixed_chunks_; }
  std::uint64_t mixed_rows() const override { return mixed_chunks_ ? max_chunk_ : 0; }
  std::vector<Sampled> mixed(std::span<const ChunkCall> chunks, std::span<const DecodeCall> rows) override;
  std::uint64_t mixed_calls() const { return mixed_calls_; }
  std::uint64_t decode_calls() const { return decode_calls_; }
  // True while a decode call's while_running runs (what it does overlaps the fake step).
  bool in_decode() const { return in_decode_; }
  void check(const driver::SamplingParams& sampling, std::uint64_t max_new, bool prompt_logprobs = false) const override;
  std::uint64_t prefill_rows() const { return prefill_rows_; }

 private:
  std::uint64_t vocab_, max_rows_, max_chunk_, step_us_, mixed_chunks_, prefill_chunks_, prefill_rows_ = 0,
      prefill_calls_ = 0, mixed_calls_ = 0, decode_calls_ = 0;
  bool in_decode_ = false;
};

}  // namespace kern::serve
