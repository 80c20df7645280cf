// The generic greedy driver against a fake executor over a small verified manifest
// (tests/host/driver/fixtures/driver-toy.json: page size 4, one table row reaches 4 pages,
// chunk program bound 8 rows, positions < 64).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <functional>
#include <numeric>
#include <tuple>

#include "fake_executor.hpp"
#include "kern/driver/driver.hpp"
#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/core/manifest.hpp"
#include "kern/core/protocol.hpp"
#include "kern/core/verify.hpp"

namespace kern::driver {
namespace {

using test::Event;
using test::FakeExecutor;
using test::toy_next;

using test::toy;

std::vector<std::int64_t> iota_prompt(std::size_t n, std::int64_t start = 10) {
  std::vector<std::int64_t> p(n);
  std::iota(p.begin(), p.end(), start);
  return p;
}

// What the toy model generates greedily after `prompt`.
std::vector<std::int64_t> expected_tokens(const std::vector<std::int64_t>& prompt, std::size_t steps) {
  std::vector<std::int64_t> out;
  std::int64_t t = prompt.back();
  std::uint64_t pos = prompt.size() - 1;
  for (std::size_t i = 0; i < steps; ++i, ++pos) {
    t = toy_next(t, pos);
    out.push_back(t);
  }
  return out;
}

std::vector<const Event*> runs(const FakeExecutor& f) {
  std::vector<const Event*> r;
  for (const Event& e : f.events)
    if (e.kind == Event::Kind::Run) r.push_back(&e);
  return r;
}

// Events between run i−1 and run i (the writes made for call i).
std::vector<const Event*> writes_before_run(const FakeExecutor& f, std::size_t i) {
  std::vector<const Event*> w;
  std::size_t seen = 0;
  for (const Event& e : f.events) {
    if (e.kind == Event::Kind::Run) {
      if (seen == i) return w;
      ++seen;
      w.clear();
    } else if (e.kind == Event::Kind::Write) {
      w.push_back(&e);
    }
  }
  return w;
}

// (The fake's state pool holds 16 tokens unless a test gives it another capacity.)
GeneratorOptions options(std::uint64_t steps, std::uint64_t chunk, bool first_token_from_step = false) {
  GeneratorOptions o;
  o.steps = steps;
  o.chunk = chunk;
  o.first_token_from_step = first_token_from_step;
  return o;
}

// The toy with its prefill program calling a copy of the step op without the params at `dropped`
// (indices, ascending): a chunk program that writes less than the one-row step does. (The fake
// executor still fills every output; what is asserted is which calls the Generator makes and reads.)
struct ToyVariant {
  core::Verified verified;
  core::Protocol protocol;
  explicit ToyVariant(const std::vector<std::size_t>& dropped)
      : verified(core::verify(core::parse_manifest(variant_text(dropped), "toy variant"))),
        protocol(core::check_protocol(verified)) {}
  static std::string variant_text(const std::vector<std::size_t>& dropped) {
    nlohmann::ordered_json m = nlohmann::ordered_json::parse(
        read_file(std::string(KERN_SOURCE_DIR) + "/tests/host/driver/fixtures/driver-toy.json"));
    nlohmann::ordered_json op = m["ops"]["step"];
    nlohmann::ordered_json& args = m["programs"]["prefill"]["calls"][0]["args"];
    for (auto i = dropped.rbegin(); i != dropped.rend(); ++i) {
      op["params"].erase(*i);
      args.erase(*i);
    }
    m["ops"]["chunk_step"] = op;
    m["programs"]["prefill"]["calls"][0]["op"] = "chunk_step";
    return m.dump();
  }
};

TEST(Generator, FromTheStepChunksTheFirstNMinusOneTokensAndDecodesTheLast) {
  FakeExecutor fake(toy().verified.manifest());
  Generator gen(toy().protocol, fake, options(3, 4, true));
  EXPECT_FALSE(gen.first_token_from_chunk());
  const auto prompt = iota_prompt(11);
  const GenerationResult r = gen.generate(prompt);
  EXPECT_TRUE(fake.violations.empty()) << fake.violations.front();
  const auto rs = runs(fake);
  ASSERT_EQ(rs.size(), 3u + 3u);  // chunks 4, 4, 2; then three one-row calls
  const std::uint64_t chunk_rows[] = {4, 4, 2};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(rs[i]->name, "prefill");
    EXPECT_EQ(rs[i]->vars.at("tokens"), chunk_rows[i]);
    EXPECT_EQ(rs[i]->vars.at("seqs"), 1u);
  }
  for (int i = 3; i < 6; ++i) {
    EXPECT_EQ(rs[i]->name, "decode");
    EXPECT_EQ(rs[i]->vars.at("tokens"), 1u);
    EXPECT_EQ(rs[i]->vars.at("seqs"), 1u);
  }
  // The third chunk carries prompt[8..10) at positions 8, 9; the last prompt token goes to decode.
  const auto w2 = writes_before_run(fake, 2);
  auto find = [](const std::vector<const Event*>& w, const std::string& name) -> const Event* {
    for (const Event* e : w)
      if (e->name == name) return e;
    return nullptr;
  };
  ASSERT_NE(find(w2, "ids"), nullptr);
  EXPECT_EQ(find(w2, "ids")->values, (std::vector<std::int64_t>{18, 19}));
  EXPECT_EQ(find(w2, "pos")->values, (std::vector<std::int64_t>{8, 9}));
  EXPECT_EQ(find(w2, "lens")->values, (std::vector<std::int64_t>{10}));
  EXPECT_EQ(find(w2, "cu")->values, (std::vector<std::int64_t>{0, 2}));
  const auto w3 = writes_before_run(fake, 3);
  EXPECT_EQ(find(w3, "ids")->values, (std::vector<std::int64_t>{20}));
  EXPECT_EQ(find(w3, "pos")->values, (std::vector<std::int64_t>{10}));
  EXPECT_EQ(find(w3, "lens")->values, (std::vector<std::int64_t>{11}));
  EXPECT_EQ(r.tokens, expected_tokens(prompt, 3));
  EXPECT_EQ(r.chunk_calls, 3u);
  EXPECT_EQ(r.step_calls, 3u);
  EXPECT_EQ(r.reason, StopReason::Steps);
}

TEST(Generator, ChunkIsCappedByTheChunkProgramsRowBound) {
  FakeExecutor fake(toy().verified.manifest());
  Generator gen(toy().protocol, fake, options(2, 512));
  EXPECT_EQ(gen.chunk_rows(), 8u);  // vars.tokens.max
  const auto prompt = iota_prompt(14);
  gen.generate(prompt);
  const auto rs = runs(fake);
  ASSERT_EQ(rs.size(), 2u + 1u);  // 8 + 6 rows, the second chunk yielding the first token; one step
  EXPECT_EQ(rs[0]->vars.at("tokens"), 8u);
  EXPECT_EQ(rs[1]->vars.at("tokens"), 6u);
  EXPECT_EQ(rs[2]->name, "decode");
  EXPECT_TRUE(fake.violations.empty());
}

TEST(Generator, DecodeStepsWriteOnlyWhatChanged) {
  // Prompt of 3 tokens, chunk 1, the first token from the step: chunks at positions 0, 1 (one row
  // each), decode from position 2.
  FakeExecutor fake(toy().verified.manifest());
  Generator gen(toy().protocol, fake, options(12, 1, true));
  const auto prompt = iota_prompt(3);
  const GenerationResult r = gen.generate(prompt);
  EXPECT_TRUE(fake.violations.empty()) << fake.violations.front();
  EXPECT_EQ(r.tokens, expected_tokens(prompt, 12));
  const auto rs = runs(fake);
  ASSERT_EQ(rs.size(), 2u + 12u);
  // First chunk: every input including the table row (page 0) and cu_seqlens.
  std::vector<std::string> first;
  for (const Event* e : writes_before_run(fake, 0)) first.push_back(e->name);
  EXPECT_EQ(first, (std::vector<std::string>{"table", "ids", "pos", "slots", "lens", "cu"}));
  for (std::size_t i = 2; i < rs.size(); ++i) {
    const std::uint64_t pos = prompt.size() - 1 + (i - 2);
    std::vector<std::string> names;
    for (const Event* e : writes_before_run(fake, i)) {
      names.push_back(e->name);
      EXPECT_EQ(e->prefix, e->name != "table");  // the table gets a ranged write of its new entry
      if (e->name == "ids") {
        EXPECT_EQ(e->values, (std::vector<std::int64_t>{i == 2 ? prompt.back() : r.tokens[i - 3]}));
      } else if (e->name == "pos") {
        EXPECT_EQ(e->values, (std::vector<std::int64_t>{static_cast<std::int64_t>(pos)}));
      } else if (e->name == "slots") {
        EXPECT_EQ(e->values, (std::vector<std::int64_t>{static_cast<std::int64_t>(pos)}));
      } else if (e->name == "lens") {
        EXPECT_EQ(e->values, (std::vector<std::int64_t>{static_cast<std::int64_t>(pos + 1)}));
      }
      if (e->name == "table") {  // only the new page's entry (i32), at its place in the row
        EXPECT_EQ(e->values, (std::vector<std::int64_t>{static_cast<std::int64_t>(pos / 4)})) << "position " << pos;
        EXPECT_EQ(e->offset, pos / 4 * 4) << "position " << pos;
      }
    }
    const std::int64_t fed = i == 2 ? prompt.back() : r.tokens[i - 3];
    const std::int64_t fed_before = i == 2 ? prompt[1] : i == 3 ? prompt.back() : r.tokens[i - 4];
    std::vector<std::string> want;
    if (pos % 4 == 0) want.push_back("table");  // a new page begins
    if (i == 2) {                               // after a chunk call: everything in the call itself
      if (fed != fed_before) want.push_back("ids");
      want.insert(want.end(), {"pos", "slots", "lens"});
    } else {  // the previous step wrote position, slot and seq_len ahead while it ran; then the token
      want.insert(want.end(), {"pos", "slots", "lens"});
      if (fed != fed_before) want.push_back("ids");  // an unchanged token is not rewritten
    }
    EXPECT_EQ(names, want) << "call " << i << " at position " << pos;
  }
  // The last step writes nothing ahead: no step follows it.
  ASSERT_EQ(fake.events.back().kind, Event::Kind::Read);
  EXPECT_EQ(fake.events[fake.events.size() - 2].kind, Event::Kind::Run);
  // Reads: one tokens read per one-row call and nothing else (no logits buffer asked for).
  std::size_t reads = 0;
  for (const Event& e : fake.events)
    if (e.kind == Event::Kind::Read) {
      ++reads;
      EXPECT_EQ(e.name, "next");
    }
  EXPECT_EQ(reads, 12u);
}

TEST(Generator, StopsAfterAStopToken) {
  const auto prompt = iota_prompt(5);
  const auto all = expected_tokens(prompt, 8);
  FakeExecutor fake(toy().verified.manifest());
  GeneratorOptions o = options(8, 4);
  o.stop_tokens = {999, all[3]};
  Generator gen(toy().protocol, fake, o);
  const GenerationResult r = gen.generate(prompt);
  ASSERT_EQ(r.reason, StopReason::StopToken);
  // The first occurrence of the stop token ends it (it may occur before index 3).
  const std::size_t first = static_cast<std::size_t>(std::find(all.begin(), all.end(), all[3]) - all.begin());
  EXPECT_EQ(r.tokens, std::vector<std::int64_t>(all.begin(), all.begin() + first + 1));
  EXPECT_EQ(r.step_calls, first);  // the first token came from the prefill's chunk
  EXPECT_EQ(r.chunk_calls, 2u);
}

TEST(Generator, StepsLimitAndRepeatedPrompts) {
  FakeExecutor fake(toy().verified.manifest());
  Generator gen(toy().protocol, fake, options(5, 3));
  const auto a = iota_prompt(7);
  const auto b = iota_prompt(2, 40);
  EXPECT_EQ(gen.generate(a).tokens, expected_tokens(a, 5));
  const GenerationResult rb = gen.generate(b);  // a fresh sequence over the same buffers
  EXPECT_EQ(rb.tokens, expected_tokens(b, 5));
  EXPECT_EQ(rb.reason, StopReason::Steps);
  EXPECT_TRUE(fake.violations.empty()) << fake.violations.front();
}

TEST(Generator, OneTokenPromptSkipsPrefillWhenTheStepYieldsTheFirstToken) {
  FakeExecutor fake(toy().verified.manifest());
  Generator gen(toy().protocol, fake, options(4, 4, true));
  const std::vector<std::int64_t> prompt{42};
  const GenerationResult r = gen.generate(prompt);
  const auto rs = runs(fake);
  ASSERT_EQ(rs.size(), 4u);
  for (const Event* e : rs) EXPECT_EQ(e->name, "decode");
  EXPECT_EQ(r.chunk_calls, 0u);
  EXPECT_EQ(r.tokens, expected_tokens(prompt, 4));
  EXPECT_TRUE(fake.violations.empty());
}

TEST(Generator, OneTokenPromptIsOneRowOfPrefillWhenThePrefillYieldsTheFirstToken) {
  FakeExecutor fake(toy().verified.manifest());
  Generator gen(toy().protocol, fake, options(4, 4));
  const std::vector<std::int64_t> prompt{42};
  const GenerationResult r = gen.generate(prompt);
  const auto rs = runs(fake);
  ASSERT_EQ(rs.size(), 4u);
  EXPECT_EQ(rs[0]->name, "prefill");
  EXPECT_EQ(rs[0]->vars.at("tokens"), 1u);
  for (std::size_t i = 1; i < 4; ++i) EXPECT_EQ(rs[i]->name, "decode");
  EXPECT_EQ(r.chunk_calls, 1u);
  EXPECT_EQ(r.step_calls, 3u);
  EXPECT_EQ(r.tokens, expected_tokens(prompt, 4));
  EXPECT_TRUE(fake.violations.empty());
}

TEST(Generator, TheLastChunkYieldsTheFirstToken) {
  FakeExecutor fake(toy().verified.manifest());
  Generator gen(toy().protocol, fake, options(3, 4));
  EXPECT_TRUE(gen.first_token_from_chunk());
  const auto prompt = iota_prompt(11);
  const GenerationResult r = gen.generate(prompt);
  EXPECT_TRUE(fake.violations.empty()) << fake.violations.front();
  const auto rs = runs(fake);
  ASSERT_EQ(rs.size(), 3u + 2u);  // chunks 4, 4, 3 (the whole prompt); then two one-row calls
  const std::uint64_t chunk_rows[] = {4, 4, 3};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(rs[i]->name, "prefill");
    EXPECT_EQ(rs[i]->vars.at("tokens"), chunk_rows[i]);
  }
  for (int i = 3; i < 5; ++i) EXPECT_EQ(rs[i]->name, "decode");
  auto find = [](const std::vector<const Event*>& w, const std::string& name) -> const Event* {
    for (const Event* e : w)
      if (e->name == name) return e;
    return nullptr;
  };
  const auto w2 = writes_before_run(fake, 2);  // the last chunk carries the prompt's last token
  ASSERT_NE(find(w2, "ids"), nullptr);
  EXPECT_EQ(find(w2, "ids")->values, (std::vector<std::int64_t>{18, 19, 20}));
  EXPECT_EQ(find(w2, "pos")->values, (std::vector<std::int64_t>{8, 9, 10}));
  EXPECT_EQ(find(w2, "lens")->values, (std::vector<std::int64_t>{11}));
  const auto w3 = writes_before_run(fake, 3);  // the first step feeds the first token at position 11
  ASSERT_NE(find(w3, "ids"), nullptr);
  EXPECT_EQ(find(w3, "ids")->values, (std::vector<std::int64_t>{r.tokens[0]}));
  // Only the token-yielding calls are read: the last chunk and the two steps.
  std::vector<std::size_t> reads_after;  // index of the run each read follows
  std::size_t seen = 0;
  for (const Event& e : fake.events) {
    if (e.kind == Event::Kind::Run) ++seen;
    if (e.kind == Event::Kind::Read) reads_after.push_back(seen - 1);
  }
  EXPECT_EQ(reads_after, (std::vector<std::size_t>{2, 3, 4}));
  EXPECT_EQ(r.tokens, expected_tokens(prompt, 3));
  EXPECT_EQ(r.chunk_calls, 3u);
  EXPECT_EQ(r.step_calls, 2u);
}

TEST(Generator, BothWaysToTheFirstTokenGiveTheSameTokensAndPositions) {
  for (const std::uint64_t n : {1, 2, 4, 5, 9}) {
    for (const std::uint64_t chunk : {1, 3, 4, 8}) {
      const auto prompt = iota_prompt(n, 20);
      FakeExecutor a(toy().verified.manifest()), b(toy().verified.manifest());
      const GenerationResult ra = Generator(toy().protocol, a, options(5, chunk)).generate(prompt);
      const GenerationResult rb = Generator(toy().protocol, b, options(5, chunk, true)).generate(prompt);
      EXPECT_EQ(ra.tokens, expected_tokens(prompt, 5)) << n << " " << chunk;
      EXPECT_EQ(ra.tokens, rb.tokens) << n << " " << chunk;
      EXPECT_EQ(ra.chunk_calls, (n + chunk - 1) / chunk) << n << " " << chunk;
      EXPECT_EQ(ra.step_calls, 4u);
      EXPECT_EQ(rb.chunk_calls, (n - 1 + chunk - 1) / chunk) << n << " " << chunk;
      EXPECT_EQ(rb.step_calls, 5u);
      EXPECT_TRUE(a.violations.empty()) << a.violations.front();
      EXPECT_TRUE(b.violations.empty()) << b.violations.front();
      EXPECT_EQ(a.kv, b.kv) << n << " " << chunk;  // every position in the same slot with the same token
    }
  }
}

TEST(Generator, AChunkProgramThatWritesNoTokenLeavesTheFirstTokenToTheStep) {
  const ToyVariant kv_only({8, 9});  // prefill writes neither tokens nor scores (kern serve's kind)
  FakeExecutor fake(kv_only.verified.manifest());
  Generator gen(kv_only.protocol, fake, options(3, 4));
  EXPECT_FALSE(gen.first_token_from_chunk());
  const auto prompt = iota_prompt(6);
  const GenerationResult r = gen.generate(prompt);
  const auto rs = runs(fake);
  ASSERT_EQ(rs.size(), 2u + 3u);  // chunks 4, 1; then three steps
  EXPECT_EQ(rs[1]->vars.at("tokens"), 1u);
  EXPECT_EQ(r.tokens, expected_tokens(prompt, 3));
  EXPECT_EQ(r.step_calls, 3u);
}

TEST(Generator, AChunkProgramThatDoesNotWriteTheLogitsBufferLeavesTheFirstTokenToTheStep) {
  const ToyVariant no_scores({9});  // prefill writes the token, not the logits row
  FakeExecutor fake(no_scores.verified.manifest());
  EXPECT_TRUE(Generator(no_scores.protocol, fake, options(3, 4)).first_token_from_chunk());
  GeneratorOptions o = options(3, 4);
  o.logits_buffer = "scores";
  Generator gen(no_scores.protocol, fake, o);
  EXPECT_FALSE(gen.first_token_from_chunk());
  const auto prompt = iota_prompt(6);
  EXPECT_EQ(gen.generate(prompt).step_calls, 3u);
  EXPECT_TRUE(Generator(toy().protocol, fake, o).first_token_from_chunk());  // the toy's prefill writes scores
}

TEST(Generator, RefusesWhatDoesNotFitCapacityOrARow) {
  {
    FakeExecutor fake(toy().verified.manifest(), 8);  // capacity 8 tokens
    Generator gen(toy().protocol, fake, options(4, 4));
    gen.generate(iota_prompt(5));                           // 8 positions: fits exactly
    try {
      gen.generate(iota_prompt(6));  // 9 positions
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Api);
      EXPECT_NE(std::string(e.what()).find("needs 9 positions, but the KV capacity is 8 tokens"), std::string::npos)
          << e.what();
    }
  }
  {
    FakeExecutor fake(toy().verified.manifest(), 64);
    Generator gen(toy().protocol, fake, options(8, 4));  // 16 pages, but a row lists 4 pages
    EXPECT_EQ(gen.max_positions(), 16u);
    try {
      gen.check_fits(10);  // 17 positions
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Api);
      EXPECT_NE(std::string(e.what()).find("one page-table row reaches 4 pages of 4 tokens"), std::string::npos)
          << e.what();
    }
  }
  FakeExecutor fake(toy().verified.manifest(), 64);
  const std::size_t before = fake.events.size();
  Generator gen(toy().protocol, fake, options(8, 4));
  EXPECT_THROW(gen.generate(iota_prompt(10)), Error);
  EXPECT_EQ(fake.events.size(), before);  // refused before touching the executor
  EXPECT_EQ(fake.leases, 0);
  EXPECT_THROW(gen.generate({}), Error);
}

TEST(Generator, RefusesBadOptions) {
  FakeExecutor fake(toy().verified.manifest());
  EXPECT_THROW(Generator(toy().protocol, fake, options(0, 4)), Error);
  EXPECT_THROW(Generator(toy().protocol, fake, options(4, 0)), Error);
  FakeExecutor no_pool(toy().verified.manifest(), 0);
  EXPECT_THROW(Generator(toy().protocol, no_pool, options(4, 4)), Error);  // paged state, no capacity
  GeneratorOptions o = options(4, 4);
  o.logits_buffer = "lens";  // an input
  EXPECT_THROW(Generator(toy().protocol, fake, o), Error);
  o.logits_buffer = "nope";
  EXPECT_THROW(Generator(toy().protocol, fake, o), Error);
}

class Recorder final : public GenerationObserver {
 public:
  void on_prefill_done(std::uint64_t n) override { log.push_back("prefill " + std::to_string(n)); }
  void on_logits(std::uint64_t position, std::span<const float> l) override {
    log.push_back("logits " + std::to_string(position));
    rows.emplace_back(l.begin(), l.end());
  }
  void on_token(std::uint64_t index, std::int64_t token) override {
    log.push_back("token " + std::to_string(index) + " " + std::to_string(token));
  }
  std::vector<std::string> log;
  std::vector<std::vector<float>> rows;
};

TEST(Generator, ReadsLogitsAfterEveryTokenProducingCall) {
  EXPECT_EQ(find_logits_output(toy().protocol), std::optional<std::string>("scores"));
  FakeExecutor fake(toy().verified.manifest());
  GeneratorOptions o = options(3, 4);
  o.logits_buffer = "scores";
  Generator gen(toy().protocol, fake, o);
  Recorder rec;
  const auto prompt = iota_prompt(6);
  const GenerationResult r = gen.generate(prompt, &rec);
  const auto want = expected_tokens(prompt, 3);
  // Chunks [0, 4) and [4, 6): the second yields the first token.
  EXPECT_EQ(rec.log, (std::vector<std::string>{"prefill 4", "logits 5", "token 0 " + std::to_string(want[0]),
                                               "logits 6", "token 1 " + std::to_string(want[1]), "logits 7",
                                               "token 2 " + std::to_string(want[2])}));
  ASSERT_EQ(rec.rows.size(), 3u);
  for (std::size_t k = 0; k < 3; ++k) {
    ASSERT_EQ(rec.rows[k].size(), 6u);
    EXPECT_FLOAT_EQ(rec.rows[k][0], static_cast<float>(r.tokens[k]) * 0.5f);
    EXPECT_FLOAT_EQ(rec.rows[k][5], static_cast<float>(r.tokens[k]) * 0.5f + 5);
  }
}

TEST(Generator, TakesItsPagesThroughOneLease) {
  FakeExecutor fake(toy().verified.manifest());  // 16 tokens: 4 pages of 4
  Generator gen(toy().protocol, fake, options(12, 1));
  gen.generate(iota_prompt(3));  // positions 0..13: a lease for page 0, then one extend per new page
  EXPECT_EQ(fake.leases, 1);
  EXPECT_EQ(fake.extends, 3);
  EXPECT_EQ(fake.the_pool().used(), 4u);
  gen.generate(iota_prompt(2));  // the previous sequence's lease is dropped first: 4 pages again
  EXPECT_EQ(fake.leases, 2);
  EXPECT_EQ(fake.the_pool().used(), 4u);
  EXPECT_EQ(fake.settles, 0);
  EXPECT_TRUE(fake.violations.empty()) << fake.violations.front();
}

// Forwards to a FakeExecutor, answering the first extend with Denied{Remapping}.
class RemapOnce final : public Executor {
 public:
  explicit RemapOnce(FakeExecutor& f) : f_(f) {}
  void write_input(std::string_view b, std::span<const std::byte> bytes, bool prefix) override {
    f_.write_input(b, bytes, prefix);
  }
  void write_input_at(std::string_view b, std::uint64_t offset, std::span<const std::byte> bytes) override {
    f_.write_input_at(b, offset, bytes);
  }
  void run(std::string_view program, const core::Vars& vars) override { f_.run(program, vars); }
  std::vector<std::byte> read_output(std::string_view b) override { return f_.read_output(b); }
  std::vector<std::byte> read_buffer(std::string_view n) override { return f_.read_buffer(n); }
  std::optional<SeqLimits> seq_limits() const override { return f_.seq_limits(); }
  pool::Granted<pool::Lease> lease(std::uint64_t tokens) override { return f_.lease(tokens); }
  std::optional<pool::Denied> extend(pool::Lease& lease, std::uint64_t tokens) override {
    if (!denied_) {
      denied_ = true;
      return pool::Denied{pool::DeniedKind::Remapping};
    }
    return f_.extend(lease, tokens);
  }
  void settle() override { f_.settle(); }

 private:
  FakeExecutor& f_;
  bool denied_ = false;
};

TEST(Generator, ARemapInTheWayIsSettledAndTheExtendTriedOnceMore) {
  const auto prompt = iota_prompt(3);
  FakeExecutor plain(toy().verified.manifest());
  const GenerationResult want = Generator(toy().protocol, plain, options(6, 1)).generate(prompt);
  FakeExecutor fake(toy().verified.manifest());
  RemapOnce remap(fake);
  const GenerationResult got = Generator(toy().protocol, remap, options(6, 1)).generate(prompt);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(fake.settles, 1);
  EXPECT_EQ(fake.extends, plain.extends);
  ASSERT_EQ(fake.events.size(), plain.events.size());  // the same writes, runs and reads
  for (std::size_t i = 0; i < fake.events.size(); ++i) {
    EXPECT_EQ(fake.events[i].name, plain.events[i].name) << i;
    EXPECT_EQ(fake.events[i].values, plain.events[i].values) << i;
    EXPECT_EQ(fake.events[i].offset, plain.events[i].offset) << i;
  }
  EXPECT_TRUE(fake.violations.empty()) << fake.violations.front();
}

TEST(Generator, PagesHeldByAnotherLeaseAreRefusedInTheCapacitysWords) {
  FakeExecutor fake(toy().verified.manifest());                       // 4 pages
  pool::Lease other = std::move(fake.the_pool().lease(8)).value();  // 2 of them held elsewhere
  Generator gen(toy().protocol, fake, options(4, 4));
  gen.generate(iota_prompt(4));  // 7 positions: 2 pages
  try {
    gen.generate(iota_prompt(6));  // 9 positions: a third page is Busy
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Api);
    EXPECT_NE(std::string(e.what()).find("9 positions do not fit the KV capacity of 16 tokens"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("Busy"), std::string::npos) << e.what();
  }
}

TEST(Generator, SizedPoolHasTheLimitsOfTheRuntimesPool) {
  const core::Manifest& m = toy().verified.manifest();
  const std::optional<pool::Pool> p = sized_pool(m, {64, 1});
  ASSERT_TRUE(p);
  const SeqLimits l = limits_of(*p);
  EXPECT_EQ(l.unit, 4u);
  EXPECT_EQ(l.row_pages, 4u);
  EXPECT_EQ(l.total_pages, 16u);
  EXPECT_EQ(l.max_tokens(), 16u);
  EXPECT_EQ(limits_of(*sized_pool(m, {10, 1})).total_pages, 2u);  // rounded down to the unit
  EXPECT_FALSE(sized_pool(m, {0, 1}));
  EXPECT_FALSE(sized_pool(m, {std::nullopt, 1}));
  // A paged state without page tables (examples/toy.json): unit 1 and no row limit of its own.
  const core::Verified toy_example =
      core::verify(core::parse_manifest_file(std::string(KERN_SOURCE_DIR) + "/examples/toy.json"));
  const SeqLimits t = limits_of(*sized_pool(toy_example.manifest(), {100, 1}));
  EXPECT_EQ(t.unit, 1u);
  EXPECT_EQ(t.total_pages, 100u);
  EXPECT_GE(t.row_pages, 100u);
  EXPECT_EQ(t.max_tokens(), 100u);
}

TEST(Generator, CapacityForRoundsUpToThePageUnit) {
  EXPECT_EQ(capacity_for(toy().protocol, 1), 4u);
  EXPECT_EQ(capacity_for(toy().protocol, 8), 8u);
  EXPECT_EQ(capacity_for(toy().protocol, 9), 12u);
}

}  // namespace
}  // namespace kern::driver

namespace kern::driver {
namespace {

struct SamplingToy {
  core::Verified verified = core::verify(core::parse_manifest_file(
      std::string(KERN_SOURCE_DIR) + "/tests/host/driver/fixtures/driver-toy-sampling.json"));
  core::Protocol protocol = core::check_protocol(verified);
};
const SamplingToy& sampling_toy() {
  static const SamplingToy t;
  return t;
}

struct LogprobRecorder final : GenerationObserver {
  std::vector<TokenLogprobs> logprobs;
  std::vector<std::int64_t> tokens;
  void on_logprobs(std::uint64_t index, const TokenLogprobs& lp) override {
    EXPECT_EQ(index, logprobs.size());
    logprobs.push_back(lp);
  }
  void on_token(std::uint64_t, std::int64_t token) override { tokens.push_back(token); }
};

GeneratorOptions sampling_options(std::uint64_t steps) {
  GeneratorOptions o;
  o.steps = steps;
  o.chunk = 8;
  return o;
}

TEST(GeneratorSampling, GreedyOnASamplingManifestMatchesThePlainOneAndWritesTheRowsOnce) {
  FakeExecutor fake(sampling_toy().verified.manifest());
  Generator g(sampling_toy().protocol, fake, sampling_options(5));
  const std::vector<std::int64_t> prompt = iota_prompt(3);
  EXPECT_EQ(g.generate(prompt).tokens, expected_tokens(prompt, 5));
  // Greedy: the parameter rows are written before the first call and never again.
  int samp_writes = 0, key_writes = 0, hist_writes = 0;
  for (const Event& e : fake.events) {
    samp_writes += e.kind == Event::Kind::Write && e.name == "samp";
    key_writes += e.kind == Event::Kind::Write && e.name == "keys";
    hist_writes += e.kind == Event::Kind::Write && e.name == "hist";
  }
  EXPECT_EQ(samp_writes, 1);
  EXPECT_EQ(key_writes, 1);
  EXPECT_EQ(hist_writes, 0);
  EXPECT_EQ(fake.get_f32("samp", 0), 0.0f);
}

TEST(GeneratorSampling, SeedAndCounterReachTheDeviceEveryStep) {
  GeneratorOptions o = sampling_options(4);
  o.sampling.temperature = 0.7;
  o.sampling.seed = 11;
  FakeExecutor fake(sampling_toy().verified.manifest());
  Generator g(sampling_toy().protocol, fake, o);
  const std::vector<std::int64_t> prompt = iota_prompt(3);
  const std::vector<std::int64_t> got = g.generate(prompt).tokens;
  // The fake draws (greedy + seed + counter) % 100 with counter = the sampled row's position.
  std::vector<std::int64_t> want;
  std::int64_t t = prompt.back();
  for (std::uint64_t pos = 2; want.size() < 4; ++pos) {
    t = (toy_next(t, pos) + 11 + static_cast<std::int64_t>(pos)) % 100;
    want.push_back(t);
  }
  EXPECT_EQ(got, want);
  EXPECT_FLOAT_EQ(fake.get_f32("samp", 0), 0.7f);
  EXPECT_EQ(fake.get("keys", 1), 11);
  // Again: the same tokens (nothing about a draw depends on what ran before).
  EXPECT_EQ(g.generate(prompt).tokens, want);
}

TEST(GeneratorSampling, PenaltiesSeeTheGeneratedTokens) {
  GeneratorOptions o = sampling_options(6);
  o.sampling.repetition_penalty = 1.3;
  FakeExecutor fake(sampling_toy().verified.manifest());
  Generator g(sampling_toy().protocol, fake, o);
  const std::vector<std::int64_t> got = g.generate(iota_prompt(2)).tokens;
  ASSERT_EQ(got.size(), 6u);
  // The last step saw 5 generated tokens, in order, in the history input.
  EXPECT_EQ(fake.get("keys", 3), 5);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(fake.get("hist", i), got[i]) << i;
  // Each step writes one new history element (after the first token), not the whole row.
  for (const Event& e : fake.events) {
    if (e.kind == Event::Kind::Write && e.name == "hist") {
      EXPECT_EQ(e.values.size(), 1u);
    }
  }
}

TEST(GeneratorSampling, LogitBiasEntriesSitAtTheHistoryRowsEnd) {
  GeneratorOptions o = sampling_options(5);
  o.sampling.logit_bias = {{3, -100.0f}, {7, 2.5f}};
  o.sampling.repetition_penalty = 1.2;
  FakeExecutor fake(sampling_toy().verified.manifest());
  Generator g(sampling_toy().protocol, fake, o);
  const std::vector<std::int64_t> got = g.generate(iota_prompt(2)).tokens;
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(fake.get("keys", 6), 2);  // entries announced
  EXPECT_EQ(fake.get("keys", 3), 4);  // and the generated tokens beside them, from the row's start
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(fake.get("hist", i), got[i]) << i;
  auto bits = [](float v) {
    std::int32_t b = 0;
    std::memcpy(&b, &v, 4);
    return static_cast<std::int64_t>(b);
  };
  EXPECT_EQ(fake.get("hist", 12), 3);
  EXPECT_EQ(fake.get("hist", 13), bits(-100.0f));
  EXPECT_EQ(fake.get("hist", 14), 7);
  EXPECT_EQ(fake.get("hist", 15), bits(2.5f));
  // written before the first token only (ranged writes at the row's end), never with the generated ones
  int tail_writes = 0;
  for (const Event& e : fake.events)
    if (e.kind == Event::Kind::Write && e.name == "hist" && e.offset == 12 * 4) {
      ++tail_writes;
      EXPECT_EQ(e.values.size(), 4u);
    }
  EXPECT_EQ(tail_writes, 1);
}

TEST(GeneratorSampling, ParseLogitBias) {
  EXPECT_EQ(parse_logit_bias("151643:-100,42:2.5"),
            (std::vector<std::pair<std::int32_t, float>>{{42, 2.5f}, {151643, -100.0f}}));
  EXPECT_EQ(parse_logit_bias("0:1e1"), (std::vector<std::pair<std::int32_t, float>>{{0, 10.0f}}));
  for (const char* bad : {"", "5", "5:", ":5", "-1:2", "a:2", "5:x", "5:2,", "5:2,,6:1", " 5:2", "5:2 ", "5:2:3"})
    EXPECT_THROW(parse_logit_bias(bad), Error) << bad;
  SamplingParams p;  // a repeated id parses and is refused as every caller's settings are
  p.logit_bias = parse_logit_bias("5:1,7:2,5:3");
  try {
    validate(p);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 5 twice"), std::string::npos);
  }
}

TEST(GeneratorSampling, LogprobsComeBackPerToken) {
  GeneratorOptions o = sampling_options(3);
  o.sampling.logprobs = 2;
  FakeExecutor fake(sampling_toy().verified.manifest());
  Generator g(sampling_toy().protocol, fake, o);
  LogprobRecorder rec;
  g.generate(iota_prompt(3), &rec);
  ASSERT_EQ(rec.logprobs.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    const std::int64_t t = rec.tokens[i];
    EXPECT_FLOAT_EQ(rec.logprobs[i].chosen, -static_cast<float>(t) / 100.0f);
    ASSERT_EQ(rec.logprobs[i].top.size(), 2u);
    EXPECT_EQ(rec.logprobs[i].top[0].first, t);
    EXPECT_EQ(rec.logprobs[i].top[1].first, (t + 1) % 100);
    EXPECT_FLOAT_EQ(rec.logprobs[i].top[1].second, rec.logprobs[i].chosen - 1.0f);
  }
}

TEST(GeneratorSampling, RefusesWhatTheManifestOrTheRangesCannotDo) {
  auto message = [](const core::Protocol& p, const GeneratorOptions& o, std::uint64_t capacity = 16) {
    FakeExecutor fake(p.verified().manifest(), capacity);
    try {
      Generator g(p, fake, o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // (manifest, a change to four-step greedy options, what the refusal says)
  const std::vector<std::tuple<const core::Protocol*, std::function<void(SamplingParams&)>, std::string>> cases = {
      {&toy().protocol, [](SamplingParams& s) { s.temperature = 0.5; }, "has no sampling op"},
      {&toy().protocol, [](SamplingParams& s) { s.logprobs = 1; }, "has no sampling op"},
      {&sampling_toy().protocol, [](SamplingParams& s) { s.temperature = 2.5; }, "temperature = 2.5 is out of range"},
      {&sampling_toy().protocol, [](SamplingParams& s) { s.top_p = 0.0; }, "top_p = 0 is out of range"},
      {&sampling_toy().protocol, [](SamplingParams& s) { s.logprobs = 21; }, "logprobs = 21"},
  };
  for (const auto& [protocol, change, words] : cases) {
    GeneratorOptions o = sampling_options(4);
    change(o.sampling);
    EXPECT_NE(message(*protocol, o).find(words), std::string::npos) << words;
  }
  GeneratorOptions o = sampling_options(18);  // 17 tokens fed back, the history holds 16
  o.sampling.frequency_penalty = 0.5;
  EXPECT_NE(message(sampling_toy().protocol, o, 32).find("penalties see at most 16 generated tokens"),
            std::string::npos);
  o.sampling.frequency_penalty = 0.0;
  EXPECT_EQ(message(sampling_toy().protocol, o, 32), "");
  // a logit bias takes 2 slots an entry at the row's end: 8 entries fit 16 slots, beside no penalty
  o = sampling_options(4);
  for (std::int32_t i = 0; i < 9; ++i) o.sampling.logit_bias.push_back({i, 1.0f});
  EXPECT_NE(message(sampling_toy().protocol, o).find("logit_bias has 9 entries; the device's history row holds 8"),
            std::string::npos);
  o.sampling.logit_bias.pop_back();
  EXPECT_EQ(message(sampling_toy().protocol, o), "");
  o.sampling.presence_penalty = 0.5;  // 3 tokens fed back beside 16 slots of bias
  EXPECT_NE(message(sampling_toy().protocol, o).find("penalties see at most 0 generated tokens beside 8 logit_bias"),
            std::string::npos);
  o.sampling.presence_penalty = 0.0;
  o.sampling.logit_bias = {{5, 1.0f}, {5, 2.0f}};
  EXPECT_NE(message(sampling_toy().protocol, o).find("names token id 5 twice"), std::string::npos);
  o.sampling.logit_bias = {{6, 1.0f}, {5, 2.0f}};
  EXPECT_NE(message(sampling_toy().protocol, o).find("ascending; 5 follows 6"), std::string::npos);
  o.sampling.logit_bias = {{5, 100.5f}};
  EXPECT_NE(message(sampling_toy().protocol, o).find("logit_bias[5] = 100.5 is out of range"), std::string::npos);
  o.sampling.logit_bias = {{5, 1.0f}};
  EXPECT_NE(message(toy().protocol, o).find("has no sampling op"), std::string::npos);
}

}  // namespace
}  // namespace kern::driver

namespace kern::driver::test {
namespace {

// An `error` fill of several words (kern's extension of schema v5's [1]; tensor-parallel manifests give
// each peer barrier one): the generator reads all of them after each call and fails the call on any
// non-zero word, naming the word. The fake executor leaves outputs it does not model at 0xEE bytes.
TEST(Generator, AnErrorFillOfSeveralWordsFailsTheCallThatRaisedOne) {
  const Toy t = toy_with_error_flags(3);
  const core::Protocol& p = t.protocol;
  ASSERT_NE(p.fill(core::Fill::Error), nullptr);
  FakeExecutor fake(t.verified.manifest());
  Generator gen(p, fake, options(3, 4));
  try {
    const std::vector<std::int64_t> prompt = {1, 2, 3};
    gen.generate(prompt);
    FAIL() << "a non-zero error word passed";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Call);
    EXPECT_NE(std::string(e.what()).find("raised error flag -286331154 in flags[0]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kern::driver::test
