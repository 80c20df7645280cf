#include "kern/core/ab_compare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kern/base/error.hpp"

namespace kern::core {

namespace {

// 0 finite, 1 NaN, 2 +inf, 3 -inf
int kind_of(float v) {
  if (std::isnan(v)) return 1;
  if (std::isinf(v)) return v > 0 ? 2 : 3;
  return 0;
}

// a before b: larger first, ties to the lower id
bool before(std::span<const float> row, std::size_t a, std::size_t b) {
  return row[a] > row[b] || (row[a] == row[b] && a < b);
}

// The finite entries' ids in rank order, the first k (fewer when there are fewer).
std::vector<std::size_t> top_ids(std::span<const float> row, std::size_t k) {
  std::vector<std::size_t> ids;
  for (std::size_t i = 0; i < row.size(); ++i)
    if (std::isfinite(row[i])) ids.push_back(i);
  const std::size_t n = std::min(k, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(),
                    [&](std::size_t a, std::size_t b) { return before(row, a, b); });
  ids.resize(n);
  return ids;
}

}  // namespace

std::string_view to_string(Verdict v) {
  switch (v) {
    case Verdict::Pass:
      return "PASS";
    case Verdict::Fail:
      return "FAIL";
    case Verdict::Inconclusive:
      return "INCONCLUSIVE";
  }
  return "?";
}

PositionCompare compare_rows(std::span<const float> ref, std::span<const float> test) {
  if (ref.size() != test.size() || ref.empty())
    fail(ErrorKind::Api, "compare_rows: rows of {} and {} entries (they must be equal and non-empty)", ref.size(),
         test.size());
  PositionCompare out;
  out.identical = std::memcmp(ref.data(), test.data(), ref.size_bytes()) == 0;
  const std::vector<std::size_t> tr = top_ids(ref, 20), tt = top_ids(test, 20);
  if (!tr.empty()) out.top1_ref = static_cast<std::int64_t>(tr[0]);
  if (!tt.empty()) out.top1_test = static_cast<std::int64_t>(tt[0]);
  if (tr.size() >= 2) out.margin_ref = static_cast<double>(ref[tr[0]]) - ref[tr[1]];
  for (std::size_t a : tr) out.top20_overlap += std::find(tt.begin(), tt.end(), a) != tt.end() ? 1 : 0;
  if (!tr.empty() && std::isfinite(test[tr[0]])) {
    out.rank_in_test = 0;
    for (std::size_t i = 0; i < test.size(); ++i)
      if (std::isfinite(test[i]) && before(test, i, tr[0])) ++out.rank_in_test;
  }
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
    r.verdict = Verdict::Inconclusive;
    r.rung = "nothing compared";
    r.reasons.push_back("the workload has no positions");
    return r;
  }
  std::size_t agree = 0;
  double kl_sum = 0.0;
  bool any_flip = false;
  for (std::size_t p = 0; p < positions.size(); ++p) {
    const PositionCompare& c = positions[p];
    const bool over = !(c.kl <= t.kl);  // NaN counts as infinite
    const bool flip = c.top1_ref != c.top1_test;
    kl_sum += c.kl;
    if (p == 0 || c.kl > r.kl_max || std::isnan(c.kl)) r.kl_max = c.kl, r.kl_max_at = p;
    if (p == 0 || c.max_abs_diff > r.max_abs_diff) r.max_abs_diff = c.max_abs_diff, r.max_abs_diff_at = p;
    r.nonfinite += c.nonfinite;
    r.identical += c.identical ? 1 : 0;
    r.over_kl += over ? 1 : 0;
    if (flip) {
      r.min_margin_at_flip = any_flip ? std::min(r.min_margin_at_flip, c.margin_ref) : c.margin_ref;
      any_flip = true;
      ++r.flips;
      r.flips_over_kl += over ? 1 : 0;
    } else {
      ++agree;
    }
    if (!c.identical && (flip || over || c.nonfinite > 0) && !r.first_divergence) r.first_divergence = p;
  }
  r.kl_mean = kl_sum / static_cast<double>(positions.size());
  r.top1_agreement = static_cast<double>(agree) / static_cast<double>(positions.size());
  if (r.nonfinite > 0)
    r.reasons.push_back(fmt::format("{} entries are NaN or infinite on one side only", r.nonfinite));
  if (r.flips_over_kl > 0)
    r.reasons.push_back(fmt::format("{} top-1 flips on rows whose KL exceeds {:.6g} (max KL {:.6g} at position {})",
                                    r.flips_over_kl, t.kl, r.kl_max, r.kl_max_at));
  if (!r.reasons.empty()) {
    r.verdict = Verdict::Fail;
    r.rung = r.nonfinite > 0 ? "non-finite logits" : "argmax flip beyond the KL threshold";
    return r;
  }
  if (r.identical == r.positions) {
    r.verdict = Verdict::Pass;
    r.rung = "logits bit-identical";
    return r;
  }
  if (r.over_kl == 0) {
    r.verdict = Verdict::Pass;
    r.rung = "logit evidence";
    return r;
  }
  r.verdict = Verdict::Inconclusive;
  r.rung = "KL above the threshold without a flip";
  r.reasons.push_back(
      fmt::format("{} positions have KL above {:.6g} (max {:.6g} at {}) but the same top-1", r.over_kl, t.kl, r.kl_max,
                  r.kl_max_at));
  return r;
}

std::string describe(const CompareReport& r, const CompareThresholds& t) {
  std::string s = fmt::format("positions {} ({} bit-identical); KL mean {:.6g}, max {:.6g} at {} (threshold {:.6g})",
                              r.positions, r.identical, r.kl_mean, r.kl_max, r.kl_max_at, t.kl);
  s += fmt::format("\ntop-1 agreement {:.4f}: {} flips, {} beyond the threshold", r.top1_agreement, r.flips,
                   r.flips_over_kl);
  if (r.flips > 0) s += fmt::format(" (the reference's smallest margin at a flip {:.6g})", r.min_margin_at_flip);
  s += fmt::format("\nmax |logit difference| {:.6g} at {}; non-finite disagreements {}", r.max_abs_diff,
                   r.max_abs_diff_at, r.nonfinite);
  s += r.first_divergence ? fmt::format("\nfirst divergence at position {}", *r.first_divergence)
                          : std::string("\nno divergence");
  for (const std::string& why : r.reasons) s += "\n  " + why;
  s += fmt::format("\n{}: {}", to_string(r.verdict), r.rung);
  return s;
}

}  // namespace kern::core
