// kern test's comparison core (include/kern/core/ab_compare.hpp): KL, top-1, max |diff| and the
// non-finite disagreements of one position, and the verdict over a workload.
#include "kern/core/ab_compare.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kern/base/error.hpp"

namespace kern::core {
namespace {

TEST(AbCompare, EqualRowsGiveZeroAndAgree) {
  std::mt19937 rng(1);
  std::normal_distribution<float> n(0.0f, 3.0f);
  std::vector<float> row(151936);
  for (float& x : row) x = n(rng);
  const PositionCompare c = compare_rows(row, row);
  EXPECT_EQ(c.kl, 0.0);
  EXPECT_EQ(c.max_abs_diff, 0.0);
  EXPECT_EQ(c.nonfinite, 0);
  EXPECT_EQ(c.top1_ref, c.top1_test);
  EXPECT_GE(c.top1_ref, 0);
}

TEST(AbCompare, KlOfTwoTokensIsTheClosedForm) {
  // p = (1/2, 1/2), q = (1/4, 3/4): KL(p || q) = ln 2 / 2 + ln(2/3) / 2
  const std::vector<float> ref = {0.0f, 0.0f}, test = {0.0f, static_cast<float>(std::log(3.0))};
  const PositionCompare c = compare_rows(ref, test);
  EXPECT_NEAR(c.kl, 0.5 * std::log(2.0) + 0.5 * std::log(2.0 / 3.0), 1e-7);
  EXPECT_EQ(c.top1_ref, 0);  // a tie: the lower id
  EXPECT_EQ(c.top1_test, 1);
  EXPECT_NEAR(c.max_abs_diff, std::log(3.0), 1e-6);
  // the direction matters: KL(q || p) differs
  EXPECT_NEAR(compare_rows(test, ref).kl, 0.25 * std::log(0.5) + 0.75 * std::log(1.5), 1e-7);
}

TEST(AbCompare, KlIsOfTheDistributionsNotTheLogits) {
  std::vector<float> ref = {1.0f, 2.0f, -3.0f, 0.5f}, test = ref;
  for (float& x : test) x += 5.0f;  // the same softmax
  const PositionCompare c = compare_rows(ref, test);
  EXPECT_NEAR(c.kl, 0.0, 1e-12);
  EXPECT_NEAR(c.max_abs_diff, 5.0, 1e-6);
  EXPECT_EQ(c.top1_ref, 1);
  EXPECT_EQ(c.top1_test, 1);
}

TEST(AbCompare, KlGrowsWithThePerturbation) {
  std::mt19937 rng(2);
  std::normal_distribution<float> n(0.0f, 2.0f);
  std::vector<float> ref(4096), noise(4096);
  for (float& x : ref) x = n(rng);
  for (float& x : noise) x = n(rng);
  double last = 0.0;
  for (float eps : {0.001f, 0.01f, 0.1f, 1.0f}) {
    std::vector<float> test(ref);
    for (size_t i = 0; i < test.size(); ++i) test[i] += eps * noise[i];
    const double kl = compare_rows(ref, test).kl;
    EXPECT_GT(kl, last) << "eps " << eps;
    last = kl;
  }
  EXPECT_GT(last, 0.01);  // a unit perturbation fails the default threshold
}

TEST(AbCompare, NonFiniteDisagreementsAreCountedNotHidden) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> ref = {1.0f, nan, -inf, 3.0f, inf, 2.0f};
  const std::vector<float> test = {1.0f, 0.5f, -inf, nan, inf, 2.0f};
  const PositionCompare c = compare_rows(ref, test);
  EXPECT_EQ(c.nonfinite, 2);  // entry 1 (NaN vs finite) and 3 (finite vs NaN); equal kinds agree
  EXPECT_EQ(c.top1_ref, 3);   // finite entries only
  EXPECT_EQ(c.top1_test, 5);
  EXPECT_TRUE(std::isfinite(c.kl));
  const PositionCompare all_nan = compare_rows(std::vector<float>{nan, nan}, std::vector<float>{nan, nan});
  EXPECT_EQ(all_nan.top1_ref, -1);
  EXPECT_EQ(all_nan.nonfinite, 0);
  EXPECT_EQ(all_nan.kl, 0.0);
}

TEST(AbCompare, RowsOfDifferentLengthsAreAnApiError) {
  const std::vector<float> a = {1.0f, 2.0f}, b = {1.0f};
  try {
    compare_rows(a, b);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Api);
    EXPECT_NE(std::string(e.what()).find("2 and 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(compare_rows(std::vector<float>{}, std::vector<float>{}), Error);
}

TEST(AbCompare, MarginsRanksAndTopTwentyOverlap) {
  std::vector<float> ref(100), test(100);
  for (int i = 0; i < 100; ++i) ref[i] = static_cast<float>(i % 50);  // 49 at ids 49 and 99: ties
  test = ref;
  EXPECT_TRUE(compare_rows(ref, test).identical);
  test[49] = 10.0f;  // the reference's top-1 (id 49, tie to the lower id) falls in the test row
  const PositionCompare c = compare_rows(ref, test);
  EXPECT_FALSE(c.identical);
  EXPECT_EQ(c.top1_ref, 49);
  EXPECT_EQ(c.top1_test, 99);
  EXPECT_EQ(c.margin_ref, 0.0);  // 49 and 49
  // in the test row, ahead of id 49 (10): the values 11..49 at ids 11..48 and 61..99 (78 entries)
  EXPECT_EQ(c.rank_in_test, 78);
  // top 20 of ref: 49, 99, 48, 98, ..., 40, 90; of test: 99, 48, 98, ..., 40, 90, 39: 19 shared
  EXPECT_EQ(c.top20_overlap, 19);
  ref[3] = 60.0f;
  EXPECT_EQ(compare_rows(ref, test).margin_ref, 11.0);
}

PositionCompare pos(double kl, std::int64_t r, std::int64_t t, bool identical = false, std::int64_t nonfinite = 0,
                    double margin = 1.0) {
  PositionCompare c;
  c.kl = kl;
  c.top1_ref = r;
  c.top1_test = t;
  c.identical = identical;
  c.nonfinite = nonfinite;
  c.margin_ref = margin;
  return c;
}

TEST(AbCompare, BitIdenticalRowsPass) {
  const std::vector<PositionCompare> w = {pos(0.0, 5, 5, true), pos(0.0, 7, 7, true)};
  const CompareReport r = summarize(w);
  EXPECT_EQ(r.verdict, Verdict::Pass) << describe(r, {});
  EXPECT_EQ(r.rung, "logits bit-identical");
  EXPECT_FALSE(r.first_divergence.has_value());
}

TEST(AbCompare, FlipsWithinTheThresholdAreLogitEvidence) {
  const std::vector<PositionCompare> w = {pos(0.001, 5, 5), pos(0.009, 7, 8, false, 0, 0.02), pos(0.0, 2, 2, true)};
  const CompareReport r = summarize(w);
  EXPECT_EQ(r.verdict, Verdict::Pass) << describe(r, {});
  EXPECT_EQ(r.rung, "logit evidence");
  EXPECT_NEAR(r.kl_mean, 0.01 / 3, 1e-12);
  EXPECT_EQ(r.kl_max_at, 1u);
  EXPECT_EQ(r.flips, 1u);
  EXPECT_EQ(r.flips_over_kl, 0u);
  EXPECT_EQ(r.identical, 1u);
  EXPECT_DOUBLE_EQ(r.top1_agreement, 2.0 / 3);
  EXPECT_EQ(r.min_margin_at_flip, 0.02);
  EXPECT_EQ(r.first_divergence, 1u);
  EXPECT_NE(describe(r, {}).find("PASS: logit evidence"), std::string::npos) << describe(r, {});
}

TEST(AbCompare, AFlipBeyondTheThresholdFails) {
  const std::vector<PositionCompare> w = {pos(0.001, 5, 5), pos(0.02, 2, 2), pos(0.05, 7, 8)};
  const CompareReport r = summarize(w, {.kl = 0.01});
  EXPECT_EQ(r.verdict, Verdict::Fail);
  EXPECT_EQ(r.rung, "argmax flip beyond the KL threshold");
  EXPECT_EQ(r.first_divergence, 1u);  // KL over the threshold already at 1
  ASSERT_EQ(r.reasons.size(), 1u);
  EXPECT_NE(r.reasons[0].find("1 top-1 flips"), std::string::npos) << r.reasons[0];
  EXPECT_NE(r.reasons[0].find("at position 2"), std::string::npos) << r.reasons[0];
  // a looser threshold turns the same workload into logit evidence
  EXPECT_EQ(summarize(w, {.kl = 0.1}).verdict, Verdict::Pass);
}

TEST(AbCompare, KlOverTheThresholdWithoutAFlipIsInconclusive) {
  const std::vector<PositionCompare> w = {pos(0.001, 5, 5), pos(0.5, 2, 2)};
  const CompareReport r = summarize(w);
  EXPECT_EQ(r.verdict, Verdict::Inconclusive) << describe(r, {});
  ASSERT_EQ(r.reasons.size(), 1u);
  EXPECT_NE(r.reasons[0].find("1 positions have KL above"), std::string::npos) << r.reasons[0];
}

TEST(AbCompare, NonFiniteDisagreementsAndNanKlNeverPass) {
  EXPECT_EQ(summarize(std::vector<PositionCompare>{pos(0.0, 1, 1, false, 3)}).verdict, Verdict::Fail);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const CompareReport flip = summarize(std::vector<PositionCompare>{pos(0.0, 1, 1), pos(nan, 1, 2)});
  EXPECT_EQ(flip.verdict, Verdict::Fail);  // NaN is infinite KL
  EXPECT_EQ(flip.kl_max_at, 1u);
  EXPECT_EQ(summarize(std::vector<PositionCompare>{pos(nan, 1, 1)}).verdict, Verdict::Inconclusive);
}

TEST(AbCompare, NothingComparedIsInconclusive) {
  const CompareReport r = summarize(std::vector<PositionCompare>{});
  EXPECT_EQ(r.verdict, Verdict::Inconclusive);
  EXPECT_EQ(r.rung, "nothing compared");
}

}  // namespace
}  // namespace kern::core
