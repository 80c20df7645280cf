#include "kern/driver/sampling.hpp"

#include <cmath>
#include <cstring>

#include "kern/base/error.hpp"

namespace kern::driver {

namespace {

void need(bool ok, std::string_view what, double value, std::string_view range) {
  if (!ok) fail(ErrorKind::Api, "{} = {} is out of range: it must be {}", what, value, range);
}

}  // namespace

void validate(const SamplingParams& p) {
  need(std::isfinite(p.temperature) && p.temperature >= 0.0 && p.temperature <= 2.0, "temperature", p.temperature,
       "in [0, 2] (0 = greedy)");
  need(p.top_k >= 0, "top_k", static_cast<double>(p.top_k), "≥ 0 (0 = off)");
  need(std::isfinite(p.top_p) && p.top_p > 0.0 && p.top_p <= 1.0, "top_p", p.top_p, "in (0, 1] (1 = off)");
  need(std::isfinite(p.min_p) && p.min_p >= 0.0 && p.min_p <= 1.0, "min_p", p.min_p, "in [0, 1] (0 = off)");
  need(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0.0 && p.repetition_penalty <= 10.0,
       "repetition_penalty", p.repetition_penalty, "in (0, 10] (1 = off)");
  need(std::isfinite(p.presence_penalty) && std::fabs(p.presence_penalty) <= 2.0, "presence_penalty",
       p.presence_penalty, "in [-2, 2] (0 = off)");
  need(std::isfinite(p.frequency_penalty) && std::fabs(p.frequency_penalty) <= 2.0, "frequency_penalty",
       p.frequency_penalty, "in [-2, 2] (0 = off)");
  need(p.logprobs <= core::kMaxLogprobs, "logprobs", p.logprobs, "at most 20");
}

std::array<float, core::kSamplingWidth> sampling_row(const SamplingParams& p) {
  return {static_cast<float>(p.temperature),
          static_cast<float>(p.top_p),
          static_cast<float>(p.min_p),
          static_cast<float>(p.repetition_penalty),
          static_cast<float>(p.presence_penalty),
          static_cast<float>(p.frequency_penalty),
          0.0f,
          0.0f};
}

std::array<std::int64_t, core::kSamplingWidth> sampling_keys_row(const SamplingParams& p, std::uint64_t counter,
                                                                 std::uint64_t history_len, std::int64_t forced) {
  return {p.top_k,
          static_cast<std::int64_t>(p.seed),
          static_cast<std::int64_t>(counter),
          static_cast<std::int64_t>(history_len),
          static_cast<std::int64_t>(p.logprobs),
          forced >= 0 ? forced + 1 : 0,
          0,
          0};
}

TokenLogprobs decode_logprobs(std::span<const std::byte> logprobs, std::span<const std::byte> ids,
                              std::uint32_t count) {
  if (logprobs.size() < (1 + count) * 4 || ids.size() < count * 4)
    fail(ErrorKind::Api, "log-prob outputs hold {} and {} bytes; {} log-probs need {} and {}", logprobs.size(),
         ids.size(), count, (1 + count) * 4, count * 4);
  TokenLogprobs out;
  std::memcpy(&out.chosen, logprobs.data(), 4);
  out.top.resize(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    std::memcpy(&out.top[i].first, ids.data() + 4 * i, 4);
    std::memcpy(&out.top[i].second, logprobs.data() + 4 * (1 + i), 4);
  }
  return out;
}

}  // namespace kern::driver
