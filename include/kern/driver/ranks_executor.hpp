// The driver's Executor over every rank of one topology group held by one process (kern run /
// kern bench --gpus; issue 20, docs/multi-gpu-handles.md "One process, every rank").
//
// Every input write goes to every rank. A graph program's run launches ranks 1.. first (their first
// cross-rank wait holds them), then runs rank 0, then waits for the others, so a rank that fails is
// seen before the next call; an eager program's calls go call by call over the ranks (ranks 1..,
// then 0, for each call), so that a launch that blocks the host never leaves a queued cross-rank
// wait without its partners. Reads, limits and leases are rank 0's: its pool decides every sequence's pages and the
// page-table rows the driver writes name the same pages of every rank's own memory (plan_ranks
// allows only paged states, whose layout is the same on every rank of one manifest and capacity).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kern/driver/driver.hpp"
#include "kern/driver/ranks.hpp"
#include "kern/driver/runtime_executor.hpp"
#include "kern/runtime/runtime.hpp"

namespace kern::driver {

// Loads one runtime per rank of `plan` (options.gpu and options.ranks[plan.group] set per rank), with
// more than one rank after Runtime::prefer_eager_module_loading (call it first in the process: CUDA
// reads the setting once). Bind the weights on each, then connect_ranks.
std::vector<std::unique_ptr<runtime::Runtime>> load_ranks(const core::Verified& manifest, const std::string& kernels_dir,
                                                          const runtime::RuntimeOptions& options, const RankPlan& plan);
// The handshake among them (Runtime::connect_local); nothing for a single rank.
void connect_ranks(const std::vector<std::unique_ptr<runtime::Runtime>>& ranks);
// The ranks as the non-owning pointers RanksExecutor and connect_local take, in rank order.
std::vector<runtime::Runtime*> rank_pointers(const std::vector<std::unique_ptr<runtime::Runtime>>& ranks);

class RanksExecutor final : public Executor {
 public:
  explicit RanksExecutor(std::vector<runtime::Runtime*> ranks);
  void write_input(std::string_view b, std::span<const std::byte> bytes, bool prefix) override;
  void write_input_at(std::string_view b, std::uint64_t offset, std::span<const std::byte> bytes) override;
  void run(std::string_view program, const core::Vars& vars) override;
  void run_and_read(std::string_view program, const core::Vars& vars, std::string_view buffer, std::span<std::byte> out,
                    const std::function<void()>& before_wait) override;
  std::vector<std::byte> read_output(std::string_view b) override { return lead_.read_output(b); }
  std::vector<std::byte> read_buffer(std::string_view n) override { return lead_.read_buffer(n); }
  std::vector<std::byte> read_output_prefix(std::string_view b, std::uint64_t bytes) override {
    return lead_.read_output_prefix(b, bytes);
  }
  std::optional<SeqLimits> seq_limits() const override { return lead_.seq_limits(); }
  pool::Granted<pool::Lease> lease(std::uint64_t tokens) override { return lead_.lease(tokens); }
  std::optional<pool::Denied> extend(pool::Lease& lease, std::uint64_t tokens) override {
    return lead_.extend(lease, tokens);
  }
  void settle() override { lead_.settle(); }

 private:
  bool interleaves(std::string_view program);
  void launch_interleaved(std::string_view program, const core::Vars& vars);
  void launch_others(std::string_view program, const core::Vars& vars);
  void wait_others();
  std::vector<runtime::Runtime*> ranks_;
  RuntimeExecutor lead_;
};

}  // namespace kern::driver
