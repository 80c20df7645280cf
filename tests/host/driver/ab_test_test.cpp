// kern test's A/B run (driver/ab_test.hpp) over fake executors of the toy manifest: the workload's
// prompts, teacher forcing, the rows compared at the same positions, and the verdict when the
// candidate's logits differ.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "fake_executor.hpp"
#include "kern/base/error.hpp"
#include "kern/driver/ab_test.hpp"
#include "kern/driver/driver.hpp"

namespace kern::driver {
namespace {

using test::Event;
using test::FakeExecutor;
using test::toy;
using test::toy_next;

// A candidate in front of a fake: it can change the token the device emits (what forcing must
// override) and the logits row of chosen calls (what the comparison must see).
class Tampered final : public Executor {
 public:
  explicit Tampered(FakeExecutor& inner) : in_(inner) {}
  std::function<std::int64_t(std::int64_t)> token = [](std::int64_t t) { return t; };
  std::function<void(std::size_t call, std::vector<float>&)> logits;  // by token-producing call index

  void write_input(std::string_view b, std::span<const std::byte> bytes, bool prefix) override {
    in_.write_input(b, bytes, prefix);
  }
  void write_input_at(std::string_view b, std::uint64_t offset, std::span<const std::byte> bytes) override {
    in_.write_input_at(b, offset, bytes);
  }
  void run(std::string_view program, const core::Vars& vars) override { in_.run(program, vars); }
  void run_and_read(std::string_view program, const core::Vars& vars, std::string_view b, std::span<std::byte> out,
                    const std::function<void()>& before_wait) override {
    in_.run(program, vars);
    std::vector<std::byte> got = in_.read_output_prefix(b, out.size());
    std::int64_t t;
    std::memcpy(&t, got.data(), 8);
    t = token(t);
    std::memcpy(out.data(), &t, 8);
    if (before_wait) before_wait();
    ++calls_;
  }
  std::vector<std::byte> read_output(std::string_view b) override { return read_output_prefix(b, ~0ull); }
  std::vector<std::byte> read_buffer(std::string_view n) override { return in_.read_buffer(n); }
  std::vector<std::byte> read_output_prefix(std::string_view b, std::uint64_t bytes) override {
    std::vector<std::byte> got = in_.read_output_prefix(b, bytes);
    if (b == "scores" && logits) {
      std::vector<float> row(got.size() / 4);
      std::memcpy(row.data(), got.data(), row.size() * 4);
      logits(calls_ - 1, row);
      std::memcpy(got.data(), row.data(), row.size() * 4);
    }
    return got;
  }
  std::optional<SeqLimits> seq_limits() const override { return in_.seq_limits(); }
  pool::Granted<pool::Lease> lease(std::uint64_t tokens) override { return in_.lease(tokens); }
  std::optional<pool::Denied> extend(pool::Lease& l, std::uint64_t tokens) override { return in_.extend(l, tokens); }
  void settle() override { in_.settle(); }

 private:
  FakeExecutor& in_;
  std::size_t calls_ = 0;
};

GeneratorOptions options(std::uint64_t steps) {
  GeneratorOptions o;
  o.steps = steps;
  o.chunk = 4;
  return o;
}

// The tokens the candidate was fed at its one-row calls, in order.
std::vector<std::int64_t> fed_tokens(const FakeExecutor& f) {
  std::vector<std::int64_t> out;
  std::map<std::size_t, std::int64_t> ids;  // element -> value, as the writes leave the input
  for (const Event& e : f.events) {
    if (e.kind == Event::Kind::Write && e.name == "ids")
      for (std::size_t i = 0; i < e.values.size(); ++i) ids[e.offset / 8 + i] = e.values[i];
    if (e.kind == Event::Kind::Run && e.name == "decode") out.push_back(ids.at(0));
  }
  return out;
}

struct Pair {
  FakeExecutor ref_fake{toy().verified.manifest()}, cand_fake{toy().verified.manifest()};
  Tampered cand{cand_fake};
  HostRowComparer comparer{{&ref_fake, "scores", DType::F32}, {&cand, "scores", DType::F32}, 6};
};

TEST(AbWorkload, PromptsAreDeterministicAndSpanTheLengths) {
  const AbWorkloadOptions o{12, 40, 7};
  const auto a = sample_prompts(o, 1000), b = sample_prompts(o, 1000);
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), 12u);
  EXPECT_EQ(a[0].size(), 40u);
  EXPECT_EQ(a[1].size(), 1u);
  std::set<std::size_t> lengths;
  for (const auto& p : a) {
    EXPECT_GE(p.size(), 1u);
    EXPECT_LE(p.size(), 40u);
    lengths.insert(p.size());
    for (std::int64_t t : p) {
      EXPECT_GE(t, 0);
      EXPECT_LT(t, 1000);
    }
  }
  EXPECT_GE(lengths.size(), 5u);  // not one length repeated
  EXPECT_NE(sample_prompts({12, 40, 8}, 1000), a);
  EXPECT_THROW(sample_prompts({0, 40, 7}, 1000), Error);
  EXPECT_THROW(sample_prompts({1, 0, 7}, 1000), Error);
  EXPECT_THROW(sample_prompts({1, 4, 7}, 0), Error);
}

TEST(AbRun, IdenticalExecutorsPassBitForBitAtEveryGeneratedPosition) {
  Pair p;
  Generator ref(toy().protocol, p.ref_fake, options(5)), cand(toy().protocol, p.cand, options(5));
  const std::vector<std::vector<std::int64_t>> prompts{{10, 11, 12, 13, 14, 15}, {42}, {3, 9}};
  const AbResult r = run_ab(ref, cand, prompts, p.comparer);
  ASSERT_EQ(r.rows.size(), 15u);
  EXPECT_EQ(r.report.verdict, core::Verdict::Pass);
  EXPECT_EQ(r.report.identical, 15u);
  EXPECT_FALSE(r.report.first_divergence);
  EXPECT_EQ(r.prompt_tokens, 9u);
  // Rows sit at the last prompt position, then each generated token's.
  EXPECT_EQ(r.where[0].prompt, 0u);
  EXPECT_EQ(r.where[0].position, 5u);
  EXPECT_EQ(r.where[4].position, 9u);
  EXPECT_EQ(r.where[5].prompt, 1u);
  EXPECT_EQ(r.where[5].position, 0u);
  EXPECT_EQ(r.where[0].reference_token, toy_next(15, 5));
  EXPECT_TRUE(p.ref_fake.violations.empty());
  EXPECT_TRUE(p.cand_fake.violations.empty());
}

TEST(AbRun, TheCandidateIsFedTheReferencesTokensWhateverItEmits) {
  Pair p;
  p.cand.token = [](std::int64_t t) { return (t + 1) % 100; };  // a candidate whose argmax is always off by one
  Generator ref(toy().protocol, p.ref_fake, options(4)), cand(toy().protocol, p.cand, options(4));
  const std::vector<std::vector<std::int64_t>> prompts{{10, 11, 12}};
  const AbResult r = run_ab(ref, cand, prompts, p.comparer);
  // Its logits depend only on what it is fed: the reference's tokens, so every row still agrees.
  EXPECT_EQ(r.report.verdict, core::Verdict::Pass);
  EXPECT_EQ(r.report.identical, 4u);
  EXPECT_EQ(fed_tokens(p.cand_fake), fed_tokens(p.ref_fake));
  std::vector<std::int64_t> ref_tokens;
  for (const AbPosition& w : r.where) ref_tokens.push_back(w.reference_token);
  const std::vector<std::int64_t> fed = fed_tokens(p.cand_fake);
  // The prefill's chunk yields the first token; the one-row calls are fed the reference's first
  // three tokens (not the candidate's own, off by one).
  ASSERT_EQ(fed.size(), 3u);
  EXPECT_EQ(fed, std::vector<std::int64_t>(ref_tokens.begin(), ref_tokens.begin() + 3));
}

TEST(AbRun, SmallNoisePassesOnLogitEvidence) {
  Pair p;
  p.cand.logits = [](std::size_t, std::vector<float>& row) {
    for (std::size_t i = 0; i < row.size(); ++i) row[i] += 1e-3f * static_cast<float>(i % 3);
  };
  Generator ref(toy().protocol, p.ref_fake, options(3)), cand(toy().protocol, p.cand, options(3));
  const std::vector<std::vector<std::int64_t>> prompts{{1, 2, 3, 4}, {7}};
  const AbResult r = run_ab(ref, cand, prompts, p.comparer);
  EXPECT_EQ(r.report.verdict, core::Verdict::Pass);
  EXPECT_EQ(r.report.rung, "logit evidence");
  EXPECT_EQ(r.report.identical, 0u);
  EXPECT_GT(r.report.max_abs_diff, 1.9e-3);
  EXPECT_LT(r.report.max_abs_diff, 2.1e-3);
}

TEST(AbRun, AFlippedRowFailsAndIsNamedAsTheFirstDivergence) {
  Pair p;
  // The candidate's 5th token-producing call (prompt 0's last row) ranks the entries backwards.
  p.cand.logits = [](std::size_t call, std::vector<float>& row) {
    if (call == 4) std::reverse(row.begin(), row.end());
  };
  Generator ref(toy().protocol, p.ref_fake, options(5)), cand(toy().protocol, p.cand, options(5));
  const std::vector<std::vector<std::int64_t>> prompts{{5, 6, 7}, {8, 9}};
  const AbResult r = run_ab(ref, cand, prompts, p.comparer);
  EXPECT_EQ(r.report.verdict, core::Verdict::Fail);
  ASSERT_TRUE(r.report.first_divergence);
  EXPECT_EQ(*r.report.first_divergence, 4u);
  EXPECT_EQ(r.where[4].prompt, 0u);
  EXPECT_EQ(r.where[4].position, 6u);
  EXPECT_EQ(r.report.flips, 1u);
  EXPECT_EQ(r.report.identical, 9u);
}

TEST(AbRun, ACandidateThatStopsEarlierIsRefused) {
  Pair p;
  Generator ref(toy().protocol, p.ref_fake, options(5)), cand(toy().protocol, p.cand, options(3));
  const std::vector<std::vector<std::int64_t>> prompts{{5, 6, 7}};
  try {
    run_ab(ref, cand, prompts, p.comparer);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Api);
    EXPECT_NE(std::string(e.what()).find("the reference produced 5 logits rows, the candidate 3"), std::string::npos)
        << e.what();
  }
}

TEST(AbRun, HostComparerRefusesRowsOutOfOrder) {
  Pair p;
  p.comparer.begin_prompt();
  EXPECT_THROW(p.comparer.compare(0), Error);
  EXPECT_THROW(p.comparer.keep_reference(1), Error);
}

}  // namespace
}  // namespace kern::driver
