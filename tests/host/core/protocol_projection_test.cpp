// The serving-protocol projection of the example manifests: axes, fills, tables, forward
// selection, chunk, var tables.
#include <gtest/gtest.h>

#include "kern/base/error.hpp"
#include "kern/core/protocol.hpp"
#include "kern/base/file.hpp"
#include "verify_fixtures.hpp"

#include <functional>

namespace kern::core {
namespace {

Protocol project(const std::string& base, const std::string& patch = "") {
  return check_protocol(verify(testing::parse_patched(base, patch)));
}

TEST(ProtocolProjection, QwenAxesFillsAndTables) {
  const Protocol p = project("qwen");
  EXPECT_EQ(p.row_var(), "tokens");
  EXPECT_EQ(p.group_var(), "seqs");
  EXPECT_EQ(p.tray_var(), "");
  EXPECT_EQ(p.span_var(), "");
  ASSERT_NE(p.fill(Fill::Slot), nullptr);
  EXPECT_EQ(p.fill(Fill::Slot)->buffer, "slot_mapping");
  EXPECT_EQ(p.fill(Fill::Slot)->dtype, DType::I64);
  EXPECT_EQ(p.fill(Fill::Slot)->axis, "tokens");
  const FillSlot* cu = p.fill(Fill::CuSeqlens);
  ASSERT_NE(cu, nullptr);
  EXPECT_EQ(cu->axis, "");
  EXPECT_EQ(cu->extent, 17u);
  EXPECT_EQ(p.fill(Fill::Count), nullptr);
  EXPECT_EQ(p.fill(Fill::Tokens)->buffer, "next_token");
  ASSERT_EQ(p.page_tables().size(), 1u);
  EXPECT_EQ(p.page_tables()[0].buffer, "block_table");
  EXPECT_EQ(p.page_tables()[0].state, "kv");
  EXPECT_EQ(p.page_tables()[0].stride, 16u);
  EXPECT_EQ(p.page_tables()[0].width, 16u);
  EXPECT_EQ(p.page_tables()[0].axis, "seqs");
  EXPECT_TRUE(p.line_tables().empty());
  EXPECT_EQ(p.once_programs(), std::vector<std::string>{"load"});
  EXPECT_TRUE(p.derive_programs().empty());
}

TEST(ProtocolProjection, ForwardPicksTheTightestCoveringProgram) {
  const Protocol p = project("qwen");
  auto prefill = p.forward(1, 100);
  ASSERT_TRUE(prefill);
  EXPECT_EQ(prefill->program, "prefill");
  EXPECT_EQ(prefill->rows_var, "tokens");
  auto decode = p.forward(5, 1);
  ASSERT_TRUE(decode);
  EXPECT_EQ(decode->program, "decode");
  EXPECT_TRUE(decode->graph);
  EXPECT_TRUE(decode->emits_tokens);
  EXPECT_EQ(decode->tokens_per_group, 1u);
  EXPECT_EQ(decode->count, "");
  EXPECT_EQ(p.forward(16, 1)->program, "decode");
  // (1, 1): both cover it; prefill's groups bound (1) is tighter than decode's (16).
  EXPECT_EQ(p.forward(1, 1)->program, "prefill");
  EXPECT_FALSE(p.forward(17, 1));
  EXPECT_FALSE(p.forward(2, 2));
  EXPECT_FALSE(p.forward(1, 257));
  EXPECT_FALSE(p.forward(0, 1));
  ASSERT_TRUE(p.chunk());
  EXPECT_EQ(p.chunk()->program, "prefill");
  EXPECT_FALSE(p.spanned(1));
}

TEST(ProtocolProjection, ExactRowsWinATieOnGroups) {
  const Protocol p = project(
      "qwen", R"([{"op":"add","path":"/programs/decode1","value":{"batch":{"groups":1,"rows":1},"calls":[]}}])");
  EXPECT_EQ(p.forward(1, 1)->program, "decode1");
  EXPECT_EQ(p.forward(1, 2)->program, "prefill");
  EXPECT_EQ(p.forward(2, 1)->program, "decode");
  EXPECT_FALSE(p.forward(1, 1)->emits_tokens);
}

TEST(ProtocolProjection, VarsForOneCall) {
  const Protocol p = project("qwen");
  auto d = *p.forward(4, 1);
  auto v = p.vars(d, 4, 1, 100);
  EXPECT_EQ(v.at("tokens"), 4u);
  EXPECT_EQ(v.at("seqs"), 4u);
  auto c = *p.chunk();
  v = p.vars(c, 1, 200, 900);
  EXPECT_EQ(v.at("tokens"), 200u);
  EXPECT_EQ(v.at("seqs"), 1u);
  EXPECT_THROW(p.vars(d, 17, 1, 1), Error);
  EXPECT_THROW(p.vars(d, 4, 2, 1), Error);
  EXPECT_THROW(p.vars(c, 1, 257, 1), Error);
  try {
    p.vars(d, 0, 1, 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Api);
  }
}

TEST(ProtocolProjection, ContextAndSpanVars) {
  const std::string clean = R"([
    {"op":"add","path":"/vars/ctx","value":{"max":4096}},
    {"op":"add","path":"/vars/run","value":{"max":8}},
    {"op":"add","path":"/programs/prefill/batch/context","value":"ctx"},
    {"op":"add","path":"/ops/span_probe","value":{"params":["in buffer<i32>","i32","i32"],"impl":{"launches":[{"module":"argmax","entry":"probe","block":[32,1,1],"grid":["run",1,1]}]}}},
    {"op":"add","path":"/buffers/span_first","value":{"dtype":"i32","shape":[1],"kind":"input","fill":"span_at"}},
    {"op":"add","path":"/programs/decode_span","value":{"batch":{"groups":16,"rows":1,"span":"run"},"calls":[
       {"op":"span_probe","args":[{"buf":"span_first"},{"var":"run"},{"var":"ctx"}]}]}}
  ])";
  const Protocol p = project("qwen", clean);
  EXPECT_EQ(p.span_var(), "run");
  EXPECT_EQ(p.context_var(), "ctx");
  auto s = p.spanned(3);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->program, "decode_span");
  EXPECT_EQ(p.forward(3, 1)->program, "decode");  // span programs are not plain forwards
  auto v = p.vars(*s, 3, 1, 700, 5);
  EXPECT_EQ(v.at("tokens"), 7u);  // two single-row groups + one run of 5
  EXPECT_EQ(v.at("run"), 5u);
  EXPECT_EQ(v.at("ctx"), 700u);
  EXPECT_THROW(p.vars(*s, 3, 1, 5000, 5), Error);  // context beyond its var
}

// A mixed step (batch.decode, kern's extension): decode groups first, then chunk groups, every row
// of the call on the row axis. It is neither a plain forward nor the chunk program.
const char* const kMixed = R"([{"op":"add","path":"/vars/dseqs","value":{"max":8}},
    {"op":"add","path":"/programs/mixed","value":{"batch":{"groups":12,"rows":"tokens","decode":"dseqs"},"calls":[]}},
    {"op":"copy","from":"/programs/decode/calls","path":"/programs/mixed/calls"}])";

TEST(ProtocolProjection, MixedStep) {
  const Protocol p = project("qwen", kMixed);
  auto m = p.mixed();
  ASSERT_TRUE(m);
  EXPECT_EQ(m->program, "mixed");
  EXPECT_EQ(m->decode_var, "dseqs");
  EXPECT_EQ(m->decode_groups, 8u);
  EXPECT_EQ(m->groups, 12u);
  EXPECT_TRUE(m->emits_tokens);
  EXPECT_EQ(p.forward(5, 1)->program, "decode");
  EXPECT_EQ(p.forward(1, 100)->program, "prefill");
  EXPECT_EQ(p.chunk()->program, "prefill");
  EXPECT_FALSE(project("qwen").mixed());
  const auto v = p.mixed_vars(*m, 5, 2, 200, 900);
  EXPECT_EQ(v.at("tokens"), 200u);
  EXPECT_EQ(v.at("seqs"), 7u);
  EXPECT_EQ(v.at("dseqs"), 5u);
  EXPECT_EQ(p.mixed_vars(*m, 8, 4, 12, 1).at("seqs"), 12u);
  EXPECT_THROW(p.mixed_vars(*m, 0, 1, 10, 1), Error);    // no decode group: the chunk program's step
  EXPECT_THROW(p.mixed_vars(*m, 9, 1, 20, 1), Error);    // beyond the decode var
  EXPECT_THROW(p.mixed_vars(*m, 8, 5, 20, 1), Error);    // beyond the groups bound
  EXPECT_THROW(p.mixed_vars(*m, 3, 0, 20, 1), Error);    // no chunk
  EXPECT_THROW(p.mixed_vars(*m, 3, 2, 4, 1), Error);     // fewer rows than groups
  EXPECT_THROW(p.mixed_vars(*m, 3, 2, 257, 1), Error);   // beyond the row axis
  EXPECT_THROW(p.mixed_vars(*p.chunk(), 1, 1, 4, 1), Error);  // not a mixed program
}

// A packed prefill program (batch.packed, kern's extension): up to `groups` chunks of their own
// lengths in one call, every row on the row axis: the chunk program.
TEST(ProtocolProjection, PackedChunks) {
  const Protocol plain = project("qwen");
  EXPECT_FALSE(plain.chunk()->packed);
  EXPECT_THROW(plain.chunk_vars(*plain.chunk(), 2, 20, 20), Error);  // one chunk per call unless packed
  EXPECT_EQ(plain.chunk_vars(*plain.chunk(), 1, 20, 300).at("tokens"), 20u);
  const Protocol p = project("qwen", R"([{"op":"replace","path":"/programs/prefill/batch","value":{"groups":4,"rows":"tokens","packed":true}},
      {"op":"remove","path":"/programs/prefill/calls/23"}])");
  auto c = p.chunk();
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->packed);
  EXPECT_EQ(c->groups, 4u);
  EXPECT_EQ(c->rows, 256u);
  EXPECT_EQ(p.forward(1, 100)->program, "prefill");  // one chunk is a plain call of the packed program
  const auto v = p.chunk_vars(*c, 3, 200, 900);
  EXPECT_EQ(v.at("tokens"), 200u);
  EXPECT_EQ(v.at("seqs"), 3u);
  EXPECT_EQ(p.chunk_vars(*c, 1, 256, 1).at("tokens"), 256u);
  EXPECT_THROW(p.chunk_vars(*c, 0, 10, 1), Error);    // no chunk
  EXPECT_THROW(p.chunk_vars(*c, 5, 100, 1), Error);   // beyond the groups bound
  EXPECT_THROW(p.chunk_vars(*c, 3, 2, 1), Error);     // fewer rows than chunks
  EXPECT_THROW(p.chunk_vars(*c, 2, 257, 1), Error);   // beyond the row axis
  EXPECT_THROW(p.chunk_vars(*p.forward(2, 1), 1, 1, 1), Error);  // the decode program is no chunk program
}

TEST(ProtocolProjection, DerivePrograms) {
  const Protocol p = project("toy_derive");
  EXPECT_EQ(p.derive_programs(), std::vector<std::string>{"convert"});
  EXPECT_EQ(p.once_programs(), std::vector<std::string>{"load"});
  EXPECT_EQ(p.chunk()->program, "step");
}

TEST(ProtocolProjection, Tp2) {
  const Protocol p = project("tp2");
  EXPECT_EQ(p.fill(Fill::Error)->buffer, "flag");
  EXPECT_EQ(p.forward(3, 1)->program, "decode");
  EXPECT_FALSE(p.chunk());
}

}  // namespace
}  // namespace kern::core

namespace kern::core {
namespace {

// The driver's sampling fixture: a verifier-clean manifest with every sampling role.
Json sampling_fixture() {
  return Json::parse(read_file(std::string(KERN_SOURCE_DIR) + "/tests/host/driver/fixtures/driver-toy-sampling.json"));
}

// The protocol findings of the fixture after `edit`, as "rule path" lines (empty: it passes).
std::string sampling_findings(const std::function<void(Json&)>& edit) {
  Json doc = sampling_fixture();
  edit(doc);
  const Verified v = verify(parse_manifest(doc.dump()));
  try {
    check_protocol(v);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ProtocolSampling, RolesProjectWithTheirWidths) {
  const Verified v = verify(parse_manifest(sampling_fixture().dump()));
  const Protocol p = check_protocol(v);
  ASSERT_NE(p.fill(Fill::Sampling), nullptr);
  EXPECT_EQ(p.fill(Fill::Sampling)->width, kSamplingWidth);
  EXPECT_EQ(p.fill(Fill::SamplingKeys)->dtype, DType::I64);
  EXPECT_EQ(p.fill(Fill::History)->width, 16u);
  EXPECT_EQ(p.fill(Fill::Logprobs)->width, 1 + kMaxLogprobs);
  EXPECT_EQ(p.fill(Fill::LogprobIds)->axis, "seqs");
  EXPECT_TRUE(p.tray_var().empty());  // [groups, literal] shapes add no axis
}

TEST(ProtocolSampling, ShapesOtherThanTheRolesAreRefused) {
  EXPECT_NE(sampling_findings([](Json& d) { d["buffers"]["samp"]["shape"] = Json::array({"seqs", 4}); })
                .find("buffers.samp.shape: fill 'sampling' is shaped [groups, 8]"),
            std::string::npos);
  EXPECT_NE(sampling_findings([](Json& d) { d["buffers"]["hist"]["shape"] = Json::array({"seqs", "tokens"}); })
                .find("buffers.hist.shape: fill 'history' is shaped [groups, h] with a literal h"),
            std::string::npos);
  EXPECT_NE(sampling_findings([](Json& d) { d["buffers"]["lp_ids"]["shape"] = Json::array({"seqs", 21}); })
                .find("fill 'logprob_ids' is shaped [groups, 20]"),
            std::string::npos);
  EXPECT_EQ(sampling_findings([](Json&) {}), "");
}

TEST(ProtocolSampling, RoleDtypesAreChecked) {
  Json doc = sampling_fixture();
  doc["buffers"]["samp"]["dtype"] = "i32";
  doc["ops"]["step"]["params"][10] = "in buffer<i32>";
  const std::vector<Violation> vs = check(parse_manifest(doc.dump()));
  ASSERT_EQ(vs.size(), 1u) << testing::describe(vs);
  EXPECT_EQ(vs[0].rule, "R4.fill");
  EXPECT_EQ(vs[0].path, "buffers.samp.fill");
  EXPECT_NE(vs[0].message.find("fill 'sampling' on a i32 buffer"), std::string::npos) << vs[0].message;
  doc = sampling_fixture();
  doc["buffers"]["lp_ids"]["dtype"] = "i64";
  doc["ops"]["step"]["params"][14] = "out buffer<i64>";
  const std::vector<Violation> ws = check(parse_manifest(doc.dump()));
  ASSERT_EQ(ws.size(), 1u) << testing::describe(ws);
  EXPECT_EQ(ws[0].path, "buffers.lp_ids.fill");
}

}  // namespace
}  // namespace kern::core
