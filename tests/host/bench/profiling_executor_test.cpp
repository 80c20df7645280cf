// kern bench's prefill profile hook: ProfilingExecutor over the fake executor, driven by kern run's
// Generator on the driver's toy manifest (prefill program "prefill", up to 8 rows; decode "decode").
#include <gtest/gtest.h>

#include "bench/profiling_executor.hpp"
#include "fake_executor.hpp"
#include "kern/driver/driver.hpp"
#include "kern/base/error.hpp"

namespace kern::bench {
namespace {

using driver::test::Event;
using driver::test::FakeExecutor;
using driver::test::toy;

driver::GeneratorOptions one_token(std::uint64_t chunk) {
  driver::GeneratorOptions o;
  o.steps = 1;
  o.chunk = chunk;  // the fake's pool holds 16 tokens
  return o;
}

struct HookCall {
  std::string program;
  core::Vars vars;
  std::size_t events_before = 0;  // what the fake had seen when the hook ran
};

TEST(ProfilingExecutor, HookRunsOnceBeforeTheFirstPrefillRunWithItsVars) {
  const std::vector<std::int64_t> prompt = {11, 22, 33, 44, 55, 66};
  FakeExecutor plain(toy().verified.manifest());
  const driver::GenerationResult expected = driver::Generator(toy().protocol, plain, one_token(6)).generate(prompt);

  FakeExecutor fake(toy().verified.manifest());
  std::vector<HookCall> calls;
  ProfilingExecutor prof(fake, one_call_prefill_program(toy().protocol, prompt.size()),
                         [&](std::string_view program, const core::Vars& vars) {
                           calls.push_back({std::string(program), vars, fake.events.size()});
                         });
  EXPECT_FALSE(prof.fired());
  driver::Generator gen(toy().protocol, prof, one_token(6));
  const driver::GenerationResult got = gen.generate(prompt);
  EXPECT_TRUE(prof.fired());
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].program, "prefill");
  EXPECT_EQ(calls[0].vars.at("tokens"), 6u);  // the whole prompt: the prefill yields the first token
  // The hook saw the prefill's inputs written, and nothing run yet; the real run came right after.
  ASSERT_LT(calls[0].events_before, fake.events.size());
  for (std::size_t i = 0; i < calls[0].events_before; ++i) EXPECT_EQ(fake.events[i].kind, Event::Kind::Write) << i;
  EXPECT_EQ(fake.events[calls[0].events_before].kind, Event::Kind::Run);
  EXPECT_EQ(fake.events[calls[0].events_before].name, "prefill");
  // Everything else went through unchanged: the same events and the same token as without the hook.
  ASSERT_EQ(fake.events.size(), plain.events.size());
  for (std::size_t i = 0; i < fake.events.size(); ++i) {
    EXPECT_EQ(fake.events[i].kind, plain.events[i].kind) << i;
    EXPECT_EQ(fake.events[i].name, plain.events[i].name) << i;
    EXPECT_EQ(fake.events[i].values, plain.events[i].values) << i;
  }
  EXPECT_EQ(got.tokens, expected.tokens);
  EXPECT_EQ(got.chunk_calls, 1u);

  // A second prompt through the same executor: the hook does not run again.
  gen.generate(prompt);
  EXPECT_EQ(calls.size(), 1u);
}

TEST(ProfilingExecutor, HookMayRunTheProgramItselfFirst) {
  // What kern bench's hook does (time_calls runs the program several times on the inputs in place):
  // the generation then still produces the same token, with no violation in the fake's checks.
  const std::vector<std::int64_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6};
  FakeExecutor plain(toy().verified.manifest());
  const std::int64_t expected = driver::Generator(toy().protocol, plain, one_token(8)).generate(prompt).tokens.at(0);

  FakeExecutor fake(toy().verified.manifest());
  int runs = 0;
  ProfilingExecutor prof(fake, one_call_prefill_program(toy().protocol, prompt.size()),
                         [&](std::string_view program, const core::Vars& vars) {
                           for (int i = 0; i < 3; ++i, ++runs) fake.run(program, vars);
                         });
  const driver::GenerationResult got = driver::Generator(toy().protocol, prof, one_token(8)).generate(prompt);
  EXPECT_EQ(runs, 3);
  EXPECT_EQ(got.tokens.at(0), expected);
  EXPECT_TRUE(fake.violations.empty()) << fake.violations.front();
}

TEST(ProfilingExecutor, HookOnTheDecodeProgramSeesRunAndRead) {
  // The one-row step goes through run_and_read; a hook on it sees that call's vars too.
  FakeExecutor fake(toy().verified.manifest());
  std::vector<core::Vars> seen;
  ProfilingExecutor prof(fake, "decode", [&](std::string_view, const core::Vars& vars) { seen.push_back(vars); });
  driver::GeneratorOptions o = one_token(8);
  o.steps = 3;
  driver::Generator(toy().protocol, prof, o).generate(std::vector<std::int64_t>{7, 8});
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].at("seqs"), 1u);
}

TEST(ProfilingExecutor, OneCallPrefillProgramChecksTheRows) {
  EXPECT_EQ(one_call_prefill_program(toy().protocol, 1), "prefill");
  EXPECT_EQ(one_call_prefill_program(toy().protocol, 8), "prefill");  // the program's bound
  auto expect_api = [](std::uint64_t rows, const std::string& fragment) {
    try {
      one_call_prefill_program(toy().protocol, rows);
      ADD_FAILURE() << "accepted " << rows << " rows";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Api);
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_api(0, "at least one row");
  expect_api(9, "a prefill sends 9 rows in one call, but program prefill takes at most 8");
  // The rows come from the generator: the whole prompt, or all but its last token.
  FakeExecutor fake(toy().verified.manifest());
  driver::GeneratorOptions o = one_token(8);
  EXPECT_EQ(driver::Generator(toy().protocol, fake, o).chunked_rows(6), 6u);
  o.first_token_from_step = true;
  EXPECT_EQ(driver::Generator(toy().protocol, fake, o).chunked_rows(6), 5u);
}

TEST(ProfilingExecutor, WithTheFirstTokenFromTheStepTheHookSeesAllButTheLastRow) {
  const std::vector<std::int64_t> prompt = {11, 22, 33, 44, 55, 66};
  driver::GeneratorOptions o = one_token(6);
  o.first_token_from_step = true;
  FakeExecutor fake(toy().verified.manifest());
  std::vector<core::Vars> seen;
  ProfilingExecutor prof(fake, one_call_prefill_program(toy().protocol, prompt.size() - 1),
                         [&](std::string_view, const core::Vars& vars) { seen.push_back(vars); });
  const driver::GenerationResult got = driver::Generator(toy().protocol, prof, o).generate(prompt);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].at("tokens"), 5u);  // the 6th row goes through decode
  EXPECT_EQ(got.chunk_calls, 1u);
  EXPECT_EQ(got.step_calls, 1u);
}

TEST(ProfilingExecutor, NeedsAProgramAndAHook) {
  FakeExecutor fake(toy().verified.manifest());
  EXPECT_THROW(ProfilingExecutor(fake, "", [](std::string_view, const core::Vars&) {}), Error);
  EXPECT_THROW(ProfilingExecutor(fake, "prefill", ProfilingExecutor::Hook()), Error);
}

}  // namespace
}  // namespace kern::bench
