// kern bench's decode inputs at a chosen context, against the fake executor over the driver's
// toy manifest (page size 4, one table row reaches 4 pages, positions < 64).
#include <gtest/gtest.h>

#include "fake_executor.hpp"
#include "kern/driver/driver.hpp"
#include "kern/bench/bench.hpp"
#include "kern/base/error.hpp"
#include "kern/core/manifest.hpp"
#include "kern/core/protocol.hpp"
#include "kern/core/verify.hpp"

namespace kern::bench {
namespace {

using driver::test::Event;
using driver::test::FakeExecutor;

using driver::test::toy;

// name -> values of the writes since event `from`.
std::map<std::string, std::vector<std::int64_t>> writes_since(const FakeExecutor& f, std::size_t from) {
  std::map<std::string, std::vector<std::int64_t>> w;
  for (std::size_t i = from; i < f.events.size(); ++i)
    if (f.events[i].kind == Event::Kind::Write) w[f.events[i].name] = f.events[i].values;
  return w;
}

using Ints = std::vector<std::int64_t>;

TEST(BenchInputs, StartWritesOneStepAtTheContextWithoutAPrefill) {
  FakeExecutor fake(toy().verified.manifest());
  DecodeInputs in(toy().protocol, fake);  // the fake's pool holds 16 tokens
  EXPECT_EQ(in.step_program(), "decode");
  in.start(10, 42);
  const auto w = writes_since(fake, 0);
  // Position 9 lives on page 2 (the third page handed out): slot 2 * 4 + 9 % 4 = 9; the table
  // row lists the ceil(10 / 4) = 3 pages held.
  EXPECT_EQ(w.at("table"), (Ints{0, 1, 2}));
  EXPECT_EQ(w.at("ids"), (Ints{42}));
  EXPECT_EQ(w.at("pos"), (Ints{9}));
  EXPECT_EQ(w.at("slots"), (Ints{9}));
  EXPECT_EQ(w.at("lens"), (Ints{10}));
  EXPECT_EQ(w.at("cu"), (Ints{0, 1}));
  for (const Event& e : fake.events) EXPECT_EQ(e.kind, Event::Kind::Write);  // nothing runs yet
  const auto vars = in.step_vars(10);
  EXPECT_EQ(vars.at("tokens"), 1u);
  EXPECT_EQ(vars.at("seqs"), 1u);
}

TEST(BenchInputs, StepsWriteOnlyWhatChangedAndReturnTheDevicesToken) {
  FakeExecutor fake(toy().verified.manifest());
  DecodeInputs in(toy().protocol, fake);  // the fake's pool holds 16 tokens
  in.start(10, 42);
  std::size_t mark = fake.events.size();
  // The first step at the context's last position: its inputs are already there (not ahead).
  const std::int64_t t1 = in.step(9, 42, false);
  EXPECT_EQ(t1, driver::test::toy_next(42, 9));
  EXPECT_TRUE(writes_since(fake, mark).empty());
  ASSERT_EQ(fake.events.size(), mark + 2);
  EXPECT_EQ(fake.events[mark].kind, Event::Kind::Run);
  EXPECT_EQ(fake.events[mark].name, "decode");
  EXPECT_EQ(fake.events[mark].vars.at("tokens"), 1u);
  EXPECT_EQ(fake.events.back().kind, Event::Kind::Read);
  EXPECT_EQ(fake.events.back().name, "next");

  // Position 10 is on page 2 too: token, position, slot and seq_len change, the table does not;
  // with `ahead`, position 11's position, slot and seq_len follow the run (still page 2).
  mark = fake.events.size();
  const std::int64_t t2 = in.step(10, t1);
  EXPECT_EQ(t2, driver::test::toy_next(t1, 10));
  std::size_t run_at = mark;
  while (run_at < fake.events.size() && fake.events[run_at].kind != Event::Kind::Run) ++run_at;
  ASSERT_LT(run_at, fake.events.size());
  std::vector<std::string> before_run;
  for (std::size_t i = mark; i < run_at; ++i) before_run.push_back(fake.events[i].name);
  EXPECT_EQ(before_run, (std::vector<std::string>{"ids", "pos", "slots", "lens"}));
  EXPECT_EQ(fake.get("pos", 0), 11);  // what the device holds for the next step
  auto w = writes_since(fake, run_at);
  EXPECT_EQ(w.count("table"), 0u);
  EXPECT_EQ(w.count("cu"), 0u);
  EXPECT_EQ(w.count("ids"), 0u);
  EXPECT_EQ(w.at("pos"), (Ints{11}));
  EXPECT_EQ(w.at("slots"), (Ints{11}));
  EXPECT_EQ(w.at("lens"), (Ints{12}));

  // The step at 11 writes position 12's inputs ahead: 12 begins page 3, so the table row grows
  // by its one new entry (a ranged write). The step at 12 then writes only its token.
  mark = fake.events.size();
  in.step(11, t2);
  w = writes_since(fake, mark);
  EXPECT_EQ(w.at("table"), (Ints{3}));
  for (std::size_t i = mark; i < fake.events.size(); ++i)
    if (fake.events[i].name == "table") {
      EXPECT_FALSE(fake.events[i].prefix);
      EXPECT_EQ(fake.events[i].offset, 3u * 4u);  // i32 entry 3
    }
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(fake.get("table", i), static_cast<std::int64_t>(i));
  EXPECT_EQ(w.at("slots"), (Ints{12}));
  mark = fake.events.size();
  in.step(12, 7, false);
  w = writes_since(fake, mark);
  EXPECT_EQ(w.size(), 1u);
  EXPECT_EQ(w.at("ids"), (Ints{7}));
}

TEST(BenchInputs, StartForgetsThePreviousSequence) {
  FakeExecutor fake(toy().verified.manifest());
  DecodeInputs in(toy().protocol, fake);  // the fake's pool holds 16 tokens
  in.start(16, 1);
  const std::size_t mark = fake.events.size();
  in.start(3, 1);  // every input is written again (even an unchanged token), the table from page 0
  const auto w = writes_since(fake, mark);
  EXPECT_EQ(w.at("table"), (Ints{0}));
  EXPECT_EQ(w.at("ids"), (Ints{1}));
  EXPECT_EQ(w.at("pos"), (Ints{2}));
  EXPECT_EQ(w.at("slots"), (Ints{2}));
  EXPECT_EQ(w.at("lens"), (Ints{3}));
  EXPECT_EQ(w.at("cu"), (Ints{0, 1}));
}

TEST(BenchInputs, ItsPagesAreOneLeaseDroppedAtEachStart) {
  FakeExecutor fake(toy().verified.manifest());
  DecodeInputs in(toy().protocol, fake);
  in.start(10, 1);  // 3 pages at once
  EXPECT_EQ(fake.leases, 1);
  EXPECT_EQ(fake.the_pool().used(), 3u);
  in.step(9, 1);  // position 10's inputs ahead: still page 2
  in.step(10, 1);  // position 11 ahead: page 2
  in.step(11, 1);  // position 12 ahead: page 3, one extend
  EXPECT_EQ(fake.extends, 1);
  EXPECT_EQ(fake.the_pool().used(), 4u);
  in.start(3, 1);  // the old lease goes back first
  EXPECT_EQ(fake.leases, 2);
  EXPECT_EQ(fake.the_pool().used(), 1u);
}

TEST(BenchInputs, RefusesContextsItCannotHold) {
  FakeExecutor fake(toy().verified.manifest());
  DecodeInputs in(toy().protocol, fake);  // the fake's pool holds 16 tokens
  EXPECT_THROW(in.start(0, 1), Error);
  try {
    in.start(17, 1);  // 16 token slots
    ADD_FAILURE() << "accepted a context past the capacity";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Api) << e.what();
  }
}

// The decode e2e figure (kern bench --gpus) reads the manifest's error fill after every step: a step
// whose flags are set (a peer barrier that timed out) gives an error, not a figure. The fake fills an
// output it was never given with 0xEE bytes, so the flags read non-zero.
TEST(BenchInputs, DecodeE2eFailsOnAStepThatRaisedAnErrorFlag) {
  std::size_t waits = 0;
  {
    FakeExecutor fake(toy().verified.manifest());
    const std::vector<double> ms = decode_e2e_ms(toy().protocol, fake, [&] { ++waits; }, 10, 42, 3);
    EXPECT_EQ(ms.size(), 3u);  // no error fill: every step timed
  }
  EXPECT_EQ(waits, 3u);
  const driver::test::Toy t = driver::test::toy_with_error_flags(2);
  FakeExecutor fake(t.verified.manifest());
  try {
    decode_e2e_ms(t.protocol, fake, [] {}, 10, 42, 3);
    FAIL() << "a step with a non-zero error word gave a figure";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Call);
    EXPECT_NE(std::string(e.what()).find("raised error flag -286331154 in flags[0]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kern::bench
