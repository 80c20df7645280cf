// core::state_tables: which inputs index which state, on the toy manifests, a kern gen'd Qwen3
// manifest and per-seq states with every line-table shape; the protocol projects the same tables.
#include <gtest/gtest.h>

#include "kern/base/sha256.hpp"
#include "kern/core/manifest.hpp"
#include "kern/core/protocol.hpp"
#include "kern/core/state_tables.hpp"
#include "kern/core/verify.hpp"
#include "kern/models/qwen3_gen.hpp"
#include "kern/models/qwen3_synth.hpp"
#include "verify_fixtures.hpp"

namespace kern::core {
namespace {

// kern gen qwen3 for one preset, as tests/host/models/gen_qwen3_test.cpp runs it.
Manifest generated_qwen3(const std::string& preset, std::uint64_t page_size) {
  models::Qwen3GenOptions o;
  for (const std::string& f : models::qwen3_kernel_families()) o.module_sha256[f] = to_hex(sha256(f));
  o.model = "test";
  o.page_size = page_size;
  const models::Qwen3Shape shape = models::parse_qwen3_config(models::qwen3_config_json(models::qwen3_preset(preset)));
  return parse_manifest(models::generate_qwen3_manifest(shape, o).dump(), "generated");
}

// The toy manifest with one per-seq state "conv" (1 KiB a slot) and the buffers in `buffers`
// (a JSON object) added.
Manifest toy_with_conv(const std::string& buffers) {
  Json j = testing::load_fixture("toy");
  j["states"]["conv"] = Json::parse(R"({"bytes_per_seq": 1024})");
  const Json added = Json::parse(buffers);
  for (const auto& [name, b] : added.items()) j["buffers"][name] = b;
  return parse_manifest(j.dump(), "toy+conv");
}

std::vector<std::string> violation_lines(const StateTables& t) {
  std::vector<std::string> lines;
  for (const auto& v : t.violations) lines.push_back(v.line());
  return lines;
}

TEST(StateTables, ToyHasOnlyASlotFill) {
  const StateTables t = state_tables(testing::parse_patched("toy", ""));
  EXPECT_TRUE(t.page_tables.empty());
  EXPECT_TRUE(t.line_tables.empty());
  EXPECT_TRUE(t.violations.empty());
  ASSERT_EQ(t.slot_fills.size(), 1u);
  EXPECT_EQ(t.slot_fills[0].buffer, "slots");
  EXPECT_EQ(t.slot_fills[0].state, "cache");
  EXPECT_EQ(t.slot_fills[0].dtype, DType::I64);
  EXPECT_EQ(t.slot_fills[0].stride, 1u);
}

TEST(StateTables, DriverToysHaveOnePageTableAndOneSlotFill) {
  for (const char* fixture : {"driver-toy.json", "driver-toy-sampling.json"}) {
    SCOPED_TRACE(fixture);
    const Manifest m = parse_manifest_file(std::string(KERN_SOURCE_DIR) + "/tests/host/driver/fixtures/" + fixture);
    const StateTables t = state_tables(m);
    ASSERT_EQ(t.page_tables.size(), 1u);
    const PageTable& pt = t.page_tables[0];
    EXPECT_EQ(pt.buffer, "table");
    EXPECT_EQ(pt.state, "kv");
    EXPECT_EQ(pt.dtype, DType::I32);
    EXPECT_EQ(pt.stride, 4u);
    EXPECT_EQ(pt.width, 4u);
    EXPECT_EQ(pt.axis, "seqs");
    ASSERT_EQ(t.slot_fills.size(), 1u);
    EXPECT_EQ(t.slot_fills[0].buffer, "slots");
    EXPECT_EQ(t.slot_fills[0].state, "kv");
    EXPECT_TRUE(t.line_tables.empty());
    EXPECT_TRUE(t.violations.empty());
  }
}

TEST(StateTables, GeneratedQwen3PagesKvThroughTheBlockTable) {
  for (std::uint64_t page_size : {16, 32}) {
    SCOPED_TRACE("page_size " + std::to_string(page_size));
    const Manifest m = generated_qwen3("0.6b", page_size);
    const StateTables t = state_tables(m);
    // token_ids and positions index buffers (embed, rope), not states: not listed.
    ASSERT_EQ(t.page_tables.size(), 1u);
    EXPECT_EQ(t.page_tables[0].buffer, "block_table");
    EXPECT_EQ(t.page_tables[0].state, "kv");
    EXPECT_EQ(t.page_tables[0].stride, page_size);
    EXPECT_EQ(t.page_tables[0].width, 40960 / page_size);  // the context over the page size
    EXPECT_EQ(t.page_tables[0].axis, "seqs");
    ASSERT_EQ(t.slot_fills.size(), 1u);
    EXPECT_EQ(t.slot_fills[0].buffer, "slot_mapping");
    EXPECT_EQ(t.slot_fills[0].state, "kv");
    EXPECT_TRUE(t.line_tables.empty());
    EXPECT_TRUE(t.violations.empty());

    // The protocol reads the same definition.
    const Protocol p = check_protocol(verify(m));
    ASSERT_EQ(p.page_tables().size(), 1u);
    EXPECT_EQ(p.page_tables()[0].buffer, t.page_tables[0].buffer);
    EXPECT_EQ(p.page_tables()[0].stride, t.page_tables[0].stride);
    EXPECT_EQ(p.page_tables()[0].width, t.page_tables[0].width);
    EXPECT_EQ(p.fill(Fill::Slot)->buffer, t.slot_fills[0].buffer);
  }
}

TEST(StateTables, PerSeqLineTablesOfEveryShape) {
  const Manifest m = toy_with_conv(R"({
    "lines": {"dtype": "i32", "shape": [4], "kind": "input", "domain": {"index_into": "conv", "stride": 256}},
    "lines_by_seq": {"dtype": "i32", "shape": [2, "seqs"], "kind": "input",
                     "domain": {"index_into": "conv", "stride": 512}},
    "lines_wide": {"dtype": "i64", "shape": [1, "seqs", 3], "kind": "input",
                   "domain": {"index_into": "conv", "stride": 1024}}
  })");
  const StateTables t = state_tables(m);
  EXPECT_TRUE(t.violations.empty()) << testing::describe(t.violations);
  ASSERT_EQ(t.line_tables.size(), 3u);  // buffer-name order
  const LineTable& one = t.line_tables[0];
  EXPECT_EQ(one.buffer, "lines");
  EXPECT_EQ(one.state, "conv");
  EXPECT_EQ(one.stride, 256u);
  EXPECT_EQ(one.lines_per_slot, 4u);
  ASSERT_EQ(one.shape.size(), 1u);
  EXPECT_EQ(one.shape[0].value, 4u);
  const LineTable& by_seq = t.line_tables[1];
  EXPECT_EQ(by_seq.buffer, "lines_by_seq");
  EXPECT_EQ(by_seq.lines_per_slot, 2u);
  ASSERT_EQ(by_seq.shape.size(), 2u);
  EXPECT_EQ(by_seq.shape[1].var, "seqs");
  const LineTable& wide = t.line_tables[2];
  EXPECT_EQ(wide.buffer, "lines_wide");
  EXPECT_EQ(wide.dtype, DType::I64);
  EXPECT_EQ(wide.lines_per_slot, 1u);
  ASSERT_EQ(wide.shape.size(), 3u);
  EXPECT_EQ(wide.shape[2].value, 3u);
  // The toy's paged state keeps its slot fill beside the per-seq state's tables.
  ASSERT_EQ(t.slot_fills.size(), 1u);
  EXPECT_EQ(t.slot_fills[0].state, "cache");
  EXPECT_TRUE(t.page_tables.empty());
}

TEST(StateTables, ImpossibleShapesAreFoundAndTheTablesStillListed) {
  const Manifest m = toy_with_conv(R"({
    "a_bad_stride": {"dtype": "i32", "shape": [4], "kind": "input", "domain": {"index_into": "conv", "stride": 300}},
    "b_bad_rank": {"dtype": "i32", "shape": [1, 2, 3, 4], "kind": "input",
                   "domain": {"index_into": "conv", "stride": 256}},
    "c_cube_pages": {"dtype": "i32", "shape": ["seqs", 4, 4], "kind": "input",
                     "domain": {"index_into": "cache", "stride": 16}}
  })");
  const StateTables t = state_tables(m);
  EXPECT_EQ(t.line_tables.size(), 2u);
  ASSERT_EQ(t.page_tables.size(), 1u);
  EXPECT_EQ(t.page_tables[0].width, 4u);  // the innermost extent
  EXPECT_EQ(violation_lines(t),
            (std::vector<std::string>{
                "buffers.a_bad_stride.domain.stride: line stride must divide the state's bytes_per_seq [P.table_shape]",
                "buffers.b_bad_rank.shape: a line table is [lines], [lines, seqs] or [lines, seqs, w] [P.table_shape]",
                "buffers.c_cube_pages.shape: a page table is [seqs] or [seqs, entries] [P.table_shape]"}));
}

TEST(StateTables, FixedStatesBuffersAndOtherFillsAreNotTables) {
  Json j = testing::load_fixture("toy");
  j["states"]["fixed"] = Json::parse(R"({"bytes": 4096})");
  j["buffers"]["fixed_index"] =
      Json::parse(R"({"dtype": "i32", "shape": [4], "kind": "input", "domain": {"index_into": "fixed"}})");
  j["buffers"]["pos_into_cache"] = Json::parse(
      R"({"dtype": "i64", "shape": ["tokens"], "kind": "input", "fill": "position", "domain": {"index_into": "cache"}})");
  const StateTables t = state_tables(parse_manifest(j.dump(), "toy+fixed"));
  EXPECT_TRUE(t.page_tables.empty());
  EXPECT_TRUE(t.line_tables.empty());
  ASSERT_EQ(t.slot_fills.size(), 1u);
  EXPECT_EQ(t.slot_fills[0].buffer, "slots");
}

}  // namespace
}  // namespace kern::core
