// kern test: the A/B harness (issue 19; docs/test.md).
//   kern test CANDIDATE.json --reference REFERENCE.json --weights W --kernels DIR
//             [--reference-kernels DIR] [--prompts 8] [--steps 32] [--max-prompt N] [--seed 0]
//             [--kl 0.01] [--capacity N] [--chunk 512] [--gpu 0] [--eager] [--host-compare]
//             [--json FILE]
// Both manifests are loaded on one GPU over one checkpoint; the candidate's weights that the
// reference declares identically use the reference's memory (Runtime::load_over). A workload of
// random prompts (lengths up to --max-prompt, ids over the vocabulary) runs through the reference
// greedily and through the candidate teacher-forced with the reference's tokens; each logits row
// is reduced on the device (kernels/compare.cu) and the verdict printed: per-position KL, top-1
// agreement, max |Δ logit|, the first diverging position. Exit status: 0 PASS, 3 FAIL,
// 4 INCONCLUSIVE (1 bad input, 2 bad usage).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "command.hpp"
#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/base/json.hpp"
#include "kern/core/ab_compare.hpp"
#include "kern/core/manifest.hpp"
#include "kern/core/protocol.hpp"
#include "kern/core/verify.hpp"
#include "kern/driver/ab_test.hpp"
#include "kern/driver/device_row_comparer.hpp"
#include "kern/driver/driver.hpp"
#include "kern/driver/runtime_executor.hpp"
#include "kern/runtime/runtime.hpp"
#include "kern/weights/safetensors.hpp"

namespace kern::cli::cmd_test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string candidate, reference, weights, kernels, reference_kernels, json;
  std::uint64_t prompts = 8, steps = 32, seed = 0, chunk = 512;
  std::optional<std::uint64_t> max_prompt, capacity;
  double kl = 0.01;
  int gpu = 0;
  bool eager = false, host_compare = false;
};
Options opt;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

void require(const std::string& path, const char* what, bool dir) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail(ErrorKind::Io, "{} {} does not exist", what, path);
  if (dir != fs::is_directory(path, ec))
    fail(ErrorKind::Io, "{} {} is {}", what, path, dir ? "not a directory" : "a directory, not a file");
}

// One manifest of the pair: verified, its protocol and its logits output.
struct Side {
  std::string what;  // "candidate" / "reference"
  core::Verified verified;
  core::Protocol protocol;
  std::string logits;
  DType dtype = DType::BF16;
  std::uint64_t vocab = 0;
};

Side open_side(const std::string& what, const std::string& path) {
  require(path, (what + " manifest").c_str(), false);
  core::Verified v = core::verify(core::parse_manifest_file(path));
  core::Protocol p = core::check_protocol(v);
  const std::optional<std::string> logits = driver::find_logits_output(p);
  if (!logits)
    fail(ErrorKind::Api,
         "the {} manifest {} has no single float output shaped [{}, vocab]: kern test compares logits (generate it "
         "with kern gen --logits-output)",
         what, path, p.group_var());
  const core::Buffer& b = v.manifest().buffers.at(*logits);
  std::uint64_t vocab = 1;
  for (std::size_t i = 1; i < b.shape.size(); ++i) vocab *= b.shape[i].value;
  return Side{what, std::move(v), std::move(p), *logits, b.dtype, vocab};
}

int exit_for(core::Verdict v) {
  switch (v) {
    case core::Verdict::Pass:
      return 0;
    case core::Verdict::Fail:
      return 3;
    case core::Verdict::Inconclusive:
      return 4;
  }
  return 4;
}

Json report_json(const Side& cand, const Side& ref, const driver::AbResult& r, const core::CompareThresholds& th) {
  Json rows = Json::array();
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    const core::PositionCompare& c = r.rows[i];
    const driver::AbPosition& w = r.where[i];
    rows.push_back(Json{{"prompt", w.prompt},
                        {"position", w.position},
                        {"reference_token", w.reference_token},
                        {"kl", c.kl},
                        {"top1_reference", c.top1_ref},
                        {"top1_candidate", c.top1_test},
                        {"max_abs_diff", c.max_abs_diff},
                        {"nonfinite", c.nonfinite},
                        {"identical", c.identical},
                        {"margin_reference", c.margin_ref},
                        {"rank_in_candidate", c.rank_in_test},
                        {"top20_overlap", c.top20_overlap}});
  }
  const core::CompareReport& s = r.report;
  Json summary{{"verdict", std::string(core::to_string(s.verdict))},
               {"rung", s.rung},
               {"positions", s.positions},
               {"kl_threshold", th.kl},
               {"kl_mean", s.kl_mean},
               {"kl_max", s.kl_max},
               {"kl_max_at", s.kl_max_at},
               {"top1_agreement", s.top1_agreement},
               {"max_abs_diff", s.max_abs_diff},
               {"flips", s.flips},
               {"identical", s.identical},
               {"nonfinite", s.nonfinite},
               {"first_divergence", s.first_divergence ? Json(*s.first_divergence) : Json(nullptr)},
               {"reasons", s.reasons}};
  return Json{{"candidate", opt.candidate}, {"reference", opt.reference}, {"logits", {cand.logits, ref.logits}},
              {"summary", summary},         {"rows", rows}};
}

int run() {
  if (opt.steps == 0 || opt.prompts == 0 || opt.chunk == 0) {
    std::fprintf(stderr, "error: --steps, --prompts and --chunk must be at least 1\n");
    return 2;
  }
  if (!(opt.kl > 0)) {
    std::fprintf(stderr, "error: --kl must be a positive number of nats\n");
    return 2;
  }
  require(opt.kernels, "kernels directory", true);
  if (!opt.reference_kernels.empty()) require(opt.reference_kernels, "reference kernels directory", true);
  {
    std::error_code ec;
    if (!fs::exists(opt.weights, ec)) fail(ErrorKind::Io, "weights {} does not exist", opt.weights);
  }
  const Side ref = open_side("reference", opt.reference);
  const Side cand = open_side("candidate", opt.candidate);
  if (ref.vocab != cand.vocab)
    fail(ErrorKind::Api, "the reference's logits ({}) hold {} entries per row, the candidate's ({}) {}", ref.logits,
         ref.vocab, cand.logits, cand.vocab);
  if (!opt.host_compare && ref.dtype != cand.dtype)
    fail(ErrorKind::Api, "the reference's logits are {}, the candidate's {}: the device compare needs one dtype "
         "(or use --host-compare)", manifest_name(ref.dtype), manifest_name(cand.dtype));

  // The workload's longest prompt: what --max-prompt asks, else 1024 or what the positions allow
  // (known once the generators see the runtimes' pools).
  if (opt.max_prompt && *opt.max_prompt == 0) fail(ErrorKind::Api, "--max-prompt must be at least 1");
  const std::uint64_t planned = opt.max_prompt.value_or(1024) + opt.steps - 1;
  const std::uint64_t capacity = opt.capacity.value_or(
      std::max(driver::capacity_for(ref.protocol, planned), driver::capacity_for(cand.protocol, planned)));

  runtime::RuntimeOptions ropt;
  ropt.gpu = opt.gpu;
  ropt.capacity.tokens = capacity;
  ropt.capacity.seqs = 1;
  ropt.eager = opt.eager;

  const Clock::time_point t0 = Clock::now();
  const weights::SafetensorsTensors tensors = weights::SafetensorsTensors::open(opt.weights);
  const std::unique_ptr<runtime::Runtime> ref_rt =
      runtime::Runtime::load(ref.verified, opt.reference_kernels.empty() ? opt.kernels : opt.reference_kernels, ropt);
  ref_rt->load_weights(tensors);
  const std::unique_ptr<runtime::Runtime> cand_rt = runtime::Runtime::load_over(*ref_rt, cand.verified, opt.kernels, ropt);
  cand_rt->load_weights(tensors);
  const runtime::Runtime::SharedWeights shared = cand_rt->shared_weights();
  std::fprintf(stderr,
               "weights: reference %.3f GB bound; candidate %.3f GB bound, %.3f GB (%zu buffers) shared with the "
               "reference; loaded in %.0f ms\n",
               ref_rt->stats().weight_bytes / 1e9, cand_rt->stats().weight_bytes / 1e9, shared.bytes / 1e9,
               shared.buffers, ms_since(t0));

  driver::RuntimeExecutor ref_exec(*ref_rt), cand_exec(*cand_rt);
  driver::GeneratorOptions gopt;
  gopt.steps = opt.steps;
  gopt.chunk = opt.chunk;
  driver::Generator ref_gen(ref.protocol, ref_exec, gopt);
  driver::Generator cand_gen(cand.protocol, cand_exec, gopt);
  const std::uint64_t fits = std::min(ref_gen.max_positions(), cand_gen.max_positions());
  const std::uint64_t max_prompt =
      opt.max_prompt ? *opt.max_prompt : std::min<std::uint64_t>(1024, fits >= opt.steps ? fits - opt.steps + 1 : 1);
  const std::uint64_t needed = max_prompt + opt.steps - 1;
  if (needed > fits)
    fail(ErrorKind::Api, "a {}-token prompt and {} steps need {} positions; the runtimes hold {} (raise --capacity "
         "or lower --max-prompt)", max_prompt, opt.steps, needed, fits);
  const std::vector<std::vector<std::int64_t>> prompts =
      driver::sample_prompts({opt.prompts, max_prompt, opt.seed}, ref.vocab);

  std::unique_ptr<driver::RowComparer> comparer;
  if (opt.host_compare)
    comparer = std::make_unique<driver::HostRowComparer>(driver::HostRowComparer::Side{&ref_exec, ref.logits, ref.dtype},
                                                         driver::HostRowComparer::Side{&cand_exec, cand.logits, cand.dtype},
                                                         ref.vocab);
  else
    comparer = std::make_unique<driver::DeviceRowComparer>(
        driver::DeviceRowComparer::Side{ref_rt.get(), ref.logits, ref.dtype},
        driver::DeviceRowComparer::Side{cand_rt.get(), cand.logits, cand.dtype}, ref.vocab, opt.steps, opt.kernels);
  const core::CompareThresholds th{opt.kl};
  const Clock::time_point t1 = Clock::now();
  const driver::AbResult result = driver::run_ab(ref_gen, cand_gen, prompts, *comparer, th);
  std::fprintf(stderr, "workload: %zu prompts (%llu tokens, longest %llu), %zu positions compared %s in %.0f ms\n",
               prompts.size(), static_cast<unsigned long long>(result.prompt_tokens),
               static_cast<unsigned long long>(max_prompt), result.rows.size(),
               opt.host_compare ? "on the host" : "on the device", ms_since(t1));
  if (!opt.json.empty()) write_file(opt.json, report_json(cand, ref, result, th).dump(1) + "\n");
  std::printf("%s\n", core::describe(result.report, th).c_str());
  if (result.report.first_divergence) {
    const driver::AbPosition& w = result.where[*result.report.first_divergence];
    std::printf("first divergence: prompt %zu position %llu\n", w.prompt, static_cast<unsigned long long>(w.position));
  }
  std::fflush(stdout);
  return exit_for(result.report.verdict);
}

Runner setup(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("test", "A/B a candidate manifest against a reference over one checkpoint");
  cmd->add_option("candidate", opt.candidate, "Candidate manifest JSON")->required();
  cmd->add_option("--reference", opt.reference, "Reference manifest JSON")->required();
  cmd->add_option("--weights", opt.weights, "Checkpoint directory or .safetensors file")->required();
  cmd->add_option("--kernels", opt.kernels, "Kernels directory (the candidate's; compare.fatbin too)")->required();
  cmd->add_option("--reference-kernels", opt.reference_kernels, "The reference's kernels directory (default: --kernels)");
  cmd->add_option("--prompts", opt.prompts, "Prompts in the workload (default 8)");
  cmd->add_option("--steps", opt.steps, "Positions compared per prompt (default 32)");
  cmd->add_option("--max-prompt", opt.max_prompt, "Longest prompt in tokens (default: 1024, or what the positions allow)");
  cmd->add_option("--seed", opt.seed, "Seed of the workload's prompts (default 0)");
  cmd->add_option("--kl", opt.kl, "KL threshold in nats per position (default 0.01)");
  cmd->add_option("--capacity", opt.capacity, "KV capacity in tokens (default: the longest prompt + steps)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--chunk", opt.chunk, "Prefill rows per call (default 512)");
  cmd->add_option("--gpu", opt.gpu, "GPU index (default 0)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--eager", opt.eager, "Never replay CUDA graphs (both runtimes)");
  cmd->add_flag("--host-compare", opt.host_compare, "Reduce the rows on the host (reads every logits row back)");
  cmd->add_option("--json", opt.json, "Write the per-position report as JSON to FILE");
  return [] { return run(); };
}
Registrar reg("test", setup);

}  // namespace
}  // namespace kern::cli::cmd_test
