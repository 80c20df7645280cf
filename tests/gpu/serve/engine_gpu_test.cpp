// The engine on the GPU: a synthesized tiny Qwen3 (4 layers of 256, the real vocabulary) loaded
// with a 64-sequence decode program; greedy tokens from the engine must equal kern run's generator
// (driver::Generator, one sequence) for the same prompts, a request alone and among 63 others.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <random>
#include <thread>

#include "kern/core/protocol.hpp"
#include "kern/driver/driver.hpp"
#include "kern/driver/runtime_executor.hpp"
#include "kern/models/qwen3_gen.hpp"
#include "kern/models/qwen3_shape.hpp"
#include "kern/models/qwen3_synth.hpp"
#include "kern/serve/engine.hpp"
#include "kern/serve/runtime_pages.hpp"
#include "kern/weights/tensors.hpp"

namespace kern::serve {
namespace {

std::string kernels_dir() {
  if (const char* env = std::getenv("KERN_KERNELS_DIR"); env != nullptr && *env != '\0') return env;
  return std::string(KERN_BINARY_DIR) + "/kernels";
}

struct Collect final : TokenSink {
  bool on_token(std::uint64_t, std::int64_t token, const driver::TokenLogprobs*) override {
    std::lock_guard<std::mutex> l(mu);
    tokens.push_back(token);
    return true;
  }
  void on_end(std::uint64_t, End why, std::uint64_t) override {
    std::lock_guard<std::mutex> l(mu);
    end = why;
  }
  void on_error(const std::string& m) override {
    std::lock_guard<std::mutex> l(mu);
    error = m;
    end = End::Cancelled;
  }
  bool cancelled() const override { return false; }
  bool done() {
    std::lock_guard<std::mutex> l(mu);
    return end.has_value();
  }
  std::mutex mu;
  std::vector<std::int64_t> tokens;
  std::optional<End> end;
  std::string error;
};

struct Model {
  // mixed: the manifest has kern serve's mixed program (and no prefill logits; every program runs the
  // decode ops). packed: its prefill program packs up to 8 chunks per call (no prefill logits).
  explicit Model(bool mixed = false, bool packed = false) {
    dir = std::filesystem::temp_directory_path() / ("kern-serve-gpu-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    models::SynthOptions so;
    so.out_dir = dir.string();
    so.shape = models::qwen3_preset("tiny");
    so.seed = 7;
    models::synth_qwen3(so);
    models::Qwen3GenOptions gen;
    gen.max_seqs = 64;
    gen.max_tokens = 512;
    gen.model = "tiny";
    gen.mixed = mixed;
    gen.prefill_logits = !mixed && !packed;
    gen.prefill_chunks = packed ? 8 : 1;
    gen.module_sha256 = models::hash_kernel_fatbins(kernels_dir());
    const auto manifest = models::generate_qwen3_manifest(so.shape, gen);
    verified.emplace(core::verify(core::parse_manifest(manifest.dump())));
    protocol.emplace(core::check_protocol(*verified));
    runtime::RuntimeOptions ro;
    ro.capacity.tokens = 64 * 512;
    ro.capacity.seqs = 1;
    rt = runtime::Runtime::load(*verified, kernels_dir(), ro);
    rt->load_weights(weights::SafetensorsTensors::open(dir.string()));
  }
  ~Model() {
    rt.reset();
    std::filesystem::remove_all(dir);
  }
  std::filesystem::path dir;
  std::optional<core::Verified> verified;
  std::optional<core::Protocol> protocol;
  std::unique_ptr<runtime::Runtime> rt;
};

std::vector<std::vector<pool::Token>> prompts(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<pool::Token>> out(n);
  for (auto& p : out) {
    p.resize(5 + rng() % 300);
    for (auto& t : p) t = static_cast<pool::Token>(100 + rng() % 150000);
  }
  return out;
}

// The engine over the model's runtime: 64 sequences per step, 64-row chunks, no prefix cache.
struct Served {
  static EngineConfig config(const StepRunner& runner) {
    EngineConfig cfg;
    cfg.scheduler.mixed_rows = runner.mixed_rows();  // 0 without a mixed program
    cfg.scheduler.mixed_chunks = runner.mixed_chunks();
    cfg.scheduler.max_running = 64;
    cfg.scheduler.chunk = 64;
    cfg.scheduler.prefill_budget = 512;
    cfg.scheduler.max_len = 512;
    cfg.scheduler.prefix_cache = false;
    return cfg;
  }
  Served(Model& m, driver::Executor& exec)
      : pages(*m.rt),
        runner(*m.protocol, exec, std::move(m.rt->lease(1)).value(), 64),
        engine(config(runner), pages, runner) {
    engine.start();
  }
  RuntimePages pages;
  ProtocolRunner runner;
  Engine engine;
};

void greedy_alone_and_among_others(bool mixed, bool packed = false) {
  Model m(mixed, packed);
  constexpr std::uint64_t kSteps = 24;
  const auto ps = prompts(64, 3);
  driver::RuntimeExecutor exec(*m.rt);
  std::vector<std::vector<std::int64_t>> reference;
  {
    driver::GeneratorOptions go;
    go.steps = kSteps;
    go.chunk = 64;
    go.first_token_from_step = true;  // the server's way, whatever the manifest (docs/serve.md)
    driver::Generator gen(*m.protocol, exec, go);
    for (const auto& p : ps) {
      const std::vector<std::int64_t> prompt(p.begin(), p.end());
      reference.push_back(gen.generate(prompt).tokens);
    }
  }
  Served served(m, exec);
  Engine& engine = served.engine;
  auto serve = [&](std::span<const std::vector<pool::Token>> batch) {
    std::vector<std::shared_ptr<Collect>> sinks;
    for (const auto& p : batch) {
      auto s = std::make_shared<Collect>();
      EngineRequest r;
      r.spec.prompt = p;
      r.spec.max_new = kSteps;
      r.sink = s;
      EXPECT_EQ(engine.submit(std::move(r)), Engine::Submitted::Queued);
      sinks.push_back(s);
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (auto& s : sinks)
      while (!s->done() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::vector<std::vector<std::int64_t>> out;
    for (auto& s : sinks) {
      EXPECT_TRUE(s->done());
      EXPECT_EQ(s->error, "");
      out.push_back(s->tokens);
    }
    return out;
  };
  const auto alone = serve(std::span(ps).first(1));
  EXPECT_EQ(alone.at(0), reference.at(0)) << "one request through the engine = kern run";
  const auto t0 = std::chrono::steady_clock::now();
  const auto together = serve(ps);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::size_t equal = 0, first_token_equal = 0;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    if (together[i] == reference[i]) ++equal;
    if (!together[i].empty() && together[i][0] == reference[i][0]) ++first_token_equal;
    if (together[i] != reference[i]) {
      std::size_t k = 0;
      while (k < together[i].size() && k < reference[i].size() && together[i][k] == reference[i][k]) ++k;
      std::printf("[serve-gpu] request %zu (prompt %zu): first difference at token %zu of %zu\n", i, ps[i].size(), k,
                  reference[i].size());
    }
  }
  std::printf("[serve-gpu] 64 requests together in %.2f s: %zu of 64 equal kern run's %llu tokens bitwise, %zu first tokens\n",
              secs, equal, static_cast<unsigned long long>(kSteps), first_token_equal);
  const EngineMetrics mt = engine.metrics();
  std::printf("[serve-gpu] steps %llu, prefill rows %llu, pages used %llu of %llu after\n",
              static_cast<unsigned long long>(mt.steps), static_cast<unsigned long long>(mt.prefill_rows),
              static_cast<unsigned long long>(mt.pages_used), static_cast<unsigned long long>(mt.pages_total));
  EXPECT_EQ(equal, 64u) << "batch invariance: a request's tokens do not depend on what shares its steps";
  std::printf("[serve-gpu] prefill calls %llu (packed chunks: %s)\n", static_cast<unsigned long long>(mt.prefill_calls),
              packed ? "up to 8" : "no");
  if (packed) {
    // 64 prompts of 5-304 tokens in chunks of 64: more chunks than calls only if calls packed them.
    std::uint64_t chunks = 0;
    for (const auto& p : ps) chunks += (p.size() + 63) / 64;
    EXPECT_LT(mt.prefill_calls, chunks);
  }
  if (mixed) {
    std::printf("[serve-gpu] mixed steps: %llu of %llu steps carried chunks beside decode rows\n",
                static_cast<unsigned long long>(mt.mixed_calls), static_cast<unsigned long long>(mt.steps));
    EXPECT_GT(mt.mixed_calls, 0u);
  } else {
    EXPECT_EQ(mt.mixed_calls, 0u);
  }
  engine.stop();
}

TEST(ServeGpu, GreedyTokensEqualKernRunAloneAndAmong63Others) { greedy_alone_and_among_others(false); }

// Mixed steps: the 64 prompts' chunks ride beside the earlier requests' decode rows in one forward,
// and every token still equals kern run's, which never mixes (its chunks through the prefill
// program, its rows through the decode graphs).
TEST(ServeGpu, MixedStepsGiveKernRunsTokensBitwise) { greedy_alone_and_among_others(true); }

// Packed prefill: the 64 prompts' chunks share prefill calls (up to 8 a call, 512 rows), and every token
// still equals kern run's, whose chunks each run alone through the same program.
TEST(ServeGpu, PackedPrefillGivesKernRunsTokensBitwise) { greedy_alone_and_among_others(false, true); }

// Sampled rows with mixed settings (greedy, temperature, top-k / top-p, min-p, and the three
// penalties over each row's generated tokens): a seeded request gives kern run's generator's tokens
// bitwise, alone and among 63 others with other settings.
TEST(ServeGpu, SeededAndPenalizedRequestsEqualKernRunAloneAndAmong63Others) {  // (and biased ones)
  Model m;
  constexpr std::uint64_t kSteps = 24;
  const auto ps = prompts(64, 5);
  // Three in 8 requests (greedy, top-k / top-p, min-p ones) with a logit bias too: the cluster kernel's
  // rows, the entries at the end of the history row of whichever group the sequence lands in.
  auto settings = [](std::size_t i) {
    driver::SamplingParams sp;
    sp.seed = 1000 + i;
    switch (i % 4) {
      case 0: sp.temperature = 0.0, sp.presence_penalty = 1.5, sp.frequency_penalty = 0.5; break;
      case 1: sp.temperature = 0.8, sp.repetition_penalty = 1.3; break;
      case 2: sp.temperature = 1.0, sp.top_k = 20, sp.top_p = 0.9, sp.frequency_penalty = 1.0; break;
      default: sp.temperature = 0.7, sp.min_p = 0.05; break;
    }
    const auto id = static_cast<std::int32_t>(i);
    if (i % 8 == 4) sp.logit_bias = {{17, 4.0f}, {100 + id, 3.0f}};
    if (i % 8 == 6) sp.logit_bias = {{17, 4.0f}, {100, -100.0f}, {101, 2.5f}, {200 + id, 3.0f}};
    if (i % 8 == 3) sp.logit_bias = {{5, 1.5f}, {42, -2.0f}}, sp.presence_penalty = 0.5;
    return sp;
  };
  driver::RuntimeExecutor exec(*m.rt);
  std::vector<std::vector<std::int64_t>> reference;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    driver::GeneratorOptions go;
    go.steps = kSteps;
    go.chunk = 64;
    go.first_token_from_step = true;  // the server's way, whatever the manifest (docs/serve.md)
    go.sampling = settings(i);
    driver::Generator gen(*m.protocol, exec, go);
    reference.push_back(gen.generate(std::vector<std::int64_t>(ps[i].begin(), ps[i].end())).tokens);
  }
  Served served(m, exec);
  Engine& engine = served.engine;
  auto serve = [&](std::size_t first, std::size_t n) {
    std::vector<std::shared_ptr<Collect>> sinks;
    for (std::size_t i = first; i < first + n; ++i) {
      auto s = std::make_shared<Collect>();
      EngineRequest r;
      r.spec.prompt = ps[i];
      r.spec.max_new = kSteps;
      r.sampling = settings(i);
      r.sink = s;
      EXPECT_EQ(engine.submit(std::move(r)), Engine::Submitted::Queued);
      sinks.push_back(s);
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    std::vector<std::vector<std::int64_t>> out;
    for (auto& s : sinks) {
      while (!s->done() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      EXPECT_TRUE(s->done());
      EXPECT_EQ(s->error, "");
      out.push_back(s->tokens);
    }
    return out;
  };
  std::size_t alone_equal = 0;
  for (std::size_t i = 0; i < 8; ++i) alone_equal += serve(i, 1).at(0) == reference[i];
  const auto together = serve(0, ps.size());
  std::size_t equal = 0;
  for (std::size_t i = 0; i < ps.size(); ++i) equal += together[i] == reference[i];
  std::size_t penalized_differs = 0;  // the penalties did something: greedy rows with a penalty vs without
  {
    driver::GeneratorOptions go;
    go.steps = kSteps;
    go.chunk = 64;
    go.first_token_from_step = true;  // the server's way, whatever the manifest (docs/serve.md)
    driver::Generator gen(*m.protocol, exec, go);
    for (std::size_t i = 0; i < ps.size(); i += 4)
      penalized_differs += gen.generate(std::vector<std::int64_t>(ps[i].begin(), ps[i].end())).tokens != reference[i];
  }
  std::printf("[serve-gpu] sampled, penalized, biased: alone %zu of 8, among 63 others %zu of 64 equal kern run "
              "bitwise; penalties changed %zu of 16 greedy rows\n",
              alone_equal, equal, penalized_differs);
  EXPECT_EQ(alone_equal, 8u);
  EXPECT_EQ(equal, 64u);
  EXPECT_GT(penalized_differs, 0u);
  engine.stop();
}

}  // namespace
}  // namespace kern::serve
