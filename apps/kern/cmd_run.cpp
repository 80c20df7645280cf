// kern run: single-sequence generation (docs/run.md), greedy unless sampling flags say otherwise.
//   kern run [--target T] --manifest M --kernels DIR --weights W... --tokenizer FILE
//            (--prompt TEXT | --prompt-ids a,b,c) [--steps 32] [--gpu 0 | --gpus 0,1] [--capacity N]
//            [--chunk 512] [--eager] [--stop-tokens a,b] [--dump-logits FILE [--logits-buffer NAME]]
//            [--chat [--system TEXT] [--chat-template PATH] [--enable-thinking | --no-thinking]]
//            [--temperature T --top-k K --top-p P --min-p P --seed S --repetition-penalty R
//             --presence-penalty P --frequency-penalty F --logit-bias ID:V,...] [--logprobs K [--logprobs-file FILE]]
// With --chat the reasoning (<think>...</think>) goes to stderr (dimmed on a terminal), the answer to stdout.
// --gpus runs a tensor-parallel manifest (kern gen --tp N) with one rank per listed GPU in this process.
// Flags beat the kern.toml target, which beats the built-in defaults. Generated text streams to
// stdout (flushed per token); the start-up report, logs and the final summary go to stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "command.hpp"
#include "config.hpp"
#include "logprobs_report.hpp"
#include "run_chat.hpp"
#include "kern/base/file.hpp"
#include "kern/driver/driver.hpp"
#include "kern/driver/generation_config.hpp"
#include "kern/driver/logits_dump.hpp"
#include "kern/driver/ranks_executor.hpp"
#include "kern/driver/runtime_executor.hpp"
#include "kern/base/error.hpp"
#include "kern/core/manifest.hpp"
#include "kern/core/protocol.hpp"
#include "kern/runtime/runtime.hpp"
#include "kern/weights/safetensors.hpp"
#include "kern/weights/tensors.hpp"
#include "kern/tokenizer/tokenizer.hpp"
#include "kern/core/verify.hpp"

namespace kern::cli::cmd_run {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string target;
  std::string manifest, kernels, tokenizer;
  std::vector<std::string> weights;
  std::string prompt, prompt_ids;
  std::optional<std::uint64_t> steps, capacity;
  std::optional<int> gpu;
  std::string gpus;
  std::uint64_t chunk = 512;
  bool eager = false;
  std::string stop_tokens;
  std::string dump_logits, logits_buffer;
  driver::SamplingParams sampling;
  std::string logprobs_file;
  std::string logit_bias;
  bool chat = false;
  std::string system, chat_template;
  bool thinking = false, no_thinking = false;
};
Options opt;
CLI::App* cmd = nullptr;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

void require_path(const std::string& path, const char* what, bool dir) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail(ErrorKind::Io, "{} {} does not exist", what, path);
  if (dir && !fs::is_directory(path, ec)) fail(ErrorKind::Io, "{} {} is not a directory", what, path);
  if (!dir && fs::is_directory(path, ec)) fail(ErrorKind::Io, "{} {} is a directory, not a file", what, path);
}

// --weights: one checkpoint directory or file, or several shard files.
std::unique_ptr<weights::Tensors> open_weights(const std::vector<std::string>& paths) {
  std::error_code ec;
  if (paths.size() == 1)
    return std::make_unique<weights::SafetensorsTensors>(weights::SafetensorsTensors::open(paths[0]));
  for (const std::string& p : paths)
    if (fs::is_directory(p, ec))
      fail(ErrorKind::Api, "--weights {}: give one checkpoint directory, or several .safetensors files", p);
  return std::make_unique<weights::SafetensorsTensors>(weights::SafetensorsCheckpoint::open_shards(paths));
}

// Launches one call of `program` makes, per op and per module (extern launches under "extern").
std::string launch_summary(const core::Manifest& m, const std::string& program) {
  std::map<std::string, std::uint64_t> per_op, per_module;
  std::uint64_t total = 0;
  for (const core::Call& c : m.programs.at(program).calls) {
    const core::Op& op = m.ops.at(c.op);
    per_op[c.op] += op.impl.launches.size();
    for (const core::Launch& l : op.impl.launches) per_module[l.is_extern() ? std::string(l.entry) : l.module] += 1;
    total += op.impl.launches.size();
  }
  std::string s = fmt::format("{} calls, {} launches; per op:", m.programs.at(program).calls.size(), total);
  for (const auto& [o, n] : per_op) s += fmt::format(" {}={}", o, n);
  s += "; per module:";
  for (const auto& [mod, n] : per_module) s += fmt::format(" {}={}", mod, n);
  return s;
}

// The runtimes' executor, bound once they are loaded (the generator checks everything before). Until
// then its sequence limits are those of a pure pool sized like the runtime's (driver::sized_pool).
class LateExecutor final : public driver::Executor {
 public:
  LateExecutor(const core::Manifest& m, const pool::Capacity& capacity) : planned_(driver::sized_pool(m, capacity)) {}
  void bind(std::vector<runtime::Runtime*> ranks) { inner_.emplace(std::move(ranks)); }
  void write_input(std::string_view b, std::span<const std::byte> bytes, bool prefix) override {
    get().write_input(b, bytes, prefix);
  }
  void write_input_at(std::string_view b, std::uint64_t offset, std::span<const std::byte> bytes) override {
    get().write_input_at(b, offset, bytes);
  }
  void run(std::string_view program, const core::Vars& vars) override { get().run(program, vars); }
  void run_and_read(std::string_view program, const core::Vars& vars, std::string_view b, std::span<std::byte> out,
                    const std::function<void()>& before_wait) override {
    get().run_and_read(program, vars, b, out, before_wait);
  }
  std::vector<std::byte> read_output(std::string_view b) override { return get().read_output(b); }
  std::vector<std::byte> read_buffer(std::string_view n) override { return get().read_buffer(n); }
  std::vector<std::byte> read_output_prefix(std::string_view b, std::uint64_t bytes) override {
    return get().read_output_prefix(b, bytes);
  }
  std::optional<driver::SeqLimits> seq_limits() const override {
    if (inner_) return inner_->seq_limits();
    if (!planned_) return std::nullopt;
    return driver::limits_of(*planned_);
  }
  pool::Granted<pool::Lease> lease(std::uint64_t tokens) override { return get().lease(tokens); }
  std::optional<pool::Denied> extend(pool::Lease& lease, std::uint64_t tokens) override {
    return get().extend(lease, tokens);
  }
  void settle() override { get().settle(); }

 private:
  driver::RanksExecutor& get() {
    if (!inner_) fail(ErrorKind::Api, "the runtime is not loaded yet");
    return *inner_;
  }
  std::optional<pool::Pool> planned_;
  std::optional<driver::RanksExecutor> inner_;
};

// Streams text as tokens arrive and times the run.
class Streamer final : public driver::GenerationObserver {
 public:
  Streamer(const tokenizer::Tokenizer* tok, driver::LogitsDump* dump, ReplyPrinter* reply = nullptr)
      : tok_(tok), dump_(dump), reply_(reply) {
    if (tok) decoder_.emplace(*tok);
    t0_ = Clock::now();
  }
  void on_prefill_done(std::uint64_t) override { prefill_ms_ = ms_since(t0_); }
  void on_logprobs(std::uint64_t, const driver::TokenLogprobs& lp) override { logprobs_.push_back(lp); }
  void on_logits(std::uint64_t position, std::span<const float> logits) override {
    if (dump_) dump_->append(position, logits);
  }
  void on_token(std::uint64_t index, std::int64_t token) override {
    const Clock::time_point now = Clock::now();
    if (index == 0)
      first_token_ms_ = std::chrono::duration<double, std::milli>(now - t0_).count();
    else
      step_ms_.push_back(std::chrono::duration<double, std::milli>(now - last_).count());
    last_ = now;
    // An id past the tokenizer's vocabulary (the embedding's padding rows) decodes to nothing,
    // as in HF's decode.
    std::string text;
    if (!decoder_)
      text = fmt::format("{} ", token);
    else if (tok_->contains(static_cast<tokenizer::TokenId>(token)))
      text = decoder_->push(static_cast<tokenizer::TokenId>(token));
    emit(text);
  }
  void finish() {
    if (decoder_) emit(decoder_->finish());
    if (reply_) reply_->finish();
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }
  double prefill_ms_ = 0, first_token_ms_ = 0;
  std::vector<double> step_ms_;
  std::vector<driver::TokenLogprobs> logprobs_;

 private:
  void emit(const std::string& text) {
    if (reply_) {
      reply_->push(text);
      return;
    }
    if (!text.empty()) std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  }
  const tokenizer::Tokenizer* tok_;
  std::optional<tokenizer::StreamingDecoder> decoder_;
  driver::LogitsDump* dump_;
  ReplyPrinter* reply_;
  Clock::time_point t0_, last_;
};

int run() {
  const Config config = load_config(globals().config);
  const std::optional<Target> target = config.target(opt.target);
  if (target) {
    if (opt.manifest.empty()) opt.manifest = target->manifest;
    if (opt.kernels.empty()) opt.kernels = target->kernels;
    if (opt.weights.empty()) opt.weights = target->weights;
    if (opt.tokenizer.empty()) opt.tokenizer = target->tokenizer;
  }
  if (opt.prompt.empty() && opt.prompt_ids.empty() && config.run.prompt) opt.prompt = *config.run.prompt;
  if (!opt.steps && config.run.steps) {
    if (*config.run.steps < 1) fail(ErrorKind::Api, "{}: [run] steps must be at least 1", config.path);
    opt.steps = static_cast<std::uint64_t>(*config.run.steps);
  }
  if (!opt.gpu && config.gpu) opt.gpu = static_cast<int>(*config.gpu);
  const std::uint64_t steps = opt.steps.value_or(32);

  auto missing = [](const char* what) {
    std::fprintf(stderr, "error: kern run needs %s (a flag, or a kern.toml target)\n", what);
    return 2;
  };
  if (opt.manifest.empty()) return missing("--manifest");
  if (opt.kernels.empty()) return missing("--kernels");
  if (opt.weights.empty()) return missing("--weights");
  if (opt.prompt.empty() && opt.prompt_ids.empty()) return missing("--prompt or --prompt-ids");
  if (!opt.prompt.empty() && opt.tokenizer.empty()) return missing("--tokenizer to encode --prompt");
  if (steps == 0) return missing("--steps of at least 1");
  if (opt.chunk == 0) return missing("--chunk of at least 1");
  if (!opt.logits_buffer.empty() && opt.dump_logits.empty()) return missing("--dump-logits with --logits-buffer");
  if (opt.chat && opt.prompt.empty()) return missing("--prompt (the user message) with --chat");
  if (opt.chat && opt.tokenizer.empty()) return missing("--tokenizer with --chat");
  if (!opt.chat && (!opt.system.empty() || opt.thinking || opt.no_thinking || !opt.chat_template.empty()))
    return missing("--chat with --system, --chat-template, --enable-thinking or --no-thinking");

  require_path(opt.manifest, "manifest", false);
  require_path(opt.kernels, "kernels directory", true);
  for (const std::string& w : opt.weights) {
    std::error_code ec;
    if (!fs::exists(w, ec)) fail(ErrorKind::Io, "weights {} does not exist", w);
  }
  if (!opt.tokenizer.empty()) require_path(opt.tokenizer, "tokenizer", false);

  const Clock::time_point t_start = Clock::now();
  const core::Verified verified = core::verify(core::parse_manifest_file(opt.manifest));
  const core::Protocol protocol = core::check_protocol(verified);
  const core::Manifest& m = verified.manifest();

  std::optional<tokenizer::Tokenizer> tokenizer;
  if (!opt.tokenizer.empty()) tokenizer.emplace(tokenizer::Tokenizer::from_file(opt.tokenizer));
  std::vector<std::int64_t> prompt;
  std::optional<ReplyPrinter> reply;
  std::vector<std::int64_t> chat_stops;
  if (!opt.prompt_ids.empty()) {
    prompt = driver::parse_id_list(opt.prompt_ids, "--prompt-ids");
  } else {
    std::string text = opt.prompt;
    if (opt.chat) {
      const chat::ChatTemplate tmpl = find_chat_template(opt.chat_template, opt.tokenizer, opt.weights.front());
      ChatRequest req{opt.system, opt.prompt, std::nullopt};
      if (opt.thinking) req.enable_thinking = true;
      if (opt.no_thinking) req.enable_thinking = false;
      text = render_chat(tmpl, req);
      chat::ReasoningOptions ro;
      ro.starts_in_reasoning = opens_reasoning(text, ro);
      reply.emplace(ro);
      // The template's end-of-turn token ends the reply too.
      if (tmpl.eos_token())
        if (std::optional<tokenizer::TokenId> eos = tokenizer->token_id(*tmpl.eos_token())) chat_stops.push_back(*eos);
      std::fprintf(stderr, "chat: %zu bytes of prompt from the chat template%s\n", text.size(),
                   ro.starts_in_reasoning ? " (it opens a reasoning block)" : "");
    }
    for (tokenizer::TokenId id : tokenizer->encode(text)) prompt.push_back(id);
    if (prompt.empty()) fail(ErrorKind::Api, "--prompt encodes to no tokens");
  }

  std::vector<std::int64_t> stops = driver::read_eos_tokens(opt.weights.front());
  for (std::int64_t t : chat_stops)
    if (std::find(stops.begin(), stops.end(), t) == stops.end()) stops.push_back(t);
  if (!opt.stop_tokens.empty())
    for (std::int64_t t : driver::parse_id_list(opt.stop_tokens, "--stop-tokens")) stops.push_back(t);

  driver::GeneratorOptions gopt;
  gopt.steps = steps;
  gopt.chunk = opt.chunk;
  gopt.stop_tokens = stops;
  const std::uint64_t capacity = opt.capacity ? *opt.capacity : driver::capacity_for(protocol, prompt.size() + steps);
  gopt.sampling = opt.sampling;
  if (!opt.logit_bias.empty()) gopt.sampling.logit_bias = driver::parse_logit_bias(opt.logit_bias);
  if (!opt.logprobs_file.empty()) gopt.sampling.chosen_logprob = true;
  if (!opt.dump_logits.empty()) {
    if (!opt.logits_buffer.empty()) {
      gopt.logits_buffer = opt.logits_buffer;
    } else if (auto found = driver::find_logits_output(protocol)) {
      gopt.logits_buffer = *found;
    } else {
      fail(ErrorKind::Api,
           "--dump-logits: the manifest has no single float output shaped [{}, vocab]; "
           "generate it with logits exposed, or name one with --logits-buffer",
           protocol.group_var());
    }
  }

  // Checks the protocol and the options before anything touches the GPU.
  runtime::RuntimeOptions ropt;
  ropt.capacity.tokens = capacity;
  ropt.capacity.seqs = 1;
  ropt.eager = opt.eager;
  const driver::RankPlan ranks =
      driver::plan_ranks(m, opt.gpus.empty() ? std::vector<int>{} : driver::parse_gpu_list(opt.gpus, "--gpus"),
                         opt.gpu.value_or(0));

  LateExecutor exec(m, pool::Capacity{capacity, 1});
  driver::Generator gen(protocol, exec, gopt);
  gen.check_fits(prompt.size());
  const std::vector<std::unique_ptr<runtime::Runtime>> runtimes = driver::load_ranks(verified, opt.kernels, ropt, ranks);
  const std::unique_ptr<runtime::Runtime>& rt = runtimes.front();

  const std::unique_ptr<weights::Tensors> weights = open_weights(opt.weights);
  const Clock::time_point t_weights = Clock::now();
  for (const auto& r : runtimes) r->load_weights(*weights);
  const double weights_ms = ms_since(t_weights);
  driver::connect_ranks(runtimes);
  exec.bind(driver::rank_pointers(runtimes));
  const double load_ms = ms_since(t_start);

  // Start-up report.
  const core::Forward* step = &gen.step_program();
  const std::optional<core::Forward>& chunk = gen.chunk_program();
  std::string vars;
  for (const auto& [n, v] : m.vars) vars += fmt::format(" {}≤{}", n, v.max);
  std::fprintf(stderr, "manifest: %s (schema %llu), %zu buffers, %zu ops, %zu programs, vars%s\n", m.model.c_str(),
               static_cast<unsigned long long>(m.schema_version), m.buffers.size(), m.ops.size(), m.programs.size(),
               vars.c_str());
  std::fprintf(stderr, "step program: %s%s\n", launch_summary(m, step->program).c_str(),
               step->graph && !opt.eager ? " (CUDA graph)" : " (eager)");
  if (chunk)
    std::fprintf(stderr, "chunk program: %s; %llu rows per chunk\n", launch_summary(m, chunk->program).c_str(),
                 static_cast<unsigned long long>(gen.chunk_rows()));
  double weight_bytes = 0;  // every rank's (each binds its own slices)
  for (const auto& r : runtimes) weight_bytes += static_cast<double>(r->stats().weight_bytes);
  if (runtimes.size() > 1) {
    std::string gpus;
    for (int g : ranks.gpus) gpus += fmt::format("{}{}", gpus.empty() ? "" : ",", g);
    std::fprintf(stderr, "ranks: %zu of topology group %s on GPUs %s (weights per rank)\n", runtimes.size(),
                 ranks.group.c_str(), gpus.c_str());
  }
  std::fprintf(stderr,
               "weights: %.3f GB bound in %.0f ms (%.2f GB/s) from %zu file(s); load total %.0f ms; "
               "capacity %llu tokens; prompt %zu tokens; stop tokens %zu\n",
               weight_bytes / 1e9, weights_ms, weights_ms > 0 ? weight_bytes / 1e6 / weights_ms : 0.0,
               weights->files().size(), load_ms, static_cast<unsigned long long>(capacity), prompt.size(),
               stops.size());
  if (opt.chunk > gen.chunk_rows())
    std::fprintf(stderr, "note: --chunk %llu capped to %llu rows (the chunk program's bound)\n",
                 static_cast<unsigned long long>(opt.chunk), static_cast<unsigned long long>(gen.chunk_rows()));

  std::unique_ptr<driver::LogitsDump> dump;
  if (!opt.dump_logits.empty()) {
    const core::Buffer& b = m.buffers.at(gopt.logits_buffer);
    std::uint64_t width = 1;
    for (std::size_t i = 1; i < b.shape.size(); ++i) width *= b.shape[i].value;
    dump = std::make_unique<driver::LogitsDump>(opt.dump_logits, width);
  }

  Streamer streamer(tokenizer ? &*tokenizer : nullptr, dump.get(), reply ? &*reply : nullptr);
  const std::uint64_t launches0 = rt->stats().kernel_launches;
  const driver::GenerationResult result = gen.generate(prompt, &streamer);
  streamer.finish();
  if (dump) dump->finish(prompt, result.tokens, std::string(driver::to_string(result.reason)));
  if (gopt.sampling.wants_logprobs()) {
    const Json content = logprobs_json(result.tokens, streamer.logprobs_, tokenizer ? &*tokenizer : nullptr);
    if (!opt.logprobs_file.empty()) {
      write_file(opt.logprobs_file, Json{{"content", content}}.dump(1) + "\n");
    } else {
      const std::string lines = logprobs_lines(content);
      std::fwrite(lines.data(), 1, lines.size(), stderr);
    }
  }

  const runtime::RuntimeStats& st = rt->stats();
  std::vector<double> steps_ms = streamer.step_ms_;
  double median = 0;
  if (!steps_ms.empty()) {
    std::sort(steps_ms.begin(), steps_ms.end());
    median = steps_ms.size() % 2 ? steps_ms[steps_ms.size() / 2]
                                 : (steps_ms[steps_ms.size() / 2 - 1] + steps_ms[steps_ms.size() / 2]) / 2;
  }
  std::fprintf(stderr, "graphs: %llu captured, %llu launched; %llu kernel launches, %llu GEMMs during generation\n",
               static_cast<unsigned long long>(st.graph_captures), static_cast<unsigned long long>(st.graph_launches),
               static_cast<unsigned long long>(st.kernel_launches - launches0),
               static_cast<unsigned long long>(st.gemm_calls));
  std::fprintf(stderr,
               "generated %zu tokens (stop: %s); prefill %zu tokens in %.2f ms (%.0f tokens/s, first token at %.2f ms, "
               "%llu chunk calls); decode %.3f ms/token (median of %zu)\n",
               result.tokens.size(), std::string(driver::to_string(result.reason)).c_str(), prompt.size(),
               streamer.first_token_ms_,
               streamer.first_token_ms_ > 0 ? prompt.size() * 1000.0 / streamer.first_token_ms_ : 0.0,
               streamer.first_token_ms_, static_cast<unsigned long long>(result.chunk_calls), median, steps_ms.size());
  return 0;
}

Runner setup(CLI::App& app) {
  cmd = app.add_subcommand("run", "Greedy generation for one prompt (text to stdout, report to stderr)");
  cmd->add_option("target", opt.target, "kern.toml target (default: the [run] target or the only one)");
  cmd->add_option("--target", opt.target, "kern.toml target");
  cmd->add_option("--manifest", opt.manifest, "Manifest JSON");
  cmd->add_option("--kernels", opt.kernels, "Kernels directory");
  cmd->add_option("--weights", opt.weights, "Checkpoint directory, or .safetensors files (repeatable)");
  cmd->add_option("--tokenizer", opt.tokenizer, "tokenizer.json");
  CLI::Option* p = cmd->add_option("--prompt", opt.prompt, "Prompt text (with --chat: the user message)");
  cmd->add_flag("--chat", opt.chat, "Send the prompt as a user message through the model's chat template");
  cmd->add_option("--system", opt.system, "With --chat: a system message first");
  cmd->add_option("--chat-template", opt.chat_template,
                  "With --chat: tokenizer_config.json, chat_template.jinja or a model directory (default: beside the "
                  "tokenizer, else the weights)");
  CLI::Option* think = cmd->add_flag("--enable-thinking", opt.thinking, "With --chat: enable_thinking=true");
  cmd->add_flag("--no-thinking", opt.no_thinking, "With --chat: enable_thinking=false")->excludes(think);
  cmd->add_option("--prompt-ids", opt.prompt_ids, "Prompt token ids a,b,c")->excludes(p);
  cmd->add_option("--steps", opt.steps, "Tokens to generate at most (default 32)")->check(CLI::PositiveNumber);
  CLI::Option* gpu = cmd->add_option("--gpu", opt.gpu, "GPU index (default 0)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--gpus", opt.gpus,
                  "GPU ordinals a,b,... of a tensor-parallel manifest's ranks, in rank order (kern gen --tp N)")
      ->excludes(gpu);
  cmd->add_option("--capacity", opt.capacity, "KV capacity in tokens (default: prompt + steps, rounded up to pages)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--chunk", opt.chunk, "Prefill rows per call (capped by the chunk program's bound)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--eager", opt.eager, "Never replay CUDA graphs");
  cmd->add_option("--stop-tokens", opt.stop_tokens,
                  "Extra stop token ids a,b (generation_config.json eos ids always stop)");
  cmd->add_option("--dump-logits", opt.dump_logits, "Write every logits row to FILE (.npy f32) + FILE.json (ids)");
  cmd->add_option("--logits-buffer", opt.logits_buffer,
                  "Output to dump (default: the one float [groups, vocab] output)");
  driver::SamplingParams& s = opt.sampling;
  cmd->add_option("--temperature", s.temperature, "Sampling temperature in [0, 2] (default 0: greedy)");
  cmd->add_option("--top-k", s.top_k, "Keep the k most likely tokens (default 0: off)");
  cmd->add_option("--top-p", s.top_p, "Keep the smallest set holding this probability (default 1: off)");
  cmd->add_option("--min-p", s.min_p, "Drop tokens below min-p x the top probability (default 0: off)");
  cmd->add_option("--repetition-penalty", s.repetition_penalty, "Penalty on generated tokens (default 1: off)");
  cmd->add_option("--presence-penalty", s.presence_penalty, "OpenAI presence penalty in [-2, 2] (default 0)");
  cmd->add_option("--frequency-penalty", s.frequency_penalty, "OpenAI frequency penalty in [-2, 2] (default 0)");
  cmd->add_option("--seed", s.seed, "Seed of the random draws (default 0): same seed, same tokens");
  cmd->add_option("--logit-bias", opt.logit_bias,
                  "ID:VALUE,... added to those tokens' logits before sampling, VALUE in [-100, 100] "
                  "(OpenAI's logit_bias)");
  cmd->add_option("--logprobs", s.logprobs, "Top log-probs per generated token, 0..20 (printed to stderr)");
  cmd->add_option("--logprobs-file", opt.logprobs_file, "Write the log-probs as JSON to FILE instead of stderr");
  return [] { return run(); };
}
Registrar reg("run", setup);

}  // namespace
}  // namespace kern::cli::cmd_run
