#include "kern/core/ab_compare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kern/base/error.hpp"

namespace kern::core {

namespace {

// 0 finite, 1 NaN, 2 +inf, 3 -inf
int kind_of(float v) {
  if (std::isnan(v)) return 1;
  if (std::isinf(v)) return v > 0 ? 2 : 3;
  return 0;
}

std::int64_t argmax_finite(std::span<const float> row) {
  std::int64_t best = -1;
  for (std::size_t i = 0; i < row.size(); ++i)
    if (std::isfinite(row[i]) && (best < 0 || row[i] > row[static_cast<std::size_t>(best)]))
      best = static_cast<std::int64_t>(i);
  return best;
}

}  // namespace

PositionCompare compare_rows(std::span<const float> ref, std::span<const float> test) {
  if (ref.size() != test.size() || ref.empty())
    fail(ErrorKind::Api, "compare_rows: rows of {} and {} entries (they must be equal and non-empty)", ref.size(),
         test.size());
  PositionCompare out;
  out.top1_ref = argmax_finite(ref);
  out.top1_test = argmax_finite(test);
  double mr = -std::numeric_limits<double>::infinity(), mt = mr;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const int kr = kind_of(ref[i]), kt = kind_of(test[i]);
    if (kr != kt) {
      ++out.nonfinite;
      continue;
    }
    if (kr != 0) continue;
    mr = std::max(mr, static_cast<double>(ref[i]));
    mt = std::max(mt, static_cast<double>(test[i]));
    out.max_abs_diff = std::max(out.max_abs_diff, std::fabs(static_cast<double>(test[i]) - ref[i]));
  }
  if (std::isinf(mr)) return out;  // no entry finite in both: nothing to divide (the nonfinite count decides)
  double zr = 0.0, zt = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(ref[i]) || !std::isfinite(test[i])) continue;
    zr += std::exp(ref[i] - mr);
    zt += std::exp(test[i] - mt);
  }
  const double lzr = mr + std::log(zr), lzt = mt + std::log(zt);
  double kl = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(ref[i]) || !std::isfinite(test[i])) continue;
    const double lr = ref[i] - lzr, lt = test[i] - lzt;
    kl += std::exp(lr) * (lr - lt);
  }
  out.kl = std::max(0.0, kl);  // rounding can leave a tiny negative sum for equal rows
  return out;
}

CompareReport summarize(std::span<const PositionCompare> positions, const CompareThresholds& t) {
  CompareReport r;
  r.positions = positions.size();
  if (positions.empty()) {
    r.reasons.push_back("nothing compared: the workload has no positions");
    return r;
  }
  std::size_t agree = 0;
  double kl_sum = 0.0;
  for (std::size_t p = 0; p < positions.size(); ++p) {
    const PositionCompare& c = positions[p];
    kl_sum += c.kl;
    if (p == 0 || c.kl > r.kl_max) r.kl_max = c.kl, r.kl_max_at = p;
    if (p == 0 || c.max_abs_diff > r.max_abs_diff) r.max_abs_diff = c.max_abs_diff, r.max_abs_diff_at = p;
    r.nonfinite += c.nonfinite;
    const bool same = c.top1_ref == c.top1_test;
    agree += same ? 1 : 0;
    const bool breaks = !same || c.nonfinite > 0 || !(c.kl <= t.kl) || !(c.max_abs_diff <= t.max_abs_diff);
    if (breaks && !r.first_divergence) r.first_divergence = p;
  }
  r.kl_mean = kl_sum / static_cast<double>(positions.size());
  r.top1_agreement = static_cast<double>(agree) / static_cast<double>(positions.size());
  if (!(r.kl_max <= t.kl))
    r.reasons.push_back(fmt::format("KL {:.6g} at position {} exceeds {:.6g}", r.kl_max, r.kl_max_at, t.kl));
  if (!(r.max_abs_diff <= t.max_abs_diff))
    r.reasons.push_back(fmt::format("max |logit difference| {:.6g} at position {} exceeds {:.6g}", r.max_abs_diff,
                                    r.max_abs_diff_at, t.max_abs_diff));
  if (r.nonfinite > 0)
    r.reasons.push_back(fmt::format("{} entries are NaN or infinite on one side only", r.nonfinite));
  if (r.top1_agreement < t.top1_agreement)
    r.reasons.push_back(fmt::format("top-1 agreement {:.4f} below {:.4f}", r.top1_agreement, t.top1_agreement));
  r.pass = r.reasons.empty();
  return r;
}

std::string describe(const CompareReport& r, const CompareThresholds& t) {
  std::string s = fmt::format("positions {}; KL mean {:.6g}, max {:.6g} at {} (threshold {:.6g}); top-1 agreement {:.4f}",
                              r.positions, r.kl_mean, r.kl_max, r.kl_max_at, t.kl, r.top1_agreement);
  s += fmt::format("\nmax |logit difference| {:.6g} at {}; non-finite disagreements {}", r.max_abs_diff,
                   r.max_abs_diff_at, r.nonfinite);
  s += r.first_divergence ? fmt::format("\nfirst divergence at position {}", *r.first_divergence)
                          : std::string("\nno divergence");
  s += r.pass ? "\nverdict: PASS" : "\nverdict: FAIL";
  for (const std::string& why : r.reasons) s += "\n  " + why;
  return s;
}

}  // namespace kern::core
