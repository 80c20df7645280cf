// kern bench: issue 5's performance figures for a dense Qwen3 checkpoint on one GPU, plus the
// PyTorch peer in the same run (docs/perf.md).
//   kern bench --weights DIR [--kernels DIR] [--json FILE] [--peer bench/torch_peer.py | --no-peer]
//              [--contexts 128,1024,8192,32768] [--prefill 512,2048,8192] [--replays 200] [--quick]
//              [--pinned-mib 2048] [--no-pool] [--pool-contexts 1024,32768] [--remap-mib 1024]
//              [--park-mib 1024,2048,5632] [--issue-pages 2500] [--overlap-mib 5120]
// Progress goes to stderr, the table to stdout, the JSON document to --json.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "command.hpp"
#include "kern/cuda/cuda.hpp"
#include "kern/driver/driver.hpp"
#include "kern/bench/bench.hpp"
#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/base/log.hpp"
#include "kern/core/manifest.hpp"
#include "kern/models/qwen3_gen.hpp"
#include "kern/core/pages.hpp"
#include "kern/core/protocol.hpp"
#include "kern/pool/pool.hpp"
#include "kern/runtime/runtime.hpp"
#include "kern/driver/ranks_executor.hpp"
#include "kern/driver/runtime_executor.hpp"
#include "kern/serve/step_runner.hpp"
#include "kern/weights/tensors.hpp"
#include "kern/core/verify.hpp"

namespace kern::cli::cmd_bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string weights, kernels, json, peer = "bench/torch_peer.py";
  bool no_peer = false, quick = false;
  std::string contexts = "128,1024,8192,32768";
  std::string prefill = "512,2048,8192";
  std::uint64_t replays = 200;
  std::uint64_t chunk = 512;
  std::uint64_t copy_mib = 2048;
  std::uint64_t gemm_size = 8192;
  int gpu = 0;
  bool no_startup = false;
  bool first_token_step = false;          // driver::GeneratorOptions::first_token_from_step
  int peer_timeout_s = 900;
  bool pdl = true;                        // kern gen's decode launches with pdl
  bool decode_chain = false;              // kern gen's --decode-chain (sized to the GPU's SMs)
  std::uint64_t attn_target_blocks = 0;   // kern gen's --attn-target-blocks (0: the kernel's default)
  bool decode_attn_mma = true;            // kern gen's --decode-attn-f32 (negated)
  bool prefill_attn_wgmma = true;         // kern gen's --prefill-attn-mma (negated)
  std::uint64_t prefill_long_rows = models::Qwen3GenOptions{}.prefill_long_rows;  // kern gen's --prefill-long-rows
  models::Qwen3GenOptions::DecodeAttnItems decode_attn_items{};  // kern gen's --decode-attn-items
  bool decode_attn_key_major = false;                           // kern gen's --decode-attn-key-major
  bool batch_invariant = true;            // kern gen's --no-batch-invariant (negated)
  std::uint64_t attn_split_tokens = 0;    // kern gen's --attn-split-tokens (0: the kernel's default)
  bool gemm_per_m = models::Qwen3GenOptions{}.gemm_per_m;  // kern gen's --no-gemm-per-m (negated)
  std::uint64_t gemv_prefetch_bytes = 0;  // kern gen's --gemv-prefetch
  bool gemv_fused_norm = false;           // kern gen's --gemv-fused-norm
  bool fp8 = false;                       // kern gen's --fp8 (e4m3 layer GEMMs; sm_89+)
  std::uint64_t gemv_max_blocks = 0;      // kern gen's --gemv-max-blocks
  std::uint64_t pinned_mib = 2048;        // pinned host <-> device copy ceilings (0: none)
  bool no_pool = false;                   // skip the state pool's figures (issue 16)
  std::string pool_contexts = "1024,32768";
  std::uint64_t remap_mib = 1024;         // the per-seq slot a remap moves between arenas
  std::string park_mib = "1024,2048,5632";  // KV sizes of the park / wake figures
  std::uint64_t issue_pages = 2500;       // the issue-cost size (0: none)
  std::uint64_t overlap_mib = 5120;       // the park / wake the decode step runs beside (0: none)
  std::string batches;                    // decode at these batch sizes (kern serve's step; "" = none)
  std::string gpus;                       // --gpus: also the tensor-parallel figures on these GPUs
  std::uint64_t batch_context = 1024;     // every sequence's context there
};
Options opt;

// Bytes per element of the layers' matrices that the decode floors count (e4m3 with --fp8).
std::uint64_t layer_matrix_bytes() { return opt.fp8 ? 1 : 2; }
CLI::Option* contexts_flag = nullptr;
CLI::Option* prefill_flag = nullptr;
CLI::Option* replays_flag = nullptr;

// This process's command line, for the report.
std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.empty()) return "kern bench";
  std::string out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\0', start);
    if (end == std::string::npos) end = text.size();
    out += (out.empty() ? "" : " ") + text.substr(start, end - start);
    start = end + 1;
  }
  return out;
}

std::string exe_path() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) fail(ErrorKind::Io, "kern bench: cannot read /proc/self/exe");
  buf[n] = '\0';
  return buf;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

void progress(const std::string& what) {
  std::fprintf(stderr, "bench: %s\n", what.c_str());
  std::fflush(stderr);
}

bench::Startup measure_startup(const std::string& tmp, const std::string& manifest_path, std::size_t runs) {
  bench::Startup s;
  std::vector<std::string> argv = {exe_path(),  "run",       "--manifest", manifest_path,
                                   "--kernels", opt.kernels, "--weights",  opt.weights,
                                   "--steps",   "1",         "--gpu",      std::to_string(opt.gpu)};
  const fs::path tok = fs::path(opt.weights) / "tokenizer.json";
  std::error_code ec;
  if (fs::is_regular_file(tok, ec)) {
    for (const char* a : {"--tokenizer", tok.c_str(), "--prompt", "The quick brown fox jumps over the lazy dog."})
      argv.push_back(a);
  } else {
    for (const char* a : {"--prompt-ids", "785,3974,13876,38835,34208,916,279,15678,5562,13"}) argv.push_back(a);
  }
  std::vector<double> ms;
  for (std::size_t i = 0; i < runs + 1; ++i) {  // the first run warms the page cache
    std::string why;
    const auto t = bench::time_to_first_output(argv, tmp + "/run-stderr.log", 120, why);
    if (!t) {
      s.note = why;
      return s;
    }
    if (i > 0) ms.push_back(*t);
  }
  s.measured = true;
  s.first_token_ms = bench::median(ms);
  return s;
}

bench::Peer run_peer(const std::string& tmp, const std::vector<std::uint64_t>& contexts,
                     const std::vector<std::uint64_t>& prefill) {
  bench::Peer p;
  if (opt.no_peer) {
    p.note = "--no-peer";
    return p;
  }
  std::error_code ec;
  if (!fs::is_regular_file(opt.peer, ec)) {
    p.note = fmt::format("peer script {} not found", opt.peer);
    return p;
  }
  auto join = [](const std::vector<std::uint64_t>& v) {
    std::string s;
    for (std::uint64_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
    return s;
  };
  const std::string out = tmp + "/peer.json";
  const std::vector<std::string> argv = {"python3",    opt.peer,
                                         "--config",   (fs::path(opt.weights) / "config.json").string(),
                                         "--json",     out,
                                         "--contexts", join(contexts),
                                         "--prefill",  join(prefill),
                                         "--replays",  std::to_string(opt.replays),
                                         "--chunk",    std::to_string(opt.chunk),
                                         "--gpu",      std::to_string(opt.gpu)};
  progress("running the PyTorch peer: python3 " + opt.peer);
  const int status = bench::run_child(argv, opt.peer_timeout_s);
  if (status == 127) {
    p.note = "python3 could not be started";
  } else if (status == 3) {
    p.note = "python3 has no torch (or no CUDA device for it)";
  } else if (status != 0) {
    p.note = status < 0 ? fmt::format("the peer did not finish within {} s", opt.peer_timeout_s)
                        : fmt::format("the peer exited with status {}", status);
  } else if (!fs::is_regular_file(out, ec)) {
    p.note = "the peer wrote no JSON";
  } else {
    return bench::parse_peer_json(read_file(out), out);
  }
  return p;
}

// Issue 16's figures on the model's own pool: the pool's shape and the host cost of its calls.
void measure_pool(runtime::Runtime& rt, const core::Protocol& protocol,
                  const std::vector<std::uint64_t>& contexts, const bench::HostTierPlan& host, const bench::Report& r,
                  bench::PoolFigures& out) {
  const pool::Pool* p = rt.state_pool();
  if (!p) {
    out.note = "the manifest has no pooled state";
    return;
  }
  out.measured = true;
  out.unit = p->unit();
  out.chunk_bytes = p->chunk_bytes();
  out.pages = p->total();
  out.row_tokens = p->max_seq_tokens();
  for (const pool::ArenaInfo& a : p->arenas())
    if (a.paged) out.page_bytes += a.object_bytes;
  progress(fmt::format("state pool: host cost of lease / checkpoint / lease_from / fork at {}", opt.pool_contexts));
  try {
    out.ops = bench::measure_pool_ops(rt, contexts, opt.quick ? 10 : 50, out.note);
    for (const bench::PoolOpCost& o : out.ops)
      progress(fmt::format("state pool: {} at {}: {:.1f} us", o.op, o.context, o.us));
  } catch (const std::exception& e) {
    out.note += (out.note.empty() ? "" : "; ") + fmt::format("pool calls failed: {}", e.what());
    progress("state pool: " + out.note);
  }
  progress(fmt::format("state pool: park / wake of {} MiB, issue of {} pages, decode at {} beside a {} MiB park / wake",
                       opt.park_mib, opt.issue_pages, host.context, opt.overlap_mib));
  try {
    bench::measure_host_tier(protocol, rt, host, r.ceilings.h2d.gbps, r.ceilings.d2h.gbps, out);
    out.host_measured = true;
    for (const auto* v : {&out.transfers, &out.issue})
      for (const bench::TransferPoint& t : *v)
        progress(fmt::format("state pool: {} of {} pages: {:.2f} ms ({:.1f} GB/s, {:.3f} of the ceiling), issue {:.0f} us",
                             t.direction, t.pages, t.ms, t.gbps, t.of_ceiling, t.issue_us));
    for (const bench::OverlapPoint& o : out.overlap)
      progress(fmt::format("state pool: decode at {} during a {}: {:.1f} us vs {:.1f} us alone ({:+.2f} %)", o.context,
                           o.direction, o.during_us, o.base_us, 100 * o.slowdown));
  } catch (const std::exception& e) {
    out.host_note += (out.host_note.empty() ? "" : "; ") + fmt::format("failed: {}", e.what());
    progress("state pool: host tier " + out.host_note);
  }
}

// A remap of --remap-mib between the page arena and a slot arena. The bench's model has no per-seq
// state, so this runs on its manifest with one added (with_seq_state), loaded without weights.
void measure_remap(const core::Verified& model, const nlohmann::ordered_json& manifest, bench::PoolFigures& out) {
  const std::string state = "bench_seq", program = "bench_remap";
  const bool has_seq = std::any_of(model.manifest().states.begin(), model.manifest().states.end(),
                                   [](const auto& s) { return s.second.bytes_per_seq > 0; });
  out.remap_note = fmt::format("{}the model's manifest with a per-seq state '{}' of {} MiB (named by one call of "
                               "program '{}', which nothing runs), loaded without weights",
                               has_seq ? "" : "the model has no per-seq state: ", state, opt.remap_mib, program);
  progress(fmt::format("state pool: remap of a {} MiB slot between the page and slot arenas", opt.remap_mib));
  try {
    const core::Verified verified = core::verify(core::parse_manifest(
        bench::with_seq_state(manifest, state, opt.remap_mib << 20, program).dump(), "remap manifest"));
    out.remap = bench::measure_remap(verified, opt.kernels, opt.gpu, opt.remap_mib << 20, opt.quick ? 2 : 5,
                                     out.remap_note);
    out.remap_measured = true;
    for (const bench::RemapFigure& r : out.remap)
      progress(fmt::format("state pool: remap {}: {} chunks in {:.2f} ms ({:.0f} chunks/s)", r.direction,
                           r.chunks_mapped, r.ms, r.chunks_per_s));
  } catch (const std::exception& e) {
    out.remap_note += fmt::format("; failed: {}", e.what());
    progress("state pool: remap " + out.remap_note);
  }
}

void measure_batched(const models::Qwen3Shape& shape, models::Qwen3GenOptions gen,
                     const std::vector<std::uint64_t>& batches, bench::Report& report);
void measure_tensor_parallel(const models::Qwen3Shape& shape, models::Qwen3GenOptions gen, const std::vector<int>& gpus,
                             std::uint64_t context, const std::vector<std::uint64_t>& prefill, bench::Report& report);

int run() {
  if (opt.quick) {  // smaller defaults; explicit flags still win
    if (!contexts_flag->count()) opt.contexts = "128,1024";
    if (!prefill_flag->count()) opt.prefill = "512";
    if (!replays_flag->count()) opt.replays = 50;
  }
  const std::vector<std::uint64_t> contexts = bench::parse_sizes(opt.contexts, "--contexts");
  const std::vector<std::uint64_t> prefill = bench::parse_sizes(opt.prefill, "--prefill");
  const std::vector<std::uint64_t> pool_contexts = bench::parse_sizes(opt.pool_contexts, "--pool-contexts");
  const std::vector<std::uint64_t> batches =
      opt.batches.empty() ? std::vector<std::uint64_t>{} : bench::parse_sizes(opt.batches, "--batches");
  const std::vector<int> tp_gpus = opt.gpus.empty() ? std::vector<int>{} : driver::parse_gpu_list(opt.gpus, "--gpus");
  if (tp_gpus.size() == 1) fail(ErrorKind::Api, "--gpus {}: list at least two GPUs (one rank each)", opt.gpus);
  if (!tp_gpus.empty() && (opt.decode_chain || opt.fp8 || opt.gemv_fused_norm))
    fail(ErrorKind::Api, "--gpus cannot be combined with --decode-chain, --fp8 or --gemv-fused-norm (kern gen --tp refuses them)");
  // Before anything starts CUDA in this process (the start-up child inherits the setting).
  if (!tp_gpus.empty()) runtime::Runtime::prefer_eager_module_loading();
  bench::HostTierPlan host_plan;
  for (std::uint64_t mib : bench::parse_sizes(opt.park_mib, "--park-mib")) host_plan.park_bytes.push_back(mib << 20);
  host_plan.issue_pages = opt.issue_pages;
  host_plan.overlap_bytes = opt.overlap_mib << 20;
  host_plan.reps = opt.quick ? 1 : 3;
  host_plan.overlap_rounds = opt.quick ? 2 : 5;
  if (opt.weights.empty()) {
    std::fprintf(stderr, "error: kern bench needs --weights DIR (a Qwen3 checkpoint directory)\n");
    return 2;
  }
  if (opt.kernels.empty()) opt.kernels = (fs::path(exe_path()).parent_path().parent_path() / "kernels").string();
  std::error_code ec;
  if (!fs::is_directory(opt.weights, ec)) fail(ErrorKind::Io, "--weights {} is not a directory", opt.weights);
  if (!fs::is_directory(opt.kernels, ec)) fail(ErrorKind::Io, "--kernels {} is not a directory", opt.kernels);

  const models::Qwen3Shape shape = models::read_qwen3_config(opt.weights);
  const std::uint64_t max_context = *std::max_element(contexts.begin(), contexts.end());
  const std::uint64_t max_prefill = *std::max_element(prefill.begin(), prefill.end());
  const std::uint64_t e2e_steps = opt.replays;
  if (max_context + e2e_steps > shape.max_positions)
    fail(ErrorKind::Api, "--contexts: {} + {} host-loop steps exceed the model's max_position_embeddings {}",
         max_context, e2e_steps, shape.max_positions);
  if (max_prefill + 1 > shape.max_positions)
    fail(ErrorKind::Api, "--prefill: {} tokens exceed the model's max_position_embeddings {}", max_prefill,
         shape.max_positions);

  // The manifest, generated in memory and written to a temporary file for the start-up child.
  char tmpl[] = "/tmp/kern-bench-XXXXXX";
  if (!::mkdtemp(tmpl)) fail(ErrorKind::Io, "kern bench: cannot create a temporary directory under /tmp");
  const std::string tmp = tmpl;
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code e;
      fs::remove_all(dir, e);
    }
  } cleanup{tmp};
  models::Qwen3GenOptions gen;
  gen.max_tokens = std::max<std::uint64_t>({max_prefill, opt.chunk, 8});
  gen.max_seqs = 8;
  gen.pdl = opt.pdl;
  gen.decode_attn_target_blocks = opt.attn_target_blocks;
  gen.decode_attn_mma = opt.decode_attn_mma;
  gen.decode_attn_items = opt.decode_attn_items;
  gen.decode_attn_key_major = opt.decode_attn_key_major;
  gen.batch_invariant = opt.batch_invariant;
  gen.decode_attn_split_tokens = opt.attn_split_tokens;
  gen.gemm_per_m = opt.gemm_per_m;
  const cuda::DeviceInfo device = cuda::device_info(opt.gpu);
  gen.decode_chain = opt.decode_chain && device.cc_major >= 9;  // the chain kernel is sm_90 only
  gen.prefill_attn_wgmma = opt.prefill_attn_wgmma && models::prefill_attn_wgmma_runs_on(device.cc_major, device.cc_minor);
  gen.prefill_long_rows = opt.prefill_long_rows;
  gen.chain_blocks = static_cast<std::uint64_t>(device.sm_count);
  gen.gemv_prefetch_bytes = opt.gemv_prefetch_bytes;
  gen.gemv_fused_norm = opt.gemv_fused_norm;
  gen.fp8 = opt.fp8;
  gen.gemv_max_blocks = opt.gemv_max_blocks;
  gen.model = fs::path(opt.weights).filename().string();
  gen.module_sha256 = models::hash_kernel_fatbins(opt.kernels);
  const std::string manifest_path = tmp + "/manifest.json";
  const nlohmann::ordered_json manifest_json = models::generate_qwen3_manifest(shape, gen);
  write_file(manifest_path, manifest_json.dump(1) + "\n");
  const core::Verified verified = core::verify(core::parse_manifest_file(manifest_path));
  const core::Protocol protocol = core::check_protocol(verified);

  bench::Report report;
  report.date = utc_now();
  report.model = gen.model;
  report.shape = shape;
  report.command = command_line();
  report.machine =
      fmt::format("{} (sm_{}{}, {} SMs, {:.0f} GiB), driver {}", device.name, device.cc_major, device.cc_minor,
                  device.sm_count, device.total_memory / 1073741824.0, device.driver_version);

  if (opt.no_startup) {
    report.startup.note = "--no-startup";
  } else {
    progress("start-up: kern run --steps 1 (one warm-up run, then the measured ones)");
    report.startup = measure_startup(tmp, manifest_path, opt.quick ? 1 : 3);
    progress(report.startup.measured ? fmt::format("start-up: first token at {:.0f} ms", report.startup.first_token_ms)
                                     : "start-up not measured: " + report.startup.note);
  }

  progress(fmt::format("ceilings: {} MiB device copy, bf16 GEMM {}^3, {} MiB pinned host <-> device copies",
                       opt.copy_mib, opt.gemm_size, opt.pinned_mib));
  report.ceilings =
      bench::measure_ceilings(opt.gpu, opt.copy_mib << 20, opt.gemm_size, opt.quick ? 10 : 20, opt.pinned_mib << 20);
  progress(fmt::format("ceilings: copy {:.0f} GB/s, GEMM {:.1f} TFLOP/s, pinned H2D {:.1f} / D2H {:.1f} GB/s",
                       report.ceilings.copy_gbps, report.ceilings.gemm_tflops, report.ceilings.h2d.gbps,
                       report.ceilings.d2h.gbps));

  // KV tokens: the decode contexts and their host loops, the prompts, and (issue 16) a sequence at
  // the longest --pool-contexts beside its fork's or continuation's next page.
  std::uint64_t kv_tokens = std::max(max_context + e2e_steps, max_prefill + 1);
  const std::uint64_t unit = driver::capacity_for(protocol, 1);
  const std::uint64_t op_context =
      std::find(contexts.begin(), contexts.end(), 1024) != contexts.end() ? 1024 : contexts.front();
  host_plan.context = op_context;
  host_plan.replays = opt.replays;
  if (!opt.no_pool) {
    kv_tokens = std::max(kv_tokens, *std::max_element(pool_contexts.begin(), pool_contexts.end()) + 2 * unit);
    // The host tier's largest size in whole pages, one row per store and one page more each for
    // the wake's next token, beside the decode step's sequence (and a lease of its own for it).
    std::uint64_t kv_bytes_per_token = 0;
    for (const auto& [name, st] : verified.manifest().states) kv_bytes_per_token += st.bytes_per_token;
    if (kv_bytes_per_token > 0) {
      const std::uint64_t page_bytes = kv_bytes_per_token * unit;
      std::uint64_t pages = std::max(host_plan.issue_pages, bench::pages_for_bytes(host_plan.overlap_bytes, page_bytes));
      for (std::uint64_t b : host_plan.park_bytes) pages = std::max(pages, bench::pages_for_bytes(b, page_bytes));
      const std::uint64_t row = core::row_pages(protocol.page_tables(), unit).value_or(pages);
      const std::uint64_t stores = row > 0 ? (pages + row - 1) / row : 1;
      kv_tokens = std::max(kv_tokens, (pages + stores) * unit + 2 * (op_context + opt.replays) + unit);
    }
  }
  const std::uint64_t capacity = driver::capacity_for(protocol, kv_tokens);
  runtime::RuntimeOptions ropt;
  ropt.gpu = opt.gpu;
  ropt.capacity.tokens = capacity;
  ropt.capacity.seqs = 1;
  progress(fmt::format("loading: {} layers, KV capacity {} tokens", shape.layers, capacity));
  std::unique_ptr<runtime::Runtime> rt = runtime::Runtime::load(verified, opt.kernels, ropt);
  {
    const weights::SafetensorsTensors weights = weights::SafetensorsTensors::open(opt.weights);
    const Clock::time_point t0 = Clock::now();
    rt->load_weights(weights);
    report.startup.weight_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    report.startup.weight_bytes = rt->stats().weight_bytes;
    report.startup.weight_gbps =
        report.startup.weight_ms > 0 ? report.startup.weight_bytes / (report.startup.weight_ms * 1e6) : 0;
  }
  rt->fill_states(0x3c24);  // bf16 ≈ 0.01 everywhere in the KV cache: finite, non-zero attention inputs

  {
    bench::DecodeBench decode(protocol, *rt);
    for (std::uint64_t c : contexts) {
      progress(fmt::format("decode at context {}: {} graph replays, {} host-loop steps", c, opt.replays, e2e_steps));
      decode.set_context(c, static_cast<std::int64_t>(c % shape.vocab));
      const std::vector<double> step = decode.gpu_step_ms(opt.replays);
      const std::vector<double> e2e = decode.e2e_ms(e2e_steps);
      report.decode.push_back(bench::make_decode_point(shape, c, step, e2e, report.ceilings.copy_gbps, layer_matrix_bytes()));
      const bench::DecodePoint& d = report.decode.back();
      progress(fmt::format("decode at {}: GPU step {:.1f} us, e2e {:.1f} us, floor {:.1f} us ({:.3f}x)", c,
                           d.gpu_step_us, d.e2e_us, d.floor_us, d.ratio));
    }
    report.op_context = op_context;
    progress(fmt::format("per-op times at context {} (eager)", report.op_context));
    decode.set_context(report.op_context, 1);
    report.ops = bench::op_shares(decode.call_ms(opt.quick ? 3 : 10));
  }

  for (std::uint64_t n : prefill) {
    std::vector<std::uint64_t> chunks = {n};
    if (opt.chunk < n) chunks.push_back(opt.chunk);
    for (std::uint64_t c : chunks) {
      progress(fmt::format("prefill {} tokens, chunk {}", n, c));
      const std::vector<double> ms =
          bench::measure_prefill_ms(protocol, *rt, n, c, shape.vocab, opt.quick ? 2 : 5, opt.first_token_step);
      report.prefill.push_back(bench::make_prefill_point(shape, n, c, ms, report.ceilings.gemm_tflops));
      progress(fmt::format("prefill {} / chunk {}: {:.2f} ms, {:.0f} tok/s", n, c, report.prefill.back().ms,
                           report.prefill.back().tokens_per_s));
    }
  }
  // Where a whole-prompt prefill's time goes, at the issue's prompt lengths (not with --quick).
  for (std::uint64_t n : prefill) {
    if (opt.quick || n < 2048) continue;
    progress(fmt::format("per-op times of a prefill of {} tokens (eager)", n));
    bench::PrefillOps p;
    p.tokens = n;
    bench::PrefillCallTimes t = bench::prefill_call_ms(protocol, *rt, n, shape.vocab, 5, opt.first_token_step);
    p.rows = t.rows;
    p.ops = bench::op_shares(t.ms);
    report.prefill_ops.push_back(std::move(p));
  }
  if (opt.no_pool) {
    report.pool.note = "--no-pool";
  } else {
    measure_pool(*rt, protocol, pool_contexts, host_plan, report, report.pool);
  }
  rt.reset();  // the remap's runtime and then the peer get the GPU to themselves
  if (!opt.no_pool) measure_remap(verified, manifest_json, report.pool);
  if (!batches.empty()) measure_batched(shape, gen, batches, report);
  if (!tp_gpus.empty()) measure_tensor_parallel(shape, gen, tp_gpus, op_context, prefill, report);

  report.peer = run_peer(tmp, contexts, prefill);

  const std::string table = bench::format_table(report);
  std::fwrite(table.data(), 1, table.size(), stdout);
  std::fflush(stdout);
  if (!opt.json.empty()) {
    write_file(opt.json, bench::to_json(report).dump(2) + "\n");
    progress("JSON written to " + opt.json);
  }
  return 0;
}

// The tensor-parallel figures (--gpus): the same shape generated with --tp N, one rank per listed GPU
// in this process (driver::RanksExecutor, kern run --gpus' executor), the all-reduces by the peer kernel
// for decode-sized calls and NCCL above, or by the peer kernel for every size when a GPU is listed twice
// (NCCL refuses two ranks on one GPU). Decode: the e2e host figure at `context` (kern run's per-token
// work; the GPU step time needs every rank's replays timed together, not built); prefill: each prompt in
// one chunk, its first token from the last row.
void measure_tensor_parallel(const models::Qwen3Shape& shape, models::Qwen3GenOptions gen, const std::vector<int>& gpus,
                             std::uint64_t context, const std::vector<std::uint64_t>& prefill, bench::Report& report) {
  const std::uint64_t ranks = gpus.size();
  gen.tp = ranks;
  gen.decode_chain = false;
  std::vector<int> sorted = gpus;
  std::sort(sorted.begin(), sorted.end());
  const bool shared = std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end();
  gen.tp_peer_allreduce = shared;
  const core::Verified verified =
      core::verify(core::parse_manifest(models::generate_qwen3_manifest(shape, gen).dump()));
  const core::Protocol protocol = core::check_protocol(verified);
  const driver::RankPlan plan = driver::plan_ranks(verified.manifest(), gpus, opt.gpu);
  const std::uint64_t max_prefill = *std::max_element(prefill.begin(), prefill.end());
  runtime::RuntimeOptions ropt;
  ropt.capacity.tokens = driver::capacity_for(protocol, std::max(context + 2, max_prefill + 1));
  ropt.capacity.seqs = 1;
  progress(fmt::format("tensor parallel: loading {} ranks on GPUs {}, KV capacity {} tokens each", ranks, opt.gpus,
                       ropt.capacity.tokens));
  const std::vector<std::unique_ptr<runtime::Runtime>> runtimes = driver::load_ranks(verified, opt.kernels, ropt, plan);
  {
    const weights::SafetensorsTensors weights = weights::SafetensorsTensors::open(opt.weights);
    for (const auto& r : runtimes) {
      r->load_weights(weights);
      r->fill_states(0x3c24);
    }
  }
  driver::connect_ranks(runtimes);
  const std::vector<runtime::Runtime*> raw = driver::rank_pointers(runtimes);
  driver::RanksExecutor exec(raw);
  bench::Report::TensorParallel tp;
  tp.ranks = ranks;
  tp.gpus = opt.gpus;
  tp.allreduce = shared ? "the peer kernel for every call (a GPU listed twice: NCCL refuses that)"
                        : fmt::format("the peer kernel up to {} rows, NCCL above", gen.max_seqs);
  tp.context = context;
  const std::vector<double> e2e = bench::decode_e2e_ms(
      protocol, exec, [&] { for (runtime::Runtime* r : raw) r->synchronize(); }, context,
      static_cast<std::int64_t>(context % shape.vocab), opt.replays);
  tp.decode_e2e_us = 1000 * bench::median(e2e);
  for (const bench::DecodePoint& d : report.decode)
    if (d.context == context) tp.one_rank_e2e_us = d.e2e_us;
  progress(fmt::format("tensor parallel: decode at {}: e2e {:.1f} us per token", context, tp.decode_e2e_us));
  for (std::uint64_t n : prefill) {
    const std::vector<double> ms =
        bench::measure_prefill_ms(protocol, exec, n, n, shape.vocab, opt.quick ? 2 : 5, opt.first_token_step);
    tp.prefill.push_back(bench::make_prefill_point(shape, n, n, ms, report.ceilings.gemm_tflops));
    progress(fmt::format("tensor parallel: prefill {}: {:.2f} ms, {:.0f} tok/s", n, tp.prefill.back().ms,
                         tp.prefill.back().tokens_per_s));
  }
  report.tensor_parallel = std::move(tp);
}

// Decode at batch B through kern serve's runner (serve::ProtocolRunner: the buckets, graphs and
// inputs a serving step uses), every sequence at one context, on a manifest generated for the
// largest batch (its own runtime: the main one is gone by then). Per batch: the graph replay's GPU
// time, the runner's whole decode call, and (at 64, else the largest batch) the per-op profile.
void measure_batched(const models::Qwen3Shape& shape, models::Qwen3GenOptions gen,
                     const std::vector<std::uint64_t>& batches, bench::Report& report) {
  const std::uint64_t max_b = *std::max_element(batches.begin(), batches.end());
  const std::uint64_t context = opt.batch_context;
  gen.max_seqs = max_b;
  gen.max_tokens = std::max<std::uint64_t>(gen.max_tokens, max_b);
  const core::Verified verified =
      core::verify(core::parse_manifest(models::generate_qwen3_manifest(shape, gen).dump()));
  const core::Protocol protocol = core::check_protocol(verified);
  runtime::RuntimeOptions ropt;
  ropt.gpu = opt.gpu;
  ropt.capacity.tokens = driver::capacity_for(protocol, (max_b + 1) * (context + 1) + 64);
  ropt.capacity.seqs = 1;
  progress(fmt::format("batched decode: loading a manifest for {} sequences, KV capacity {} tokens", max_b,
                       ropt.capacity.tokens));
  std::unique_ptr<runtime::Runtime> rt = runtime::Runtime::load(verified, opt.kernels, ropt);
  rt->load_weights(weights::SafetensorsTensors::open(opt.weights));
  rt->fill_states(0x3c24);
  driver::RuntimeExecutor exec(*rt);
  std::vector<pool::Lease> leases;
  for (std::uint64_t i = 0; i < max_b; ++i) {
    pool::Granted<pool::Lease> l = rt->lease(context);
    if (!l) fail(ErrorKind::Api, "kern bench: no room for sequence {} of {} at context {}", i, max_b, context);
    leases.push_back(std::move(l).value());
  }
  pool::Granted<pool::Lease> pad = rt->lease(1);
  if (!pad) fail(ErrorKind::Api, "kern bench: no room for the serve runner's padding page");
  serve::ProtocolRunner runner(protocol, exec, std::move(pad).value(), max_b);
  (void)runner.warm_up();
  const std::optional<core::Forward> step = protocol.forward(max_b, 1);
  const driver::SamplingParams greedy;
  const std::uint64_t profile_at = std::find(batches.begin(), batches.end(), 64) != batches.end() ? 64 : max_b;
  const std::size_t reps = opt.quick ? 10 : 30;
  for (std::uint64_t b : batches) {
    std::vector<serve::DecodeCall> rows(b);
    for (std::uint64_t i = 0; i < b; ++i)
      rows[i] = {&leases[i], leases[i].slot(context - 1), static_cast<std::int32_t>((i * 7919 + 11) % shape.vocab),
                 context - 1, &greedy, 0, {}};
    for (int w = 0; w < 3; ++w) (void)runner.decode(rows);
    std::vector<double> call_ms;
    for (std::size_t r = 0; r < reps; ++r) {
      const Clock::time_point t0 = Clock::now();
      (void)runner.decode(rows);
      call_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    const std::uint64_t bucket = runner.bucket(b);
    const auto table = protocol.vars(*step, bucket, 1, context);
    const core::Vars vars(table.begin(), table.end());
    const std::vector<double> gpu_ms = rt->time_replays(step->program, vars, reps);
    report.batched.push_back(
        bench::make_batched_point(shape, b, context, bucket, gpu_ms, call_ms, report.ceilings.copy_gbps,
                                  layer_matrix_bytes()));
    bench::BatchedPoint& p = report.batched.back();
    if (b == profile_at) {
      std::vector<std::pair<std::string, double>> calls;
      for (const runtime::CallTime& c : rt->time_calls(step->program, vars, opt.quick ? 3 : 5))
        calls.emplace_back(c.op, c.ms);
      p.ops = bench::op_shares(calls);
    }
    progress(fmt::format("batched decode at {} x {}: GPU step {:.1f} us, call {:.1f} us, floor {:.1f} us ({:.3f}x)", b,
                         context, p.gpu_step_us, p.call_us, p.floor_us, p.ratio));
  }
}

Runner setup(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("bench", "Decode, prefill and start-up figures on one GPU, with the PyTorch peer");
  cmd->add_option("--weights", opt.weights, "Qwen3 checkpoint directory (config.json, safetensors, tokenizer.json)");
  cmd->add_option("--kernels", opt.kernels, "Kernels directory (default: <build>/kernels)");
  cmd->add_option("--json", opt.json, "Write the JSON report here");
  CLI::Option* peer = cmd->add_option("--peer", opt.peer, "The PyTorch peer script (default bench/torch_peer.py)");
  cmd->add_flag("--no-peer", opt.no_peer, "Do not run the PyTorch peer")->excludes(peer);
  contexts_flag = cmd->add_option("--contexts", opt.contexts, "Decode contexts a,b,c (default 128,1024,8192,32768)");
  prefill_flag = cmd->add_option("--prefill", opt.prefill, "Prefill prompt lengths a,b,c (default 512,2048,8192)");
  replays_flag = cmd->add_option("--replays", opt.replays, "Graph replays (and host-loop steps) per context")
                     ->check(CLI::Range(1, 100000));
  cmd->add_option("--chunk", opt.chunk, "The second prefill chunk size (the first is the whole prompt)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--copy-mib", opt.copy_mib, "Device copy size for the bandwidth ceiling (MiB)")
      ->check(CLI::Range(16, 65536));
  cmd->add_option("--gemm", opt.gemm_size, "m = n = k of the GEMM ceiling")->check(CLI::Range(256, 32768));
  cmd->add_option("--gpu", opt.gpu, "GPU index")->check(CLI::NonNegativeNumber);
  cmd->add_option("--gpus", opt.gpus,
                  "Also the tensor-parallel figures: the shape generated with --tp N, one rank per listed GPU in this "
                  "process (a GPU listed twice: the peer all-reduce for every call); CUDA then loads modules eagerly "
                  "for the whole run");
  cmd->add_option("--peer-timeout", opt.peer_timeout_s, "Seconds the peer may run (default 900)")
      ->check(CLI::Range(1, 86400));
  cmd->add_flag("--no-startup", opt.no_startup, "Skip the start-up measurement (child kern run)");
  cmd->add_flag("--first-token-step", opt.first_token_step,
                "Prefill figures with the prompt's last token through the one-row decode step (kern serve's way) "
                "instead of the first token from the prefill's own last row");
  cmd->add_flag("!--no-pdl", opt.pdl, "Generate the decode program without programmatic dependent launch");
  cmd->add_option("--attn-target-blocks", opt.attn_target_blocks, "kern gen --attn-target-blocks");
  cmd->add_flag("!--decode-attn-f32", opt.decode_attn_mma, "kern gen --decode-attn-f32");
  cmd->add_flag("!--prefill-attn-mma", opt.prefill_attn_wgmma, "kern gen --prefill-attn-mma");
  cmd->add_option("--prefill-long-rows", opt.prefill_long_rows, "kern gen --prefill-long-rows (0: one layout)");
  add_decode_attn_items(*cmd, opt.decode_attn_items, "kern gen --decode-attn-items");
  cmd->add_flag("--decode-attn-key-major", opt.decode_attn_key_major, "kern gen --decode-attn-key-major");
  cmd->add_flag("!--no-batch-invariant", opt.batch_invariant, "kern gen --no-batch-invariant");
  cmd->add_option("--attn-split-tokens", opt.attn_split_tokens, "kern gen --attn-split-tokens");
  cmd->add_flag("!--no-gemm-per-m", opt.gemm_per_m, "kern gen --no-gemm-per-m");
  cmd->add_flag("--decode-chain", opt.decode_chain, "Generate the decode program with the persistent decode chain");
  cmd->add_option("--gemv-prefetch", opt.gemv_prefetch_bytes,
                  "kern gen --gemv-prefetch (bytes per GEMV block, 0: none)")
      ->check(CLI::Range(0, 0x7fffffff));
  cmd->add_flag("--gemv-fused-norm", opt.gemv_fused_norm, "kern gen --gemv-fused-norm");
  cmd->add_flag("--fp8", opt.fp8, "kern gen --fp8: e4m3 layer GEMMs (the peer stays bf16)");
  cmd->add_option("--gemv-max-blocks", opt.gemv_max_blocks, "kern gen --gemv-max-blocks (0: one block per tile)")
      ->check(CLI::Range(0, 0x7fffffff));
  cmd->add_option("--pinned-mib", opt.pinned_mib,
                  "Pinned host <-> device copy size for the H2D / D2H ceilings (MiB, 0: none)")
      ->check(CLI::Range(0, 65536));
  cmd->add_flag("--no-pool", opt.no_pool, "Skip the state pool's figures (issue 16)");
  cmd->add_option("--pool-contexts", opt.pool_contexts,
                  "Contexts of the pool calls' host costs a,b (default 1024,32768)");
  cmd->add_option("--remap-mib", opt.remap_mib, "Slot size the remap moves between the arenas (MiB)")
      ->check(CLI::Range(64, 65536));
  cmd->add_option("--park-mib", opt.park_mib, "KV sizes of the park / wake figures a,b,c (MiB; default 1024,2048,5632)");
  cmd->add_option("--issue-pages", opt.issue_pages, "Pages of the park / wake issue-cost figure (0: none)")
      ->check(CLI::Range(0, 100000000));
  cmd->add_option("--overlap-mib", opt.overlap_mib,
                  "The park / wake the decode step at 1k runs beside (MiB, 0: none; default 5120)")
      ->check(CLI::Range(0, 1048576));
  cmd->add_option("--batches", opt.batches,
                  "Also decode at these batch sizes through kern serve's runner, e.g. 1,8,64,256 (default: none)");
  cmd->add_option("--batch-context", opt.batch_context, "Every sequence's context at --batches (default 1024)")
      ->check(CLI::Range(2, 1 << 20));
  cmd->add_flag("--quick", opt.quick,
                "Contexts 128,1024, prefill 512, at most 50 replays, fewer repetitions, no prefill per-op profile");
  return [] { return run(); };
}
Registrar reg("bench", setup);

}  // namespace
}  // namespace kern::cli::cmd_bench
