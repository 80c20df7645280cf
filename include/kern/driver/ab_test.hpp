// kern test's A/B run (issue 19; docs/test.md): one workload of prompts through a reference and a
// candidate manifest, position by position. The reference generates greedily; the candidate is
// teacher-forced with the reference's tokens (Generator::generate's `forced`), so both produce a
// logits row at the same positions from the same inputs. Each token-producing call's row goes to a
// RowComparer: the reference's rows of a prompt are kept, then each candidate row is compared with
// the kept row of the same index (on the device for kern test; on the host for fakes). The rows'
// verdict is core::summarize's.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kern/base/dtype.hpp"
#include "kern/core/ab_compare.hpp"
#include "kern/driver/driver.hpp"

namespace kern::driver {

struct AbWorkloadOptions {
  std::uint64_t prompts = 8;     // ≥ 1
  std::uint64_t max_prompt = 0;  // the longest prompt (≥ 1)
  std::uint64_t seed = 0;
};

// Deterministic prompts of token ids uniform in [0, vocab): the first max_prompt tokens long, the
// second (when there are two or more) one token long, the others' lengths uniform in
// [1, max_prompt]. The same options give the same prompts on every platform (SplitMix64, no
// standard distributions). Error(Api) for 0 prompts, vocab 0 or max_prompt 0.
std::vector<std::vector<std::int64_t>> sample_prompts(const AbWorkloadOptions& options, std::uint64_t vocab);

// Where the two runs' logits rows go.
class RowComparer {
 public:
  virtual ~RowComparer() = default;
  // A prompt begins: what was kept for the previous one may go.
  virtual void begin_prompt() = 0;
  // After a reference call: its logits row is row `index` of this prompt (0, 1, ... in order).
  virtual void keep_reference(std::size_t index) = 0;
  // After a candidate call: compare its logits row with the kept reference row `index`.
  virtual void compare(std::size_t index) = 0;
  // Every comparison made so far, in order (may wait for the device).
  virtual std::vector<core::PositionCompare> results() = 0;
};

// Compares on the host: reads both executors' logits rows (`vocab` leading entries of each output,
// bf16 / f16 / f32) and reduces them with core::compare_rows. For fake executors and tests.
class HostRowComparer final : public RowComparer {
 public:
  struct Side {
    Executor* exec = nullptr;
    std::string buffer;  // the logits output
    DType dtype = DType::F32;
  };
  HostRowComparer(Side reference, Side candidate, std::uint64_t vocab);
  void begin_prompt() override;
  void keep_reference(std::size_t index) override;
  void compare(std::size_t index) override;
  std::vector<core::PositionCompare> results() override;

 private:
  std::vector<float> row(const Side& s);
  Side ref_, cand_;
  std::uint64_t vocab_;
  std::vector<std::vector<float>> kept_;
  std::vector<core::PositionCompare> results_;
};

// Where a compared row was: its prompt, the sequence position whose logits it holds, and the token
// the reference chose there (fed to both at the next position).
struct AbPosition {
  std::size_t prompt = 0;
  std::uint64_t position = 0;
  std::int64_t reference_token = -1;
};

struct AbResult {
  std::vector<core::PositionCompare> rows;  // workload order
  std::vector<AbPosition> where;            // one per row
  std::uint64_t prompt_tokens = 0;          // over the workload
  core::CompareReport report;
};

// Runs each prompt through `reference` (its options decide steps and stop tokens), then through
// `candidate` forced with the reference's tokens; Error(Api) when the two runs produce a different
// number of rows for a prompt (the candidate stopped early) or a prompt cannot fit either.
AbResult run_ab(Generator& reference, Generator& candidate, std::span<const std::vector<std::int64_t>> prompts,
                RowComparer& comparer, const core::CompareThresholds& thresholds = {});

}  // namespace kern::driver
