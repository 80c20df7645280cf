// kern test's comparison (issue 19): two manifests' logits at the same positions, reduced per
// position to what the verdict needs, then judged. The GPU compare kernels will reduce each
// position on the device (logits never cross to the host); compare_rows is their float64 host
// reference and the fake executor's; summarize is the one verdict both use. The logit rungs of the
// seed's verdict ladder (kern-facts.md §7): FAIL on a one-sided NaN / inf or an argmax flip on a
// row whose KL exceeds the threshold (NaN counts as infinite); PASS when every row is bit-identical;
// PASS on logit evidence when every row's KL is within it (flips only there); else INCONCLUSIVE.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string_view>
#include <string>
#include <vector>

namespace kern::core {

// One position of a reference row and a test row of the same length.
struct PositionCompare {
  double kl = 0.0;              // KL(P_ref || P_test), nats: softmax in float64 over the entries finite in both
  std::int64_t top1_ref = -1;   // argmax of the finite entries, ties to the lower id; -1 when none
  std::int64_t top1_test = -1;
  double max_abs_diff = 0.0;    // max |test - ref| over the entries finite in both
  std::int64_t nonfinite = 0;   // entries where the two sides disagree in finiteness (NaN, +inf, -inf, finite)
  bool identical = false;       // every entry bitwise equal
  double margin_ref = 0.0;      // the reference's top-1 minus its top-2 (finite entries; 0 with fewer than 2)
  std::int64_t rank_in_test = -1;  // the reference's top-1's rank in the test row (0 = its top-1 too); -1: none
  int top20_overlap = 0;        // |top-20 of ref ∩ top-20 of test| (finite entries, ties to the lower id)
};

// Error(Api) when the rows' lengths differ or are zero.
PositionCompare compare_rows(std::span<const float> ref, std::span<const float> test);

struct CompareThresholds {
  double kl = 0.01;  // nats: a row's KL within this is evidence of agreement (the seed's logit_kl)
};

enum class Verdict { Pass, Fail, Inconclusive };
std::string_view to_string(Verdict v);

struct CompareReport {
  std::size_t positions = 0;
  double kl_mean = 0.0, kl_max = 0.0;
  std::size_t kl_max_at = 0;
  double top1_agreement = 0.0;  // fraction of positions whose top-1 agree
  double max_abs_diff = 0.0;
  std::size_t max_abs_diff_at = 0;
  std::int64_t nonfinite = 0;
  std::size_t flips = 0;           // positions whose top-1 differ
  std::size_t flips_over_kl = 0;   // of them, with KL above the threshold
  std::size_t over_kl = 0;         // positions with KL above the threshold
  std::size_t identical = 0;       // bit-identical positions
  double min_margin_at_flip = 0.0; // the reference's smallest top-1 margin among the flips
  // the first position that is not bit-identical and either flips its top-1, exceeds the KL threshold
  // or has non-finite disagreements
  std::optional<std::size_t> first_divergence;
  Verdict verdict = Verdict::Inconclusive;
  std::string rung;                // which rung decided, e.g. "logit evidence"
  std::vector<std::string> reasons;  // what stands against a pass, one line each
};

// The verdict over a workload's positions in order; no positions is a failure ("nothing compared").
CompareReport summarize(std::span<const PositionCompare> positions, const CompareThresholds& thresholds = {});

// The report as the text `kern test` prints (several lines, no trailing newline).
std::string describe(const CompareReport& report, const CompareThresholds& thresholds);

}  // namespace kern::core
