// FakeRunner: a deterministic token source with the StepRunner's shape, so kern serve's HTTP
// path, scheduler and streaming can be tested without a GPU (kern serve --fake-engine).
#include <algorithm>
#include <chrono>
#include <thread>

#include "kern/serve/step_runner.hpp"

namespace kern::serve {

std::int64_t fake_next(std::int64_t token, std::uint64_t position, std::uint64_t vocab) {
  // Ids in [256, min(vocab, 20000)): ordinary word pieces of a BPE vocabulary, no special tokens.
  const std::uint64_t span = std::min<std::uint64_t>(vocab, 20000) - 256;
  std::uint64_t x = static_cast<std::uint64_t>(token) * 0x9e3779b97f4a7c15ull + position * 0xbf58476d1ce4e5b9ull + 1;
  x ^= x >> 29;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 32;
  return static_cast<std::int64_t>(256 + x % span);
}

FakeRunner::FakeRunner(std::uint64_t vocab, std::uint64_t max_rows, std::uint64_t max_chunk, std::uint64_t step_us,
                       std::uint64_t mixed_chunks, std::uint64_t prefill_chunks)
    : vocab_(vocab),
      max_rows_(max_rows),
      max_chunk_(max_chunk),
      step_us_(step_us),
      mixed_chunks_(mixed_chunks),
      prefill_chunks_(prefill_chunks) {
  if (vocab_ <= 512) fail(ErrorKind::Api, "fake engine: a vocabulary of {} ids is too small", vocab_);
  if (prefill_chunks_ < 1) fail(ErrorKind::Api, "fake engine: prefill calls of {} chunks", prefill_chunks_);
}

std::int64_t fake_biased(std::int64_t token, const driver::SamplingParams& sampling, std::uint64_t vocab) {
  const auto& bias = sampling.logit_bias;  // ascending ids
  for (const auto& [id, value] : bias)
    if (value >= 50.0f && static_cast<std::uint64_t>(id) < vocab) return id;
  auto banned = [&](std::int64_t t) {
    auto it = std::lower_bound(bias.begin(), bias.end(), std::pair<std::int32_t, float>(static_cast<std::int32_t>(t), -1e30f));
    return it != bias.end() && it->first == t && it->second <= -50.0f;
  };
  for (std::uint64_t k = 0; k < vocab && banned(token); ++k) token = (token + 1) % static_cast<std::int64_t>(vocab);
  return token;
}

void FakeRunner::check(const driver::SamplingParams& sampling, std::uint64_t, bool) const {
  driver::validate(sampling);
}

void FakeRunner::prefill(std::span<const ChunkCall> chunks) {
  prefill_rows_ += prefill_call_rows(chunks, prefill_chunks_, max_chunk_, "fake engine");
  ++prefill_calls_;
  if (step_us_) std::this_thread::sleep_for(std::chrono::microseconds(step_us_));
}

std::vector<Sampled> FakeRunner::decode(std::span<const DecodeCall> rows, const std::function<void()>& while_running) {
  if (rows.size() > max_rows_) fail(ErrorKind::Api, "fake engine: {} rows over {}", rows.size(), max_rows_);
  const auto start = std::chrono::steady_clock::now();
  ++decode_calls_;
  std::vector<Sampled> out(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const DecodeCall& r = rows[i];
    std::int64_t t = r.token;
    if (r.sampling && !r.sampling->greedy()) t ^= static_cast<std::int64_t>(r.sampling->seed & 0xffff);
    // A penalized row's next token depends on how often `token` was generated before (tests see the history arrive).
    if (r.sampling && r.sampling->penalized()) t += 7919 * std::count(r.generated.begin(), r.generated.end(), r.token);
    out[i].token = r.forced >= 0 ? r.forced : fake_next(t, r.position, vocab_);
    if (r.forced < 0 && r.sampling && r.sampling->biased()) out[i].token = fake_biased(out[i].token, *r.sampling, vocab_);
    if (r.sampling && r.sampling->wants_logprobs()) {
      driver::TokenLogprobs lp;
      // A scored prompt position's log-prob says where it was: -(1 + position) / 8.
      lp.chosen = r.forced >= 0 ? -static_cast<float>(r.position + 1) / 8.0f : -0.25f;
      lp.top.emplace_back(static_cast<std::int32_t>(out[i].token), -0.25f);
      for (std::uint32_t k = 1; k < r.sampling->logprobs; ++k)
        lp.top.emplace_back(static_cast<std::int32_t>(fake_next(out[i].token, k, vocab_)),
                            -0.25f - static_cast<float>(k));
      if (r.sampling->logprobs == 0) lp.top.clear();
      out[i].logprobs = lp;
    }
  }
  if (while_running) {
    in_decode_ = true;
    try {
      while_running();
    } catch (...) {
      in_decode_ = false;
      throw;
    }
    in_decode_ = false;
  }
  if (step_us_) std::this_thread::sleep_until(start + std::chrono::microseconds(step_us_));
  return out;
}

std::vector<Sampled> FakeRunner::mixed(std::span<const ChunkCall> chunks, std::span<const DecodeCall> rows) {
  std::uint64_t total = rows.size();
  for (const ChunkCall& c : chunks) total += c.tokens.size();
  if (mixed_chunks_ == 0 || chunks.empty() || rows.empty() || chunks.size() > mixed_chunks_ || total > mixed_rows())
    fail(ErrorKind::Api, "fake engine: a mixed step of {} chunks and {} rows ({} in all)", chunks.size(), rows.size(),
         total);
  ++mixed_calls_;
  const std::uint64_t pause = step_us_;
  step_us_ = 0;  // one step's time for the whole call
  for (const ChunkCall& c : chunks) prefill_rows_ += c.tokens.size();
  std::vector<Sampled> out = decode(rows);
  step_us_ = pause;
  if (step_us_) std::this_thread::sleep_for(std::chrono::microseconds(step_us_));
  return out;
}

}  // namespace kern::serve
