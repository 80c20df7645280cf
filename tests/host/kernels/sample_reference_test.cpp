// The sampling reference (tests/gpu/kernels/sample_reference.hpp) on hand-computed rows, the
// chi-square helper on known quantiles, and Philox4x32-10 on Random123's known answers.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>

#include "philox.cuh"
#include "sample_reference.hpp"

namespace kern_sample_ref {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInfF = std::numeric_limits<float>::infinity();

std::vector<float> logs(std::initializer_list<double> p) {
  std::vector<float> v;
  for (double x : p) v.push_back(static_cast<float>(std::log(x)));
  return v;
}

void expect_probs(const SampleReference& r, std::initializer_list<double> want) {
  ASSERT_EQ(r.probs.size(), want.size());
  size_t i = 0;
  for (double w : want) {
    EXPECT_NEAR(r.probs[i], w, 1e-6) << "token " << i;
    ++i;
  }
}

TEST(SampleReference, TemperatureOneIsSoftmax) {
  SampleParams p;
  const auto r = sample_reference({1.0f, 2.0f, 3.0f}, p);
  EXPECT_FALSE(r.greedy);
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  expect_probs(r, {std::exp(1.0) / z, std::exp(2.0) / z, std::exp(3.0) / z});
}

TEST(SampleReference, TemperatureScales) {
  SampleParams p;
  p.temperature = 0.5f;  // l = [0, 2 ln 2]: weights 1 and 4
  expect_probs(sample_reference({0.0f, static_cast<float>(std::log(2.0))}, p), {0.2, 0.8});
}

TEST(SampleReference, TopKKeepsTiesAtTheThreshold) {
  SampleParams p;
  p.top_k = 2;
  const double z2 = std::exp(2.0) + std::exp(3.0);
  expect_probs(sample_reference({1.0f, 2.0f, 3.0f}, p), {0.0, std::exp(2.0) / z2, std::exp(3.0) / z2});
  // [3, 2, 2, 1], k = 2: the threshold 2 is tied, both kept
  const double z3 = std::exp(3.0) + 2 * std::exp(2.0);
  expect_probs(sample_reference({3.0f, 2.0f, 2.0f, 1.0f}, p),
               {std::exp(3.0) / z3, std::exp(2.0) / z3, std::exp(2.0) / z3, 0.0});
  p.top_k = 4;  // >= vocab: off
  EXPECT_GT(sample_reference({3.0f, 2.0f, 2.0f, 1.0f}, p).probs[3], 0.0);
  p.top_k = -3;  // negative: off
  EXPECT_GT(sample_reference({3.0f, 2.0f, 2.0f, 1.0f}, p).probs[3], 0.0);
}

TEST(SampleReference, TopPKeepsTheSmallestPrefixReachingP) {
  SampleParams p;
  const auto v = logs({0.5, 0.3, 0.15, 0.05});
  p.top_p = 0.6f;  // 0.5 < 0.6 <= 0.8
  expect_probs(sample_reference(v, p), {0.5 / 0.8, 0.3 / 0.8, 0.0, 0.0});
  p.top_p = 0.4f;
  expect_probs(sample_reference(v, p), {1.0, 0.0, 0.0, 0.0});
  p.top_p = 0.9f;  // 0.8 < 0.9 <= 0.95
  expect_probs(sample_reference(v, p), {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0.0});
  p.top_p = 0.0f;  // the top token
  expect_probs(sample_reference(v, p), {1.0, 0.0, 0.0, 0.0});
  p.top_p = kNaN;  // off
  expect_probs(sample_reference(v, p), {0.5, 0.3, 0.15, 0.05});
}

TEST(SampleReference, TopPRunsOnTheTopKRenormalisedDistribution) {
  SampleParams p;
  const auto v = logs({0.4, 0.3, 0.2, 0.1});
  p.top_p = 0.5f;  // alone: 0.4 < 0.5 <= 0.7 keeps two
  expect_probs(sample_reference(v, p), {0.4 / 0.7, 0.3 / 0.7, 0.0, 0.0});
  p.top_k = 2;  // top-2 renormalised: 0.571, 0.429; 0.571 >= 0.5 keeps one
  expect_probs(sample_reference(v, p), {1.0, 0.0, 0.0, 0.0});
}

TEST(SampleReference, MinPKeepsTokensAboveAFractionOfTheMax) {
  SampleParams p;
  const auto v = logs({0.5, 0.3, 0.15, 0.05});
  p.min_p = 0.35f;  // 0.175: keeps 0.5 and 0.3
  expect_probs(sample_reference(v, p), {0.5 / 0.8, 0.3 / 0.8, 0.0, 0.0});
  p.min_p = 7.0f;  // clamped to 1: the maximum only
  expect_probs(sample_reference(v, p), {1.0, 0.0, 0.0, 0.0});
  p.min_p = 0.35f;  // with top-p 0.9 (three kept) the tighter min-p wins
  p.top_p = 0.9f;
  expect_probs(sample_reference(v, p), {0.5 / 0.8, 0.3 / 0.8, 0.0, 0.0});
}

TEST(SampleReference, Penalties) {
  SampleParams p;
  p.temperature = 0.0f;
  p.repetition = 2.0f;
  p.history = {0, 1, 0, 99, -1};  // ids outside [0, vocab) ignored
  // x0 = 2 / 2 = 1, x1 = -2 * 2 = -4, x2 = 1.5 untouched
  auto r = sample_reference({2.0f, -2.0f, 1.5f}, p);
  EXPECT_TRUE(r.greedy);
  EXPECT_EQ(r.greedy_token, 2);
  expect_probs(r, {0.0, 0.0, 1.0});
  // frequency 0.5 and presence 0.25: token 0 (twice) loses 1.25, token 1 once 0.75
  p.repetition = 1.0f;
  p.frequency = 0.5f;
  p.presence = 0.25f;
  r = sample_reference({2.0f, 1.0f, 0.8f}, p);
  EXPECT_EQ(r.greedy_token, 2);  // 0.75, 0.25, 0.8
  p.temperature = 1.0f;
  const double z = std::exp(0.75) + std::exp(0.25) + std::exp(0.8);
  expect_probs(sample_reference({2.0f, 1.0f, 0.8f}, p), {std::exp(0.75) / z, std::exp(0.25) / z, std::exp(0.8) / z});
  // non-finite / non-positive penalties are off
  p.repetition = kNaN;
  p.frequency = kInfF;
  p.presence = kNaN;
  p.temperature = 0.0f;
  EXPECT_EQ(sample_reference({2.0f, 1.0f, 0.8f}, p).greedy_token, 0);
  p.repetition = -2.0f;
  EXPECT_EQ(sample_reference({2.0f, 1.0f, 0.8f}, p).greedy_token, 0);
}

TEST(SampleReference, LogitBiasBeforePenaltiesAndNotInTheLogprobs) {
  SampleParams p;
  p.temperature = 0.0f;
  // bias first: x1 = -2 + 5 = 3; then the repetition penalty of its one occurrence: 3 / 2 = 1.5
  p.bias = {{1, 5.0f}, {7, 50.0f}, {-1, 50.0f}, {2, kNaN}};  // ids outside [0, vocab), NaN values ignored
  p.history = {1};
  p.repetition = 2.0f;
  auto r = sample_reference({1.0f, -2.0f, 1.4f}, p);
  EXPECT_EQ(r.greedy_token, 1);
  // log-probs stay those of the raw logits
  const double z = std::exp(1.0) + std::exp(-2.0) + std::exp(static_cast<double>(1.4f));
  EXPECT_NEAR(r.logprobs[1], -2.0 - std::log(z), 1e-12);
  // -100 takes a token out of any practical draw; the rest renormalise
  p = {};
  p.temperature = 1.0f;
  p.bias = {{0, -100.0f}};
  r = sample_reference({2.0f, 0.0f, 0.0f}, p);
  const double e = std::exp(-98.0), zb = e + 2.0;
  expect_probs(r, {e / zb, 1.0 / zb, 1.0 / zb});
}

TEST(SampleReference, GreedyTiesNaNAndSanitising) {
  SampleParams p;
  p.temperature = 0.0f;
  EXPECT_EQ(sample_reference({1.0f, 3.0f, 3.0f}, p).greedy_token, 1);
  EXPECT_EQ(sample_reference({kNaN, 1.0f, 0.0f}, p).greedy_token, 1);
  EXPECT_EQ(sample_reference({kNaN, kNaN}, p).greedy_token, 0);
  EXPECT_EQ(sample_reference({-kInfF, kNaN, -kInfF}, p).greedy_token, 0);
  p.temperature = -1.0f;
  EXPECT_TRUE(sample_reference({1.0f, 3.0f}, p).greedy);
  p.temperature = kNaN;
  EXPECT_TRUE(sample_reference({1.0f, 3.0f}, p).greedy);
  // sampling with nothing finite falls back to the greedy token
  p.temperature = 1.0f;
  const auto r = sample_reference({-kInfF, kNaN, -kInfF}, p);
  EXPECT_TRUE(r.greedy);
  EXPECT_EQ(r.greedy_token, 0);
  // +inf scaled logits clamp to FLT_MAX: the infinite tokens share the mass
  expect_probs(sample_reference({kInfF, 1.0f, kInfF}, p), {0.5, 0.0, 0.5});
  // NaN logits are never drawn
  EXPECT_EQ(sample_reference({kNaN, 1.0f}, p).probs[0], 0.0);
}

TEST(SampleReference, LogprobsAndTopIds) {
  SampleParams p;
  p.n_logprobs = 3;
  const auto r = sample_reference({0.0f, static_cast<float>(std::log(3.0)), 0.0f, -1.0f}, p);
  const double z = 1.0 + 3.0 + 1.0 + std::exp(-1.0);
  EXPECT_NEAR(r.logprobs[0], -std::log(z), 1e-6);
  EXPECT_NEAR(r.logprobs[1], std::log(3.0) - std::log(z), 1e-6);
  EXPECT_EQ(r.top_ids, (std::vector<int32_t>{1, 0, 2}));  // the tie 0 = 2 to the lower id
  // log-probs are of the raw logits: penalties and temperature do not move them
  SampleParams q = p;
  q.temperature = 0.3f;
  q.repetition = 3.0f;
  q.history = {1};
  const auto r2 = sample_reference({0.0f, static_cast<float>(std::log(3.0)), 0.0f, -1.0f}, q);
  EXPECT_EQ(r2.logprobs, r.logprobs);
  EXPECT_EQ(r2.top_ids, r.top_ids);
  // NaN logits: ignored by the normaliser, ranked last
  p.n_logprobs = 2;
  const auto r3 = sample_reference({kNaN, 0.0f, 0.0f}, p);
  EXPECT_NEAR(r3.logprobs[1], std::log(0.5), 1e-9);
  EXPECT_EQ(r3.top_ids, (std::vector<int32_t>{1, 2}));
  // clamped to [0, min(20, vocab)]
  p.n_logprobs = 50;
  EXPECT_EQ(sample_reference(std::vector<float>(30, 1.0f), p).n_logprobs, 20);
  EXPECT_EQ(sample_reference(std::vector<float>(7, 1.0f), p).n_logprobs, 7);
  p.n_logprobs = -1;
  EXPECT_EQ(sample_reference(std::vector<float>(7, 1.0f), p).n_logprobs, 0);
  EXPECT_TRUE(sample_reference(std::vector<float>(7, 1.0f), p).top_ids.empty());
}

TEST(SampleReference, ChiSquarePValueQuantiles) {
  // upper 5 % / 1 % / 1e-6 points of the chi-square distribution
  EXPECT_NEAR(chi2_pvalue(3.841459, 1), 0.05, 1e-6);
  EXPECT_NEAR(chi2_pvalue(18.307038, 10), 0.05, 1e-6);
  EXPECT_NEAR(chi2_pvalue(23.209251, 10), 0.01, 1e-6);
  EXPECT_NEAR(chi2_pvalue(124.342113, 100), 0.05, 1e-6);
  EXPECT_NEAR(chi2_pvalue(2.0, 2), std::exp(-1.0), 1e-12);  // df 2: exp(-x/2)
  EXPECT_NEAR(chi2_pvalue(1.0, 3), 0.801252, 1e-6);
  EXPECT_NEAR(chi2_pvalue(23.928127, 1), 1e-6, 1e-9);
  EXPECT_EQ(chi2_pvalue(0.0, 4), 1.0);
}

TEST(SampleReference, ChiSquareMergesSmallBins) {
  // 100 draws over probabilities 0.5, 0.3, 0.12, 0.05, 0.03, 0: expected 50, 30, 12, 5, 3 -> the
  // last two merge (5 + 3 = 8 is one bin: 5 closes a bin, 3 joins it)
  const std::vector<double> probs = {0.5, 0.3, 0.12, 0.05, 0.03, 0.0};
  const std::vector<int64_t> counts = {52, 28, 12, 5, 3, 0};
  const ChiSquare c = chi_square(counts, probs, 100);
  EXPECT_EQ(c.df, 3);
  EXPECT_NEAR(c.statistic, 4.0 / 50 + 4.0 / 30 + 0.0 + 0.0, 1e-12);
  EXPECT_EQ(c.impossible, 0);
  const ChiSquare d = chi_square({52, 28, 12, 5, 2, 1}, probs, 100);
  EXPECT_EQ(d.impossible, 1);
}

TEST(Philox, Random123KnownAnswers) {
  using kern_philox::philox4x32_10;
  using kern_philox::U32x4;
  auto eq = [](U32x4 a, U32x4 b) {
    for (int i = 0; i < 4; ++i)
      if (a.v[i] != b.v[i]) return false;
    return true;
  };
  EXPECT_TRUE(eq(philox4x32_10({{0, 0, 0, 0}}, 0, 0), {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}));
  EXPECT_TRUE(eq(philox4x32_10({{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu),
                 {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}));
  EXPECT_TRUE(eq(philox4x32_10({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u),
                 {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}));
}

TEST(Philox, SampleUniformInUnitInterval) {
  double sum = 0.0;
  for (int64_t c = 0; c < 10000; ++c) {
    const float u = kern_philox::sample_uniform(1234, c);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.01);
  EXPECT_NE(kern_philox::sample_uniform(1, 5), kern_philox::sample_uniform(2, 5));
  EXPECT_NE(kern_philox::sample_uniform(1, 5), kern_philox::sample_uniform(1, 6));
  EXPECT_NE(kern_philox::sample_uniform(1, 5), kern_philox::sample_uniform(1, 5 + (int64_t{1} << 32)));
}

// The race kernel's row uniform (inverse-CDF draws): in [0, 1), about uniform, and drawn from
// counters of its own, so a row the race rejects is drawn again by the cluster kernel independently.
TEST(Philox, RaceUniformInUnitIntervalApartFromTheClusterKernels) {
  double sum = 0.0;
  int equal = 0;
  for (int64_t c = 0; c < 10000; ++c) {
    const float u = kern_philox::race_uniform(99, c);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
    equal += u == kern_philox::sample_uniform(99, c) ? 1 : 0;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.01);
  EXPECT_LT(equal, 3);  // 24-bit values: a chance match is ~1 in 16 million per pair
  EXPECT_NE(kern_philox::race_uniform(1, 5), kern_philox::race_uniform(2, 5));
  EXPECT_NE(kern_philox::race_uniform(1, 5), kern_philox::race_uniform(1, 6));
}

}  // namespace
}  // namespace kern_sample_ref
