// ProtocolRunner's prefill over a packed chunk program (batch.packed), on the driver's host fake
// executor and its toy serving manifest: one call writes every chunk's rows, positions, slots, its
// sequence's length and bounds, and runs the program once with the rows and groups of all chunks;
// calls outside the program's bounds are refused before anything runs. Without packing, one chunk a call.
#include <gtest/gtest.h>

#include "../driver/fake_executor.hpp"
#include "kern/base/file.hpp"
#include "kern/base/json.hpp"
#include "kern/serve/step_runner.hpp"

#include <cstring>

namespace kern::serve {
namespace {

using driver::test::Event;
using driver::test::FakeExecutor;

// The toy serving manifest, its prefill program packed (up to 3 chunks, 8 rows in all) over an op
// that writes no token.
core::Verified packed_toy() {
  Json j = Json::parse(read_file(std::string(KERN_SOURCE_DIR) + "/tests/host/driver/fixtures/driver-toy.json"));
  j = j.patch(Json::parse(R"([
    {"op":"add","path":"/ops/chunk_step","value":{"params":["in buffer<i64>","in buffer<i64>","in buffer<i64>",
      "in buffer<i32>","in buffer<i32>","in buffer<i32>","inout state","in buffer<bf16>","i32"],
      "impl":{"launches":[{"module":"toy","entry":"toy_chunk","block":[32,1,1],"grid":["tokens",1,1]}]}}},
    {"op":"replace","path":"/programs/prefill","value":{"batch":{"groups":3,"rows":"tokens","packed":true},"calls":[
      {"label":"chunk","op":"chunk_step","args":[{"buf":"ids"},{"buf":"pos"},{"buf":"slots"},{"buf":"table"},
       {"buf":"lens"},{"buf":"cu"},{"state":"kv"},{"buf":"w"},{"var":"tokens"}]}]}}])"));
  return core::verify(core::parse_manifest(j.dump(), "packed toy"));
}

const Event* last_run(const FakeExecutor& exec) {
  for (auto it = exec.events.rbegin(); it != exec.events.rend(); ++it)
    if (it->kind == Event::Kind::Run) return &*it;
  return nullptr;
}

TEST(ProtocolRunner, PackedPrefillRunsEveryChunkInOneCall) {
  const core::Verified v = packed_toy();
  const core::Protocol protocol = core::check_protocol(v);
  ASSERT_TRUE(protocol.chunk() && protocol.chunk()->packed);
  FakeExecutor exec(v.manifest(), 64, 4);
  ProtocolRunner runner(protocol, exec, std::move(exec.lease(1)).value(), 4);
  EXPECT_EQ(runner.prefill_chunks(), 3u);
  EXPECT_EQ(runner.max_chunk(), 8u);
  pool::Lease a = std::move(exec.lease(8)).value(), b = std::move(exec.lease(8)).value();
  const std::vector<std::uint64_t> sa = {a.slot(2), a.slot(3), a.slot(4)};
  const std::vector<std::uint64_t> sb = {b.slot(0), b.slot(1), b.slot(2), b.slot(3)};
  const std::vector<std::int32_t> ta = {11, 12, 13}, tb = {21, 22, 23, 24};
  const std::vector<ChunkCall> chunks = {{&a, sa, ta, 2}, {&b, sb, tb, 0}};
  runner.prefill(chunks);
  const Event* run = last_run(exec);
  ASSERT_NE(run, nullptr);
  EXPECT_EQ(run->name, "prefill");
  EXPECT_EQ(run->vars.at("tokens"), 7u);
  EXPECT_EQ(run->vars.at("seqs"), 2u);
  const std::vector<std::int64_t> ids = {11, 12, 13, 21, 22, 23, 24}, pos = {2, 3, 4, 0, 1, 2, 3};
  for (std::size_t r = 0; r < 7; ++r) {
    EXPECT_EQ(exec.get("ids", r), ids[r]) << r;
    EXPECT_EQ(exec.get("pos", r), pos[r]) << r;
    EXPECT_EQ(exec.get("slots", r), static_cast<std::int64_t>(r < 3 ? sa[r] : sb[r - 3])) << r;
  }
  EXPECT_EQ(exec.get("lens", 0), 5);
  EXPECT_EQ(exec.get("lens", 1), 4);
  EXPECT_EQ(exec.get("cu", 0), 0);
  EXPECT_EQ(exec.get("cu", 1), 3);
  EXPECT_EQ(exec.get("cu", 2), 7);
  // Refused before anything runs: more chunks than groups, one sequence twice, more rows than the program's.
  const std::size_t runs = exec.events.size();
  pool::Lease c = std::move(exec.lease(8)).value(), d = std::move(exec.lease(8)).value();
  const std::vector<std::uint64_t> s1 = {c.slot(0)}, s2 = {d.slot(0)};
  const std::vector<std::int32_t> t1 = {1};
  EXPECT_THROW(runner.prefill(std::vector<ChunkCall>{{&a, sa, ta, 2}, {&b, sb, tb, 0}, {&c, s1, t1, 0}, {&d, s2, t1, 0}}),
               Error);
  EXPECT_THROW(runner.prefill(std::vector<ChunkCall>{{&a, sa, ta, 2}, {&a, sa, ta, 2}}), Error);
  const std::vector<std::uint64_t> s6 = {c.slot(1), c.slot(2), c.slot(3), c.slot(4), c.slot(5), c.slot(6)};
  const std::vector<std::int32_t> t6 = {1, 2, 3, 4, 5, 6};
  EXPECT_THROW(runner.prefill(std::vector<ChunkCall>{{&c, s6, t6, 1}, {&b, sb, tb, 0}}), Error);  // 10 rows
  for (std::size_t i = runs; i < exec.events.size(); ++i) EXPECT_NE(exec.events[i].kind, Event::Kind::Run) << i;
}

// A decode row's logit bias goes to the end of its group's `history` row (the sampling toy's 16
// slots), written when another sequence takes the group, not again while it keeps it; its count in
// sampling_keys[6]. The generated tokens of a penalized row fill the row from its start beside it.
TEST(ProtocolRunner, LogitBiasAtTheEndOfTheGroupsHistoryRow) {
  const core::Verified v = core::verify(core::parse_manifest_file(std::string(KERN_SOURCE_DIR) +
                                                                  "/tests/host/driver/fixtures/driver-toy-sampling.json"));
  const core::Protocol protocol = core::check_protocol(v);
  FakeExecutor exec(v.manifest(), 64, 4);
  ProtocolRunner runner(protocol, exec, std::move(exec.lease(1)).value(), 4);
  pool::Lease a = std::move(exec.lease(8)).value(), b = std::move(exec.lease(8)).value();
  driver::SamplingParams biased, plain, other;
  biased.logit_bias = {{3, -100.0f}, {7, 2.5f}};
  biased.presence_penalty = 0.5;
  other.logit_bias = {{9, 1.0f}};
  auto bits = [](float f) {
    std::int32_t x = 0;
    std::memcpy(&x, &f, 4);
    return static_cast<std::int64_t>(x);
  };
  auto hist_writes = [&] {
    int n = 0;
    for (const Event& e : exec.events) n += e.kind == Event::Kind::Write && e.name == "hist";
    return n;
  };
  const std::vector<std::int32_t> gen_a = {40, 41};
  std::vector<DecodeCall> rows(1);  // (the fake executor models one sequence a call)
  rows[0] = {&a, a.slot(4), 41, 4, &biased, 10, gen_a};
  runner.decode(rows);
  EXPECT_EQ(exec.get("keys", 6), 2);
  EXPECT_EQ(exec.get("keys", 3), 2);  // the history length beside the bias
  const std::vector<std::int64_t> want = {40, 41, 3, bits(-100.0f), 7, bits(2.5f)};
  for (std::size_t i = 0; i < 2; ++i) EXPECT_EQ(exec.get("hist", i), want[i]) << i;
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(exec.get("hist", 12 + i), want[2 + i]) << i;
  const int writes = hist_writes();
  rows[0].position = 5;
  rows[0].slot = a.slot(5);
  runner.decode(rows);  // the same sequence, no new token generated: nothing to write
  EXPECT_EQ(hist_writes(), writes);
  rows[0] = {&b, b.slot(2), 5, 2, &plain, 11, {}};  // a sequence without a bias: announced none
  runner.decode(rows);
  EXPECT_EQ(exec.get("keys", 6), 0);
  EXPECT_EQ(hist_writes(), writes);
  rows[0] = {&b, b.slot(3), 6, 3, &other, 12, {}};  // another biased sequence takes group 0
  runner.decode(rows);
  EXPECT_EQ(exec.get("keys", 6), 1);
  EXPECT_EQ(exec.get("hist", 14), 9);
  EXPECT_EQ(exec.get("hist", 15), bits(1.0f));
  EXPECT_EQ(hist_writes(), writes + 1);
  // Sequences move between groups: a long penalised sequence's tokens and another's bias share row 0's
  // slots in turn, and each comes back to find its own bytes, written again where the other's were.
  driver::SamplingParams penalized;
  penalized.frequency_penalty = 0.5;
  std::vector<std::int32_t> gen_c(14);
  for (std::size_t i = 0; i < gen_c.size(); ++i) gen_c[i] = static_cast<std::int32_t>(60 + i);
  pool::Lease c = std::move(exec.lease(16)).value();
  rows[0] = {&c, c.slot(1), gen_c.back(), 1, &penalized, 20, gen_c};
  runner.decode(rows);
  rows[0] = {&b, b.slot(4), 7, 4, &biased, 21, {}};  // its 4 slots of bias over slots 12..15
  runner.decode(rows);
  EXPECT_EQ(exec.get("hist", 12), 3);
  gen_c.push_back(74);
  rows[0] = {&c, c.slot(2), gen_c.back(), 2, &penalized, 20, gen_c};  // 15 tokens: slots 0..14 again
  runner.decode(rows);
  for (std::size_t i = 0; i < gen_c.size(); ++i) EXPECT_EQ(exec.get("hist", i), gen_c[i]) << i;
  rows[0] = {&b, b.slot(5), 7, 5, &biased, 21, {}};  // the bias written again
  runner.decode(rows);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(exec.get("hist", 12 + i), want[2 + i]) << i;
  // a request whose bias and penalised tokens outgrow the row is refused before it runs
  EXPECT_NO_THROW(runner.check(biased, 12));
  EXPECT_THROW(runner.check(biased, 13), Error);
  EXPECT_NO_THROW(runner.check(other, 1000));
}

TEST(ProtocolRunner, UnpackedPrefillTakesOneChunkACall) {
  const core::Verified& v = driver::test::toy().verified;
  const core::Protocol& protocol = driver::test::toy().protocol;
  FakeExecutor exec(v.manifest(), 64, 4);
  ProtocolRunner runner(protocol, exec, std::move(exec.lease(1)).value(), 4);
  EXPECT_EQ(runner.prefill_chunks(), 1u);
  pool::Lease a = std::move(exec.lease(8)).value(), b = std::move(exec.lease(8)).value();
  const std::vector<std::uint64_t> sa = {a.slot(0), a.slot(1)}, sb = {b.slot(0)};
  const std::vector<std::int32_t> ta = {5, 6}, tb = {7};
  EXPECT_THROW(runner.prefill(std::vector<ChunkCall>{{&a, sa, ta, 0}, {&b, sb, tb, 0}}), Error);
  runner.prefill(ChunkCall{&a, sa, ta, 0});
  const Event* run = last_run(exec);
  ASSERT_NE(run, nullptr);
  EXPECT_EQ(run->vars.at("tokens"), 2u);
  EXPECT_EQ(run->vars.at("seqs"), 1u);
  EXPECT_EQ(exec.get("lens", 0), 2);
}

}  // namespace
}  // namespace kern::serve
