#include "kern/driver/ranks_executor.hpp"

#include "kern/base/error.hpp"
#include "kern/base/log.hpp"

namespace kern::driver {

std::vector<std::unique_ptr<runtime::Runtime>> load_ranks(const core::Verified& manifest, const std::string& kernels_dir,
                                                          const runtime::RuntimeOptions& options, const RankPlan& plan) {
  std::vector<std::unique_ptr<runtime::Runtime>> ranks;
  if (plan.gpus.size() > 1) runtime::Runtime::prefer_eager_module_loading();  // before CUDA starts
  for (std::size_t r = 0; r < plan.gpus.size(); ++r) {
    runtime::RuntimeOptions o = options;
    o.gpu = plan.gpus[r];
    if (!plan.group.empty()) o.ranks[plan.group] = r;
    ranks.push_back(runtime::Runtime::load(manifest, kernels_dir, o));
    if (plan.gpus.size() > 1) log().info("rank {} of group {}: GPU {}", r, plan.group, plan.gpus[r]);
  }
  return ranks;
}

std::vector<runtime::Runtime*> rank_pointers(const std::vector<std::unique_ptr<runtime::Runtime>>& ranks) {
  std::vector<runtime::Runtime*> raw;
  raw.reserve(ranks.size());
  for (const auto& r : ranks) raw.push_back(r.get());
  return raw;
}

void connect_ranks(const std::vector<std::unique_ptr<runtime::Runtime>>& ranks) {
  if (ranks.size() < 2) return;
  runtime::Runtime::connect_local(rank_pointers(ranks));
}

namespace {
runtime::Runtime& first_of(const std::vector<runtime::Runtime*>& ranks) {
  if (ranks.empty() || ranks[0] == nullptr) fail(ErrorKind::Api, "RanksExecutor: no ranks");
  return *ranks[0];
}
}  // namespace

RanksExecutor::RanksExecutor(std::vector<runtime::Runtime*> ranks) : ranks_(std::move(ranks)), lead_(first_of(ranks_)) {
  for (runtime::Runtime* r : ranks_)
    if (r == nullptr) fail(ErrorKind::Api, "RanksExecutor: a rank is missing");
}

void RanksExecutor::write_input(std::string_view b, std::span<const std::byte> bytes, bool prefix) {
  for (runtime::Runtime* r : ranks_) r->write_input(b, bytes, prefix);
}

void RanksExecutor::write_input_at(std::string_view b, std::uint64_t offset, std::span<const std::byte> bytes) {
  for (runtime::Runtime* r : ranks_) r->write_input_at(b, offset, bytes);
}

void RanksExecutor::launch_others(std::string_view program, const core::Vars& vars) {
  for (std::size_t i = 1; i < ranks_.size(); ++i) ranks_[i]->launch(program, vars);
}

void RanksExecutor::wait_others() {
  for (std::size_t i = 1; i < ranks_.size(); ++i) ranks_[i]->synchronize();
}

// An eager program goes call by call over the ranks (eager_launch_order: ranks 1.. then 0 for each call), so that when
// a launch blocks the host (a library kernel's first launch may load its module and wait for the
// GPU's work in flight), every cross-rank wait already queued has its partners queued too. Launched
// rank after rank, rank 1's barriers spun for a rank 0 not yet launched while the host waited, and
// timed out: kern run --gpus 0,0 spent 16 x 2 s in its first prefill call (docs/perf.md, session 36).
// A graph program is one launch per rank, which never blocks part-way.
bool RanksExecutor::interleaves(std::string_view program) {
  return ranks_.size() > 1 && !ranks_[0]->replays_graph(program);
}

void RanksExecutor::launch_interleaved(std::string_view program, const core::Vars& vars) {
  for (const RankCall& rc : eager_launch_order(ranks_[0]->call_count(program), ranks_.size()))
    ranks_[rc.rank]->launch_range(program, vars, rc.call, rc.call + 1);
}

void RanksExecutor::run(std::string_view program, const core::Vars& vars) {
  if (interleaves(program)) {
    launch_interleaved(program, vars);
    ranks_[0]->synchronize();
  } else {
    launch_others(program, vars);
    ranks_[0]->run(program, vars);
  }
  wait_others();
}

// The other ranks' inputs for the next step are written after every rank finished this one: before_wait
// runs on rank 0's wait, and writes to every rank (write_input above), so the other ranks must be done
// reading this step's inputs first.
void RanksExecutor::run_and_read(std::string_view program, const core::Vars& vars, std::string_view buffer,
                                 std::span<std::byte> out, const std::function<void()>& before_wait) {
  if (interleaves(program)) {
    launch_interleaved(program, vars);
    ranks_[0]->read_output(buffer, 0, out);  // queued behind rank 0's calls, then waited for
  } else {
    launch_others(program, vars);
    ranks_[0]->run_and_read(program, vars, buffer, 0, out, std::function<void()>());
  }
  wait_others();
  if (before_wait) before_wait();
}

}  // namespace kern::driver
