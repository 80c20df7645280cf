// Parse (and verify) time of a ~1 MB Qwen3-4B-like manifest generated here: 36 layers x 15
// calls x 2 programs, per-layer weights with bind, constants. Prints the times; asserts only
// that the text is large and parses to the expected counts (no timing assertion).
#include <gtest/gtest.h>

#include <ctime>
#include <optional>
#include <vector>
#include <cstdio>

#include "kern/base/json.hpp"
#include "kern/core/manifest.hpp"
#include "kern/core/verify.hpp"

using namespace kern;
using namespace kern::core;

namespace {

Json buf(const std::string& name) { return {{"buf", name}}; }
Json weight(const std::string& dtype, Json shape, const std::string& tensor) {
  return {{"dtype", dtype}, {"shape", std::move(shape)}, {"kind", "weight"}, {"bind", {{{"tensor", tensor}}}}};
}
Json workspace(Json shape) { return {{"dtype", "bf16"}, {"shape", std::move(shape)}, {"kind", "workspace"}}; }
Json kernel(const std::string& module, const std::string& entry, Json grid) {
  return {{"module", module}, {"entry", entry}, {"block", {256, 1, 1}}, {"grid", std::move(grid)}};
}
Json with(Json a, const Json& extra) {
  a.update(extra);
  return a;
}
// `launches` is a vector so that `{kernel(...)}` is a list of one launch with every compiler (clang
// copy-initializes a Json from a one-element braced list of Json; g++ makes an array).
Json op(Json params, const std::vector<Json>& launches) {
  return {{"params", std::move(params)}, {"impl", {{"launches", launches}}}};
}

Json qwen_like(int layers) {
  Json j;
  j["schema_version"] = 5;
  j["model"] = "qwen3-4b-like";
  j["constants"] = {{"HIDDEN", 2560},   {"QKV", 6144},        {"Q", 4096},      {"INTER", 9728},
                    {"UPGATE", 19456},  {"VOCAB", 151936},    {"HEAD", 128},    {"EPS", 1e-6},
                    {"KV_LAYER", 4096}, {"MAX_TOKENS", 2048}, {"MAX_SEQS", 256}};
  j["vars"] = {{"tokens", {{"max", "MAX_TOKENS"}}}, {"seqs", {{"max", "MAX_SEQS"}}}};
  j["states"] = {{"kv", {{"bytes_per_token", layers * 4096}}}};
  Json& b = j["buffers"];
  b["token_ids"] = {{"dtype", "i64"},
                    {"shape", {"tokens"}},
                    {"kind", "input"},
                    {"fill", "token"},
                    {"domain", {{"index_into", "embed"}}}};
  b["positions"] = {{"dtype", "i64"},
                    {"shape", {"tokens"}},
                    {"kind", "input"},
                    {"fill", "position"},
                    {"domain", {{"min", 0}, {"max", 40959}}}};
  b["slot_mapping"] = {
      {"dtype", "i64"}, {"shape", {"tokens"}}, {"kind", "input"}, {"fill", "slot"}, {"domain", {{"index_into", "kv"}}}};
  b["seq_lens"] = {
      {"dtype", "i32"}, {"shape", {"seqs"}}, {"kind", "input"}, {"fill", "seq_len"}, {"domain", {{"min", 1}}}};
  b["block_table"] = {{"dtype", "i32"},
                      {"shape", {"seqs", 2560}},
                      {"kind", "input"},
                      {"domain", {{"index_into", "kv"}, {"stride", 16}}}};
  b["next_token"] = {{"dtype", "i64"}, {"shape", {"seqs"}}, {"kind", "output"}, {"fill", "tokens"}};
  b["hidden"] = workspace({"tokens", "HIDDEN"});
  b["residual"] = workspace({"tokens", "HIDDEN"});
  b["normed"] = workspace({"tokens", "HIDDEN"});
  b["qkv"] = workspace({"tokens", "QKV"});
  b["attn"] = workspace({"tokens", "Q"});
  b["upgate"] = workspace({"tokens", "UPGATE"});
  b["act"] = workspace({"tokens", "INTER"});
  b["logits"] = workspace({"tokens", "VOCAB"});
  b["embed"] = weight("bf16", {"VOCAB", "HIDDEN"}, "model.embed_tokens.weight");
  b["final_norm"] = weight("bf16", {"HIDDEN"}, "model.norm.weight");
  b["lm_head"] = weight("bf16", {"VOCAB", "HIDDEN"}, "lm_head.weight");
  for (int l = 0; l < layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    const std::string t = "model.layers." + std::to_string(l) + ".";
    b[p + "input_norm"] = weight("bf16", {"HIDDEN"}, t + "input_layernorm.weight");
    b[p + "post_norm"] = weight("bf16", {"HIDDEN"}, t + "post_attention_layernorm.weight");
    b[p + "q_norm"] = weight("bf16", {"HEAD"}, t + "self_attn.q_norm.weight");
    b[p + "k_norm"] = weight("bf16", {"HEAD"}, t + "self_attn.k_norm.weight");
    b[p + "qkv_proj"] = {{"dtype", "bf16"},
                         {"shape", {"QKV", "HIDDEN"}},
                         {"kind", "weight"},
                         {"bind",
                          {{{"tensor", t + "self_attn.q_proj.weight"}},
                           {{"tensor", t + "self_attn.k_proj.weight"}},
                           {{"tensor", t + "self_attn.v_proj.weight"}}}}};
    b[p + "o_proj"] = weight("bf16", {"HIDDEN", "Q"}, t + "self_attn.o_proj.weight");
    b[p + "gate_up"] = {{"dtype", "bf16"},
                        {"shape", {"UPGATE", "HIDDEN"}},
                        {"kind", "weight"},
                        {"bind", {{{"tensor", t + "mlp.gate_proj.weight"}}, {{"tensor", t + "mlp.up_proj.weight"}}}}};
    b[p + "down"] = weight("bf16", {"HIDDEN", "INTER"}, t + "mlp.down_proj.weight");
  }
  const std::string sha(64, 'a');
  j["modules"] = {
      {"embedding", {{"source", "embedding.cubin"}, {"sha256", sha}}},
      {"layernorm", {{"source", "layernorm.cubin"}, {"sha256", std::string(64, 'b')}}},
      {"rope", {{"source", "rope.cubin"}, {"sha256", std::string(64, 'c')}}},
      {"attention", {{"source", "attention.cubin"}, {"sha256", std::string(64, 'd')}}},
      {"activation",
       {{"source", "hf:kernels-community/activation/build/activation.so@main"}, {"sha256", std::string(64, 'e')}}},
      {"argmax", {{"source", "argmax.cubin"}, {"sha256", std::string(64, 'f')}}}};
  Json& o = j["ops"];
  o["embedding"] =
      op({"in buffer<i64>", "in buffer<bf16>", "out buffer<bf16>"}, {kernel("embedding", "embed", {"tokens", 1, 1})});
  o["rms_norm"] = op({"in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>"},
                     {with(kernel("layernorm", "rms_norm", {"tokens", 1, 1}),
                           Json{{"args", {{{"param", 0}}, {{"param", 1}}, {{"param", 2}}, {{"f32", "EPS"}}}},
                                {"params", {"in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "f32"}}})});
  o["fused_add_rms_norm"] = op({"inout buffer<bf16>", "inout buffer<bf16>", "in buffer<bf16>"},
                               {kernel("layernorm", "fused_add_rms_norm", {"tokens", 1, 1})});
  o["head_norm"] = op({"inout buffer<bf16>", "in buffer<bf16>"},
                      {kernel("layernorm", "rms_norm_head", {{{"mul", {"tokens", 32}}}, 1, 1})});
  o["rotary"] = op({"in buffer<i64>", "inout buffer<bf16>"}, {kernel("rope", "rotary_embedding", {"tokens", 1, 1})});
  o["cache"] = op({"in buffer<bf16>", "inout state", "in buffer<i64>"},
                  {kernel("attention", "reshape_and_cache", {"tokens", 1, 1})});
  o["attn"] = op({"in buffer<bf16>", "in state", "in buffer<i32>", "in buffer<i32>", "out buffer<bf16>"},
                 {with(kernel("attention", "unified_attention", {{{"ceil_div", {{{"mul", {"tokens", 5}}}, 4}}}, 8, 1}),
                       Json{{"shared_mem", 65536}})});
  o["gemm"] = op({"in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32", "i32", "i32"},
                 {{{"entry", "extern:cublaslt_bf16_tn"}}});
  o["silu_mul"] = op({"in buffer<bf16>", "out buffer<bf16>"}, {kernel("activation", "silu_and_mul", {"tokens", 1, 1})});
  o["argmax"] = op({"in buffer<bf16>", "out buffer<i64>"}, {kernel("argmax", "argmax", {"seqs", 1, 1})});

  auto gemm = [](const std::string& label, const std::string& a, const std::string& w, const std::string& c,
                 const char* n, const char* k) {
    return Json{{"label", label},
                {"op", "gemm"},
                {"args", {buf(a), buf(w), buf(c), {{"var", "tokens"}}, {{"i32", n}}, {{"i32", k}}}}};
  };
  auto program = [&](Json batch) {
    Json calls = Json::array();
    calls.push_back(
        {{"label", "embed"}, {"op", "embedding"}, {"args", {buf("token_ids"), buf("embed"), buf("hidden")}}});
    calls.push_back({{"label", "copy_residual"},
                     {"op", "rms_norm"},
                     {"args", {buf("hidden"), buf("final_norm"), buf("residual")}}});
    for (int l = 0; l < layers; ++l) {
      const std::string p = "layers." + std::to_string(l) + ".";
      const std::uint64_t kv = static_cast<std::uint64_t>(l) * 4096;
      calls.push_back({{"label", p + "input_norm"},
                       {"op", "rms_norm"},
                       {"args", {buf("hidden"), buf(p + "input_norm"), buf("normed")}}});
      calls.push_back(gemm(p + "qkv_proj", "normed", p + "qkv_proj", "qkv", "QKV", "HIDDEN"));
      calls.push_back({{"label", p + "q_norm"}, {"op", "head_norm"}, {"args", {buf("qkv"), buf(p + "q_norm")}}});
      calls.push_back({{"label", p + "k_norm"},
                       {"op", "head_norm"},
                       {"args", {{{"buf", "qkv"}, {"offset", 8192}}, buf(p + "k_norm")}}});
      calls.push_back({{"label", p + "rope"}, {"op", "rotary"}, {"args", {buf("positions"), buf("qkv")}}});
      calls.push_back(
          {{"label", p + "cache"},
           {"op", "cache"},
           {"args", {{{"buf", "qkv"}, {"offset", 8192}}, {{"state", "kv"}, {"offset", kv}}, buf("slot_mapping")}}});
      calls.push_back(
          {{"label", p + "attn"},
           {"op", "attn"},
           {"args",
            {buf("qkv"), {{"state", "kv"}, {"offset", kv}}, buf("block_table"), buf("seq_lens"), buf("attn")}}});
      calls.push_back(gemm(p + "o_proj", "attn", p + "o_proj", "normed", "HIDDEN", "Q"));
      calls.push_back({{"label", p + "post_add_norm"},
                       {"op", "fused_add_rms_norm"},
                       {"args", {buf("normed"), buf("residual"), buf(p + "post_norm")}}});
      calls.push_back(gemm(p + "gate_up", "normed", p + "gate_up", "upgate", "UPGATE", "HIDDEN"));
      calls.push_back({{"label", p + "silu_mul"}, {"op", "silu_mul"}, {"args", {buf("upgate"), buf("act")}}});
      calls.push_back(gemm(p + "down", "act", p + "down", "hidden", "HIDDEN", "INTER"));
      calls.push_back({{"label", p + "add_norm"},
                       {"op", "fused_add_rms_norm"},
                       {"args", {buf("hidden"), buf("residual"), buf(p + "input_norm")}}});
      calls.push_back({{"label", p + "k_norm_again"},
                       {"op", "head_norm"},
                       {"args", {{{"buf", "qkv"}, {"offset", 8448}}, buf(p + "k_norm")}}});
      calls.push_back({{"label", p + "rope_k"},
                       {"op", "rotary"},
                       {"args", {buf("positions"), {{"buf", "qkv"}, {"offset", 8192}}}}});
    }
    calls.push_back(
        {{"label", "final_norm"}, {"op", "rms_norm"}, {"args", {buf("hidden"), buf("final_norm"), buf("normed")}}});
    calls.push_back(gemm("lm_head", "normed", "lm_head", "logits", "VOCAB", "HIDDEN"));
    calls.push_back({{"label", "argmax"}, {"op", "argmax"}, {"args", {buf("logits"), buf("next_token")}}});
    return Json{{"batch", std::move(batch)}, {"calls", std::move(calls)}};
  };
  j["programs"]["prefill"] = program({{"groups", 1}, {"rows", "tokens"}});
  j["programs"]["decode"] = program({{"groups", "MAX_SEQS"}, {"rows", 1}});
  j["programs"]["decode"]["graph"] = true;
  j["programs"]["decode_spec"] = program({{"groups", 64}, {"rows", 4}});
  j["programs"]["decode_spec"]["graph"] = true;
  return j;
}

// Milliseconds of CPU time of this thread: robust against a busy machine (CI shares 2 cores).
double cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

}  // namespace

TEST(ParsePerformance, QwenLikeOneMegabyteManifest) {
  // Qwen3-4B has 36 layers; layers are added (same shape) until the pretty-printed text passes 1 MB.
  int layers = 36;
  std::string text = qwen_like(layers).dump(2);
  while (text.size() < 1000000u) text = qwen_like(layers += 4).dump(2);
  ASSERT_GT(text.size(), 1000000u);

  constexpr int kRuns = 5;
  double best_json = 1e9, best_parse = 1e9, best_check = 1e9;
  std::optional<Manifest> m;
  std::vector<Violation> violations;
  for (int i = 0; i < kRuns; ++i) {
    m.reset();
    double t0 = cpu_ms();
    {
      Json doc = parse_json_strict(text, {ErrorKind::ManifestParse, "manifest"});
      best_json = std::min(best_json, cpu_ms() - t0);
    }
    t0 = cpu_ms();
    m.emplace(parse_manifest(text));  // strict JSON + typed walk + freeing the JSON tree
    best_parse = std::min(best_parse, cpu_ms() - t0);
    t0 = cpu_ms();
    violations = check(*m);
    best_check = std::min(best_check, cpu_ms() - t0);
  }
  std::printf("[ perf ] manifest %.2f MB: %d layers, %zu buffers, %zu ops, 3 programs x %zu calls\n", text.size() / 1e6,
              layers, m->buffers.size(), m->ops.size(), m->programs.at("decode").calls.size());
  std::printf(
      "[ perf ] CPU ms, best of %d: strict JSON tree %.1f; parse_manifest %.1f (typed walk + tree free %.1f); check "
      "%.1f; "
      "parse + check %.1f\n",
      kRuns, best_json, best_parse, best_parse - best_json, best_check, best_parse + best_check);
  std::printf("[ perf ] check found %zu violations%s\n", violations.size(), violations.empty() ? "" : " (first below)");
  if (!violations.empty()) std::printf("[ perf ]   %s\n", violations[0].line().c_str());

  EXPECT_EQ(m->buffers.size(), 17u + 8u * layers);
  EXPECT_EQ(m->programs.at("decode").calls.size(), 5u + 15u * layers);
  EXPECT_EQ(m->vars.at("tokens").max, 2048u);  // resolved through a constant
  EXPECT_EQ(m->programs.at("decode").batch->groups, 256u);
}
