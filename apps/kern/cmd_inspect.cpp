// kern inspect <checkpoint dir | .safetensors file>...: lists the tensors of a checkpoint
// (name, dtype, shape, bytes, shard) sorted by name, then a total. A broken checkpoint is a
// precise Error(WeightArtifact) (exit 1). Without paths, the weights of the kern.toml target.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "command.hpp"
#include "config.hpp"
#include "kern/base/error.hpp"
#include "kern/weights/safetensors.hpp"

namespace kern::cli::cmd_inspect {
namespace {

struct Options {
  std::vector<std::string> paths;
  std::string target;
};
Options opts;

// A directory among several paths is a usage error: one directory, or shard files.
bool usable(const std::vector<std::string>& paths) {
  if (paths.size() == 1) return true;
  for (const auto& p : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      std::fprintf(
          stderr, "kern inspect: %s is a directory: give one checkpoint directory, or one or more .safetensors files\n",
          p.c_str());
      return false;
    }
  }
  return true;
}

std::string shape_string(const std::vector<std::uint64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

int run() {
  std::vector<std::string> paths = opts.paths;
  if (paths.empty()) {
    const Config config = load_config(globals().config);
    const auto target = config.target(opts.target);
    if (!target || target->weights.empty()) {
      std::fprintf(
          stderr,
          "kern inspect: give a checkpoint directory or .safetensors files (no kern.toml target with weights%s)\n",
          config.path.empty() ? " found" : (" in " + config.path).c_str());
      return 2;
    }
    paths = target->weights;
  }
  if (!usable(paths)) return 2;
  const weights::SafetensorsCheckpoint ck = paths.size() == 1 ? weights::SafetensorsCheckpoint::open(paths[0])
                                                              : weights::SafetensorsCheckpoint::open_shards(paths);

  struct Row {
    std::string name, dtype, shape, bytes, shard;
  };
  std::vector<Row> rows;
  Row head{"NAME", "DTYPE", "SHAPE", "BYTES", "SHARD"};
  std::size_t w[4] = {head.name.size(), head.dtype.size(), head.shape.size(), head.bytes.size()};
  std::uint64_t total = 0;
  for (const auto& [name, at] : ck.tensors()) {  // std::map: sorted by name
    const weights::SafetensorsEntry& e = *at.entry;
    Row r{name, std::string(safetensors_name(e.dtype)), shape_string(e.shape), std::to_string(e.bytes()),
          std::filesystem::path(ck.shards()[at.shard].path).filename().string()};
    w[0] = std::max(w[0], r.name.size());
    w[1] = std::max(w[1], r.dtype.size());
    w[2] = std::max(w[2], r.shape.size());
    w[3] = std::max(w[3], r.bytes.size());
    total += e.bytes();
    rows.push_back(std::move(r));
  }
  auto print = [&](const Row& r) {
    fmt::print("{:<{}}  {:<{}}  {:<{}}  {:>{}}  {}\n", r.name, w[0], r.dtype, w[1], r.shape, w[2], r.bytes, w[3],
               r.shard);
  };
  print(head);
  for (const auto& r : rows) print(r);
  fmt::print("total: {} tensors, {} bytes, {} shard{}\n", rows.size(), total, ck.shards().size(),
             ck.shards().size() == 1 ? "" : "s");
  return 0;
}

Runner setup(CLI::App& app) {
  auto* sub = app.add_subcommand("inspect", "List the tensors of a safetensors checkpoint (directory or files)");
  sub->add_option(
      "paths", opts.paths,
      "A checkpoint directory, or one or more .safetensors files (default: the kern.toml target's weights)");
  sub->add_option("--target", opts.target, "kern.toml target whose weights to inspect when no path is given");
  return run;
}

Registrar reg("inspect", setup);

}  // namespace
}  // namespace kern::cli::cmd_inspect
