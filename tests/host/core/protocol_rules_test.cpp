// One verifier-clean manifest per serving-protocol rule: the finding names the rule and path.
#include <gtest/gtest.h>

#include "kern/base/error.hpp"
#include "kern/core/protocol.hpp"
#include "verify_fixtures.hpp"

namespace kern::core {
namespace {

using testing::describe;

struct PCase {
  std::string name, base, patch, rule, path;
  bool exact = true;  // false: other findings may accompany this one
};

std::vector<PCase> pcases() {
  return {
      {"fill_unique", "tp2",
       R"([{"op":"replace","path":"/buffers/flag/fill","value":"tokens"},{"op":"replace","path":"/buffers/flag/shape","value":["seqs"]}])",
       "P.fill_unique", "buffers.next.fill"},
      {"cu_seqlens_shape", "qwen", R"([{"op":"replace","path":"/buffers/cu_seqlens/shape","value":[18]}])",
       "P.fill_shape", "buffers.cu_seqlens.shape"},
      {"tokens_width_not_rows", "qwen", R"([{"op":"replace","path":"/buffers/next_token/shape","value":["seqs",3]}])",
       "P.fill_shape", "buffers.next_token.shape"},
      {"slot_shape", "qwen", R"([{"op":"replace","path":"/buffers/positions/shape","value":["seqs"]}])", "P.fill_shape",
       "buffers.positions.shape"},
      {"error_shape", "tp2", R"([{"op":"replace","path":"/buffers/flag/shape","value":["seqs"]}])", "P.fill_shape",
       "buffers.flag.shape"},
      {"count_without_tokens", "toy", R"([{"op":"replace","path":"/buffers/next/fill","value":"count"}])", "P.count",
       "buffers.next.fill"},
      {"same_shape_twice", "qwen", R"([{"op":"copy","from":"/programs/decode","path":"/programs/decode2"}])",
       "P.shape_unique", "programs.decode2.batch"},
      {"groups_beyond_rows", "qwen", R"([{"op":"replace","path":"/programs/decode/batch/groups","value":300}])",
       "P.capacity", "programs.decode.batch", false},
      {"groups_beyond_group_axis", "qwen", R"([{"op":"replace","path":"/programs/decode/batch/groups","value":32}])",
       "P.capacity", "programs.decode.batch.groups"},
      {"span_needs_span_at", "qwen",
       R"([{"op":"add","path":"/vars/run","value":{"max":4}},{"op":"add","path":"/programs/decode/batch/span","value":"run"}])",
       "P.span", "programs.decode.batch.span"},
      {"span_on_var_rows", "qwen",
       R"([{"op":"add","path":"/vars/run","value":{"max":4}},{"op":"add","path":"/programs/prefill/batch/span","value":"run"}])",
       "P.span", "programs.prefill.batch.span", false},
      {"context_is_row_var", "qwen", R"([{"op":"add","path":"/programs/decode/batch/context","value":"tokens"}])",
       "P.context", "programs.decode.batch.context"},
      {"two_context_vars", "qwen",
       R"([{"op":"add","path":"/vars/ctx","value":{"max":64}},{"op":"add","path":"/vars/ctx2","value":{"max":64}},
           {"op":"add","path":"/programs/decode/batch/context","value":"ctx"},{"op":"add","path":"/programs/prefill/batch/context","value":"ctx2"}])",
       "P.context", "programs.prefill.batch.context"},
      {"no_batch_program", "toy", R"([{"op":"remove","path":"/programs/step/batch"}])", "P.batch", "programs"},
      {"no_token_fill", "toy", R"([{"op":"remove","path":"/buffers/ids/fill"}])", "P.token", "buffers"},
      {"no_row_axis", "tp2",
       R"([{"op":"remove","path":"/buffers/slots/fill"},{"op":"remove","path":"/buffers/ids/fill"}])", "P.axes",
       "buffers", false},
      {"mixed_without_chunk_group", "qwen",
       R"([{"op":"add","path":"/vars/dseqs","value":{"max":16}},
           {"op":"add","path":"/programs/mixed","value":{"batch":{"groups":16,"rows":"tokens","decode":"dseqs"},"calls":[]}},
           {"op":"copy","from":"/programs/decode/calls","path":"/programs/mixed/calls"}])",
       "P.mixed", "programs.mixed.batch.decode"},
      {"mixed_writes_no_tokens", "qwen",
       R"([{"op":"add","path":"/vars/dseqs","value":{"max":8}},
           {"op":"add","path":"/programs/mixed","value":{"batch":{"groups":12,"rows":"tokens","decode":"dseqs"},"calls":[]}}])",
       "P.mixed", "programs.mixed.batch.decode"},
      {"mixed_decode_is_group_axis", "qwen",
       R"([{"op":"add","path":"/programs/mixed","value":{"batch":{"groups":12,"rows":"tokens","decode":"seqs"},"calls":[]}},
           {"op":"copy","from":"/programs/decode/calls","path":"/programs/mixed/calls"}])",
       "P.mixed", "programs.mixed.batch.decode", false},
      {"packed_rows_not_row_axis", "qwen",
       R"([{"op":"add","path":"/vars/chunk_rows","value":{"max":64}},
           {"op":"replace","path":"/programs/prefill/batch","value":{"groups":4,"rows":"chunk_rows","packed":true}}])",
       "P.packed", "programs.prefill.batch.packed", false},
      {"packed_emits_tokens", "qwen",
       R"([{"op":"replace","path":"/programs/prefill/batch","value":{"groups":4,"rows":"tokens","packed":true}}])",
       "P.packed", "programs.prefill.batch.packed", false},
      {"page_table_rank", "qwen", R"([{"op":"replace","path":"/buffers/block_table/shape","value":["seqs",4,4]}])",
       "P.table_shape", "buffers.block_table.shape"},
  };
}

class ProtocolRule : public ::testing::TestWithParam<PCase> {};

TEST_P(ProtocolRule, FindsIt) {
  const PCase& c = GetParam();
  Verified v = verify(testing::parse_patched(c.base, c.patch));
  const auto vs = protocol_violations(v);
  if (c.exact) {
    ASSERT_EQ(vs.size(), 1u) << describe(vs);
  }
  bool found = false;
  for (const auto& x : vs) found |= x.rule == c.rule && x.path == c.path;
  EXPECT_TRUE(found) << "want " << c.rule << " at " << c.path << ", got:\n" << describe(vs);
  EXPECT_THROW(check_protocol(v), Error);
}

INSTANTIATE_TEST_SUITE_P(Rules, ProtocolRule, ::testing::ValuesIn(pcases()),
                         [](const ::testing::TestParamInfo<PCase>& i) { return i.param.name; });

TEST(ProtocolRules, TokenFillNotNeededPastStageZero) {
  Verified v = verify(testing::parse_patched(
      "toy",
      R"([{"op":"remove","path":"/buffers/ids/fill"},{"op":"add","path":"/cut","value":{"id":"pp","stage":1,"stages":2}}])"));
  EXPECT_TRUE(protocol_violations(v).empty()) << describe(protocol_violations(v));
}

TEST(ProtocolRules, CheckProtocolListsEveryFinding) {
  Verified v = verify(testing::parse_patched(
      "toy", R"([{"op":"remove","path":"/programs/step/batch"},{"op":"remove","path":"/buffers/ids/fill"}])"));
  try {
    check_protocol(v);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::ManifestVerify);
    EXPECT_EQ(e.message(), "2 protocol violations");
    ASSERT_EQ(e.details().size(), 2u);
  }
}

}  // namespace
}  // namespace kern::core
