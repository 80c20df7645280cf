// kern bench, the state pool's figures (issue 16): rates and medians worked by hand, the split of
// a KV size into one-row checkpoints, the targets, the table and the JSON, the remap manifest.
#include <gtest/gtest.h>

#include "bench_shapes.hpp"
#include "kern/base/error.hpp"
#include "kern/base/sha256.hpp"
#include "kern/bench/bench.hpp"
#include "kern/bench/pool_bench.hpp"
#include "kern/core/manifest.hpp"
#include "kern/core/protocol.hpp"
#include "kern/core/verify.hpp"
#include "kern/models/qwen3_gen.hpp"

namespace kern::bench {
namespace {

constexpr std::uint64_t kGiB = 1ull << 30;

const Target* pool_target(const std::vector<Target>& t, const std::string& name) {
  for (const Target& x : t)
    if (x.name == name) return &x;
  return nullptr;
}

TEST(PoolModel, PinnedCopyCeilingIsOneWayBytesOverTheMedian) {
  // 2 GiB in a median of 40 ms: 2147483648 / 0.040 s = 53.687 GB/s (one way, not read + written).
  const CopyCeiling c = make_copy_ceiling(2 * kGiB, {41.0, 39.0, 40.0});
  EXPECT_DOUBLE_EQ(c.ms, 40.0);
  EXPECT_NEAR(c.gbps, 53.687091, 1e-5);
  EXPECT_THROW(make_copy_ceiling(2 * kGiB, {}), Error);
  EXPECT_THROW(make_copy_ceiling(0, {1.0}), Error);
}

TEST(PoolModel, TransferPointRatesAgainstTheCeiling) {
  // 1 GiB parked in a median of 20 ms: 53.687 GB/s; against a 55 GB/s ceiling 0.9761.
  const TransferPoint t = make_transfer_point("park", kGiB, 456, 1, {21.0, 20.0, 19.0}, {150.0, 90.0, 100.0}, 55.0);
  EXPECT_DOUBLE_EQ(t.ms, 20.0);
  EXPECT_DOUBLE_EQ(t.issue_us, 100.0);
  EXPECT_NEAR(t.gbps, 53.687091, 1e-5);
  EXPECT_NEAR(t.of_ceiling, 53.687091 / 55.0, 1e-6);
  EXPECT_EQ(t.reps, 3u);
  EXPECT_EQ(make_transfer_point("wake", kGiB, 456, 1, {20.0}, {1.0}, 0).of_ceiling, 0) << "no ceiling, no ratio";
  EXPECT_THROW(make_transfer_point("park", kGiB, 1, 1, {}, {1.0}, 55.0), Error);
}

TEST(PoolModel, RemapFigureCountsChunksPerSecond) {
  // 16 chunks of 64 MiB in a median of 8 ms: 2000 chunks/s, 1 GiB / 8 ms = 134.2 GB/s.
  const RemapFigure r =
      make_remap_figure("pages -> slot", 64ull << 20, {9.0, 8.0, 7.5}, {16, 16, 17}, {16, 15, 16}, {1, 1, 1});
  EXPECT_DOUBLE_EQ(r.ms, 8.0);
  EXPECT_EQ(r.chunks_mapped, 16u);
  EXPECT_EQ(r.chunks_unmapped, 16u);
  EXPECT_EQ(r.plans, 1u);
  EXPECT_DOUBLE_EQ(r.chunks_per_s, 2000.0);
  EXPECT_NEAR(r.gbps, 134.217728, 1e-6);
  EXPECT_THROW(make_remap_figure("x", 1, {1.0, 2.0}, {1}, {1, 1}, {1, 1}), Error) << "one count per sample";
}

TEST(PoolModel, OverlapSlowdownIsDuringOverAloneMinusOne) {
  const OverlapPoint o = make_overlap_point("park", 1024, 5 * kGiB, {3.30, 3.34, 3.32}, {3.40, 3.42, 3.41, 3.43}, 4, 0.95);
  EXPECT_NEAR(o.base_us, 3320.0, 1e-9);
  EXPECT_NEAR(o.during_us, 3415.0, 1e-9);
  EXPECT_NEAR(o.slowdown, 3415.0 / 3320.0 - 1, 1e-12);
  EXPECT_EQ(o.replays, 4u);
  EXPECT_EQ(o.rounds, 4u);
}

TEST(PoolModel, PoolCallCostIsTheMedian) {
  const PoolOpCost c = make_pool_op_cost("fork", 32768, {30.0, 10.0, 20.0, 40.0});
  EXPECT_DOUBLE_EQ(c.us, 25.0);
  EXPECT_EQ(c.reps, 4u);
}

TEST(PoolModel, SizesSplitIntoOneRowCheckpointsOfWholePages) {
  // 5.5 GiB of Qwen3-4B KV: pages of 16 tokens × 147456 bytes = 2.25 MiB; 2503.1 -> 2504 pages.
  const std::uint64_t page = 16 * kv_bytes_per_token(test::qwen3_4b());
  EXPECT_EQ(page, 2359296u);
  EXPECT_EQ(pages_for_bytes(5632ull << 20, page), 2504u);
  EXPECT_EQ(pages_for_bytes(page, page), 1u);
  EXPECT_EQ(store_tokens(2504, 16, 2560), std::vector<std::uint64_t>{40064});
  EXPECT_EQ(store_tokens(130, 16, 64), (std::vector<std::uint64_t>{1024, 1024, 32}));
  EXPECT_TRUE(store_tokens(0, 16, 64).empty());
  EXPECT_THROW(store_tokens(1, 16, 0), Error);
}

PoolFigures sample_pool() {
  PoolFigures p;
  p.measured = true;
  p.unit = 16;
  p.page_bytes = 2359296;
  p.chunk_bytes = 64ull << 20;
  p.pages = 2602;
  p.row_tokens = 40960;
  p.ops = {make_pool_op_cost("lease", 1024, {3.0}), make_pool_op_cost("fork", 32768, {41.5})};
  p.remap_measured = true;
  p.remap_note = "test manifest";
  p.remap = {make_remap_figure("pages -> slot", 64ull << 20, {8.0}, {16}, {16}, {1})};
  p.host_measured = true;
  p.transfers = {make_transfer_point("park", kGiB, 456, 1, {20.0}, {100.0}, 55.0),   // 0.976: PASS
                 make_transfer_point("wake", kGiB, 456, 1, {25.0}, {100.0}, 55.0)};  // 0.781: MISS
  p.issue = {make_transfer_point("park", 2500 * 2359296ull, 2500, 1, {110.0}, {800.0}, 55.0),
             make_transfer_point("wake", 2500 * 2359296ull, 2500, 1, {110.0}, {1200.0}, 55.0)};
  p.overlap = {make_overlap_point("park", 1024, 5 * kGiB, {3.30}, {3.35}, 4, 1.0),   // +1.5 %: PASS
               make_overlap_point("wake", 1024, 5 * kGiB, {3.30}, {3.45}, 4, 1.0)};  // +4.5 %: MISS
  return p;
}

TEST(PoolModel, TargetsOfIssue16PassAndMiss) {
  Report r;
  r.pool = sample_pool();
  const std::vector<Target> t = evaluate_targets(r);
  const Target* park = pool_target(t, "park 1.00 GiB: GB/s / pinned D2H ceiling");
  ASSERT_NE(park, nullptr);
  EXPECT_TRUE(park->pass);
  EXPECT_NEAR(park->measured, 0.97613, 1e-4);
  const Target* wake = pool_target(t, "wake 1.00 GiB: GB/s / pinned H2D ceiling");
  ASSERT_NE(wake, nullptr);
  EXPECT_FALSE(wake->pass);
  const Target* park_issue = pool_target(t, "park issue of 2500 pages (ms)");
  ASSERT_NE(park_issue, nullptr);
  EXPECT_TRUE(park_issue->pass);
  EXPECT_DOUBLE_EQ(park_issue->measured, 0.8);
  const Target* wake_issue = pool_target(t, "wake issue of 2500 pages (ms)");
  ASSERT_NE(wake_issue, nullptr);
  EXPECT_FALSE(wake_issue->pass);
  const Target* during_park = pool_target(t, "decode at 1024 during a 5.0 GiB park: slowdown (%)");
  ASSERT_NE(during_park, nullptr);
  EXPECT_TRUE(during_park->pass);
  EXPECT_NEAR(during_park->measured, 1.51515, 1e-4);
  const Target* during_wake = pool_target(t, "decode at 1024 during a 5.0 GiB wake: slowdown (%)");
  ASSERT_NE(during_wake, nullptr);
  EXPECT_FALSE(during_wake->pass);

  r.pool.measured = false;
  EXPECT_TRUE(evaluate_targets(r).empty()) << "no pool figures, no pool targets";
}

TEST(PoolModel, TableAndJsonCarryThePoolFigures) {
  Report r;
  r.shape = test::small_shape();
  r.ceilings = make_ceilings(1ull << 31, 1.0, 8192, 8192, 8192, 2.0);
  r.ceilings.h2d = make_copy_ceiling(2 * kGiB, {40.0});
  r.ceilings.d2h = make_copy_ceiling(2 * kGiB, {39.0});
  r.pool = sample_pool();
  const std::string table = format_table(r);
  for (const char* s : {"pinned host -> device", "53.7 GB/s", "pinned device -> host", "state pool (issue 16)",
                        "lease ", "fork", "pages -> slot", "2000", "park", "wake", "2500",
                        "decode at 1024 during a 5.000 GiB park", "+1.52 %"})
    EXPECT_NE(table.find(s), std::string::npos) << s << "\n" << table;

  const nlohmann::ordered_json j = to_json(r);
  EXPECT_EQ(j["ceilings"]["pinned_h2d_bytes"], 2 * kGiB);
  EXPECT_NEAR(j["ceilings"]["pinned_d2h_gbps"].get<double>(), 2.0 * kGiB / 0.039 / 1e9, 1e-6);
  const auto& pool = j["pool"];
  EXPECT_TRUE(pool["measured"].get<bool>());
  EXPECT_EQ(pool["ops"].size(), 2u);
  EXPECT_EQ(pool["ops"][1]["op"], "fork");
  EXPECT_EQ(pool["remap"]["moves"][0]["chunks"], 16u);
  EXPECT_DOUBLE_EQ(pool["remap"]["moves"][0]["chunks_per_s"].get<double>(), 2000.0);
  EXPECT_EQ(pool["host"]["transfers"].size(), 2u);
  EXPECT_EQ(pool["host"]["issue"][0]["pages"], 2500u);
  EXPECT_NEAR(pool["host"]["overlap"][1]["slowdown"].get<double>(), 3.45 / 3.30 - 1, 1e-12);

  r.pool = PoolFigures{};
  r.pool.note = "--no-pool";
  r.ceilings.h2d = r.ceilings.d2h = CopyCeiling{};
  EXPECT_NE(format_table(r).find("state pool (issue 16): not measured: --no-pool"), std::string::npos);
  EXPECT_FALSE(to_json(r)["pool"]["measured"].get<bool>());
  EXPECT_FALSE(to_json(r)["ceilings"].contains("pinned_h2d_gbps")) << "no pinned ceilings measured";
}

TEST(PoolModel, RemapManifestAddsAPerSeqStateThatVerifies) {
  models::Qwen3GenOptions gen;
  gen.max_tokens = 512;
  gen.max_seqs = 8;
  for (const std::string& f : models::qwen3_kernel_families()) gen.module_sha256[f] = to_hex(sha256(f));
  const nlohmann::ordered_json m = models::generate_qwen3_manifest(test::qwen3_4b(), gen);
  const nlohmann::ordered_json with = with_seq_state(m, "bench_seq", 1ull << 30, "bench_remap");
  EXPECT_EQ(with["states"]["bench_seq"]["bytes_per_seq"], 1ull << 30);
  const auto& calls = with["programs"]["bench_remap"]["calls"];
  ASSERT_FALSE(calls.empty());
  const std::string last = calls.back().dump();
  EXPECT_NE(last.find("\"state\":\"bench_seq\""), std::string::npos) << last;
  for (std::size_t i = 0; i + 1 < calls.size(); ++i)
    EXPECT_EQ(calls[i].dump().find("\"state\""), std::string::npos) << "only the last call names a state";
  EXPECT_EQ(m["programs"].size() + 1, with["programs"].size());
  const core::Verified v = core::verify(core::parse_manifest(with.dump(), "remap manifest"));
  EXPECT_EQ(v.manifest().states.at("bench_seq").bytes_per_seq, 1ull << 30);
  EXPECT_EQ(v.manifest().states.at("kv").bytes_per_token, kv_bytes_per_token(test::qwen3_4b()));
  EXPECT_NO_THROW(core::check_protocol(v)) << "a program without batch, once or derive is no part of the protocol";

  EXPECT_THROW(with_seq_state(with, "bench_seq", 1, "other"), Error) << "the state exists";
  EXPECT_THROW(with_seq_state(m, "fresh", 1, "decode"), Error) << "the program exists";
  EXPECT_THROW(with_seq_state(m, "fresh", 0, "other"), Error);
}

}  // namespace
}  // namespace kern::bench
