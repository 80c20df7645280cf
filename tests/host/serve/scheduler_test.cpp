// The scheduler over a pure pool (pool_pages.hpp): continuous batching, chunked prefill under the
// step budget, prefix hits through lease_from, n samples through fork, preemption under memory
// pressure, and a random property test (arrivals, lengths, cancels, stop strings, pool sizes;
// 100,000 steps in all): no page leaked, every request ends, none starves, the same inputs give the
// same decisions, and every plan is consistent with a model of what each sequence has computed.
#include "kern/serve/scheduler.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "kern/serve/pool_pages.hpp"

namespace kern::serve {
namespace {


std::vector<pool::Token> iota_prompt(std::size_t n, pool::Token from = 1) {
  std::vector<pool::Token> p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = from + static_cast<pool::Token>(i);
  return p;
}

// Runs plans until nothing is left; the token sampled is 1000 + position.
std::map<SeqId, std::vector<std::int64_t>> drain(Scheduler& s, std::size_t max_steps = 10000) {
  std::map<SeqId, std::vector<std::int64_t>> out;
  for (std::size_t i = 0; i < max_steps && s.live() > 0; ++i) {
    const Plan p = s.plan();
    std::vector<std::int64_t> sampled;
    for (const Row& r : p.decode) sampled.push_back(1000 + static_cast<std::int64_t>(r.position));
    for (const Emitted& e : s.commit(p, sampled)) out[e.seq].push_back(e.token);
    s.check_invariants();
  }
  return out;
}

TEST(Scheduler, ChunksThePromptUnderTheBudgetThenDecodesOneRowPerStep) {
  PoolPages pages(4096);
  Scheduler s({.max_running = 4, .chunk = 8, .prefill_budget = 12}, pages);
  const SeqId id = s.submit({iota_prompt(30), 3, {}, 1}).value().at(0);
  Plan p = s.plan();
  ASSERT_EQ(p.chunks.size(), 2u);  // 8 + 4 rows: the budget of 12
  EXPECT_EQ(p.chunks[0].first, 0u);
  EXPECT_EQ(p.chunks[0].count, 8u);
  EXPECT_EQ(p.chunks[1].first, 8u);
  EXPECT_EQ(p.chunks[1].count, 4u);
  EXPECT_TRUE(p.decode.empty());
  s.commit(p, {});
  p = s.plan();  // rows 12..23
  EXPECT_EQ(p.chunks.back().first + p.chunks.back().count, 24u);
  s.commit(p, {});
  p = s.plan();  // rows 24..28 (29 = n - 1 prompt rows in all), then its first decode row
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].first, 24u);
  EXPECT_EQ(p.chunks[0].count, 5u);
  ASSERT_EQ(p.decode.size(), 1u);
  EXPECT_EQ(p.decode[0].position, 29u);
  auto e = s.commit(p, std::vector<std::int64_t>{7});
  ASSERT_EQ(e.size(), 1u);
  EXPECT_FALSE(e[0].end);
  EXPECT_EQ(s.tokens(id).back(), 7);
  p = s.plan();
  ASSERT_EQ(p.decode.size(), 1u);
  EXPECT_EQ(p.decode[0].position, 30u);
  s.commit(p, std::vector<std::int64_t>{8});
  p = s.plan();
  e = s.commit(p, std::vector<std::int64_t>{9});
  ASSERT_TRUE(e.at(0).end);
  EXPECT_EQ(*e[0].end, End::Length);
  EXPECT_EQ(s.live(), 0u);
}

// Mixed steps: the step's last chunks that fit beside the decode rows are marked for the mixed
// call, the chunk at the boundary cut in two; the others run first, and chunks keep their order.
TEST(Scheduler, TheLastChunksRideWithTheDecodeRows) {
  PoolPages pages(4096);
  Scheduler s({.max_running = 8, .chunk = 16, .prefill_budget = 64, .mixed_rows = 20, .mixed_chunks = 2}, pages);
  const SeqId a = s.submit({iota_prompt(3), 50, {}, 1}).value().at(0);   // 2 prompt rows
  const SeqId b = s.submit({iota_prompt(81), 50, {}, 1}).value().at(0);  // 80
  Plan p = s.plan();  // a's 2 rows (it completes), then 62 of b's under the budget of 64
  ASSERT_EQ(p.decode.size(), 1u);
  EXPECT_EQ(p.decode[0].seq, a);
  ASSERT_EQ(p.chunks.size(), 6u);
  EXPECT_EQ(p.mixed_from, 4u);  // 5 + 14 rows beside the decode row: 20
  const std::vector<std::pair<std::uint64_t, std::uint64_t>> want = {{0, 2},   {0, 16}, {16, 16},
                                                                     {32, 11}, {43, 5}, {48, 14}};
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(p.chunks[i].seq, i == 0 ? a : b) << i;
    EXPECT_EQ(p.chunks[i].first, want[i].first) << i;
    EXPECT_EQ(p.chunks[i].count, want[i].second) << i;
  }
  s.commit(p, std::vector<std::int64_t>{5});
  p = s.plan();  // b's last 18 rows (16 + 2: it completes) and two decode rows: all of it mixed
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[1].first + p.chunks[1].count, 80u);
  EXPECT_EQ(p.mixed_from, 0u);
  EXPECT_EQ(p.decode.size(), 2u);
  s.commit(p, std::vector<std::int64_t>{5, 6});
  // Without decode rows a step has no mixed part.
  Scheduler t({.max_running = 8, .chunk = 16, .prefill_budget = 64, .mixed_rows = 20, .mixed_chunks = 2}, pages);
  t.submit({iota_prompt(100), 5, {}, 1});  // 99 rows: more than one step's budget
  p = t.plan();
  EXPECT_EQ(p.mixed_from, p.chunks.size());
  drain(s);
  drain(t);
  EXPECT_EQ(s.live() + t.live(), 0u);
}

TEST(Scheduler, ANewRequestJoinsTheRunningBatchAndAStopTokenEndsOnlyItsSequence) {
  PoolPages pages(4096);
  Scheduler s({.max_running = 4, .chunk = 64, .prefill_budget = 64}, pages);
  const SeqId a = s.submit({iota_prompt(5), 10, {42}, 1}).value().at(0);
  Plan p = s.plan();
  s.commit(p, std::vector<std::int64_t>(p.decode.size(), 1));
  const SeqId b = s.submit({iota_prompt(9, 100), 10, {}, 1}).value().at(0);
  p = s.plan();
  ASSERT_EQ(p.decode.size(), 2u);  // b's prompt is in within this step: it decodes beside a
  EXPECT_EQ(p.decode[0].seq, a);
  EXPECT_EQ(p.decode[1].seq, b);
  auto e = s.commit(p, std::vector<std::int64_t>{42, 3});
  EXPECT_EQ(e[0].end, End::StopToken);
  EXPECT_FALSE(e[1].end);
  EXPECT_EQ(s.live(), 1u);
  p = s.plan();
  ASSERT_EQ(p.decode.size(), 1u);
  EXPECT_EQ(p.decode[0].seq, b);
}

TEST(Scheduler, APromptSharingFullPagesStartsFromThePrefixIndex) {
  PoolPages pages(4096, 16);
  Scheduler s({.max_running = 4, .chunk = 512, .prefill_budget = 512}, pages);
  std::vector<pool::Token> first = iota_prompt(70);
  drain(*&s);  // nothing yet
  s.submit({first, 2, {}, 1});
  drain(s);
  EXPECT_EQ(s.prefix_entries(), 1u);  // 64 of its 69 prefilled positions: 4 whole pages
  EXPECT_EQ(s.active_pages(), 0u) << "only the index holds its pages: none is active";
  EXPECT_EQ(pages.pages_used(), 4u);
  std::vector<pool::Token> second = iota_prompt(64);
  second.push_back(999);
  second.push_back(998);
  const SeqId id = s.submit({second, 1, {}, 1}).value().at(0);
  const Plan p = s.plan();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].first, 64u) << "the shared 64 tokens come from the index";
  EXPECT_EQ(p.chunks[0].count, 1u);
  EXPECT_EQ(s.cached(id), 64u);
  EXPECT_EQ(s.stats().prefix_hits, 1u);
  EXPECT_EQ(s.stats().prefix_queries, 2u);
  // Running now: its lease shares the index's 4 pages and owns the 5th (positions 64 and 65).
  EXPECT_EQ(s.active_pages(), 5u);
  EXPECT_EQ(pages.pages_used(), 5u);
  s.commit(p, std::vector<std::int64_t>(p.decode.size(), 5));
  drain(s);
  s.clear_prefix();
  EXPECT_EQ(pages.pages_used(), 0u);
}

// --host-gib: the cold prefix entry a new prompt's pages need is parked on the host tier, not dropped,
// and a later prompt sharing it starts from it (its pages copied back: a wake); without a host tier
// the same traffic finds nothing. Either way every device and host page is free once the index is.
TEST(Scheduler, AColdPrefixParkedOnTheHostTierServesALaterPrompt) {
  for (const bool host : {true, false}) {
    SCOPED_TRACE(host ? "host tier" : "no host tier");
    PoolPages pages(8 * 16, 16, 4096, host ? 16 * 16 * PoolPages::kTokenBytes : 0);  // 8 device pages, 16 host
    EXPECT_EQ(pages.has_host(), host);
    Scheduler s({.max_running = 2, .chunk = 512, .prefill_budget = 512}, pages);
    const std::vector<pool::Token> a = iota_prompt(70);  // indexes 4 whole pages once prefilled
    s.submit({a, 2, {}, 1});
    drain(s);
    ASSERT_EQ(s.prefix_entries(), 1u);
    EXPECT_EQ(pages.pages_used(), 4u);
    s.submit({iota_prompt(100, 5000), 2, {}, 1});  // 7 pages: a's 4 must go
    drain(s);
    EXPECT_GE(s.stats().evictions, 1u);
    EXPECT_EQ(s.stats().parks, host ? s.stats().evictions : 0u);
    std::vector<pool::Token> again = iota_prompt(64);
    again.push_back(4242);
    again.push_back(4243);
    const SeqId id = s.submit({again, 1, {}, 1}).value().at(0);
    const Plan p = s.plan();
    ASSERT_EQ(p.chunks.size(), 1u);
    EXPECT_EQ(s.cached(id), host ? 64u : 0u);
    EXPECT_EQ(p.chunks[0].first, host ? 64u : 0u);
    EXPECT_EQ(p.chunks[0].count, host ? 1u : 65u);
    EXPECT_EQ(s.stats().wakes, host ? 1u : 0u);
    s.commit(p, std::vector<std::int64_t>(p.decode.size(), 5));
    drain(s);
    s.check_invariants();
    s.clear_prefix();
    EXPECT_EQ(s.prefix_entries(), 0u);
    EXPECT_EQ(pages.pages_used(), 0u);
    EXPECT_EQ(pages.host_bytes_used(), 0u);
    pages.pool().check_invariants();
    if (pages.host()) pages.host()->check_invariants();
  }
}

TEST(Scheduler, SamplesOfOnePromptForkTheLeadersPages) {
  PoolPages pages(4096, 16);
  Scheduler s({.max_running = 8, .chunk = 512, .prefill_budget = 512, .prefix_cache = false}, pages);
  const std::vector<SeqId> ids = s.submit({iota_prompt(40), 3, {}, 3}).value();
  ASSERT_EQ(ids.size(), 3u);
  Plan p = s.plan();
  ASSERT_EQ(p.chunks.size(), 1u) << "only the leader prefills";
  EXPECT_EQ(p.chunks[0].seq, ids[0]);
  ASSERT_EQ(p.decode.size(), 1u);
  s.commit(p, std::vector<std::int64_t>{1});
  const std::uint64_t used_one = pages.pages_used();
  p = s.plan();
  EXPECT_TRUE(p.chunks.empty()) << "the samples fork: no prefill";
  ASSERT_EQ(p.decode.size(), 3u);
  EXPECT_EQ(p.decode[1].position, 39u);
  EXPECT_EQ(p.decode[2].position, 39u);
  EXPECT_EQ(s.sample_index(ids[2]), 2u);
  // Two whole pages (32 tokens) shared; each fork owns its copy of the partial third page.
  EXPECT_EQ(pages.pages_used(), used_one + 2);
  s.commit(p, std::vector<std::int64_t>(3, 2));
  drain(s);
  EXPECT_EQ(pages.pages_used(), 0u);
}

TEST(Scheduler, PressurePreemptsTheNewestAndResumesItFirst) {
  // 8 pages of 16 tokens: two sequences of 40 prompt tokens (3 pages each) growing to 64 tokens
  // (4 pages each) do not both fit with their next pages.
  PoolPages pages(128, 16);
  Scheduler s({.max_running = 4, .chunk = 512, .prefill_budget = 512, .prefix_cache = false}, pages);
  const SeqId a = s.submit({iota_prompt(40), 60, {}, 1}).value().at(0);
  const SeqId b = s.submit({iota_prompt(40, 500), 60, {}, 1}).value().at(0);
  std::map<SeqId, std::size_t> got;
  bool b_preempted = false;
  for (int i = 0; i < 400 && s.live() > 0; ++i) {
    const Plan p = s.plan();
    for (SeqId v : p.preempted) {
      EXPECT_EQ(v, b) << "the newest admitted gives its pages back";
      b_preempted = true;
    }
    std::vector<std::int64_t> sampled(p.decode.size(), 3);
    for (const Emitted& e : s.commit(p, sampled)) ++got[e.seq];
    s.check_invariants();
  }
  EXPECT_TRUE(b_preempted);
  EXPECT_EQ(got[a], 60u);
  EXPECT_EQ(got[b], 60u) << "the preempted sequence resumed and finished";
  EXPECT_EQ(pages.pages_used(), 0u);
  EXPECT_GT(s.stats().preemptions, 0u);
}

TEST(Scheduler, ARequestThatNeverFitsEndsTooLongAtOnce) {
  PoolPages pages(64, 16);
  Scheduler s({.max_running = 4, .max_len = 1000}, pages);
  const SeqId big = s.submit({iota_prompt(100), 4, {}, 1}).value().at(0);  // 7 pages of 4
  const SeqId longer = s.submit({iota_prompt(10), 995, {}, 1}).value().at(0);  // over max_len
  const SeqId fine = s.submit({iota_prompt(10), 4, {}, 1}).value().at(0);
  const Plan p = s.plan();
  std::set<SeqId> ended;
  for (const auto& [id, why] : p.ended) {
    EXPECT_EQ(why, End::TooLong);
    ended.insert(id);
  }
  EXPECT_TRUE(ended.count(big));
  EXPECT_TRUE(ended.count(longer));
  EXPECT_FALSE(ended.count(fine));
  EXPECT_EQ(s.live(), 1u);
}

TEST(Scheduler, TheWaitingQueueIsBounded) {
  PoolPages pages(4096);
  Scheduler s({.max_running = 1, .max_waiting = 3}, pages);
  EXPECT_TRUE(s.submit({iota_prompt(4), 1, {}, 2}));
  EXPECT_TRUE(s.submit({iota_prompt(4), 1, {}, 1}));
  EXPECT_FALSE(s.submit({iota_prompt(4), 1, {}, 1})) << "a full queue refuses (429)";
  EXPECT_TRUE(s.end(1, End::Cancelled));
  EXPECT_FALSE(s.end(1, End::Cancelled));
  EXPECT_TRUE(s.submit({iota_prompt(4), 1, {}, 1}));
}

// ---- the property test

struct Trace {
  std::uint64_t hash = 1469598103934665603ull;
  void mix(std::uint64_t v) { hash = (hash ^ v) * 1099511628211ull; }
};

struct RunResult {
  std::uint64_t ended = 0, submitted = 0, steps = 0, max_wait = 0;
  Trace trace;
  SchedulerStats stats;
};

RunResult property_run(std::uint64_t seed, std::uint64_t steps) {
  std::mt19937_64 rng(seed);
  auto pick = [&](std::uint64_t n) { return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng); };
  const std::uint64_t unit = 16;
  const std::uint64_t pool_tokens = unit * (8 + pick(pick(2) == 0 ? 16 : 120));  // half of them tight
  // A third of the runs park cold prefix entries on a host tier of 4 to 40 pages.
  const std::uint64_t host_pages = pick(3) == 0 ? 4 + pick(37) : 0;
  PoolPages pages(pool_tokens, unit, 4096, host_pages * unit * PoolPages::kTokenBytes);
  SchedulerConfig cfg;
  cfg.max_running = 1 + pick(16);
  cfg.max_waiting = 64;
  cfg.chunk = 1 + pick(64);
  cfg.prefill_budget = cfg.chunk + pick(128);
  cfg.max_len = 512;
  cfg.prefix_cache = pick(4) != 0;
  if (pick(3) == 0) {  // mixed steps: the last chunks beside the decode rows
    cfg.mixed_rows = 1 + pick(80);
    cfg.mixed_chunks = pick(4);
  }
  Scheduler s(cfg, pages);
  // A few shared prefixes so the index is hit.
  std::vector<std::vector<pool::Token>> bases;
  for (int i = 0; i < 4; ++i) bases.push_back(iota_prompt(unit * (1 + pick(4)), static_cast<pool::Token>(1 + 1000 * i)));

  RunResult run;
  std::map<SeqId, std::uint64_t> born;     // step it was submitted
  std::map<SeqId, std::uint64_t> computed;  // the model: KV positions each sequence has
  std::map<SeqId, std::uint64_t> length;    // tokens it holds
  std::set<SeqId> alive;
  // Arrivals for `steps` steps, then drain: every sequence must end within 20 x steps.
  for (std::uint64_t step = 0; step < 20 * steps; ++step) {
    const bool arrivals = step < steps;
    if (arrivals && pick(3) == 0) {
      SeqSpec spec;
      if (pick(2) == 0) spec.prompt = bases[pick(bases.size())];
      const std::uint64_t extra = 1 + pick(pick(8) == 0 ? 300 : 40);
      for (std::uint64_t i = 0; i < extra; ++i) spec.prompt.push_back(static_cast<pool::Token>(5000 + pick(50)));
      spec.max_new = 1 + pick(pick(8) == 0 ? 200 : 20);
      spec.stop_tokens = {7};
      spec.n = pick(6) == 0 ? 1 + pick(3) : 1;
      const std::size_t plen = spec.prompt.size();
      if (auto ids = s.submit(std::move(spec))) {
        for (SeqId id : *ids) {
          born[id] = step;
          computed[id] = 0;
          length[id] = plen;
          alive.insert(id);
          run.trace.mix(id);
        }
        run.submitted += ids->size();
      }
    }
    const Plan p = s.plan();
    for (SeqId v : p.preempted) computed[v] = 0;
    for (const auto& [id, why] : p.ended) {
      alive.erase(id);
      ++run.ended;
      run.trace.mix(id * 31 + static_cast<std::uint64_t>(why));
    }
    // Chunks continue where the sequence's KV ends, or start where the index served it.
    for (const Chunk& c : p.chunks) {
      run.trace.mix(c.seq * 7 + c.first * 13 + c.count);
      if (!(c.first == computed[c.seq] || (computed[c.seq] == 0 && c.first % unit == 0)))
        fail(ErrorKind::Api, "seed {}: chunk of {} at {} but its KV ends at {}", seed, c.seq, c.first, computed[c.seq]);
      if (c.first + c.count > length[c.seq] - 1)
        fail(ErrorKind::Api, "seed {}: chunk past the prompt of {}", seed, c.seq);
      if (s.lease(c.seq).capacity() < c.first + c.count)
        fail(ErrorKind::Api, "seed {}: chunk beyond the lease of {}", seed, c.seq);
      computed[c.seq] = c.first + c.count;
    }
    std::uint64_t rows = 0;
    for (const Chunk& c : p.chunks) rows += c.count;
    if (rows > cfg.prefill_budget) fail(ErrorKind::Api, "seed {}: {} prefill rows over the budget", seed, rows);
    if (p.decode.size() > cfg.max_running) fail(ErrorKind::Api, "seed {}: decode batch over the bound", seed);
    if (p.mixed_from > p.chunks.size()) fail(ErrorKind::Api, "seed {}: mixed part past the chunks", seed);
    if (p.mixed_from < p.chunks.size()) {
      std::uint64_t mixed = p.decode.size();
      for (std::size_t i = p.mixed_from; i < p.chunks.size(); ++i) mixed += p.chunks[i].count;
      if (cfg.mixed_rows == 0 || p.decode.empty() || mixed > cfg.mixed_rows)
        fail(ErrorKind::Api, "seed {}: a mixed part of {} rows (bound {}, {} decode rows)", seed, mixed, cfg.mixed_rows,
             p.decode.size());
      if (cfg.mixed_chunks > 0 && p.chunks.size() - p.mixed_from > cfg.mixed_chunks)
        fail(ErrorKind::Api, "seed {}: {} mixed chunks over {}", seed, p.chunks.size() - p.mixed_from, cfg.mixed_chunks);
    }
    for (const Chunk& c : p.chunks)
      if (c.count == 0) fail(ErrorKind::Api, "seed {}: an empty chunk", seed);
    std::vector<std::int64_t> sampled;
    for (const Row& r : p.decode) {
      // A fork or a prefix hit may have served positions the model did not see computed.
      if (r.position != length[r.seq] - 1)
        fail(ErrorKind::Api, "seed {}: row of {} at {} holding {} tokens", seed, r.seq, r.position, length[r.seq]);
      if (s.lease(r.seq).capacity() < r.position + 1) fail(ErrorKind::Api, "seed {}: row beyond the lease", seed);
      sampled.push_back(pick(20) == 0 ? 7 : static_cast<std::int64_t>(10 + pick(50)));
      run.trace.mix(r.seq * 17 + r.position);
    }
    for (const Emitted& e : s.commit(p, sampled)) {
      ++length[e.seq];
      computed[e.seq] = length[e.seq] - 1;
      if (e.end) {
        alive.erase(e.seq);
        ++run.ended;
        run.max_wait = std::max(run.max_wait, step - born[e.seq]);
        run.trace.mix(e.seq * 31 + static_cast<std::uint64_t>(*e.end));
      }
    }
    // Clients that go away, and stop strings matched by the engine.
    if (!alive.empty() && pick(25) == 0) {
      auto it = alive.begin();
      std::advance(it, static_cast<std::ptrdiff_t>(pick(alive.size())));
      const SeqId id = *it;
      if (!s.end(id, pick(2) ? End::Cancelled : End::Stopped))
        fail(ErrorKind::Api, "seed {}: end() of live {} refused", seed, id);
      alive.erase(id);
      ++run.ended;
      run.trace.mix(id * 37);
    }
    if (step % 64 == 0) {
      s.check_invariants();
      pages.pool().check_invariants();
      if (pages.host()) pages.host()->check_invariants();
      if (s.active_pages() > pages.pages_used())
        fail(ErrorKind::Api, "seed {}: {} active pages of {} held", seed, s.active_pages(), pages.pages_used());
    }
    if (!arrivals && s.live() == 0) {
      run.steps = step + 1;
      break;
    }
    run.steps = step + 1;
  }
  if (s.live() != 0) fail(ErrorKind::Api, "seed {}: {} sequences never ended (starved)", seed, s.live());
  if (s.active_pages() != 0) fail(ErrorKind::Api, "seed {}: {} active pages at idle", seed, s.active_pages());
  if (!alive.empty()) fail(ErrorKind::Api, "seed {}: the model holds {} live sequences", seed, alive.size());
  s.clear_prefix();
  if (pages.pages_used() != 0) fail(ErrorKind::Api, "seed {}: {} pages leaked", seed, pages.pages_used());
  if (pages.host_bytes_used() != 0)
    fail(ErrorKind::Api, "seed {}: {} host bytes leaked", seed, pages.host_bytes_used());
  pages.pool().check_invariants();
  if (pages.host()) pages.host()->check_invariants();
  run.stats = s.stats();
  return run;
}

TEST(SchedulerProperty, RandomTrafficEndsEveryRequestLeaksNoPageAndIsDeterministic) {
  std::uint64_t total_steps = 0, preemptions = 0, hits = 0, ended = 0, parks = 0, wakes = 0;
  for (std::uint64_t seed = 1; total_steps < 100000; ++seed) {
    const RunResult a = property_run(seed, 2000);
    total_steps += a.steps;
    preemptions += a.stats.preemptions;
    hits += a.stats.prefix_hits;
    parks += a.stats.parks;
    wakes += a.stats.wakes;
    ended += a.ended;
    EXPECT_EQ(a.ended, a.submitted) << "seed " << seed;
    if (seed <= 3) {
      const RunResult b = property_run(seed, 2000);
      EXPECT_EQ(a.trace.hash, b.trace.hash) << "seed " << seed << ": the same inputs gave other decisions";
    }
  }
  std::printf("[scheduler] %llu steps, %llu requests ended, %llu preemptions, %llu prefix hits, %llu parks, %llu wakes\n",
              static_cast<unsigned long long>(total_steps), static_cast<unsigned long long>(ended),
              static_cast<unsigned long long>(preemptions), static_cast<unsigned long long>(hits),
              static_cast<unsigned long long>(parks), static_cast<unsigned long long>(wakes));
  EXPECT_GE(total_steps, 100000u);
  EXPECT_GT(preemptions, 0u) << "the runs exercised memory pressure";
  EXPECT_GT(hits, 0u) << "the runs exercised the prefix index";
  EXPECT_GT(parks, 0u) << "the runs parked cold prefix entries on a host tier";
  EXPECT_GT(wakes, 0u) << "the runs woke parked entries for later prompts";
}

// pack_chunks: plan-order runs of at most max_chunks chunks of different sequences and max_rows rows.
TEST(PackChunks, RunsInPlanOrderWithinTheBounds) {
  using Calls = std::vector<std::pair<std::size_t, std::size_t>>;
  const std::vector<Chunk> c = {{1, 0, 100}, {2, 0, 50}, {3, 0, 60}, {4, 0, 10}, {3, 60, 5}, {5, 0, 300}, {6, 0, 1}};
  EXPECT_EQ(pack_chunks(c, c.size(), 1, 1000), (Calls{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}, {6, 7}}));
  // Rows: 100 + 50 + 60 > 200; seq 3 twice never shares a call; 300 rows alone (too many: the runner refuses).
  EXPECT_EQ(pack_chunks(c, c.size(), 8, 200), (Calls{{0, 2}, {2, 4}, {4, 5}, {5, 6}, {6, 7}}));
  EXPECT_EQ(pack_chunks(c, c.size(), 2, 1000), (Calls{{0, 2}, {2, 4}, {4, 6}, {6, 7}}));
  EXPECT_EQ(pack_chunks(c, 3, 8, 1000), (Calls{{0, 3}}));  // only the first count chunks
  EXPECT_TRUE(pack_chunks(c, 0, 8, 1000).empty());
}

}  // namespace
}  // namespace kern::serve
