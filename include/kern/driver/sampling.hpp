// A request's sampling settings and how they travel to the device: the rows of the `sampling`
// (f32) and `sampling_keys` (i64) fills the sampling op reads, and the log-probs it hands back
// (docs/manifest.md "Sampling"). Validation lives here so every caller (kern run, kern serve)
// refuses the same out-of-range values with the same words.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kern/core/protocol.hpp"

namespace kern::driver {

struct SamplingParams {
  double temperature = 0.0;  // 0: greedy (argmax, ties to the lowest id)
  std::int64_t top_k = 0;    // 0: off
  double top_p = 1.0;        // 1: off
  double min_p = 0.0;        // 0: off
  double repetition_penalty = 1.0;
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  std::uint64_t seed = 0;
  std::uint32_t logprobs = 0;  // top log-probs wanted per generated token (0..kMaxLogprobs)
  bool chosen_logprob = false;  // the chosen token's log-prob (implied by logprobs > 0)
  // OpenAI's logit_bias: (token id, value added to its logit before the penalties), ids ascending and
  // each once, at most core::kMaxLogitBias. The log-probs stay those of the raw logits (as vLLM's).
  std::vector<std::pair<std::int32_t, float>> logit_bias;

  bool greedy() const { return temperature == 0.0; }
  bool penalized() const {
    return repetition_penalty != 1.0 || presence_penalty != 0.0 || frequency_penalty != 0.0;
  }
  bool wants_logprobs() const { return chosen_logprob || logprobs > 0; }
  bool biased() const { return !logit_bias.empty(); }
  // Whether the sampling reads the device's `history` row (the generated tokens, the bias entries).
  bool uses_history() const { return penalized() || biased(); }
  // Greedy with no penalty, no bias and no log-probs: what a manifest without the sampling op does.
  bool plain_greedy() const { return greedy() && !penalized() && !biased() && !wants_logprobs(); }
  // Slots of the device's `history` row the sampling needs: the generated tokens (penalties; up to
  // `generated`) from its start, the logit-bias pairs at its end.
  std::uint64_t history_slots(std::uint64_t generated) const {
    return (penalized() ? generated : 0) + 2 * logit_bias.size();
  }
};

// Error(Api) naming the setting and the range it must lie in (OpenAI's ranges where it has one:
// temperature [0, 2], presence/frequency [-2, 2]; top_p (0, 1]; min_p [0, 1]; top_k ≥ 0;
// repetition_penalty (0, 10]; logprobs ≤ 20; logit_bias values in [-100, 100], ids ≥ 0, ascending
// and unique, at most 255 of them; the caller checks ids against its vocabulary).
void validate(const SamplingParams& p);

// The f32 `sampling` row: temperature, top_p, min_p, repetition, presence, frequency, 0, 0.
std::array<float, core::kSamplingWidth> sampling_row(const SamplingParams& p);
// The i64 `sampling_keys` row: top_k, seed, counter, history length, logprobs wanted, forced + 1,
// 0, 0. `counter` is the position of the row whose logits are sampled: with the seed it keys the
// random draw, so a seeded request samples the same tokens alone or in any batch. `forced` >= 0
// makes the row's token that id instead of a draw (a prompt position scored for its log-probs).
std::array<std::int64_t, core::kSamplingWidth> sampling_keys_row(const SamplingParams& p, std::uint64_t counter,
                                                                 std::uint64_t history_len, std::int64_t forced = -1);

struct TokenLogprobs {
  float chosen = 0.0f;                            // log-prob of the generated token
  std::vector<std::pair<std::int32_t, float>> top;  // (id, log-prob), descending
};
// kern run's --logit-bias: "ID:VALUE" items, comma-separated (e.g. "151643:-100,42:2.5"), as
// SamplingParams::logit_bias (by ascending id); Error(Api) naming a malformed item (validate()
// refuses a repeated id).
std::vector<std::pair<std::int32_t, float>> parse_logit_bias(const std::string& text);

// The `history` row's last 2 n entries for the logit bias: id, then the value's f32 bits, per entry.
std::vector<std::int64_t> logit_bias_tail(const SamplingParams& p);
// What sampling with `p` over `max_generated` generated tokens needs of the manifest's `history` fill
// (nullptr: none): Error(Manifest) when it needs one and there is none, Error(Api) when its row is too
// short (`what` names the caller's limit, e.g. "max_tokens").
void check_history(const SamplingParams& p, const core::FillSlot* history, std::uint64_t max_generated,
                   std::string_view what);

// Group 0's log-probs from the `logprobs` row (1 + kMaxLogprobs f32) and `logprob_ids` row
// (kMaxLogprobs i32), keeping the first `count` of the top list.
TokenLogprobs decode_logprobs(std::span<const std::byte> logprobs, std::span<const std::byte> ids,
                              std::uint32_t count);

}  // namespace kern::driver
