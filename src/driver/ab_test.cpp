#include "kern/driver/ab_test.hpp"

#include <algorithm>

#include "kern/base/error.hpp"
#include "kern/driver/encode.hpp"

namespace kern::driver {

namespace {

// SplitMix64: a fixed sequence on every platform.
struct SplitMix {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) by the high half of a 128-bit product (bias below 2^-64 n).
  std::uint64_t below(std::uint64_t n) { return static_cast<std::uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }
};

// Counts the token-producing calls of one run and hands each to the comparer.
class RowFeed final : public GenerationObserver {
 public:
  RowFeed(RowComparer& c, bool reference) : c_(c), reference_(reference) {}
  void on_logits(std::uint64_t position, std::span<const float>) override {
    if (reference_)
      c_.keep_reference(positions.size());
    else
      c_.compare(positions.size());
    positions.push_back(position);
  }
  std::vector<std::uint64_t> positions;

 private:
  RowComparer& c_;
  bool reference_;
};

}  // namespace

std::vector<std::vector<std::int64_t>> sample_prompts(const AbWorkloadOptions& o, std::uint64_t vocab) {
  if (o.prompts == 0) fail(ErrorKind::Api, "the workload needs at least one prompt");
  if (vocab == 0) fail(ErrorKind::Api, "the workload's vocabulary is empty");
  if (o.max_prompt == 0) fail(ErrorKind::Api, "the workload's longest prompt must be at least one token");
  SplitMix rng{o.seed};
  std::vector<std::vector<std::int64_t>> out;
  for (std::uint64_t i = 0; i < o.prompts; ++i) {
    const std::uint64_t len = i == 0 ? o.max_prompt : i == 1 ? 1 : 1 + rng.below(o.max_prompt);
    std::vector<std::int64_t> p(len);
    for (std::int64_t& t : p) t = static_cast<std::int64_t>(rng.below(vocab));
    out.push_back(std::move(p));
  }
  return out;
}

HostRowComparer::HostRowComparer(Side reference, Side candidate, std::uint64_t vocab)
    : ref_(std::move(reference)), cand_(std::move(candidate)), vocab_(vocab) {
  if (!ref_.exec || !cand_.exec) fail(ErrorKind::Api, "HostRowComparer needs both executors");
  if (vocab_ == 0) fail(ErrorKind::Api, "HostRowComparer: the rows are empty");
}

std::vector<float> HostRowComparer::row(const Side& s) {
  const std::vector<std::byte> bytes = s.exec->read_output_prefix(s.buffer, vocab_ * dtype_size(s.dtype));
  return decode_floats(s.dtype, bytes, vocab_, s.buffer);
}

void HostRowComparer::begin_prompt() { kept_.clear(); }

void HostRowComparer::keep_reference(std::size_t index) {
  if (index != kept_.size()) fail(ErrorKind::Api, "reference row {} kept out of order ({} kept)", index, kept_.size());
  kept_.push_back(row(ref_));
}

void HostRowComparer::compare(std::size_t index) {
  if (index >= kept_.size())
    fail(ErrorKind::Api, "candidate row {} has no reference row ({} kept for this prompt)", index, kept_.size());
  results_.push_back(core::compare_rows(kept_[index], row(cand_)));
}

std::vector<core::PositionCompare> HostRowComparer::results() { return results_; }

AbResult run_ab(Generator& reference, Generator& candidate, std::span<const std::vector<std::int64_t>> prompts,
                RowComparer& comparer, const core::CompareThresholds& thresholds) {
  AbResult out;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<std::int64_t>& prompt = prompts[i];
    candidate.check_fits(prompt.size());
    comparer.begin_prompt();
    RowFeed ref_rows(comparer, true), cand_rows(comparer, false);
    const GenerationResult ref = reference.generate(prompt, &ref_rows);
    const GenerationResult cand = candidate.generate(prompt, &cand_rows, ref.tokens);
    if (cand_rows.positions != ref_rows.positions)
      fail(ErrorKind::Api,
           "prompt {} ({} tokens): the reference produced {} logits rows, the candidate {} (its stop tokens or "
           "steps differ)",
           i, prompt.size(), ref_rows.positions.size(), cand_rows.positions.size());
    for (std::size_t k = 0; k < ref_rows.positions.size(); ++k)
      out.where.push_back({i, ref_rows.positions[k], k < ref.tokens.size() ? ref.tokens[k] : -1});
    out.prompt_tokens += prompt.size();
  }
  out.rows = comparer.results();
  if (out.rows.size() != out.where.size())
    fail(ErrorKind::Api, "the comparer returned {} rows for {} compared positions", out.rows.size(), out.where.size());
  out.report = core::summarize(out.rows, thresholds);
  return out;
}

}  // namespace kern::driver
