// One manifest per verifier rule: a valid fixture with one small mutation must yield exactly
// the expected violation (rule id and JSON path).
#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "verify_fixtures.hpp"

namespace kern::core {
namespace {

using testing::describe;
using testing::parse_patched;

struct Case {
  std::string name;
  std::string base;   // fixture
  std::string patch;  // RFC 6902 JSON patch applied to the fixture
  std::string rule;
  std::string path;
  std::size_t count = 1;                      // violations expected; all must carry `rule`, the first `path`
  std::function<void(Manifest&)> typed = {};  // applied after parsing (forms the parser refuses)
};

std::string P(const std::string& pre, const std::string& name, const std::string& post) {
  return json_path_key(pre, name) + post;
}

const std::string kSilu = R"({"op":"silu_mul","args":[{"buf":"gate_up"},{"buf":"act"},{"var":"tokens"}]})";
const std::string kPack = "ops.attn_prefill.impl.launches[0].args[0].pack";
const std::string kPackJ = "/ops/attn_prefill/impl/launches/0/args/0/pack";
const std::string kTm = kPackJ + "/fields/0/tensormap";
// Makes the pack 256 bytes so a second field fits.
std::string pack256(const std::string& extra) {
  return R"([{"op":"replace","path":"/ops/attn_prefill/impl/launches/0/params/0","value":"bytes<256>"},)"
         R"({"op":"replace","path":")" +
         kPackJ + R"(/size","value":256})" + extra + "]";
}
std::string add_field(const std::string& field) {
  return R"(,{"op":"add","path":")" + kPackJ + R"(/fields/-","value":)" + field + "}";
}
std::string tm(const std::string& key, const std::string& value) {
  return R"([{"op":"replace","path":")" + kTm + "/" + key + R"(","value":)" + value + "}]";
}
std::string add_call(const std::string& call) {
  return R"([{"op":"add","path":"/programs/prefill/calls/-","value":)" + call + "}]";
}
std::string silu_with(const std::string& a0, const std::string& a1, const std::string& a2) {
  return R"({"op":"silu_mul","args":[)" + a0 + "," + a1 + "," + a2 + "]}";
}

std::vector<Case> cases() {
  const std::string call24 = "programs.prefill.calls[24]";
  return {
      // R1-R3
      {"schema_version", "qwen", "", "R1.schema_version", "schema_version", 1,
       [](Manifest& m) { m.schema_version = 4; }},
      {"var_max", "qwen", "", "R2.var_max", "vars.seqs.max", 1, [](Manifest& m) { m.vars["seqs"].max = 0; }},
      {"state_two_sizes", "qwen", R"([{"op":"add","path":"/states/kv/bytes","value":64}])", "R3.state_size",
       "states.kv"},
      {"host_state_strides", "toy", "", "R3.host_state", "states.cache.host.strides", 1,
       [](Manifest& m) {
         m.states["cache"] = State{0, 0, 0, HostState{DType::U8, {0, 16}, {16}}};
       }},
      {"host_state_inner_open", "toy", "", "R3.host_state", "states.cache.host.shape[1]", 1,
       [](Manifest& m) {
         m.states["cache"] = State{0, 0, 0, HostState{DType::U8, {16, 0}, {16, 1}}};
       }},
      // R4 buffers
      {"shape_undeclared_var", "qwen", R"([{"op":"replace","path":"/buffers/act/shape/0","value":"nope"}])", "R4.shape",
       "buffers.act.shape[0]"},
      {"shape_zero_extent", "qwen", R"([{"op":"replace","path":"/buffers/act/shape/1","value":0}])", "R4.shape",
       "buffers.act.shape[1]"},
      {"size_overflow", "qwen", R"([{"op":"replace","path":"/buffers/logits/shape/1","value":4611686018427387904}])",
       "R4.size", "buffers.logits.shape"},
      {"fill_on_workspace", "qwen", R"([{"op":"add","path":"/buffers/hidden/fill","value":"token"}])", "R4.fill",
       "buffers.hidden.fill"},
      {"fill_output_role_on_input", "qwen", R"([{"op":"replace","path":"/buffers/positions/fill","value":"count"}])",
       "R4.fill", "buffers.positions.fill"},
      {"fill_on_bf16", "toy", R"([{"op":"add","path":"/buffers/inp/fill","value":"position"}])", "R4.fill",
       "buffers.inp.fill"},
      {"domain_float_on_int", "qwen", R"([{"op":"replace","path":"/buffers/seq_lens/domain/min","value":1.5}])",
       "R4.domain", "buffers.seq_lens.domain.min"},
      {"domain_index_target", "qwen",
       R"([{"op":"replace","path":"/buffers/slot_mapping/domain/index_into","value":"nope"}])", "R4.domain",
       "buffers.slot_mapping.domain.index_into"},
      {"domain_index_and_min", "qwen", R"([{"op":"add","path":"/buffers/block_table/domain/min","value":0}])",
       "R4.domain", "buffers.block_table.domain"},
      {"domain_monotone_2d", "qwen", R"([{"op":"add","path":"/buffers/block_table/domain/monotone","value":true}])",
       "R4.domain", "buffers.block_table.domain.monotone"},
      {"domain_min_above_max", "qwen", R"([{"op":"replace","path":"/buffers/seq_lens/domain/max","value":0}])",
       "R4.domain", "buffers.seq_lens.domain"},
      {"domain_expr_unknown_var", "qwen",
       R"([{"op":"replace","path":"/buffers/cu_seqlens/domain/max","value":"nope"}])", "R4.domain",
       "buffers.cu_seqlens.domain.max"},
      {"bind_empty", "qwen", R"([{"op":"replace","path":"/buffers/final_norm_w/bind","value":[]}])", "R4.bind",
       "buffers.final_norm_w.bind"},
      {"bind_empty_range", "qwen", R"([{"op":"replace","path":"/buffers/lm_head_w/bind/0/rows","value":[5,5]}])",
       "R4.bind", "buffers.lm_head_w.bind[0].rows"},
      {"bind_interleave_with_rows", "qwen",
       R"([{"op":"add","path":"/buffers/layers.0.gate_up_w/bind/0/rows","value":[0,1]}])", "R4.bind",
       P("buffers", "layers.0.gate_up_w", ".bind[0].interleave")},
      {"bind_on_workspace", "qwen", R"([{"op":"add","path":"/buffers/hidden/bind","value":[{"tensor":"x"}]}])",
       "R4.bind", "buffers.hidden.bind"},
      {"host_placement_workspace", "qwen", R"([{"op":"add","path":"/buffers/hidden/placement","value":"host"}])",
       "R4.placement", "buffers.hidden.placement"},
      // R5 modules
      {"sha256_short", "qwen", R"([{"op":"replace","path":"/modules/argmax/sha256","value":"abc"}])", "R5.sha256",
       "modules.argmax.sha256"},
      {"source_scheme", "qwen",
       R"([{"op":"replace","path":"/modules/argmax/source","value":"ftp://host/argmax.cubin"}])", "R5.source",
       "modules.argmax.source"},
      {"source_hf_dotdot", "qwen",
       R"([{"op":"replace","path":"/modules/activation/source","value":"hf:org/../activation.so"}])", "R5.source",
       "modules.activation.source"},
      // R6 launches
      {"launch_unknown_module", "qwen",
       R"([{"op":"replace","path":"/ops/rms_norm/impl/launches/0/module","value":"nope"}])", "R6.module",
       "ops.rms_norm.impl.launches[0].module"},
      {"extern_unknown", "qwen",
       R"([{"op":"replace","path":"/ops/gemm/impl/launches/0/entry","value":"extern:cublaslt_nope"}])", "R6.extern",
       "ops.gemm.impl.launches[0].entry"},
      {"extern_arity", "qwen",
       R"([{"op":"add","path":"/ops/gemm/impl/launches/0/params","value":["in buffer<bf16>","in buffer<bf16>","out buffer<bf16>","i32","i32"]},
           {"op":"add","path":"/ops/gemm/impl/launches/0/args","value":[{"param":0},{"param":1},{"param":2},{"param":3},{"param":4}]}])",
       "R6.extern", "ops.gemm.impl.launches[0].params"},
      {"extern_types", "qwen",
       R"([{"op":"replace","path":"/ops/gemm/impl/launches/0/entry","value":"extern:cublas_bf16_tn_f32"}])",
       "R6.extern", "ops.gemm.impl.launches[0]"},
      // The parser already refuses algo on kernel launches and pdl/cluster on externs; the
      // verifier still checks typed manifests built in code.
      {"algo_on_kernel", "qwen", "", "R6.extern", "ops.embedding.impl.launches[0].algo", 1,
       [](Manifest& m) { m.ops["embedding"].impl.launches[0].algo = Algo{}; }},
      // cuBLAS chooses its own algorithm: no `algo` on cublas_bf16_tn_f32 (its bf16 c is the second)
      {"algo_on_cublas_gemm_ex", "qwen", "", "R6.extern", "ops.gemm.impl.launches[0].algo", 2,
       [](Manifest& m) {
         m.ops["gemm"].impl.launches[0].entry = "extern:cublas_bf16_tn_f32";
         m.ops["gemm"].impl.launches[0].algo = Algo{};
       }},
      {"algo_m_on_kernel", "qwen", "", "R6.extern", "ops.embedding.impl.launches[0].algo_m", 1,
       [](Manifest& m) { m.ops["embedding"].impl.launches[0].algo_m = 16; }},
      {"algo_m_zero", "qwen", R"([{"op":"add","path":"/ops/gemm/impl/launches/0/algo_m","value":0}])", "R6.extern",
       "ops.gemm.impl.launches[0].algo_m"},
      {"algo_m_with_algo", "qwen",
       R"([{"op":"add","path":"/ops/gemm/impl/launches/0/algo_m","value":64},
           {"op":"add","path":"/ops/gemm/impl/launches/0/algo","value":{"id":1,"tile":0,"stages":0,"split_k":1,"reduction":0,"swizzle":0,"custom":0,"inner_shape":0,"cluster_shape":0}}])",
       "R6.extern", "ops.gemm.impl.launches[0].algo_m"},
      {"algo_candidate_on_kernel", "qwen", "", "R6.extern", "ops.embedding.impl.launches[0].algo_candidate", 1,
       [](Manifest& m) { m.ops["embedding"].impl.launches[0].algo_candidate = 2; }},
      {"algo_candidate_with_algo", "qwen",
       R"([{"op":"add","path":"/ops/gemm/impl/launches/0/algo_candidate","value":3},
           {"op":"add","path":"/ops/gemm/impl/launches/0/algo","value":{"id":1,"tile":0,"stages":0,"split_k":1,"reduction":0,"swizzle":0,"custom":0,"inner_shape":0,"cluster_shape":0}}])",
       "R6.extern", "ops.gemm.impl.launches[0].algo_candidate"},
      {"algo_per_m_on_kernel", "qwen", "", "R6.extern", "ops.embedding.impl.launches[0].algo_per_m", 1,
       [](Manifest& m) { m.ops["embedding"].impl.launches[0].algo_per_m = true; }},
      {"algo_per_m_with_algo", "qwen",
       R"([{"op":"add","path":"/ops/gemm/impl/launches/0/algo_per_m","value":true},
           {"op":"add","path":"/ops/gemm/impl/launches/0/algo","value":{"id":1,"tile":0,"stages":0,"split_k":1,"reduction":0,"swizzle":0,"custom":0,"inner_shape":0,"cluster_shape":0}}])",
       "R6.extern", "ops.gemm.impl.launches[0].algo_per_m"},
      {"extern_geometry", "qwen", "", "R6.extern", "ops.gemm.impl.launches[0]", 1,
       [](Manifest& m) {
         m.ops["gemm"].impl.launches[0].block = {32, 1, 1};
       }},
      {"cluster_on_extern", "qwen", "", "R12.cluster", "ops.gemm.impl.launches[0].cluster", 1,
       [](Manifest& m) {
         m.ops["gemm"].impl.launches[0].cluster = std::array<std::uint32_t, 3>{1, 1, 1};
       }},
      {"cooperative_on_extern", "qwen", "", "R12.cooperative", "ops.gemm.impl.launches[0].cooperative", 1,
       [](Manifest& m) { m.ops["gemm"].impl.launches[0].cooperative = true; }},
      {"module_less_kernel", "qwen", "", "R6.module", "ops.rms_norm.impl.launches[0]", 1,
       [](Manifest& m) { m.ops["rms_norm"].impl.launches[0].module.clear(); }},
      {"moduled_extern", "qwen", "", "R6.module", "ops.gemm.impl.launches[0].module", 1,
       [](Manifest& m) { m.ops["gemm"].impl.launches[0].module = "argmax"; }},
      {"block_too_wide", "qwen",
       R"([{"op":"replace","path":"/ops/embedding/impl/launches/0/block","value":[2048,1,1]}])", "R6.block",
       "ops.embedding.impl.launches[0].block"},
      {"block_zero", "qwen", R"([{"op":"replace","path":"/ops/embedding/impl/launches/0/block","value":[0,1,1]}])",
       "R6.block", "ops.embedding.impl.launches[0].block"},
      {"block_threads", "qwen", R"([{"op":"replace","path":"/ops/embedding/impl/launches/0/block","value":[64,32,1]}])",
       "R6.block", "ops.embedding.impl.launches[0].block"},
      {"block_z", "qwen", R"([{"op":"replace","path":"/ops/embedding/impl/launches/0/block","value":[1,1,65]}])",
       "R6.block", "ops.embedding.impl.launches[0].block"},
      {"grid_zero_at_min", "qwen", R"([{"op":"replace","path":"/ops/embedding/impl/launches/0/grid/1","value":0}])",
       "R6.grid", "ops.embedding.impl.launches[0].grid[1]"},
      {"grid_y_limit", "qwen",
       R"([{"op":"replace","path":"/ops/embedding/impl/launches/0/grid/1","value":{"mul":["tokens",1000]}}])",
       "R6.grid", "ops.embedding.impl.launches[0].grid[1]"},
      {"grid_unknown_var", "qwen",
       R"([{"op":"replace","path":"/ops/embedding/impl/launches/0/grid/0","value":"nope"}])", "R6.grid",
       "ops.embedding.impl.launches[0].grid[0]"},
      {"grid_overflow", "qwen",
       R"([{"op":"replace","path":"/ops/embedding/impl/launches/0/grid/0","value":{"mul":[{"mul":["tokens",1099511627776]},1099511627776]}}])",
       "R6.grid", "ops.embedding.impl.launches[0].grid[0]"},
      {"grid_div_zero", "qwen",
       R"([{"op":"replace","path":"/ops/embedding/impl/launches/0/grid/0","value":{"ceil_div":["tokens",0]}}])",
       "R6.grid", "ops.embedding.impl.launches[0].grid[0]"},
      {"shared_mem_limit", "qwen",
       R"([{"op":"replace","path":"/ops/attn_prefill/impl/launches/0/shared_mem","value":300000}])", "R6.shared_mem",
       "ops.attn_prefill.impl.launches[0].shared_mem"},
      {"launch_arg_literal_kind", "qwen",
       R"([{"op":"replace","path":"/ops/attn_prefill/impl/launches/0/args/6","value":{"i64":1}}])", "R6.args",
       "ops.attn_prefill.impl.launches[0].args[6]"},
      {"launch_arg_param_index", "qwen",
       R"([{"op":"replace","path":"/ops/attn_prefill/impl/launches/0/args/1","value":{"param":9}}])", "R6.args",
       "ops.attn_prefill.impl.launches[0].args[1]"},
      {"launch_arg_count", "qwen", R"([{"op":"remove","path":"/ops/attn_prefill/impl/launches/0/args/6"}])", "R6.args",
       "ops.attn_prefill.impl.launches[0].args"},
      {"launch_arg_param_type", "qwen",
       R"([{"op":"replace","path":"/ops/attn_prefill/impl/launches/0/params/2","value":"in buffer<i64>"}])", "R6.args",
       "ops.attn_prefill.impl.launches[0].args[2]"},
      {"launch_scratch_dtype", "qwen",
       R"([{"op":"replace","path":"/ops/attn_decode/impl/launches/0/params/4","value":"out buffer<bf16>"}])", "R6.args",
       "ops.attn_decode.impl.launches[0].args[4]"},
      {"launch_unknown_scratch", "qwen",
       R"([{"op":"replace","path":"/ops/argmax/impl/launches/1/args/0","value":{"scratch":"nope"}}])", "R6.args",
       "ops.argmax.impl.launches[1].args[0]"},
      {"launch_default_args_count", "qwen",
       R"([{"op":"add","path":"/ops/embedding/impl/launches/0/params","value":["in buffer<i64>","in buffer<bf16>","out buffer<bf16>"]}])",
       "R6.args", "ops.embedding.impl.launches[0]"},
      {"bytes_in_interface", "toy",
       R"([{"op":"add","path":"/ops/pick/params/-","value":"bytes<8>"},{"op":"add","path":"/ops/pick/impl/launches/0/params/-","value":"bytes<8>"},
           {"op":"add","path":"/programs/step/calls/1/args/-","value":{"i32":0}}])",
       "R6.params", "ops.pick.params[5]"},
      // when
      {"when_unknown_var", "qwen",
       R"([{"op":"replace","path":"/ops/rms_norm/impl/launches/0/when/var","value":"nope"}])", "R6.when",
       "ops.rms_norm.impl.launches[0].when.var"},
      {"when_empty_range", "qwen", R"([{"op":"replace","path":"/ops/rms_norm/impl/launches/1/when/min","value":300}])",
       "R6.when", "ops.rms_norm.impl.launches[1].when"},
      // R7 impl vs interface
      {"launch_writes_in_param", "qwen",
       R"([{"op":"add","path":"/ops/embedding/impl/launches/0/params","value":["in buffer<i64>","out buffer<bf16>","out buffer<bf16>","i32"]}])",
       "R7.write_in", "ops.embedding.impl.launches[0].params[1]"},
      {"out_param_unwritten", "qwen",
       R"([{"op":"add","path":"/ops/embedding/impl/launches/0/params","value":["in buffer<i64>","in buffer<bf16>","in buffer<bf16>","i32"]}])",
       "R7.out_unwritten", "ops.embedding.params[2]"},
      {"scratch_read_before_write", "qwen",
       R"([{"op":"replace","path":"/ops/argmax/impl/launches/0/params/1","value":"inout buffer<f32>"}])",
       "R7.scratch_read", "ops.argmax.impl.launches[0].args[1]"},
      {"scratch_unused", "qwen",
       R"([{"op":"add","path":"/ops/argmax/impl/scratch/extra","value":{"dtype":"u8","shape":[4]}}])",
       "R7.scratch_unused", "ops.argmax.impl.scratch.extra"},
      {"scratch_shape_var", "qwen",
       R"([{"op":"replace","path":"/ops/argmax/impl/scratch/partial/shape/0","value":"nope"}])", "R7.scratch",
       "ops.argmax.impl.scratch.partial.shape[0]"},
      // R8 calls
      {"call_unknown_op", "qwen", add_call(R"({"op":"nope","args":[]})"), "R8.op", call24 + ".op"},
      {"call_arity", "qwen", add_call(R"({"op":"silu_mul","args":[{"buf":"gate_up"},{"buf":"act"}]})"), "R8.arity",
       call24 + ".args"},
      {"call_state_to_buffer", "qwen",
       add_call(silu_with(R"({"state":"kv"})", R"({"buf":"act"})", R"({"var":"tokens"})")), "R8.arg_kind",
       call24 + ".args[0]"},
      {"call_buffer_to_scalar", "qwen",
       add_call(silu_with(R"({"buf":"gate_up"})", R"({"buf":"act"})", R"({"buf":"act"})")), "R8.arg_kind",
       call24 + ".args[2]"},
      {"call_literal_kind", "qwen", add_call(silu_with(R"({"buf":"gate_up"})", R"({"buf":"act"})", R"({"i64":5})")),
       "R8.arg_kind", call24 + ".args[2]"},
      {"call_unknown_buffer", "qwen",
       add_call(silu_with(R"({"buf":"nope"})", R"({"buf":"act"})", R"({"var":"tokens"})")), "R8.unknown",
       call24 + ".args[0]"},
      {"call_unknown_var", "qwen", add_call(silu_with(R"({"buf":"gate_up"})", R"({"buf":"act"})", R"({"var":"nope"})")),
       "R8.unknown", call24 + ".args[2]"},
      {"call_dtype", "qwen", add_call(silu_with(R"({"buf":"rope"})", R"({"buf":"act"})", R"({"var":"tokens"})")),
       "R8.dtype", call24 + ".args[0]"},
      {"call_offset_misaligned", "qwen",
       add_call(silu_with(R"({"buf":"gate_up","offset":1})", R"({"buf":"act"})", R"({"var":"tokens"})")), "R8.offset",
       call24 + ".args[0]"},
      {"call_offset_beyond", "qwen",
       add_call(silu_with(R"({"buf":"gate_up","offset":1048576})", R"({"buf":"act"})", R"({"var":"tokens"})")),
       "R8.offset", call24 + ".args[0]"},
      {"call_expr_range", "qwen",
       add_call(silu_with(R"({"buf":"gate_up"})", R"({"buf":"act"})", R"({"expr":{"mul":["tokens",100000000]}})")),
       "R8.range", call24 + ".args[2]"},
      {"call_var_range_u8", "qwen",
       R"([{"op":"add","path":"/ops/silu_u8","value":{"params":["in buffer<bf16>","out buffer<bf16>","u8"],"impl":{"launches":[{"module":"activation","entry":"silu_u8","block":[32,1,1],"grid":[1,1,1]}]}}},
           {"op":"add","path":"/programs/prefill/calls/-","value":{"op":"silu_u8","args":[{"buf":"gate_up"},{"buf":"act"},{"var":"tokens"}]}}])",
       "R8.range", call24 + ".args[2]"},
      // R9 programs
      {"once_and_batch", "qwen", R"([{"op":"add","path":"/programs/load/batch","value":{"groups":1,"rows":1}}])",
       "R9.once_batch", "programs.load.once"},
      {"graph_without_batch", "qwen", R"([{"op":"add","path":"/programs/load/graph","value":true}])", "R9.graph",
       "programs.load.graph"},
      {"derive_and_once", "qwen", R"([{"op":"add","path":"/programs/load/derive","value":true}])", "R9.derive_flags",
       "programs.load.derive"},
      {"derive_touches_state", "toy_derive",
       R"([{"op":"add","path":"/ops/to_bf16/params/-","value":"inout state"},{"op":"add","path":"/programs/convert/calls/0/args/-","value":{"state":"cache"}}])",
       "R9.derive", "programs.convert.calls[0].args[2]"},
      {"source_read_outside_derive", "toy_derive",
       R"([{"op":"add","path":"/programs/step/calls/-","value":{"op":"to_bf16","args":[{"buf":"gain_src"},{"buf":"gain"}]}}])",
       "R9.source_read", "programs.step.calls[2].args[0]"},
      {"read_before_write", "qwen", R"([{"op":"add","path":"/programs/prefill/calls/0","value":)" + kSilu + "}]",
       "R9.read_before_write", "programs.prefill.calls[0].args[0]"},
      {"write_weight", "qwen",
       add_call(silu_with(R"({"buf":"gate_up"})", R"({"buf":"embed_w"})", R"({"var":"tokens"})")), "R9.write_readonly",
       call24 + ".args[1]"},
      {"carry_never_written", "qwen",
       R"([{"op":"replace","path":"/ops/rope_table/params/0","value":"in buffer<f32>"}])", "R9.never_written",
       "buffers.rope"},
      {"batch_rows_unknown_var", "qwen", R"([{"op":"replace","path":"/programs/prefill/batch/rows","value":"nope"}])",
       "R9.batch", "programs.prefill.batch.rows"},
      {"batch_groups_zero", "qwen", R"([{"op":"replace","path":"/programs/decode/batch/groups","value":0}])",
       "R9.batch", "programs.decode.batch.groups"},
      {"batch_var_rows_many_groups", "qwen", R"([{"op":"replace","path":"/programs/prefill/batch/groups","value":2}])",
       "R9.batch", "programs.prefill.batch.groups"},
      {"batch_span_unknown", "qwen", R"([{"op":"add","path":"/programs/decode/batch/span","value":"nope"}])",
       "R9.batch", "programs.decode.batch.span"},
      {"batch_context_unknown", "qwen", R"([{"op":"add","path":"/programs/decode/batch/context","value":"nope"}])",
       "R9.batch", "programs.decode.batch.context"},
      {"batch_decode_unknown", "qwen", R"([{"op":"add","path":"/programs/prefill/batch/decode","value":"nope"}])",
       "R9.batch", "programs.prefill.batch.decode", 2},  // undeclared, and one group
      {"batch_decode_with_literal_rows", "qwen",
       R"([{"op":"add","path":"/vars/dseqs","value":{"max":4}},{"op":"add","path":"/programs/decode/batch/decode","value":"dseqs"}])",
       "R9.batch", "programs.decode.batch.decode"},
      {"batch_decode_is_rows_var", "qwen",
       R"([{"op":"replace","path":"/programs/prefill/batch/groups","value":4},{"op":"add","path":"/programs/prefill/batch/decode","value":"tokens"}])",
       "R9.batch", "programs.prefill.batch.decode"},
      {"batch_packed_literal_rows", "qwen", R"([{"op":"add","path":"/programs/decode/batch/packed","value":true}])",
       "R9.batch", "programs.decode.batch.packed"},
      {"batch_packed_with_span", "qwen",
       R"([{"op":"add","path":"/vars/run","value":{"max":4}},{"op":"add","path":"/programs/prefill/batch/packed","value":true},
           {"op":"add","path":"/programs/prefill/batch/span","value":"run"}])",
       "R9.batch", "programs.prefill.batch.packed"},
      // R10 unused declarations
      {"unused_var", "qwen", R"([{"op":"add","path":"/vars/unused","value":{"max":4}}])", "R10.unused", "vars.unused"},
      {"unused_buffer", "qwen",
       R"([{"op":"add","path":"/buffers/unused","value":{"dtype":"u8","shape":[4],"kind":"workspace"}}])", "R10.unused",
       "buffers.unused"},
      {"unused_state", "qwen", R"([{"op":"add","path":"/states/unused","value":{"bytes":64}}])", "R10.unused",
       "states.unused"},
      {"unused_module", "qwen",
       R"([{"op":"add","path":"/modules/unused","value":{"source":"x.cubin","sha256":"2222222222222222222222222222222222222222222222222222222222222222"}}])",
       "R10.unused", "modules.unused"},
      {"unused_op", "qwen",
       R"([{"op":"add","path":"/ops/unused","value":{"params":[],"impl":{"launches":[{"module":"argmax","entry":"x","block":[1,1,1],"grid":[1,1,1]}]}}}])",
       "R10.unused", "ops.unused"},
      {"unused_group", "qwen", R"([{"op":"add","path":"/topology","value":{"groups":{"tp":2}}}])", "R10.unused",
       "topology.groups.tp"},
      // R11 multi-GPU
      {"group_size_zero", "tp2",
       R"([{"op":"add","path":"/topology/groups/ep","value":0},{"op":"replace","path":"/programs/decode/calls/2/args/6","value":{"rank":"ep"}}])",
       "R11.group_size", "topology.groups.ep"},
      {"cut_stages", "tp2", R"([{"op":"add","path":"/cut","value":{"id":"c","stage":0,"stages":1}}])", "R11.cut",
       "cut.stages"},
      {"cut_stage", "tp2", R"([{"op":"add","path":"/cut","value":{"id":"c","stage":2,"stages":2}}])", "R11.cut",
       "cut.stage"},
      {"cut_id", "tp2", R"([{"op":"add","path":"/cut","value":{"id":"","stage":0,"stages":2}}])", "R11.cut", "cut.id"},
      {"peer_shape", "tp2", R"([{"op":"replace","path":"/buffers/x_peers/shape","value":[4]}])", "R11.peer",
       "buffers.x_peers.shape"},
      {"peer_of_not_exported", "tp2", R"([{"op":"remove","path":"/buffers/x/export"}])", "R11.peer",
       "buffers.x_peers.of"},
      {"peer_of_itself", "tp2", R"([{"op":"replace","path":"/buffers/x_peers/of","value":"x_peers"}])", "R11.peer",
       "buffers.x_peers.of"},
      {"peer_of_nothing", "tp2", R"([{"op":"replace","path":"/buffers/x_peers/of","value":"nope"}])", "R11.peer",
       "buffers.x_peers.of"},
      {"peer_domain", "tp2", R"([{"op":"add","path":"/buffers/x_peers/domain","value":{"min":0}}])", "R11.peer",
       "buffers.x_peers.domain"},
      {"peer_exported", "tp2", R"([{"op":"add","path":"/buffers/x_peers/export","value":true}])", "R11.peer",
       "buffers.x_peers.export"},
      {"peer_group_undeclared", "tp2", R"([{"op":"replace","path":"/buffers/x_peers/group","value":"ep"}])",
       "R11.group", "buffers.x_peers.group"},
      {"of_on_non_peer", "tp2", R"([{"op":"add","path":"/buffers/y/of","value":"x"}])", "R11.peer", "buffers.y.of"},
      {"peer_written", "tp2", R"([{"op":"replace","path":"/ops/pick/params/0","value":"inout buffer<u64>"}])",
       "R11.peer_write", "programs.decode.calls[2].args[0]"},
      {"peer_into_extern_op", "tp2",
       R"([{"op":"add","path":"/ops/allreduce/params/-","value":"in buffer<u64>"},{"op":"add","path":"/programs/decode/calls/1/args/-","value":{"buf":"x_peers"}}])",
       "R11.peer_extern", "programs.decode.calls[1].args[3]"},
      {"rank_to_f32", "tp2", R"([{"op":"replace","path":"/ops/pick/params/6","value":"f32"}])", "R11.rank",
       "programs.decode.calls[2].args[6]"},
      {"rank_group_undeclared", "tp2",
       R"([{"op":"replace","path":"/programs/decode/calls/2/args/6","value":{"rank":"ep"}}])", "R11.group",
       "programs.decode.calls[2].args[6]"},
      {"nccl_without_rank_arg", "tp2",
       R"([{"op":"replace","path":"/ops/allreduce/impl/launches/0/args/3","value":{"i32":0}}])", "R6.extern",
       "ops.allreduce.impl.launches[0].args"},
      {"rank_table_length", "tp2", R"([{"op":"replace","path":"/buffers/w/bind/0/tensor/tensors","value":["a"]}])",
       "R4.bind", "buffers.w.bind[0].tensor.tensors"},
      {"host_weight_rank_selected", "tp2", R"([{"op":"add","path":"/buffers/w/placement","value":"host"}])", "R4.bind",
       "buffers.w.bind[0].tensor"},
      // R12 pack / tensormap / cluster
      {"pack_size", "qwen", R"([{"op":"replace","path":")" + kPackJ + R"(/size","value":256}])", "R12.pack_size",
       kPack + ".size"},
      {"pack_bounds", "qwen", pack256(add_field(R"({"at":254,"i32":1})")), "R12.pack_bounds", kPack + ".fields[1]"},
      {"pack_overlap", "qwen", pack256(add_field(R"({"at":120,"i32":1})")), "R12.pack_overlap", kPack + ".fields[1]"},
      {"pack_width_odd", "qwen", pack256(add_field(R"({"at":128,"width":3,"i32":1})")), "R12.pack_width",
       kPack + ".fields[1].width"},
      {"pack_width_value", "qwen", pack256(add_field(R"({"at":128,"width":1,"var":"tokens"})")), "R12.pack_width",
       kPack + ".fields[1]"},
      {"pack_width_pointer", "qwen", pack256(add_field(R"({"at":128,"width":4,"param":5})")), "R12.pack_width",
       kPack + ".fields[1].width"},
      {"pack_source_var", "qwen", pack256(add_field(R"({"at":128,"var":"nope"})")), "R12.pack_source",
       kPack + ".fields[1].var"},
      {"pack_source_param", "qwen", pack256(add_field(R"({"at":128,"param":9})")), "R12.pack_source",
       kPack + ".fields[1].param"},
      {"pack_source_expr", "qwen", pack256(add_field(R"({"at":128,"expr":{"ceil_div":["tokens",0]}})")),
       "R12.pack_source", kPack + ".fields[1].expr"},
      {"tensormap_align", "qwen", pack256(R"(,{"op":"replace","path":")" + kPackJ + R"(/fields/0/at","value":32})"),
       "R12.tensormap_align", kPack + ".fields[0].at"},
      {"tensormap_dim_count", "qwen", tm("dims", "[64,0,1,1,1,1]"), "R12.tensormap_dims",
       kPack + ".fields[0].tensormap.dims"},
      {"tensormap_dim0_bytes", "qwen", tm("dims", "[60,0]"), "R12.tensormap_dims",
       kPack + ".fields[0].tensormap.dims[0]"},
      {"tensormap_inner_zero", "qwen", tm("dims", "[0,16]"), "R12.tensormap_dims",
       kPack + ".fields[0].tensormap.dims[0]"},
      {"tensormap_stride_count", "qwen", tm("strides", "[512,512]"), "R12.tensormap_strides",
       kPack + ".fields[0].tensormap.strides"},
      {"tensormap_stride_multiple", "qwen", tm("strides", "[520]"), "R12.tensormap_strides",
       kPack + ".fields[0].tensormap.strides[0]"},
      {"tensormap_box_count", "qwen", tm("box", "[64]"), "R12.tensormap_box", kPack + ".fields[0].tensormap.box"},
      {"tensormap_box_range", "qwen", tm("box", "[64,300]"), "R12.tensormap_box",
       kPack + ".fields[0].tensormap.box[1]"},
      {"tensormap_inner_box_bytes", "qwen", tm("box", "[60,16]"), "R12.tensormap_box",
       kPack + ".fields[0].tensormap.box[0]"},
      {"tensormap_swizzle_span", "qwen", tm("swizzle", "64"), "R12.tensormap_swizzle",
       kPack + ".fields[0].tensormap.box[0]"},
      {"tensormap_param_scalar", "qwen", tm("param", "6"), "R12.tensormap", kPack + ".fields[0].tensormap.param"},
      {"tensormap_footprint", "qwen", tm("dims", "[64,300]"), "R12.tensormap_footprint",
       "programs.prefill.calls[5].args[0]", 2},
      {"cluster_zero", "qwen",
       R"([{"op":"replace","path":"/ops/attn_decode/impl/launches/0/cluster","value":[0,1,1]}])", "R12.cluster",
       "ops.attn_decode.impl.launches[0].cluster"},
      {"cluster_too_big", "qwen",
       R"([{"op":"replace","path":"/ops/attn_decode/impl/launches/0/cluster","value":[1,2,16]}])", "R12.cluster",
       "ops.attn_decode.impl.launches[0].cluster"},
      {"cluster_divides_grid", "qwen",
       R"([{"op":"replace","path":"/ops/attn_decode/impl/launches/0/cluster","value":[1,1,3]}])", "R12.cluster",
       "ops.attn_decode.impl.launches[0].cluster[2]"},
      {"cluster_divides_at_var_min", "qwen",
       R"([{"op":"replace","path":"/ops/attn_decode/impl/launches/0/cluster","value":[2,1,1]}])", "R12.cluster",
       "ops.attn_decode.impl.launches[0].cluster[0]"},
      {"pdl_on_extern", "qwen", "", "R12.cluster", "ops.gemm.impl.launches[0].pdl", 1,
       [](Manifest& m) { m.ops["gemm"].impl.launches[0].pdl = true; }},
  };
}

class VerifyRule : public ::testing::TestWithParam<Case> {};

TEST_P(VerifyRule, BreaksOnlyThatRule) {
  const Case& c = GetParam();
  Manifest m = parse_patched(c.base, c.patch);
  if (c.typed) c.typed(m);
  const auto vs = check(m);
  ASSERT_EQ(vs.size(), c.count) << c.name << ":\n" << describe(vs);
  EXPECT_EQ(vs[0].path, c.path) << describe(vs);
  for (const auto& v : vs) EXPECT_EQ(v.rule, c.rule) << describe(vs);
  EXPECT_FALSE(vs[0].message.empty());
}

INSTANTIATE_TEST_SUITE_P(Rules, VerifyRule, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

TEST(VerifyRuleTable, CoversEveryRuleId) {
  std::set<std::string> ids;
  for (const auto& c : cases()) ids.insert(c.rule);
  for (const char* id : {"R1.schema_version",
                         "R2.var_max",
                         "R3.state_size",
                         "R3.host_state",
                         "R4.shape",
                         "R4.size",
                         "R4.fill",
                         "R4.domain",
                         "R4.bind",
                         "R4.placement",
                         "R5.sha256",
                         "R5.source",
                         "R6.module",
                         "R6.extern",
                         "R6.block",
                         "R6.grid",
                         "R6.shared_mem",
                         "R6.args",
                         "R6.params",
                         "R6.when",
                         "R7.write_in",
                         "R7.out_unwritten",
                         "R7.scratch_read",
                         "R7.scratch_unused",
                         "R7.scratch",
                         "R8.op",
                         "R8.arity",
                         "R8.arg_kind",
                         "R8.unknown",
                         "R8.dtype",
                         "R8.offset",
                         "R8.range",
                         "R9.once_batch",
                         "R9.graph",
                         "R9.derive_flags",
                         "R9.derive",
                         "R9.source_read",
                         "R9.read_before_write",
                         "R9.write_readonly",
                         "R9.never_written",
                         "R9.batch",
                         "R10.unused",
                         "R11.group_size",
                         "R11.cut",
                         "R11.peer",
                         "R11.group",
                         "R11.peer_write",
                         "R11.peer_extern",
                         "R11.rank",
                         "R12.pack_size",
                         "R12.pack_bounds",
                         "R12.pack_overlap",
                         "R12.pack_width",
                         "R12.pack_source",
                         "R12.tensormap_align",
                         "R12.tensormap_dims",
                         "R12.tensormap_strides",
                         "R12.tensormap_box",
                         "R12.tensormap_swizzle",
                         "R12.tensormap",
                         "R12.tensormap_footprint",
                         "R12.cluster",
                         "R12.cooperative"})
    EXPECT_TRUE(ids.count(id)) << "no test breaks rule " << id;
}

}  // namespace
}  // namespace kern::core
