// kern gen qwen3 <hf-dir>: writes a schema-v5 manifest for a dense Qwen3 checkpoint from its
// config.json (and checks the bound tensor names against model.safetensors.index.json when the
// checkpoint has one). The manifest goes to -o FILE, or to stdout.
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <filesystem>
#include <string>

#include "command.hpp"
#include "kern/cuda/cuda.hpp"
#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/base/json.hpp"
#include "kern/base/log.hpp"
#include "kern/models/qwen3_gen.hpp"

namespace kern::cli::cmd_gen {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::string hf_dir;
  std::string out;
  std::string kernels_dir;
  std::string model;
  bool chain_blocks_given = false;
  models::Qwen3GenOptions gen;
};
Options opt;

// The decode chain (--decode-chain) needs one block per SM of the GPU that runs the manifest, and sm_90;
// the wgmma prefill attention needs sm_90a. Ask GPU 0 when one is visible (a machine without one keeps
// the H200's: 132 SMs unless --chain-blocks says otherwise; the runtime refuses a grid that does not
// fit at load).
void fit_to_device() {
  if (!opt.gen.prefill_attn_wgmma && (!opt.gen.decode_chain || opt.chain_blocks_given)) return;
  try {
    const cuda::DeviceInfo d = cuda::device_info(0);
    if (opt.gen.prefill_attn_wgmma && !models::prefill_attn_wgmma_runs_on(d.cc_major, d.cc_minor)) {
      opt.gen.prefill_attn_wgmma = false;
      log().info("GPU 0 is sm_{}{}: the wgmma prefill attention needs sm_90a, prefill uses the mma.sync layouts",
                 d.cc_major, d.cc_minor);
    }
    if (!opt.gen.decode_chain || opt.chain_blocks_given) return;
    if (d.cc_major < 9) {
      opt.gen.decode_chain = false;
      log().info("GPU 0 is sm_{}{}: the decode chain needs sm_90, decode uses the per-op kernels", d.cc_major,
                 d.cc_minor);
    } else {
      opt.gen.chain_blocks = static_cast<std::uint64_t>(d.sm_count);
    }
  } catch (const Error& e) {
    log().info("no GPU to fit the manifest to ({}): written for an H200 (sm_90a, {} SMs)", e.what(), opt.gen.chain_blocks);
  }
}

// <build>/kernels: the kern binary lives in <build>/bin.
std::string default_kernels_dir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "kernels";
  buf[n] = '\0';
  return (fs::path(buf).parent_path().parent_path() / "kernels").string();
}

int run_qwen3() {
  const fs::path dir(opt.hf_dir);
  const models::Qwen3Shape config = models::read_qwen3_config(dir);
  const fs::path index = dir / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::is_regular_file(index, ec)) {
    const Json j = parse_json_strict(read_file(index.string()), {ErrorKind::WeightArtifact, index.string()});
    models::check_qwen3_tensor_index(config, j, index.string());
  } else {
    log().info("{} not found: tensor names are checked when the weights load", index.string());
  }
  const std::string kernels = opt.kernels_dir.empty() ? default_kernels_dir() : opt.kernels_dir;
  opt.gen.module_sha256 = models::hash_kernel_fatbins(kernels);
  fit_to_device();
  opt.gen.model = opt.model;
  if (opt.gen.model.empty()) {
    const fs::path canon = fs::weakly_canonical(dir, ec);
    opt.gen.model = (ec ? dir : canon).filename().string();
    if (opt.gen.model.empty()) opt.gen.model = "qwen3";
  }
  const std::string text = models::generate_qwen3_manifest(config, opt.gen).dump(1) + "\n";
  if (opt.out.empty() || opt.out == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    write_file(opt.out, text);
  }
  log().info(
      "qwen3 manifest: {} layers, hidden {}, {} heads / {} kv heads × {}, vocab {}, {} embeddings; "
      "tokens ≤ {}, seqs ≤ {}, page {}; kernels from {}{}",
      config.layers, config.hidden, config.heads, config.kv_heads, config.head_dim, config.vocab,
      config.tied ? "tied" : "untied", opt.gen.max_tokens, opt.gen.max_seqs, opt.gen.page_size, kernels,
      opt.out.empty() || opt.out == "-" ? "" : " -> " + opt.out);
  return 0;
}

Runner setup(CLI::App& app) {
  CLI::App* gen = app.add_subcommand("gen", "Generate a manifest for a model family from a Hugging Face checkpoint");
  gen->require_subcommand(1);
  CLI::App* q = gen->add_subcommand("qwen3", "Dense Qwen3 (0.6B ... 32B) from <hf-dir>/config.json");
  q->add_option("hf-dir", opt.hf_dir, "Hugging Face checkpoint directory (config.json)")->required();
  q->add_option("-o,--output", opt.out, "Write the manifest here (default: stdout)");
  q->add_option("--max-tokens", opt.gen.max_tokens, "Rows per call (prefill chunk bound)");
  q->add_option("--max-seqs", opt.gen.max_seqs, "Sequences per decode step");
  q->add_option("--page-size", opt.gen.page_size, "KV-cache tokens per page");
  q->add_option("--kernels-dir", opt.kernels_dir, "Directory of the built fatbins (default: <build>/kernels)");
  q->add_option("--model", opt.model, "The manifest's model label (default: the checkpoint directory's name)");
  q->add_flag("--logits-output", opt.gen.logits_output, "Expose logits ([seqs, vocab] bf16) as an output buffer");
  q->add_flag("!--no-pdl", opt.gen.pdl, "Launch the decode kernels without programmatic dependent launch");
  q->add_flag("!--greedy-only", opt.gen.sampling,
              "Argmax instead of the sampling op (no sampling inputs; for GPUs before sm_90)");
  q->add_option("--gemv-prefetch", opt.gen.gemv_prefetch_bytes,
                "Bytes of its weight tile each decode GEMV block prefetches into L2 before waiting (0: none)");
  q->add_flag("--gemv-fused-norm", opt.gen.gemv_fused_norm,
              "Fuse each decode RMSNorm into the GEMV that reads it (measured slower on the H200)");
  q->add_option("--gemv-max-blocks", opt.gen.gemv_max_blocks,
                "At most this many blocks per decode GEMV (0: one per tile)");
  q->add_flag("--decode-chain", opt.gen.decode_chain,
              "Decode steps of up to 4 sequences through the persistent decode-chain kernel (sm_90; measured no "
              "faster on the H200)");
  q->add_option("--attn-target-blocks", opt.gen.decode_attn_target_blocks,
                "Blocks of work the decode attention aims for per call (ranges per sequence: this / (seqs x kv heads), "
                "at most 64; 0, the default: 256 for the tensor-core kernel, 1024 for --decode-attn-f32)");
  q->add_flag("!--no-batch-invariant", opt.gen.batch_invariant,
              "Let a sequence's decode arithmetic depend on the step's size (GEMV below 9 sequences, attention "
              "ranges from the step's size): faster small steps, tokens may change with what else is batched");
  q->add_option("--attn-split-tokens", opt.gen.decode_attn_split_tokens,
                "Batch-invariant decode attention: the shortest range of a context, in keys (0, the default: 256 for "
                "the block partial, 128 for the warp one)");
  q->add_flag("!--no-gemm-per-m", opt.gen.gemm_per_m,
              "Decode GEMMs (cuBLASLt) run their one algorithm at every step size; by default the runtime may run, "
              "at each step size, a faster heuristic answer that it finds bit for bit equal to it on a probe (rows "
              "stay invariant either way)");
  q->add_flag("--mixed", opt.gen.mixed,
              "Also a `mixed` program (a step's decode rows and prefill chunks in one forward, kern serve's); every "
              "program then runs the decode ops. Needs --no-prefill-logits and more than 8 sequences");
  q->add_flag("!--no-prefill-logits", opt.gen.prefill_logits,
              "End the prefill program at the last layer (no lm_head, no token): what kern serve generates for "
              "itself; kern run then takes a prompt's first token from a one-row decode step");
  q->add_option("--prefill-chunks", opt.gen.prefill_chunks,
                "Chunks of different sequences one prefill call may pack (default 1; above 1 needs "
                "--no-prefill-logits: what kern serve generates for itself)");
  q->add_option("--prefill-long-rows", opt.gen.prefill_long_rows,
                "Prefill calls of at least this many rows use the long-prompt attention layout (head_dim 128; "
                "0: never)");
  q->add_flag("!--prefill-attn-mma", opt.gen.prefill_attn_wgmma,
              "Prefill attention on mma.sync (any GPU from sm_80) instead of the sm_90a wgmma kernel (head_dim 128)");
  add_decode_attn_items(*q, opt.gen.decode_attn_items,
                        "Decode attention partial: block (4 warps per range), warp (one warp per range, a fixed grid "
                        "of --attn-target-blocks blocks), or auto (the default: warp above 8 sequences when "
                        "batch-invariant)");
  q->add_flag("--decode-attn-key-major", opt.gen.decode_attn_key_major,
              "Decode attention partial with key-major products (GQA groups of at most 8; no faster on an H100, "
              "unmeasured on an H200: docs/perf.md, session 41)");
  q->add_option("--tp", opt.gen.tp,
                "Tensor-parallel ranks: an SPMD manifest over topology group tp, each rank holding heads / tp, "
                "kv heads / tp and intermediate / tp, o_proj and down_proj all-reduced (peer kernel for decode-sized calls, NCCL above: "
                "--tp-peer-allreduce-rows; docs/multi-gpu-handles.md)");
  q->add_option("--tp-peer-allreduce-rows", opt.gen.tp_peer_allreduce_rows,
                "With --tp: calls of up to this many rows all-reduce through kern's one-shot kernel over peer buffers "
                "(between two peer barriers), larger ones through NCCL (default: --max-seqs, the decode steps; 0: "
                "NCCL for every size)");
  q->add_flag("--tp-peer-allreduce", opt.gen.tp_peer_allreduce,
              "With --tp: the peer all-reduce for every call size, no NCCL (every rank may then share one GPU)");
  q->add_flag("--fp8", opt.gen.fp8,
              "e4m3 GEMMs for the layers (cuBLASLt, sm_89+): each layer's linear weights quantized per tensor at "
              "load by a derive program, each GEMM's input per tensor per call; embedding, lm_head and norms stay "
              "bf16 (not batch-invariant; not with --decode-chain, --gemv-fused-norm or --mixed)");
  q->add_flag("!--decode-attn-f32", opt.gen.decode_attn_mma,
              "Decode attention partials on the f32 CUDA-core kernel instead of the tensor-core one");
  CLI::Option* blocks =
      q->add_option("--chain-blocks", opt.gen.chain_blocks,
                    "Blocks per decode-chain launch (default: the SM count of GPU 0, or 132 without a GPU)");
  return [q, blocks] {
    opt.chain_blocks_given = blocks->count() > 0;
    return q->parsed() ? run_qwen3() : 2;
  };
}
Registrar reg("gen", setup);

}  // namespace
}  // namespace kern::cli::cmd_gen
