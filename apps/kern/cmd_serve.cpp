// kern serve: the OpenAI-compatible server (docs/serve.md). On a GPU it loads a Qwen3 checkpoint
// (a manifest generated in memory from config.json unless --manifest names one), captures a decode
// graph per batch bucket, then answers /v1/completions, /v1/chat/completions, /v1/models, /health,
// /metrics, /tokenize and /detokenize. --fake-engine serves a deterministic token source instead
// of a model (no GPU, no weights): for the HTTP tests and for trying clients.
#include <signal.h>

#include "kern/base/log.hpp"

#include <chrono>
#include <filesystem>
#include <thread>

#include "command.hpp"
#include "kern/base/error.hpp"
#include "kern/core/protocol.hpp"
#include "kern/cuda/cuda.hpp"
#include "kern/driver/runtime_executor.hpp"
#include "kern/models/qwen3_gen.hpp"
#include "kern/models/qwen3_synth.hpp"
#include "kern/runtime/runtime.hpp"
#include "kern/serve/api_server.hpp"
#include "kern/serve/pool_pages.hpp"
#include "kern/serve/runtime_pages.hpp"
#include "kern/weights/tensors.hpp"
#include "run_chat.hpp"

namespace kern::cli::cmd_serve {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::string weights, manifest, kernels, tokenizer, chat_template;
  std::string host = "127.0.0.1";
  std::uint16_t port = 8000;
  // Prefill defaults (docs/serve.md "Packed prefill"): a request's chunk up to 1,024 rows a step, up to 8
  // requests' chunks packed in one call of up to 4,096 rows. Measured best of the points tried at
  // concurrency 64 (docs/perf.md, session 30). Up to 256 sequences a decode step, as issue 17's command
  // line and vLLM's max_num_seqs default (docs/serve.md "The API": what 64 would save at concurrency 1).
  std::uint64_t max_seqs = 256, chunk = 1024, prefill_budget = 4096, max_waiting = 1024, prefill_chunks = 8;
  std::optional<std::uint64_t> capacity, max_model_len;
  std::string served_model_name, api_key;
  int gpu = 0;
  unsigned http_threads = 2;
  double request_timeout = 10;
  double drain_timeout = 30;
  bool fake = false, no_prefix_cache = false, batch_invariant = true, mixed = false;
  std::uint64_t fake_mixed_chunks = 0;
  models::Qwen3GenOptions::DecodeAttnItems decode_attn_items{};
  bool decode_attn_key_major = false;
  std::uint64_t attn_split_tokens = 0;
  bool gemm_per_m = models::Qwen3GenOptions{}.gemm_per_m;
  std::uint64_t fake_step_us = 0, fake_capacity = 1 << 16;
  double host_gib = 0;
} opt;

std::string default_tokenizer(const std::string& weights) {
  std::error_code ec;
  if (!weights.empty()) {
    const fs::path dir = fs::is_directory(weights, ec) ? fs::path(weights) : fs::path(weights).parent_path();
    if (fs::exists(dir / "tokenizer.json", ec)) return (dir / "tokenizer.json").string();
  }
  const std::string npm = models::find_qwen3_tokenizer_dir({fs::current_path().string()});
  if (!npm.empty()) return npm + "/tokenizer.json";
  return "";
}

// Waits for SIGINT / SIGTERM (blocked in every thread since the start of run()).
int wait_for_signal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

int serve(serve::Engine& engine, const tokenizer::Tokenizer& tok, const chat::ChatTemplate* tmpl,
          serve::ServedModel model, const std::function<void()>& warm_up) {
  serve::ApiConfig api;
  api.http.host = opt.host;
  api.http.port = opt.port;
  api.http.threads = opt.http_threads;
  api.http.limits.read_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(opt.request_timeout * 1000));
  api.api_key = opt.api_key;
  serve::ApiServer server(api, engine, tok, tmpl, model);
  log().info("kern serve: listening on http://{}:{} (model '{}', context {} tokens, {} sequences per step){}",
               opt.host, server.port(), model.name, model.max_model_len, engine.scheduler_config().max_running,
               opt.api_key.empty() ? "" : ", API key required");
  if (warm_up) warm_up();  // before the engine thread starts: the runtime has one user at a time
  engine.start();
  server.set_ready(true);
  std::fprintf(stdout, "kern serve: ready on http://%s:%u\n", opt.host.c_str(), static_cast<unsigned>(server.port()));
  std::fflush(stdout);
  const int sig = wait_for_signal();
  log().info("kern serve: signal {}: draining (at most {:.0f} s for {} open requests)", sig, opt.drain_timeout,
               engine.open_requests());
  server.drain();
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(opt.drain_timeout);
  while (engine.open_requests() > 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  engine.stop("the server is shutting down");
  server.stop();
  log().info("kern serve: stopped");
  return 0;
}

// Chunks one prefill call packs (--prefill-chunks, at most --max-seqs); above 1, a call's rows reach
// the step's budget.
std::uint64_t packed_chunks() { return std::min(opt.prefill_chunks, opt.max_seqs); }

std::uint64_t host_bytes() { return static_cast<std::uint64_t>(opt.host_gib * static_cast<double>(1ull << 30)); }

// With a runner that takes mixed steps, each step's last chunks are cut to ride in its mixed call.
serve::SchedulerConfig scheduler_config(const serve::StepRunner& runner, std::uint64_t max_len) {
  const std::uint64_t max_rows = runner.max_rows(), max_chunk = runner.max_chunk();
  serve::SchedulerConfig s;
  if (runner.mixed_chunks() > 0) {
    s.mixed_rows = runner.mixed_rows();
    s.mixed_chunks = runner.mixed_chunks();
  }
  s.max_running = std::min(opt.max_seqs, max_rows);
  s.max_waiting = opt.max_waiting;
  s.chunk = std::min(opt.chunk, max_chunk);
  s.prefill_budget = std::max(opt.prefill_budget, s.chunk);
  s.max_len = max_len;
  s.prefix_cache = !opt.no_prefix_cache;
  return s;
}

int run_fake() {
  if (opt.tokenizer.empty()) opt.tokenizer = default_tokenizer("");
  if (opt.tokenizer.empty()) fail(ErrorKind::Api, "--fake-engine needs --tokenizer (tokenizer.json)");
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_file(opt.tokenizer);
  std::optional<chat::ChatTemplate> tmpl;
  try {
    tmpl.emplace(find_chat_template(opt.chat_template, opt.tokenizer, opt.tokenizer));
  } catch (const Error& e) {
    log().warn("kern serve: no chat template ({}): /v1/chat/completions will answer 400", e.what());
  }
  serve::PoolPages pages(opt.fake_capacity, 16, opt.fake_capacity, host_bytes());
  if (pages.has_host())
    log().info("kern serve: host tier of {} bytes ({} fake pages)", pages.host_bytes_total(),
               pages.host_bytes_total() / (pages.unit() * serve::PoolPages::kTokenBytes));
  const std::uint64_t packed = packed_chunks();
  serve::FakeRunner runner(tok.vocab_size(), opt.max_seqs, packed > 1 ? std::max(opt.prefill_budget, opt.chunk) : opt.chunk,
                           opt.fake_step_us, opt.fake_mixed_chunks, packed);
  serve::ServedModel model;
  model.name = opt.served_model_name.empty() ? "fake" : opt.served_model_name;
  model.max_model_len = opt.max_model_len.value_or(opt.fake_capacity);
  if (tmpl && tmpl->eos_token())
    if (auto id = tok.token_id(*tmpl->eos_token())) model.eos = {*id};
  serve::EngineConfig ec;
  ec.scheduler = scheduler_config(runner, model.max_model_len);
  serve::Engine engine(ec, pages, runner);
  log().info("kern serve: fake engine (no model: each token is a hash of the previous one and its position)");
  return serve(engine, tok, tmpl ? &*tmpl : nullptr, model, {});
}

int run_model() {
  if (opt.weights.empty()) fail(ErrorKind::Api, "kern serve needs --weights (a Qwen3 checkpoint directory), or --fake-engine");
  if (opt.kernels.empty()) fail(ErrorKind::Api, "kern serve needs --kernels (the directory of kern's fatbins)");
  if (opt.tokenizer.empty()) opt.tokenizer = default_tokenizer(opt.weights);
  if (opt.tokenizer.empty()) fail(ErrorKind::Api, "no tokenizer.json beside the weights: name one with --tokenizer");
  const models::Qwen3Shape shape = models::read_qwen3_config(opt.weights);
  const std::uint64_t packed = packed_chunks();
  const std::uint64_t rows =
      std::max<std::uint64_t>({opt.chunk, opt.max_seqs, 8, packed > 1 ? opt.prefill_budget : 0});
  std::optional<core::Verified> verified;
  if (!opt.manifest.empty()) {
    verified.emplace(core::verify(core::parse_manifest_file(opt.manifest)));
  } else {
    models::Qwen3GenOptions gen;
    gen.max_tokens = rows;
    gen.max_seqs = opt.max_seqs;
    gen.batch_invariant = opt.batch_invariant;
    gen.prefill_logits = false;  // the first decode row samples a prompt's first token (docs/serve.md)
    gen.prefill_chunks = packed;
    // --mixed: mixed steps, where the decode GEMMs take answers tuned for prefill sizes too (above
    // 128 sequences, kDecodeGemmChoices); below, the decode choice at m = max_seqs would slow every
    // chunk. Off by default: measured slower on the H200 (docs/serve.md "Mixed steps").
    gen.mixed = opt.mixed && opt.batch_invariant && opt.max_seqs > 128 && rows > opt.max_seqs;
    gen.decode_attn_split_tokens = opt.attn_split_tokens;
    gen.gemm_per_m = opt.gemm_per_m;
    gen.decode_attn_items = opt.decode_attn_items;
    gen.decode_attn_key_major = opt.decode_attn_key_major;
    const cuda::DeviceInfo device = cuda::device_info(opt.gpu);
    gen.sampling = device.cc_major >= 9;
    gen.prefill_attn_wgmma = models::prefill_attn_wgmma_runs_on(device.cc_major, device.cc_minor);
    gen.chain_blocks = static_cast<std::uint64_t>(device.sm_count);
    gen.model = fs::path(opt.weights).filename().string();
    gen.module_sha256 = models::hash_kernel_fatbins(opt.kernels);
    verified.emplace(core::verify(core::parse_manifest(models::generate_qwen3_manifest(shape, gen).dump())));
  }
  const core::Protocol protocol = core::check_protocol(*verified);
  runtime::RuntimeOptions ro;
  ro.gpu = opt.gpu;
  if (opt.capacity) ro.capacity.tokens = *opt.capacity;
  ro.capacity.seqs = opt.max_seqs;
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<runtime::Runtime> rt = runtime::Runtime::load(*verified, opt.kernels, ro);
  rt->load_weights(weights::SafetensorsTensors::open(opt.weights));
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_file(opt.tokenizer);
  std::optional<chat::ChatTemplate> tmpl;
  try {
    tmpl.emplace(find_chat_template(opt.chat_template, opt.tokenizer, opt.weights));
  } catch (const Error& e) {
    log().warn("kern serve: no chat template ({}): /v1/chat/completions will answer 400", e.what());
  }
  if (opt.host_gib > 0) {
    // Host pages of this pool's page size (HostConfig rounds each up to its grains).
    const std::uint64_t page = pool::HostConfig::for_objects(*rt->state_pool(), 1, 0).bytes;
    const std::uint64_t pages = host_bytes() / std::max<std::uint64_t>(page, 1);
    if (pages == 0) fail(ErrorKind::Api, "--host-gib {} holds no KV page ({} bytes each)", opt.host_gib, page);
    rt->reserve_host(pages, 0);
    log().info("kern serve: host tier of {} pages ({:.2f} GiB pinned) for cold prefix entries", pages,
               static_cast<double>(rt->host_tier()->capacity()) / (1ull << 30));
  }
  driver::RuntimeExecutor exec(*rt);
  serve::RuntimePages pages(*rt);
  pool::Lease pad = std::move(rt->lease(1)).value();
  serve::ProtocolRunner runner(protocol, exec, std::move(pad), opt.max_seqs);
  serve::ServedModel model;
  model.name = opt.served_model_name.empty() ? fs::path(opt.weights).filename().string() : opt.served_model_name;
  const driver::SeqLimits limits = driver::limits_of(*rt->state_pool());
  model.max_model_len = std::min<std::uint64_t>(shape.max_positions, limits.max_tokens());
  if (opt.max_model_len) model.max_model_len = std::min(model.max_model_len, *opt.max_model_len);
  serve::read_generation_defaults(opt.weights, model);
  serve::EngineConfig ec;
  ec.scheduler = scheduler_config(runner, model.max_model_len);
  if (runner.mixed_chunks() > 0)
    log().info("kern serve: mixed steps: decode rows and up to {} chunks in one forward of at most {} rows",
               runner.mixed_chunks(), runner.mixed_rows());
  serve::Engine engine(ec, pages, runner);
  log().info("kern serve: {} loaded in {:.1f} s; KV pool {} pages of {} tokens", model.name,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), limits.total_pages,
               limits.unit);
  auto warm = [&] {
    const std::vector<std::uint64_t> buckets = runner.warm_up();
    log().info("kern serve: decode graphs captured for {} buckets (up to {} sequences)", buckets.size(),
                 runner.max_rows());
  };
  return serve(engine, tok, tmpl ? &*tmpl : nullptr, model, warm);
}

int run() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // every thread started from here on inherits it
  signal(SIGPIPE, SIG_IGN);
  try {
    return opt.fake ? run_fake() : run_model();
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

Runner setup(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible server with continuous batching");
  cmd->add_option("--weights", opt.weights, "Qwen3 checkpoint directory (HF safetensors)");
  cmd->add_option("--manifest", opt.manifest, "Manifest JSON (default: generated from config.json)");
  cmd->add_option("--kernels", opt.kernels, "Kernels directory");
  cmd->add_option("--tokenizer", opt.tokenizer, "tokenizer.json (default: beside the weights)");
  cmd->add_option("--chat-template", opt.chat_template, "tokenizer_config.json or .jinja with the chat template");
  cmd->add_option("--host", opt.host, "Address to bind (default 127.0.0.1)");
  cmd->add_option("--port", opt.port, "Port (default 8000; 0: any free port)");
  cmd->add_option("--max-seqs", opt.max_seqs, "Sequences per decode step (default 256)")->check(CLI::Range(1, 1024));
  cmd->add_option("--capacity", opt.capacity, "KV capacity in tokens (default: the GPU's free memory less 1 GiB)");
  cmd->add_option("--chunk", opt.chunk, "Prefill rows of one request per step (default 1024)")->check(CLI::PositiveNumber);
  cmd->add_option("--prefill-chunks", opt.prefill_chunks,
                  "Requests' chunks one prefill call packs, up to the budget's rows (default 8; 1: a call per chunk)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--prefill-budget", opt.prefill_budget, "Prefill rows per step over all requests (default 4096)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-waiting", opt.max_waiting, "Queued sequences beyond which requests get 429 (default 1024)");
  cmd->add_option("--max-model-len", opt.max_model_len, "Positions one request may reach (default: the model's and the pool's)");
  cmd->add_option("--served-model-name", opt.served_model_name, "The model name clients send (default: the weights' folder)");
  cmd->add_option("--api-key", opt.api_key, "Require 'Authorization: Bearer KEY' on /v1/*, /tokenize, /detokenize");
  cmd->add_option("--gpu", opt.gpu, "GPU index (default 0)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--http-threads", opt.http_threads, "HTTP I/O threads (default 2)")->check(CLI::Range(1, 64));
  cmd->add_option("--request-timeout", opt.request_timeout,
                  "Seconds a request may take to arrive whole; after that: 408 and the connection closed (default 10)")
      ->check(CLI::Range(0.05, 3600.0));
  cmd->add_option("--drain-timeout", opt.drain_timeout, "Seconds SIGTERM waits for open requests (default 30)");
  cmd->add_flag("--no-prefix-cache", opt.no_prefix_cache, "Do not reuse the pages of earlier prompts");
  cmd->add_option("--host-gib", opt.host_gib,
                  "Pinned host memory (GiB) for cold prefix-cache entries: evicted entries are parked there and "
                  "copied back on a hit, instead of dropped (default 0: none)")
      ->check(CLI::Range(0.0, 4096.0));
  cmd->add_flag("!--no-batch-invariant", opt.batch_invariant,
                "Generated manifest: let a request's decode arithmetic depend on what shares its steps (kern gen "
                "--no-batch-invariant)");
  cmd->add_option("--attn-split-tokens", opt.attn_split_tokens, "Generated manifest: kern gen --attn-split-tokens");
  cmd->add_flag("!--no-gemm-per-m", opt.gemm_per_m, "Generated manifest: kern gen --no-gemm-per-m");
  cmd->add_flag("--mixed", opt.mixed,
                "Generated manifest, above 128 sequences: run each step's last prefill chunks and its decode rows as "
                "one forward (kern gen --mixed; measured slower on the H200 with cuBLASLt, docs/serve.md)");
  add_decode_attn_items(*cmd, opt.decode_attn_items, "Generated manifest: kern gen --decode-attn-items");
  cmd->add_flag("--decode-attn-key-major", opt.decode_attn_key_major, "Generated manifest: kern gen --decode-attn-key-major");
  cmd->add_flag("--fake-engine", opt.fake, "Serve a deterministic token source instead of a model (no GPU)");
  cmd->add_option("--fake-step-us", opt.fake_step_us, "With --fake-engine: wall time of each step (default 0)");
  cmd->add_option("--fake-capacity", opt.fake_capacity, "With --fake-engine: KV tokens of its pool (default 65536)");
  cmd->add_option("--fake-mixed-chunks", opt.fake_mixed_chunks,
                  "With --fake-engine: take mixed steps of up to this many chunks (default 0: none)");
  return run;
}

const Registrar registrar("serve", setup);

}  // namespace
}  // namespace kern::cli::cmd_serve
