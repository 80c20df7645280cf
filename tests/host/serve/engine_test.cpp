// The engine thread over the fake runner and a pure pool: requests stream their tokens in order
// and end, n samples each end, a sink returning false stops its sample, a client that goes away
// frees its pages within a step, stop() tells what is still open.
#include "kern/serve/engine.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>

#include "kern/serve/pool_pages.hpp"

namespace kern::serve {
namespace {


struct Recorder final : TokenSink {
  bool on_token(std::uint64_t sample, std::int64_t token, const driver::TokenLogprobs* lp) override {
    std::lock_guard<std::mutex> l(mu);
    if (throw_after && tokens[sample].size() >= throw_after) throw std::runtime_error("sink broke");
    tokens[sample].push_back(token);
    if (lp) ++logprobs;
    return !(stop_after && tokens[sample].size() >= stop_after);
  }
  void on_end(std::uint64_t sample, End why, std::uint64_t c) override {
    std::lock_guard<std::mutex> l(mu);
    ends[sample] = why;
    cached = c;
  }
  void on_error(const std::string& m) override {
    std::lock_guard<std::mutex> l(mu);
    error = m;
  }
  bool cancelled() const override { return gone.load(); }
  void on_scheduled() override {
    if (throw_on_scheduled) throw std::runtime_error("sink broke when scheduled");
  }
  void on_prompt_logprobs(const std::vector<driver::TokenLogprobs>& lps) override {
    if (throw_on_prompt) throw std::runtime_error("sink broke on the prompt's log-probs");
    std::lock_guard<std::mutex> l(mu);
    ++prompt_calls;
    prompt_before_tokens = tokens.empty();
    prompt_lps = lps;
  }
  bool done(std::size_t n) {
    std::lock_guard<std::mutex> l(mu);
    return ends.size() == n || !error.empty();
  }
  std::mutex mu;
  std::map<std::uint64_t, std::vector<std::int64_t>> tokens;
  std::map<std::uint64_t, End> ends;
  std::string error;
  std::uint64_t cached = 0, logprobs = 0, stop_after = 0, throw_after = 0;
  std::uint64_t prompt_calls = 0;
  bool throw_on_scheduled = false, throw_on_prompt = false;
  bool prompt_before_tokens = false;
  std::vector<driver::TokenLogprobs> prompt_lps;
  std::atomic<bool> gone{false};
};

bool wait_for(const std::function<bool()>& f, int ms = 5000) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!f()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

EngineRequest request(std::vector<pool::Token> prompt, std::uint64_t max_new, std::shared_ptr<Recorder> sink,
                      std::uint64_t n = 1) {
  EngineRequest r;
  r.spec.prompt = std::move(prompt);
  r.spec.max_new = max_new;
  r.spec.n = n;
  r.sink = std::move(sink);
  return r;
}

struct Rig {
  // mixed_chunks > 0: the runner takes mixed steps and the scheduler bounds a step's rows by them.
  // prefill_chunks > 1: the runner packs that many chunks (128 rows in all) per prefill call.
  explicit Rig(std::uint64_t step_us = 0, std::uint64_t mixed_chunks = 0, std::uint64_t prefill_chunks = 1)
      : pages(8192, 16),
        runner(50000, 8, prefill_chunks > 1 ? 128 : 64, step_us, mixed_chunks, prefill_chunks),
        engine(config(mixed_chunks), pages, runner) {
    engine.start();
  }
  static EngineConfig config(std::uint64_t mixed_chunks = 0) {
    EngineConfig c;
    c.scheduler.max_running = 8;
    c.scheduler.chunk = 64;
    c.scheduler.prefill_budget = 128;
    if (mixed_chunks > 0) {
      c.scheduler.mixed_rows = 64;
      c.scheduler.mixed_chunks = mixed_chunks;
    }
    c.idle_wait_ms = 5;
    return c;
  }
  PoolPages pages;
  FakeRunner runner;
  Engine engine;
};

TEST(Engine, RequestsStreamTheFakeModelsTokensAndEnd) {
  Rig r;
  auto a = std::make_shared<Recorder>();
  auto b = std::make_shared<Recorder>();
  std::vector<pool::Token> pa(100, 5), pb = {1, 2, 3};
  ASSERT_EQ(r.engine.submit(request(pa, 12, a)), Engine::Submitted::Queued);
  ASSERT_EQ(r.engine.submit(request(pb, 5, b)), Engine::Submitted::Queued);
  ASSERT_TRUE(wait_for([&] { return a->done(1) && b->done(1); }));
  EXPECT_EQ(a->tokens[0].size(), 12u);
  EXPECT_EQ(b->tokens[0].size(), 5u);
  EXPECT_EQ(a->ends[0], End::Length);
  // The fake model's tokens: each the function of the one before and its position.
  std::int64_t prev = pb.back();
  for (std::size_t i = 0; i < b->tokens[0].size(); ++i) {
    EXPECT_EQ(b->tokens[0][i], fake_next(prev, pb.size() - 1 + i, 50000)) << i;
    prev = b->tokens[0][i];
  }
  EXPECT_TRUE(wait_for([&] { return r.engine.open_requests() == 0; }));
  EXPECT_GE(r.runner.prefill_rows(), 99u + 2u);
}

// Mixed steps: while one request decodes, the others' prompts ride in its steps; every stream is the
// fake model's, as without them, and the steps that had both ran as one mixed call.
TEST(Engine, MixedStepsCarryChunksBesideDecodeRows) {
  Rig r(0, 2);
  std::vector<std::shared_ptr<Recorder>> sinks;
  std::vector<std::vector<pool::Token>> prompts;
  for (int i = 0; i < 5; ++i) {
    prompts.emplace_back(static_cast<std::size_t>(3 + 70 * i), static_cast<pool::Token>(9 + i));
    sinks.push_back(std::make_shared<Recorder>());
    ASSERT_EQ(r.engine.submit(request(prompts.back(), 20, sinks.back())), Engine::Submitted::Queued);
  }
  ASSERT_TRUE(wait_for([&] {
    for (auto& k : sinks)
      if (!k->done(1)) return false;
    return true;
  }));
  for (std::size_t i = 0; i < sinks.size(); ++i) {
    ASSERT_EQ(sinks[i]->tokens[0].size(), 20u) << i;
    std::int64_t prev = prompts[i].back();
    for (std::size_t t = 0; t < 20; ++t) {
      EXPECT_EQ(sinks[i]->tokens[0][t], fake_next(prev, prompts[i].size() - 1 + t, 50000)) << i << " " << t;
      prev = sinks[i]->tokens[0][t];
    }
  }
  EXPECT_GT(r.runner.mixed_calls(), 0u);
  EXPECT_GE(r.runner.prefill_rows(), 2u + 72 + 142 + 212 + 282);
  EXPECT_TRUE(wait_for([&] { return r.engine.open_requests() == 0; }));
  EXPECT_EQ(r.engine.metrics().mixed_calls, r.runner.mixed_calls());
}

// Packed prefill: a step's chunks of different sequences go to the runner in one call (up to its
// chunks and rows), and every stream is the fake model's, as with one call per chunk.
TEST(Engine, PackedPrefillRunsAStepsChunksInOneCall) {
  std::vector<std::vector<pool::Token>> prompts;
  for (int i = 0; i < 6; ++i) prompts.emplace_back(static_cast<std::size_t>(3 + 50 * i), static_cast<pool::Token>(9 + i));
  std::uint64_t calls[2] = {0, 0};
  for (int packed = 0; packed < 2; ++packed) {
    Rig r(0, 0, packed ? 4 : 1);
    std::vector<std::shared_ptr<Recorder>> sinks;
    for (const auto& p : prompts) {
      sinks.push_back(std::make_shared<Recorder>());
      ASSERT_EQ(r.engine.submit(request(p, 10, sinks.back())), Engine::Submitted::Queued);
    }
    ASSERT_TRUE(wait_for([&] {
      for (auto& k : sinks)
        if (!k->done(1)) return false;
      return true;
    }));
    for (std::size_t i = 0; i < sinks.size(); ++i) {
      ASSERT_EQ(sinks[i]->tokens[0].size(), 10u) << i;
      std::int64_t prev = prompts[i].back();
      for (std::size_t t = 0; t < 10; ++t) {
        EXPECT_EQ(sinks[i]->tokens[0][t], fake_next(prev, prompts[i].size() - 1 + t, 50000)) << packed << " " << i;
        prev = sinks[i]->tokens[0][t];
      }
    }
    EXPECT_TRUE(wait_for([&] { return r.engine.open_requests() == 0; }));
    EXPECT_GE(r.runner.prefill_rows(), 2u + 52 + 102 + 152 + 202 + 252);
    calls[packed] = r.runner.prefill_calls();
  }
  EXPECT_LT(calls[1], calls[0]);  // the same rows in fewer calls
}

// Penalized rows get their generated tokens (the fed one last): the fake model's next token then
// depends on how often the fed token was generated, so the stream shows the history arrived whole.
TEST(Engine, PenalizedRowsSeeTheirGeneratedTokens) {
  Rig r;
  auto plain = std::make_shared<Recorder>();
  auto pen = std::make_shared<Recorder>();
  const std::vector<pool::Token> prompt = {1, 2, 3};
  ASSERT_EQ(r.engine.submit(request(prompt, 8, plain)), Engine::Submitted::Queued);
  EngineRequest req = request(prompt, 8, pen);
  req.sampling.presence_penalty = 0.5;
  ASSERT_EQ(r.engine.submit(std::move(req)), Engine::Submitted::Queued);
  ASSERT_TRUE(wait_for([&] { return plain->done(1) && pen->done(1); }));
  ASSERT_EQ(pen->tokens[0].size(), 8u);
  std::vector<std::int64_t> generated;
  std::int64_t prev = prompt.back();
  for (std::size_t i = 0; i < 8; ++i) {
    const std::int64_t t = prev + 7919 * std::count(generated.begin(), generated.end(), prev);
    generated.push_back(fake_next(t, prompt.size() - 1 + i, 50000));
    prev = generated.back();
  }
  EXPECT_EQ(pen->tokens[0], generated);
  EXPECT_NE(pen->tokens[0], plain->tokens[0]) << "the penalty changed nothing";
  EXPECT_EQ(pen->tokens[0][0], plain->tokens[0][0]) << "no history before the first generated token";
}

// A request's logit bias reaches the runner with its rows: the fake model's tokens move as the bias says
// (fake_biased): a lifted id every time; banned ids never, the next id instead.
TEST(Engine, LogitBiasReachesTheRunner) {
  Rig r;
  auto plain = std::make_shared<Recorder>();
  auto lifted = std::make_shared<Recorder>();
  auto banning = std::make_shared<Recorder>();
  const std::vector<pool::Token> prompt = {1, 2, 3};
  ASSERT_EQ(r.engine.submit(request(prompt, 6, plain)), Engine::Submitted::Queued);
  ASSERT_TRUE(wait_for([&] { return plain->done(1); }));
  ASSERT_EQ(plain->tokens[0].size(), 6u);
  EngineRequest a = request(prompt, 6, lifted);
  a.sampling.logit_bias = {{7, -100.0f}, {42, 100.0f}, {43, 100.0f}};
  ASSERT_EQ(r.engine.submit(std::move(a)), Engine::Submitted::Queued);
  EngineRequest b = request(prompt, 6, banning);
  const auto first = static_cast<std::int32_t>(plain->tokens[0][0]);
  b.sampling.logit_bias = {{first, -100.0f}, {first + 1, -60.0f}};
  ASSERT_EQ(r.engine.submit(std::move(b)), Engine::Submitted::Queued);
  ASSERT_TRUE(wait_for([&] { return lifted->done(1) && banning->done(1); }));
  EXPECT_EQ(lifted->tokens[0], std::vector<std::int64_t>(6, 42));
  ASSERT_FALSE(banning->tokens[0].empty());
  EXPECT_EQ(banning->tokens[0][0], first + 2) << "both banned ids give way to the next";
  driver::SamplingParams p;
  p.logit_bias = {{3, -50.0f}, {4, -49.0f}};
  EXPECT_EQ(fake_biased(3, p, 10), 4);
  EXPECT_EQ(fake_biased(9, p, 10), 9);
  p.logit_bias = {{9, -100.0f}};
  EXPECT_EQ(fake_biased(9, p, 10), 0);  // wraps around the vocabulary
}

// Echo with log-probs: every prompt position but the last is scored once per request (forced rows
// in calls of at most the runner's 8 rows), before the first token, also when the prompt's pages
// come from the prefix index; what the request generates is what it generates without.
TEST(Engine, PromptLogprobsScoreEveryPositionOnceBeforeTheFirstToken) {
  Rig r;
  std::vector<pool::Token> prompt(30);
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<pool::Token>(300 + 7 * i);
  auto plain = std::make_shared<Recorder>();
  ASSERT_EQ(r.engine.submit(request(prompt, 6, plain)), Engine::Submitted::Queued);
  ASSERT_TRUE(wait_for([&] { return plain->done(1); }));
  for (int round = 0; round < 2; ++round) {  // the second round's prompt is a prefix-index hit
    SCOPED_TRACE(round);
    auto scored = std::make_shared<Recorder>();
    EngineRequest req = request(prompt, 6, scored, 2);
    req.prompt_logprobs = true;
    req.sampling.logprobs = 3;
    req.sampling.chosen_logprob = true;
    ASSERT_EQ(r.engine.submit(std::move(req)), Engine::Submitted::Queued);
    ASSERT_TRUE(wait_for([&] { return scored->done(2); }));
    EXPECT_EQ(scored->prompt_calls, 1u);
    EXPECT_TRUE(scored->prompt_before_tokens);
    ASSERT_EQ(scored->prompt_lps.size(), prompt.size() - 1);
    for (std::size_t i = 0; i < scored->prompt_lps.size(); ++i) {
      EXPECT_FLOAT_EQ(scored->prompt_lps[i].chosen, -static_cast<float>(i + 1) / 8.0f) << i;
      EXPECT_EQ(scored->prompt_lps[i].top.size(), 3u) << i;
    }
    EXPECT_EQ(scored->tokens[0], plain->tokens[0]);
    if (round == 1) {
      EXPECT_GT(scored->cached, 0u);
    }
  }
}

// Score only (max_tokens 0 with echo): the prompt's log-probs, no token told, the request ends Length.
TEST(Engine, ScoreOnlyRequestsTellTheirPromptLogprobsAndNoToken) {
  Rig r;
  const std::vector<pool::Token> prompt = {300, 301, 302, 303, 304, 305, 306, 307, 308, 309, 310};
  auto scored = std::make_shared<Recorder>();
  EngineRequest req = request(prompt, 0, scored, 2);  // the engine sets max_new 1
  req.prompt_logprobs = true;
  req.score_only = true;
  req.sampling.chosen_logprob = true;
  ASSERT_EQ(r.engine.submit(std::move(req)), Engine::Submitted::Queued);
  ASSERT_TRUE(wait_for([&] { return scored->done(2); }));
  EXPECT_EQ(scored->prompt_calls, 1u);
  EXPECT_EQ(scored->prompt_lps.size(), prompt.size() - 1);
  EXPECT_TRUE(scored->tokens.empty());
  EXPECT_EQ(scored->ends[0], End::Length);
  EXPECT_EQ(scored->ends[1], End::Length);
  EXPECT_TRUE(wait_for([&] { return r.engine.open_requests() == 0; }));
  EXPECT_EQ(r.engine.metrics().generation_tokens, 0u);
}

TEST(Engine, SamplesEndOnTheirOwnAndASinkCanStopOne) {
  Rig r;
  auto a = std::make_shared<Recorder>();
  a->stop_after = 3;
  EngineRequest req = request(std::vector<pool::Token>(40, 9), 10, a, 3);
  req.sampling.temperature = 0.7;
  req.sampling.seed = 11;
  ASSERT_EQ(r.engine.submit(std::move(req)), Engine::Submitted::Queued);
  ASSERT_TRUE(wait_for([&] { return a->done(3); }));
  for (std::uint64_t s = 0; s < 3; ++s) {
    EXPECT_EQ(a->tokens[s].size(), 3u);
    EXPECT_EQ(a->ends[s], End::Stopped);
  }
  EXPECT_NE(a->tokens[0], a->tokens[1]) << "each sample draws with its own seed";
}

// A step's tokens reach their sinks while the next decode call runs (the fake runner's while_running),
// one call behind; the last step's when nothing runs next; on_end after a sample's last token. A sink
// that stops its sample while the next call (which still has its row) runs hears nothing more, and the
// sequence's pages go back after that call.
struct CallWatcher final : TokenSink {
  explicit CallWatcher(const FakeRunner& r, std::uint64_t stop = 0) : runner(r), stop_after(stop) {}
  bool on_token(std::uint64_t, std::int64_t token, const driver::TokenLogprobs*) override {
    tokens.push_back(token);
    in_call.push_back(runner.in_decode());
    calls.push_back(runner.decode_calls());
    return !(stop_after && tokens.size() >= stop_after);
  }
  void on_end(std::uint64_t, End why, std::uint64_t) override {
    ends.push_back(why);
    tokens_at_end = tokens.size();
    ended = true;
  }
  void on_error(const std::string& m) override { error = m; }
  bool cancelled() const override { return false; }
  const FakeRunner& runner;
  std::uint64_t stop_after;
  std::vector<std::int64_t> tokens;
  std::vector<bool> in_call;
  std::vector<std::uint64_t> calls;
  std::vector<End> ends;
  std::size_t tokens_at_end = 0;
  std::string error;
  std::atomic<bool> ended{false};
};

TEST(Engine, TokensReachSinksWhileTheNextDecodeCallRuns) {
  Rig r;
  auto a = std::make_shared<CallWatcher>(r.runner);
  EngineRequest req;
  req.spec.prompt = {1, 2, 3};
  req.spec.max_new = 6;
  req.sink = a;
  ASSERT_EQ(r.engine.submit(std::move(req)), Engine::Submitted::Queued);
  ASSERT_TRUE(wait_for([&] { return a->ended.load(); }));
  ASSERT_TRUE(wait_for([&] { return r.engine.open_requests() == 0; }));
  ASSERT_EQ(a->tokens.size(), 6u);
  for (std::size_t k = 0; k + 1 < 6; ++k) {
    EXPECT_TRUE(a->in_call[k]) << "token " << k << " was told outside a decode call";
    EXPECT_EQ(a->calls[k], k + 2) << "token " << k << " (sampled by call " << k + 1 << ")";
  }
  EXPECT_FALSE(a->in_call[5]) << "the last token: no call runs after it";
  EXPECT_EQ(a->calls[5], 6u);
  ASSERT_EQ(a->ends.size(), 1u);
  EXPECT_EQ(a->ends[0], End::Length);
  EXPECT_EQ(a->tokens_at_end, 6u);
  std::int64_t prev = 3;
  for (std::size_t i = 0; i < a->tokens.size(); ++i) {
    EXPECT_EQ(a->tokens[i], fake_next(prev, 2 + i, 50000)) << i;
    prev = a->tokens[i];
  }
}

TEST(Engine, ASampleStoppedWhileTheNextCallRunsHearsNothingMore) {
  Rig r;
  auto stopped = std::make_shared<CallWatcher>(r.runner, 3);
  auto beside = std::make_shared<CallWatcher>(r.runner);
  for (auto sink : {stopped, beside}) {
    EngineRequest req;
    req.spec.prompt = std::vector<pool::Token>(20, 7);  // one page and a bit: the index keeps one page
    req.spec.max_new = 12;
    req.sink = sink;
    ASSERT_EQ(r.engine.submit(std::move(req)), Engine::Submitted::Queued);
  }
  ASSERT_TRUE(wait_for([&] { return stopped->ended.load() && beside->ended.load(); }));
  ASSERT_TRUE(wait_for([&] { return r.engine.open_requests() == 0; }));
  EXPECT_EQ(stopped->tokens.size(), 3u);
  EXPECT_TRUE(stopped->in_call[2]) << "the stopping token was told while the next call (with its row) ran";
  ASSERT_EQ(stopped->ends.size(), 1u);
  EXPECT_EQ(stopped->ends[0], End::Stopped);
  EXPECT_EQ(stopped->tokens_at_end, 3u);
  EXPECT_EQ(beside->tokens.size(), 12u);
  EXPECT_EQ(beside->ends.at(0), End::Length);
  EXPECT_TRUE(wait_for([&] { return r.engine.metrics().running == 0; }));
  r.engine.stop();
  EXPECT_LE(r.pages.pages_used(), 2u) << "only the prefix index's pages (one per prompt) stay";
}

TEST(Engine, AClientThatGoesAwayFreesItsPagesWithinAStep) {
  Rig r(200);  // slow enough that the request is still generating when its client leaves
  auto a = std::make_shared<Recorder>();
  ASSERT_EQ(r.engine.submit(request(std::vector<pool::Token>(300, 4), 4000, a)), Engine::Submitted::Queued);
  ASSERT_TRUE(wait_for([&] {
    std::lock_guard<std::mutex> l(a->mu);
    return a->tokens[0].size() > 5;
  }));
  EXPECT_GT(r.pages.pages_used(), 0u);
  a->gone = true;
  ASSERT_TRUE(wait_for([&] { return a->done(1); }));
  EXPECT_EQ(a->ends[0], End::Cancelled);
  EXPECT_TRUE(wait_for([&] { return r.engine.open_requests() == 0; }));
  r.engine.stop();
  // Only the prefix index may still hold pages (the prompt's whole pages).
  EXPECT_LE(r.pages.pages_used(), 300u / 16);
}

TEST(Engine, ASinkThatThrowsFailsOnlyItsRequest) {
  Rig r;
  auto bad = std::make_shared<Recorder>();
  bad->throw_after = 2;
  auto good = std::make_shared<Recorder>();
  ASSERT_EQ(r.engine.submit(request({1, 2, 3}, 20, bad)), Engine::Submitted::Queued);
  ASSERT_EQ(r.engine.submit(request({4, 5, 6}, 20, good)), Engine::Submitted::Queued);
  ASSERT_TRUE(wait_for([&] { return bad->done(1) && good->done(1); }));
  EXPECT_EQ(bad->error, "sink broke");
  EXPECT_EQ(good->error, "");
  EXPECT_EQ(good->tokens[0].size(), 20u);
  EXPECT_TRUE(wait_for([&] { return r.engine.open_requests() == 0; }));
}

// A sink that fails between a step's plan and its commit (when scheduled, on the prompt's log-probs)
// fails its request alone: the step's rows for it still run, its pages go back after the commit, and
// the requests beside it stream to the end.
TEST(Engine, ASinkThatThrowsBeforeTheCommitFailsOnlyItsRequest) {
  Rig r;
  std::vector<pool::Token> prompt(40);
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<pool::Token>(500 + i);
  auto early = std::make_shared<Recorder>();
  early->throw_on_scheduled = true;
  auto scoring = std::make_shared<Recorder>();
  scoring->throw_on_prompt = true;
  auto fine = std::make_shared<Recorder>();
  ASSERT_EQ(r.engine.submit(request(prompt, 6, early)), Engine::Submitted::Queued);
  EngineRequest s = request(prompt, 6, scoring);
  s.prompt_logprobs = true;
  s.sampling.chosen_logprob = true;
  ASSERT_EQ(r.engine.submit(std::move(s)), Engine::Submitted::Queued);
  ASSERT_EQ(r.engine.submit(request({1, 2, 3}, 8, fine)), Engine::Submitted::Queued);
  ASSERT_TRUE(wait_for([&] { return fine->done(1); }));
  EXPECT_EQ(fine->tokens[0].size(), 8u);
  EXPECT_EQ(fine->ends[0], End::Length);
  EXPECT_TRUE(wait_for([&] { return r.engine.open_requests() == 0; }));
  EXPECT_NE(early->error.find("when scheduled"), std::string::npos) << early->error;
  EXPECT_NE(scoring->error.find("prompt's log-probs"), std::string::npos) << scoring->error;
  EXPECT_TRUE(early->tokens.empty());
  EXPECT_TRUE(scoring->tokens.empty());
  EXPECT_TRUE(wait_for([&] { return r.pages.pages_used() == 0 || r.engine.metrics().running == 0; }));
  EXPECT_EQ(r.engine.metrics().running, 0u);
}

// A batch (a completions request's prompts) is queued whole or not at all, its samples counted against
// the waiting queue's room with those already in the inbox (the engine not yet started: nothing drains).
TEST(Engine, SubmitAllQueuesEveryRequestOrNone) {
  PoolPages pages(8192, 16);
  FakeRunner runner(50000, 8, 64, 0, 0, 1);
  EngineConfig c = Rig::config();
  c.scheduler.max_waiting = 5;
  Engine engine(c, pages, runner);
  std::vector<std::shared_ptr<Recorder>> sinks;
  auto batch = [&](std::vector<std::uint64_t> ns) {
    std::vector<EngineRequest> v;
    for (std::uint64_t n : ns) {
      sinks.push_back(std::make_shared<Recorder>());
      v.push_back(request({1, 2, 3}, 4, sinks.back(), n));
    }
    return v;
  };
  ASSERT_EQ(engine.submit_all(batch({2, 2})), Engine::Submitted::Queued);   // 4 samples of 5
  EXPECT_EQ(engine.open_requests(), 2u);
  EXPECT_EQ(engine.submit_all(batch({1, 1})), Engine::Submitted::QueueFull);  // 6: neither is queued
  EXPECT_EQ(engine.open_requests(), 2u);
  EXPECT_EQ(engine.submit(request({1}, 1, std::make_shared<Recorder>(), 2)), Engine::Submitted::QueueFull);
  ASSERT_EQ(engine.submit_all(batch({1})), Engine::Submitted::Queued);  // 5 of 5
  EXPECT_EQ(engine.open_requests(), 3u);
  engine.start();
  for (std::size_t i : {0, 1, 4}) {
    const std::size_t n = i < 2 ? 2 : 1;
    ASSERT_TRUE(wait_for([&] { return sinks[i]->done(n); })) << i;
    for (std::size_t s = 0; s < n; ++s) EXPECT_EQ(sinks[i]->tokens[s].size(), 4u) << i;
  }
  for (std::size_t i : {2, 3}) EXPECT_TRUE(sinks[i]->tokens.empty() && sinks[i]->ends.empty()) << i;
  EXPECT_TRUE(wait_for([&] { return engine.open_requests() == 0; }));
}

TEST(Engine, StopTellsOpenRequests) {
  Rig r(200);  // 200 us a step: 4,000 tokens take 0.8 s, far longer than the test waits
  auto a = std::make_shared<Recorder>();
  ASSERT_EQ(r.engine.submit(request({1, 2}, 4000, a)), Engine::Submitted::Queued);
  ASSERT_TRUE(wait_for([&] {
    std::lock_guard<std::mutex> l(a->mu);
    return !a->tokens[0].empty();
  }));
  r.engine.stop("draining");
  EXPECT_EQ(a->error, "draining");
  EXPECT_EQ(r.engine.submit(request({1}, 1, std::make_shared<Recorder>())), Engine::Submitted::Stopping);
}

}  // namespace
}  // namespace kern::serve
