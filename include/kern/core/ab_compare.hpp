// kern test's comparison (issue 19): two manifests' logits at the same positions, reduced per
// position to what the verdict needs, then summarised against thresholds. The GPU compare kernels
// will reduce each position on the device (logits never cross to the host); compare_rows is their
// float64 host reference and the fake executor's; summarize is the one verdict both use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
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
};

// Error(Api) when the rows' lengths differ or are zero.
PositionCompare compare_rows(std::span<const float> ref, std::span<const float> test);

struct CompareThresholds {
  double kl = 0.01;                                                  // every position's KL at most this
  double top1_agreement = 0.0;                                       // the fraction of positions agreeing, at least
  double max_abs_diff = std::numeric_limits<double>::infinity();     // every position's max |diff| at most this
};

struct CompareReport {
  std::size_t positions = 0;
  double kl_mean = 0.0, kl_max = 0.0;
  std::size_t kl_max_at = 0;
  double top1_agreement = 0.0;  // fraction of positions whose top-1 agree
  double max_abs_diff = 0.0;
  std::size_t max_abs_diff_at = 0;
  std::int64_t nonfinite = 0;
  // the first position breaking a per-position threshold (KL, max |diff|, non-finite entries) or whose
  // top-1 differ
  std::optional<std::size_t> first_divergence;
  bool pass = false;
  std::vector<std::string> reasons;  // why it failed, one line each (empty when it passes)
};

// The verdict over a workload's positions in order; no positions is a failure ("nothing compared").
CompareReport summarize(std::span<const PositionCompare> positions, const CompareThresholds& thresholds = {});

// The report as the text `kern test` prints (several lines, no trailing newline).
std::string describe(const CompareReport& report, const CompareThresholds& thresholds);

}  // namespace kern::core
