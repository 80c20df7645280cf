// pool::layout_of: the pool layout of the toy manifests, a kern gen'd Qwen3 manifest and a
// manifest with per-seq states, each validated and turned into a pool.
#include <gtest/gtest.h>

#include <optional>

#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/base/json.hpp"
#include "kern/base/sha256.hpp"
#include "kern/core/manifest.hpp"
#include "kern/models/qwen3_gen.hpp"
#include "kern/models/qwen3_synth.hpp"
#include "kern/pool/manifest_layout.hpp"
#include "kern/pool/pool.hpp"
#include "layouts.hpp"

namespace kern::pool {
namespace {

Json example_toy_json() { return Json::parse(read_file(std::string(KERN_SOURCE_DIR) + "/examples/toy.json")); }

// The toy manifest with the states and buffers of `extra` ({"states": {...}, "buffers": {...}}) added.
core::Manifest toy_with(const std::string& extra) {
  Json j = example_toy_json();
  const Json added = Json::parse(extra);
  for (const char* section : {"states", "buffers"})
    if (added.contains(section))
      for (const auto& [name, value] : added[section].items()) j[section][name] = value;
  return core::parse_manifest(j.dump(), "toy+extra");
}

TEST(ManifestLayout, ToyPagesItsCacheWithoutAPageTable) {
  const PoolLayout l = layout_of(core::parse_manifest(example_toy_json().dump(), "toy"));
  ASSERT_EQ(l.paged.size(), 1u);
  EXPECT_EQ(l.paged[0].name, "cache");
  EXPECT_EQ(l.paged[0].bytes_per_token, 128u);
  EXPECT_TRUE(l.per_seq.empty());
  EXPECT_TRUE(l.page_tables.empty());  // the `slots` fill is not a table
  EXPECT_TRUE(l.line_tables.empty());
  EXPECT_NO_THROW(l.validate());
  EXPECT_EQ(l.unit(), 1u);
  EXPECT_EQ(l.row_pages(), std::nullopt);

  auto [pool, plan] = Pool::create(l, PoolConfig::from_capacity(l, 4096, Capacity{64, 1}));
  EXPECT_EQ(pool.row_pages(), pool.pages_max());
  Lease lease = testing::take(pool.lease(64));
  EXPECT_EQ(lease.capacity(), 64u);
}

TEST(ManifestLayout, DriverToyPagesKvThroughItsTable) {
  const PoolLayout l = layout_of(
      core::parse_manifest_file(std::string(KERN_SOURCE_DIR) + "/tests/host/driver/fixtures/driver-toy.json"));
  ASSERT_EQ(l.paged.size(), 1u);
  EXPECT_EQ(l.paged[0].name, "kv");
  EXPECT_EQ(l.paged[0].bytes_per_token, 64u);
  ASSERT_EQ(l.page_tables.size(), 1u);
  EXPECT_EQ(l.page_tables[0].name, "table");
  EXPECT_EQ(l.page_tables[0].state, "kv");
  EXPECT_EQ(l.page_tables[0].stride, 4u);
  EXPECT_EQ(l.page_tables[0].width, 4u);
  EXPECT_NO_THROW(l.validate());
  EXPECT_EQ(l.unit(), 4u);
  EXPECT_EQ(l.row_pages(), std::optional<std::uint64_t>(4));
}

TEST(ManifestLayout, GeneratedQwen3) {
  models::Qwen3GenOptions o;
  for (const std::string& f : models::qwen3_kernel_families()) o.module_sha256[f] = to_hex(sha256(f));
  o.model = "test";
  const models::Qwen3Shape s = models::parse_qwen3_config(models::qwen3_config_json(models::qwen3_preset("4b")));
  const PoolLayout l = layout_of(core::parse_manifest(models::generate_qwen3_manifest(s, o).dump(), "generated"));
  ASSERT_EQ(l.paged.size(), 1u);
  EXPECT_EQ(l.paged[0].name, "kv");
  EXPECT_EQ(l.paged[0].bytes_per_token, s.layers * 2 * s.kv_heads * s.head_dim * 2);  // K and V, bf16
  EXPECT_EQ(l.paged[0].bytes_per_token, 144u << 10);                                  // the 4B's 144 KiB a token
  EXPECT_TRUE(l.per_seq.empty());
  ASSERT_EQ(l.page_tables.size(), 1u);
  EXPECT_EQ(l.page_tables[0].name, "block_table");
  EXPECT_EQ(l.page_tables[0].stride, 16u);
  EXPECT_EQ(l.page_tables[0].width, 2560u);  // 40960 / 16
  EXPECT_TRUE(l.line_tables.empty());
  EXPECT_NO_THROW(l.validate());
  EXPECT_EQ(l.unit(), 16u);
  EXPECT_EQ(l.row_pages(), std::optional<std::uint64_t>(2560));
  EXPECT_EQ(chunk_bytes_for(l), 64ull << 20);  // 2.25 MiB pages, under two granules: the cap
}

TEST(ManifestLayout, PerSeqStatesAndEveryLineTableShape) {
  const core::Manifest m = toy_with(R"({
    "states": {"conv": {"bytes_per_seq": 1024}, "aux": {"bytes_per_token": 32}, "fixed": {"bytes": 4096}},
    "buffers": {
      "lines": {"dtype": "i32", "shape": [4], "kind": "input", "domain": {"index_into": "conv", "stride": 256}},
      "lines_by_seq": {"dtype": "i32", "shape": [2, "seqs"], "kind": "input",
                       "domain": {"index_into": "conv", "stride": 512}},
      "lines_wide": {"dtype": "i32", "shape": [1, "seqs", 3], "kind": "input",
                     "domain": {"index_into": "conv", "stride": 1024}},
      "lines_per_row": {"dtype": "i32", "shape": ["tokens"], "kind": "input",
                        "domain": {"index_into": "conv", "stride": 1024}}
    }
  })");
  const PoolLayout l = layout_of(m);
  // Paged then per-seq, each in state-name order; the fixed state is not pooled.
  ASSERT_EQ(l.paged.size(), 2u);
  EXPECT_EQ(l.paged[0].name, "aux");
  EXPECT_EQ(l.paged[1].name, "cache");
  ASSERT_EQ(l.per_seq.size(), 1u);
  EXPECT_EQ(l.per_seq[0].name, "conv");
  EXPECT_EQ(l.per_seq[0].bytes_per_seq, 1024u);
  ASSERT_EQ(l.line_tables.size(), 4u);  // buffer-name order
  auto expect_line_table = [&](std::size_t i, const char* name, std::uint64_t stride, std::uint64_t rows,
                               std::uint64_t seq_width) {
    SCOPED_TRACE(name);
    EXPECT_EQ(l.line_tables[i].name, name);
    EXPECT_EQ(l.line_tables[i].state, "conv");
    EXPECT_EQ(l.line_tables[i].stride, stride);
    EXPECT_EQ(l.line_tables[i].rows, rows);
    EXPECT_EQ(l.line_tables[i].seq_width, seq_width);
  };
  expect_line_table(0, "lines", 256, 4, 1);
  expect_line_table(1, "lines_by_seq", 512, 2, 1);
  expect_line_table(2, "lines_per_row", 1024, 512, 1);  // rows = shape[0] at var max; one line a slot
  expect_line_table(3, "lines_wide", 1024, 1, 3);
  EXPECT_NO_THROW(l.validate());
  EXPECT_EQ(l.lines_per_slot(l.line_tables[0]), 4u);

  // The layout runs: a slot's lines are slot × lines_per_slot + row % lines_per_slot.
  auto [pool, plan] = Pool::create(l, PoolConfig::from_capacity(l, 4096, Capacity{16, 2}));
  Lease lease = testing::take(pool.lease(4));
  ASSERT_TRUE(lease.seq_slot().has_value());
  const std::uint64_t slot = *lease.seq_slot();
  EXPECT_EQ(lease.seq_line("lines", 3), slot * 4 + 3);
  EXPECT_EQ(lease.seq_line("lines_per_row", 500), slot);  // one line a slot: every row reads it
  EXPECT_EQ(lease.seq_line("lines_by_seq", 1), slot * 2 + 1);
  EXPECT_EQ(lease.seq_width("lines_wide"), 3u);
}

TEST(ManifestLayout, ImpossibleTableShapesAreAManifestError) {
  const core::Manifest m = toy_with(R"({
    "states": {"conv": {"bytes_per_seq": 1024}},
    "buffers": {
      "bad_stride": {"dtype": "i32", "shape": [4], "kind": "input", "domain": {"index_into": "conv", "stride": 300}},
      "cube_pages": {"dtype": "i32", "shape": ["seqs", 4, 4], "kind": "input",
                     "domain": {"index_into": "cache", "stride": 16}}
    }
  })");
  try {
    layout_of(m);
    FAIL() << "expected a Manifest error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Manifest);
    EXPECT_NE(std::string(e.what()).find("2 state tables of an impossible shape"), std::string::npos) << e.what();
    EXPECT_EQ(e.details(),
              (std::vector<std::string>{
                  "buffers.bad_stride.domain.stride: line stride must divide the state's bytes_per_seq [P.table_shape]",
                  "buffers.cube_pages.shape: a page table is [seqs] or [seqs, entries] [P.table_shape]"}));
  }
}

TEST(ManifestLayout, NoPooledStateGivesAnEmptyLayoutThatDoesNotValidate) {
  Json j = example_toy_json();
  j["states"] = Json::parse(R"({"fixed": {"bytes": 4096}})");
  j["buffers"].erase("slots");
  const PoolLayout l = layout_of(core::parse_manifest(j.dump(), "toy without a pooled state"));
  EXPECT_TRUE(l.paged.empty());
  EXPECT_TRUE(l.per_seq.empty());
  EXPECT_THROW(l.validate(), Error);
}

}  // namespace
}  // namespace kern::pool
