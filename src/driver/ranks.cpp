#include "kern/driver/ranks.hpp"

#include <charconv>

#include "kern/base/error.hpp"

namespace kern::driver {

std::vector<int> parse_gpu_list(const std::string& text, const std::string& what) {
  std::vector<int> out;
  std::size_t at = 0;
  while (true) {
    const std::size_t comma = text.find(',', at);
    const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    int v = -1;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || v < 0)
      fail(ErrorKind::Api, "{} {}: expected GPU ordinals a,b,... (non-negative integers), got '{}'", what, text, item);
    out.push_back(v);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

RankPlan plan_ranks(const core::Manifest& m, const std::vector<int>& gpus, int default_gpu) {
  RankPlan plan;
  std::uint64_t size = 1;
  for (const auto& [name, n] : m.topology) {
    if (n <= 1) continue;
    if (!plan.group.empty())
      fail(ErrorKind::Api,
           "the manifest's topology has groups {} ({} ranks) and {} ({} ranks); one process holds the ranks of "
           "one group only",
           plan.group, size, name, n);
    plan.group = name;
    size = n;
  }
  if (gpus.empty()) {
    if (size > 1)
      fail(ErrorKind::Api, "the manifest's topology group {} has {} ranks: give --gpus with {} GPU ordinals", plan.group,
           size, size);
    plan.gpus = {default_gpu};
    return plan;
  }
  if (gpus.size() != size)
    fail(ErrorKind::Api, "--gpus lists {} GPU{}, but the manifest {}", gpus.size(), gpus.size() == 1 ? "" : "s",
         size == 1 ? std::string("has no topology group of more than one rank (generate it with kern gen --tp N)")
                   : fmt::format("'s topology group {} has {} ranks", plan.group, size));
  if (size > 1)
    for (const auto& [name, s] : m.states)
      if (s.bytes_per_seq > 0)
        fail(ErrorKind::Api,
             "state {} is per sequence: ranks of one process share rank 0's lease decisions, which only paged "
             "states allow",
             name);
  plan.gpus = gpus;
  return plan;
}

std::vector<RankCall> eager_launch_order(std::size_t calls, std::size_t ranks) {
  std::vector<RankCall> order;
  order.reserve(calls * ranks);
  for (std::size_t i = 0; i < calls; ++i) {
    for (std::size_t r = 1; r < ranks; ++r) order.push_back({r, i});
    if (ranks > 0) order.push_back({0, i});
  }
  return order;
}

}  // namespace kern::driver
