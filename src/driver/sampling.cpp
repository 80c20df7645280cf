#include "kern/driver/sampling.hpp"

#include <algorithm>
#include <charconv>
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
  if (p.logit_bias.size() > core::kMaxLogitBias)
    fail(ErrorKind::Api, "logit_bias has {} entries; at most {}", p.logit_bias.size(), core::kMaxLogitBias);
  for (std::size_t i = 0; i < p.logit_bias.size(); ++i) {
    const auto [id, value] = p.logit_bias[i];
    if (id < 0) fail(ErrorKind::Api, "logit_bias names token id {}; ids are ≥ 0", id);
    if (i > 0 && id == p.logit_bias[i - 1].first) fail(ErrorKind::Api, "logit_bias names token id {} twice", id);
    if (i > 0 && id < p.logit_bias[i - 1].first)
      fail(ErrorKind::Api, "logit_bias ids must be ascending; {} follows {}", id, p.logit_bias[i - 1].first);
    need(std::isfinite(value) && std::fabs(value) <= 100.0f, fmt::format("logit_bias[{}]", id), value,
         "in [-100, 100]");
  }
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
          static_cast<std::int64_t>(p.logit_bias.size()),
          0};
}

std::vector<std::pair<std::int32_t, float>> parse_logit_bias(const std::string& text) {
  std::vector<std::pair<std::int32_t, float>> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    const std::size_t colon = item.find(':');
    std::int32_t id = -1;
    float value = 0.0f;
    const char* b = item.data();
    const char* e = b + item.size();
    bool ok = colon != std::string::npos;
    if (ok) {
      const auto [p1, e1] = std::from_chars(b, b + colon, id);
      const auto [p2, e2] = std::from_chars(b + colon + 1, e, value);
      ok = colon > 0 && e1 == std::errc() && p1 == b + colon && id >= 0 && colon + 1 < item.size() &&
           e2 == std::errc() && p2 == e;
    }
    if (!ok)
      fail(ErrorKind::Api, "--logit-bias: '{}' is not ID:VALUE (a token id, a number in [-100, 100])", item);
    out.emplace_back(id, value);
    start = end + 1;
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::int64_t> logit_bias_tail(const SamplingParams& p) {
  std::vector<std::int64_t> v;
  v.reserve(2 * p.logit_bias.size());
  for (const auto& [id, value] : p.logit_bias) {
    std::int32_t bits = 0;
    std::memcpy(&bits, &value, 4);
    v.push_back(id);
    v.push_back(bits);
  }
  return v;
}

void check_history(const SamplingParams& p, const core::FillSlot* history, std::uint64_t max_generated,
                   std::string_view what) {
  if (!p.uses_history()) return;
  if (!history)
    fail(ErrorKind::Manifest, "{} the device's 'history' fill, and the manifest has none",
         p.penalized() ? "penalties need the generated tokens in" : "a logit bias needs");
  const std::uint64_t width = history->width, bias = 2 * p.logit_bias.size();
  if (p.history_slots(max_generated) <= width) return;
  if (!p.penalized())
    fail(ErrorKind::Api, "logit_bias has {} entries; the device's history row holds {}", p.logit_bias.size(),
         width / 2);
  fail(ErrorKind::Api, "penalties see at most {} generated tokens{}; {} asks for {}", width - std::min(width, bias),
       p.biased() ? fmt::format(" beside {} logit_bias entries", p.logit_bias.size()) : std::string(), what,
       max_generated);
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
