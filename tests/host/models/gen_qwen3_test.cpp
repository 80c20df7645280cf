// kern gen qwen3: the generated manifests for every Qwen3 preset (the released dense shapes and tiny) parse, verify
// and pass the serving-protocol check; bad configs and options are refused with a clear error.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "shell.hpp"
#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/base/json.hpp"
#include "kern/core/manifest.hpp"
#include "kern/models/qwen3_gen.hpp"
#include "kern/models/qwen3_synth.hpp"
#include "kern/core/protocol.hpp"
#include "kern/base/sha256.hpp"
#include "kern/core/verify.hpp"

namespace kern::models {
namespace {

// A preset's config.json as kern synth writes it, read back as kern gen reads it.
Qwen3Shape config(const std::string& preset) { return parse_qwen3_config(qwen3_config_json(qwen3_preset(preset))); }

// The tests below check the step-size-dependent layout (GEMV below 9 sequences, cuBLASLt above, the
// chain): they turn batch invariance off; BatchInvariant* check the default.
Qwen3GenOptions options(bool batch_invariant = false) {
  Qwen3GenOptions o;
  o.batch_invariant = batch_invariant;
  for (const std::string& f : qwen3_kernel_families()) o.module_sha256[f] = to_hex(sha256(f));
  o.model = "test";
  return o;
}

core::Manifest parse(const nlohmann::ordered_json& m) { return core::parse_manifest(m.dump(), "generated"); }

const nlohmann::ordered_json& call_named(const nlohmann::ordered_json& program, const std::string& label) {
  for (const auto& c : program["calls"])
    if (c.value("label", "") == label) return c;
  throw std::runtime_error("no call " + label);
}

TEST(Qwen3Presets, EachShapeNamesItsPresetThroughItsConfigJson) {
  // kern bench names the report's shape (its targets depend on it) from the checkpoint's config.json.
  for (const std::string& name : qwen3_preset_names()) {
    SCOPED_TRACE(name);
    EXPECT_EQ(qwen3_preset_name(config(name)), name);
  }
  Qwen3Shape s = config("4b");
  s.layers = 4;  // kern synth --layers 4
  EXPECT_EQ(qwen3_preset_name(s), std::nullopt);
  s = config("8b");
  s.tied = true;
  EXPECT_EQ(qwen3_preset_name(s), std::nullopt);
}

TEST(GenQwen3, EveryPresetVerifiesAndServes) {
  for (const std::string& name : qwen3_preset_names()) {
    SCOPED_TRACE(name);
    const Qwen3Shape s = config(name);
    const auto m = generate_qwen3_manifest(s, options());
    core::Verified v = core::verify(parse(m));
    const core::Protocol protocol = core::check_protocol(v);
    EXPECT_EQ(protocol.row_var(), "tokens");
    EXPECT_EQ(protocol.group_var(), "seqs");
    ASSERT_TRUE(protocol.chunk().has_value());
    EXPECT_FALSE(protocol.chunk()->graph);
    const auto step = protocol.forward(64, 1);
    ASSERT_TRUE(step.has_value());
    EXPECT_TRUE(step->graph);
    EXPECT_TRUE(step->emits_tokens);
    ASSERT_EQ(protocol.page_tables().size(), 1u);
    EXPECT_EQ(protocol.page_tables()[0].stride, 16u);
    EXPECT_EQ(protocol.page_tables()[0].width, 2560u);  // 40960 / 16
    EXPECT_EQ(protocol.once_programs(), std::vector<std::string>{"load"});

    // KV: one paged state, per-layer offsets of one page's layer block.
    EXPECT_EQ(m["states"]["kv"]["bytes_per_token"], s.layers * 2 * s.kv_heads * s.head_dim * 2);
    const std::uint64_t layer_bytes = 16 * s.kv_heads * s.head_dim * 2 * 2;
    const auto& last_attn = call_named(m["programs"]["decode"], "layers." + std::to_string(s.layers - 1) + ".attn");
    EXPECT_EQ(last_attn["args"][1]["offset"], (s.layers - 1) * layer_bytes);
    EXPECT_EQ(m["programs"]["decode"]["calls"].size(), 1 + 8 * s.layers + 3);
    EXPECT_FALSE(m["ops"].contains("decode_chain"));  // the decode chain is opt-in
    EXPECT_EQ(m["programs"]["prefill"]["calls"].size(), 1 + 9 * s.layers + 4);

    // Weights bound to the HF names; q/k/v and gate/up concatenated.
    const auto& qkv = m["buffers"]["layers.3.qkv"];
    ASSERT_EQ(qkv["bind"].size(), 3u);
    EXPECT_EQ(qkv["bind"][1]["tensor"], "model.layers.3.self_attn.k_proj.weight");
    EXPECT_EQ(qkv["shape"][0], (s.heads + 2 * s.kv_heads) * s.head_dim);
    EXPECT_EQ(m["buffers"]["layers.0.gate_up"]["bind"][1]["tensor"], "model.layers.0.mlp.up_proj.weight");
    EXPECT_EQ(m["buffers"]["lm_head"]["bind"][0]["tensor"], s.tied ? "model.embed_tokens.weight" : "lm_head.weight");
    EXPECT_EQ(m["buffers"]["logits"]["kind"], "workspace");
  }
}

std::vector<std::string> op_names(const nlohmann::ordered_json& calls, std::size_t from, std::size_t count) {
  std::vector<std::string> names;
  for (std::size_t i = from; i < from + count; ++i) names.push_back(calls.at(i)["op"].get<std::string>());
  return names;
}

// Every launch of a decode GEMM op is chosen by `when` on seqs, and the distinct ranges cover
// 1..max_seqs exactly once (no gap, no overlap).
void expect_when_partition(const nlohmann::ordered_json& op, std::uint64_t max_seqs, const std::string& name) {
  SCOPED_TRACE(name);
  std::set<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const auto& l : op["impl"]["launches"]) {
    ASSERT_TRUE(l.contains("when")) << l.dump();
    EXPECT_EQ(l["when"]["var"], "seqs");
    ranges.insert({l["when"].value("min", std::uint64_t{1}), l["when"].value("max", UINT64_MAX)});
  }
  for (std::uint64_t seqs = 1; seqs <= max_seqs; ++seqs) {
    int covering = 0;
    for (const auto& [lo, hi] : ranges) covering += lo <= seqs && seqs <= hi ? 1 : 0;
    EXPECT_EQ(covering, 1) << "seqs " << seqs;
  }
  for (const auto& [lo, hi] : ranges) EXPECT_LE(lo, max_seqs) << "a range no decode step reaches";
}

// The launches of `op` active at `seqs`, as entry names.
std::vector<std::string> active_entries(const nlohmann::ordered_json& op, std::uint64_t seqs) {
  std::vector<std::string> out;
  for (const auto& l : op["impl"]["launches"]) {
    if (!l.contains("when")) {  // every step size
      out.push_back(l["entry"].get<std::string>());
      continue;
    }
    const auto& w = l["when"];
    if (w.value("min", std::uint64_t{1}) <= seqs && seqs <= w.value("max", UINT64_MAX))
      out.push_back(l["entry"].get<std::string>());
  }
  return out;
}

// The default: one decode arithmetic for every step size. Above 8 sequences every decode GEMM launch is
// cuBLASLt for every step (no `when`, no GEMV module), the chain is dropped unless it covers every step,
// and the attention's ranges come from each length alone (split_tokens, a literal of both launches).
TEST(GenQwen3, BatchInvariantDecodeHasOneKernelPerOp) {
  EXPECT_TRUE(Qwen3GenOptions{}.batch_invariant);
  for (const std::string& name : qwen3_preset_names()) {
    SCOPED_TRACE(name);
    const Qwen3Shape c = config(name);
    for (std::uint64_t max_seqs : {1, 8, 9, 64, 256}) {
      SCOPED_TRACE("max_seqs " + std::to_string(max_seqs));
      Qwen3GenOptions o = options(true);
      o.max_seqs = max_seqs;
      o.max_tokens = std::max<std::uint64_t>(max_seqs, 512);
      o.decode_chain = max_seqs > 4;  // dropped: it covers at most 4 sequences
      const auto m = generate_qwen3_manifest(c, o);
      core::Verified v = core::verify(parse(m));
      (void)core::check_protocol(v);
      const auto& ops = m["ops"];
      EXPECT_FALSE(ops.contains("decode_chain"));
      EXPECT_EQ(m["modules"].contains("gemv"), max_seqs <= 8);
      for (const char* op_name : {"decode_qkv", "decode_o_residual", "decode_gate_up_silu", "decode_down_residual",
                                  "decode_lm_head"}) {
        SCOPED_TRACE(op_name);
        const auto first = active_entries(ops[op_name], 1);
        for (std::uint64_t seqs = 2; seqs <= max_seqs; ++seqs) EXPECT_EQ(active_entries(ops[op_name], seqs), first);
        EXPECT_EQ(first.front().rfind(max_seqs <= 8 ? "kern_gemv" : "extern:cublaslt", 0), 0u) << first.front();
        // The decode GEMM's algorithm is chosen at min(max_seqs, 128) (above 128 sequences the 4B
        // shapes take their tuned answer: o_proj at 256, answer 1; qkv 2; lm_head 5); prefill GEMMs
        // keep their bound.
        const bool tuned = name == "4b";
        const std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> want = {
            {"decode_qkv", {128, 2}}, {"decode_o_residual", {256, 1}}, {"decode_gate_up_silu", {128, 0}},
            {"decode_down_residual", {128, 0}}, {"decode_lm_head", {128, 5}}};
        for (const auto& l : ops[op_name]["impl"]["launches"])
          if (l["entry"].get<std::string>().rfind("extern:cublaslt", 0) == 0) {
            EXPECT_EQ(l.contains("algo_m"), max_seqs > 128);
            if (max_seqs > 128) {
              EXPECT_EQ(l["algo_m"], tuned ? want.at(op_name).first : 128);
              EXPECT_EQ(l.value("algo_candidate", std::uint64_t{0}), tuned ? want.at(op_name).second : 0);
            } else {
              EXPECT_FALSE(l.contains("algo_candidate"));
            }
          }
      }
      for (const auto& l : ops["gemm_qkv"]["impl"]["launches"]) EXPECT_FALSE(l.contains("algo_m"));
      // Above 8 sequences the warp-item partial with ranges of at least 128 keys, else the block-item
      // one with 256 (decode_attn_items Auto, decode_attn_split_tokens 0).
      const auto& attn = ops["attn_decode"]["impl"]["launches"];
      const bool warp = max_seqs > 8;
      EXPECT_EQ(attn[0]["entry"], std::string(warp ? "kern_attn_decode_warp_partial_hd" : "kern_attn_decode_mma_partial_hd") +
                                      std::to_string(c.head_dim));
      EXPECT_EQ(attn[0]["args"][16]["i32"], warp ? 128 : 256);
      EXPECT_EQ(attn[1]["args"][11]["i32"], warp ? 128 : 256);
      // The warp-item partial: 2 stages, a fixed grid of three blocks per H200 SM.
      EXPECT_EQ(attn[0]["shared_mem"], 4u * (warp ? 2 : 3) * 2 * 16 * (c.head_dim + 8) * 2);
      if (warp) {
        EXPECT_EQ(attn[0]["grid"][0], kDecodeAttnWarpGrid);
      }
    }
  }
  Qwen3GenOptions o = options(true);
  o.decode_attn_split_tokens = 96;
  EXPECT_EQ(generate_qwen3_manifest(config("0.6b"), o)["ops"]["attn_decode"]["impl"]["launches"][0]["args"][16]["i32"],
            96);
  o.decode_attn_split_tokens = 16;
  EXPECT_THROW(generate_qwen3_manifest(config("0.6b"), o), kern::Error);
  o.batch_invariant = false;  // the split is not used: any value passes
  EXPECT_NO_THROW(generate_qwen3_manifest(config("0.6b"), o));
}

// RoPE + cache write: one launch active at every step size (the kernel's result does not depend on
// its grid); one row per block up to 256 rows (every decode step), 16 rows per block above.
// By default every decode GEMM's cuBLASLt launch carries algo_per_m, no prefill GEMM does, and the
// manifest verifies; with --no-gemm-per-m no launch does.
TEST(GenQwen3, GemmPerMMarksTheDecodeGemmsOnly) {
  EXPECT_TRUE(Qwen3GenOptions{}.gemm_per_m);
  for (bool on : {false, true}) {
    SCOPED_TRACE(on ? "default" : "--no-gemm-per-m");
    Qwen3GenOptions o = options(true);
    o.max_seqs = 256;
    o.max_tokens = 2048;
    o.gemm_per_m = on;
    const auto m = generate_qwen3_manifest(config("4b"), o);
    (void)core::verify(parse(m));
    int marked = 0, decode_blas = 0;
    for (const auto& [name, op] : m["ops"].items())
      for (const auto& l : op["impl"]["launches"]) {
        const bool blas = l["entry"].get<std::string>().rfind("extern:cublaslt", 0) == 0;
        const bool decode = name.rfind("decode_", 0) == 0;
        decode_blas += blas && decode;
        if (l.value("algo_per_m", false)) {
          ++marked;
          EXPECT_TRUE(blas && decode) << name;
        }
      }
    EXPECT_GT(decode_blas, 0);
    EXPECT_EQ(marked, on ? decode_blas : 0);
  }
}

TEST(GenQwen3, RopeTakesOneRowPerBlockOnSmallSteps) {
  const auto m = generate_qwen3_manifest(config("4b"), options(true));
  const auto& op = m["ops"]["qk_norm_rope_cache"];
  for (std::uint64_t tokens : {1, 64, 256, 257, 2048}) {
    SCOPED_TRACE(tokens);
    int active = 0;
    for (const auto& l : op["impl"]["launches"]) {
      const auto& w = l["when"];
      EXPECT_EQ(w["var"], "tokens");
      if (!(w.value("min", std::uint64_t{1}) <= tokens && tokens <= w.value("max", UINT64_MAX))) continue;
      ++active;
      EXPECT_EQ(l["entry"], "kern_qk_norm_rope_cache_bf16");
      EXPECT_EQ(l["grid"][1], (32 + 2 * 8 + 3) / 4);
      if (tokens <= 256)
        EXPECT_EQ(l["grid"][0], "tokens");
      else
        EXPECT_EQ(l["grid"][0]["ceil_div"][1], 16);
    }
    EXPECT_EQ(active, 1);
  }
}

TEST(GenQwen3, DecodeLayerIsGemvWithFusedEpilogues) {
  const Qwen3Shape c = config("4b");
  for (std::uint64_t max_seqs : {1, 8, 9, 64}) {
    SCOPED_TRACE("max_seqs " + std::to_string(max_seqs));
    Qwen3GenOptions o = options();
    o.max_seqs = max_seqs;
    const auto m = generate_qwen3_manifest(c, o);
    ASSERT_NO_THROW(core::check_protocol(core::verify(parse(m))));
    const auto& calls = m["programs"]["decode"]["calls"];
    ASSERT_EQ(calls.size(), 1 + 8 * c.layers + 3);
    const std::vector<std::string> layer = {
        "rms_norm",          "decode_qkv", "qk_norm_rope_cache",  "attn_decode",
        "decode_o_residual", "rms_norm",   "decode_gate_up_silu", "decode_down_residual"};
    for (std::uint64_t l : {std::uint64_t{0}, std::uint64_t{1}, c.layers - 1})
      EXPECT_EQ(op_names(calls, 1 + 8 * l, 8), layer) << "layer " << l;
    EXPECT_EQ(op_names(calls, 1 + 8 * c.layers, 3), (std::vector<std::string>{"rms_norm", "decode_lm_head", "sample"}));

    // Residual GEMVs add into hidden in place; the lm_head reads normed (no gather in decode).
    const auto& o_proj = call_named(m["programs"]["decode"], "layers.5.o_proj");
    EXPECT_EQ(o_proj["args"][2]["buf"], "hidden");
    EXPECT_EQ(o_proj["args"][3]["var"], "seqs");
    EXPECT_EQ(call_named(m["programs"]["decode"], "layers.5.down_proj")["args"][2]["buf"], "hidden");
    EXPECT_EQ(call_named(m["programs"]["decode"], "lm_head")["args"][0]["buf"], "normed");
    EXPECT_EQ(call_named(m["programs"]["decode"], "layers.5.qkv_proj")["args"][3]["var"], "seqs");
    const auto& gu = call_named(m["programs"]["decode"], "layers.5.gate_up_silu");
    EXPECT_EQ(gu["args"][2]["buf"], "act");
    EXPECT_EQ(gu["args"].size(), max_seqs > 8 ? 5u : 4u);
    if (max_seqs > 8) {
      EXPECT_EQ(gu["args"][3]["buf"], "gate_up");
    }
    for (const auto& call : calls) EXPECT_EQ(call["args"].dump().find("\"delta\""), std::string::npos) << call.dump();

    const auto& ops = m["ops"];
    for (const char* name :
         {"decode_qkv", "decode_o_residual", "decode_gate_up_silu", "decode_down_residual", "decode_lm_head"})
      expect_when_partition(ops[name], max_seqs, name);
    EXPECT_EQ(active_entries(ops["decode_qkv"], 1), std::vector<std::string>{"kern_gemv_bf16"});
    EXPECT_EQ(active_entries(ops["decode_o_residual"], std::min<std::uint64_t>(8, max_seqs)),
              std::vector<std::string>{"kern_gemv_residual_bf16"});
    EXPECT_EQ(active_entries(ops["decode_gate_up_silu"], 1), std::vector<std::string>{"kern_gemv_gate_up_silu_bf16"});
    if (max_seqs > 8) {
      EXPECT_EQ(active_entries(ops["decode_qkv"], 9), std::vector<std::string>{"extern:cublaslt_bf16_tn"});
      EXPECT_EQ(active_entries(ops["decode_down_residual"], max_seqs),
                std::vector<std::string>{"extern:cublaslt_bf16_tn_acc"});
      EXPECT_EQ(active_entries(ops["decode_gate_up_silu"], 9),
                (std::vector<std::string>{"extern:cublaslt_bf16_tn", "kern_silu_mul_bf16"}));
    } else {
      EXPECT_EQ(ops["decode_qkv"]["impl"]["launches"].size(), 1u);
      EXPECT_EQ(ops["decode_gate_up_silu"]["params"].size(), 4u);
    }
    // GEMV geometry and sizes: one block per 16 weight rows (8 gate/up pairs), n and k literal.
    const auto& qkv = ops["decode_qkv"]["impl"]["launches"][0];
    EXPECT_EQ(qkv["module"], "gemv");
    EXPECT_EQ(qkv["grid"][0], (6144 + 15) / 16);
    EXPECT_EQ(qkv["block"][0], 256);
    EXPECT_EQ(ops["decode_o_residual"]["impl"]["launches"][0]["block"][0], 256);
    EXPECT_EQ(qkv["args"][4]["i32"], 6144);
    EXPECT_EQ(qkv["args"][5]["i32"], 2560);
    const auto& gate = ops["decode_gate_up_silu"]["impl"]["launches"][0];
    EXPECT_EQ(gate["grid"][0], 9728 / 8);
    EXPECT_EQ(gate["args"][4]["i32"], 9728);
    EXPECT_EQ(ops["decode_lm_head"]["impl"]["launches"][0]["grid"][0], 151936 / 16);
    EXPECT_EQ(ops["decode_down_residual"]["impl"]["launches"][0]["args"][5]["i32"], 9728);
    EXPECT_EQ(ops["decode_o_residual"]["params"][2], "inout buffer<bf16>");
  }
}

// With gemv_fused_norm (measured slower, off by default): the norms move into the GEMVs' prologues.
TEST(GenQwen3, DecodeLayerWithFusedNormGemvs) {
  const Qwen3Shape c = config("4b");
  for (std::uint64_t max_seqs : {1, 8, 9, 64}) {
    SCOPED_TRACE("max_seqs " + std::to_string(max_seqs));
    Qwen3GenOptions o = options();
    o.max_seqs = max_seqs;
    o.gemv_fused_norm = true;
    o.gemv_prefetch_bytes = 65536;
    const auto m = generate_qwen3_manifest(c, o);
    ASSERT_NO_THROW(core::check_protocol(core::verify(parse(m))));
    const auto& calls = m["programs"]["decode"]["calls"];
    ASSERT_EQ(calls.size(), 1 + 6 * c.layers + 2);
    const std::vector<std::string> layer = {"decode_norm_qkv",   "qk_norm_rope_cache",       "attn_decode",
                                            "decode_o_residual", "decode_norm_gate_up_silu", "decode_down_residual"};
    for (std::uint64_t l : {std::uint64_t{0}, std::uint64_t{1}, c.layers - 1})
      EXPECT_EQ(op_names(calls, 1 + 6 * l, 6), layer) << "layer " << l;
    EXPECT_EQ(op_names(calls, 1 + 6 * c.layers, 2), (std::vector<std::string>{"decode_norm_lm_head", "sample"}));

    // Residual GEMVs add into hidden in place; the norms read hidden with their layer's weight.
    const auto& decode = m["programs"]["decode"];
    const auto& o_proj = call_named(decode, "layers.5.o_proj");
    EXPECT_EQ(o_proj["args"][2]["buf"], "hidden");
    EXPECT_EQ(o_proj["args"][3]["var"], "seqs");
    EXPECT_EQ(call_named(decode, "layers.5.down_proj")["args"][2]["buf"], "hidden");
    const auto& qkv_call = call_named(decode, "layers.5.norm_qkv_proj");
    EXPECT_EQ(qkv_call["args"][0]["buf"], "hidden");
    EXPECT_EQ(qkv_call["args"][1]["buf"], "layers.5.input_norm");
    EXPECT_EQ(qkv_call["args"][2]["buf"], "layers.5.qkv");
    EXPECT_EQ(qkv_call["args"][4]["var"], "seqs");
    const auto& head = call_named(decode, "norm_lm_head");
    EXPECT_EQ(head["args"][0]["buf"], "hidden");
    EXPECT_EQ(head["args"][1]["buf"], "final_norm");
    const auto& gu = call_named(decode, "layers.5.norm_gate_up_silu");
    EXPECT_EQ(gu["args"][0]["buf"], "hidden");
    EXPECT_EQ(gu["args"][1]["buf"], "layers.5.post_norm");
    EXPECT_EQ(gu["args"][3]["buf"], "act");
    EXPECT_EQ(gu["args"].size(), max_seqs > 8 ? 6u : 5u);
    if (max_seqs > 8) {
      EXPECT_EQ(gu["args"][4]["buf"], "gate_up");
    }
    for (const auto& call : calls) {
      EXPECT_EQ(call["args"].dump().find("\"delta\""), std::string::npos) << call.dump();
      EXPECT_EQ(call["args"].dump().find("\"normed\""), std::string::npos) << call.dump();
    }

    const auto& ops = m["ops"];
    for (const char* name : {"decode_norm_qkv", "decode_o_residual", "decode_norm_gate_up_silu", "decode_down_residual",
                             "decode_norm_lm_head"})
      expect_when_partition(ops[name], max_seqs, name);
    EXPECT_EQ(active_entries(ops["decode_norm_qkv"], 1), std::vector<std::string>{"kern_gemv_rms_norm_bf16"});
    EXPECT_EQ(active_entries(ops["decode_o_residual"], std::min<std::uint64_t>(8, max_seqs)),
              std::vector<std::string>{"kern_gemv_residual_bf16"});
    EXPECT_EQ(active_entries(ops["decode_norm_gate_up_silu"], 1),
              std::vector<std::string>{"kern_gemv_rms_norm_gate_up_silu_bf16"});
    if (max_seqs > 8) {
      // Above 8 rows: the norm into the op's scratch, then cuBLASLt.
      EXPECT_EQ(active_entries(ops["decode_norm_qkv"], 9),
                (std::vector<std::string>{"kern_rms_norm_bf16", "extern:cublaslt_bf16_tn"}));
      EXPECT_EQ(ops["decode_norm_qkv"]["impl"]["scratch"]["normed"]["shape"],
                nlohmann::ordered_json::array({"seqs", 2560}));
      EXPECT_EQ(active_entries(ops["decode_down_residual"], max_seqs),
                std::vector<std::string>{"extern:cublaslt_bf16_tn_acc"});
      EXPECT_EQ(active_entries(ops["decode_norm_gate_up_silu"], 9),
                (std::vector<std::string>{"kern_rms_norm_bf16", "extern:cublaslt_bf16_tn", "kern_silu_mul_bf16"}));
    } else {
      EXPECT_EQ(ops["decode_norm_qkv"]["impl"]["launches"].size(), 1u);
      EXPECT_FALSE(ops["decode_norm_qkv"]["impl"].contains("scratch"));
      EXPECT_EQ(ops["decode_norm_gate_up_silu"]["params"].size(), 5u);
    }
    // GEMV geometry and sizes: one block per 16 weight rows (8 gate/up pairs), n and k literal; the
    // fused norm's shared memory holds min(max_seqs, 8) rows of hidden + 8 bf16.
    const auto& qkv = ops["decode_norm_qkv"]["impl"]["launches"][0];
    EXPECT_EQ(qkv["module"], "gemv");
    EXPECT_EQ(qkv["grid"][0], (6144 + 15) / 16);
    EXPECT_EQ(qkv["block"][0], 256);
    EXPECT_EQ(qkv["shared_mem"], std::min<std::uint64_t>(max_seqs, 8) * (2560 + 8) * 2);
    EXPECT_EQ(ops["decode_o_residual"]["impl"]["launches"][0]["block"][0], 256);
    EXPECT_EQ(qkv["args"][5]["i32"], 6144);
    EXPECT_EQ(qkv["args"][6]["i32"], 2560);
    EXPECT_EQ(qkv["args"][9]["i32"], 65536);  // prefetch: the default cap (the tile is 80 KiB)
    const auto& gate = ops["decode_norm_gate_up_silu"]["impl"]["launches"][0];
    EXPECT_EQ(gate["grid"][0], 9728 / 8);
    EXPECT_EQ(gate["args"][5]["i32"], 9728);
    EXPECT_EQ(ops["decode_norm_lm_head"]["impl"]["launches"][0]["grid"][0], 151936 / 16);
    EXPECT_EQ(ops["decode_down_residual"]["impl"]["launches"][0]["args"][5]["i32"], 9728);
    EXPECT_EQ(ops["decode_o_residual"]["params"][2], "inout buffer<bf16>");
  }
}

// The decode chain (opt-in): steps of up to 4 sequences run the first layer's norm + qkv_proj and then,
// per layer, RoPE, attention and one persistent kernel up to the next layer's qkv_proj (the last layer's
// ends with the final norm and the lm_head). Larger steps keep the per-op calls, gated by `when`.
TEST(GenQwen3, DecodeChainCoversSmallSteps) {
  const Qwen3Shape c = config("4b");
  for (std::uint64_t max_seqs : {1, 4, 8, 64}) {
    SCOPED_TRACE("max_seqs " + std::to_string(max_seqs));
    Qwen3GenOptions o = options();
    o.max_seqs = max_seqs;
    o.decode_chain = true;
    o.chain_blocks = 114;
    const auto m = generate_qwen3_manifest(c, o);
    ASSERT_NO_THROW(core::check_protocol(core::verify(parse(m))));
    const auto& calls = m["programs"]["decode"]["calls"];
    const auto& ops = m["ops"];
    const std::uint64_t rows = std::min<std::uint64_t>(4, max_seqs);
    EXPECT_EQ(m["buffers"]["chain_sync"]["kind"], "carry");
    EXPECT_EQ(m["buffers"]["chain_sync"]["dtype"], "u32");
    EXPECT_EQ(calls[1]["op"], "decode_chain_head");
    EXPECT_EQ(calls[1]["args"][2]["buf"], "layers.0.qkv");
    if (max_seqs <= 4) {
      // Every step goes through the chain: no per-op decode call, no GEMV module.
      ASSERT_EQ(calls.size(), 2 + 3 * c.layers + 1);
      for (std::uint64_t l : {std::uint64_t{0}, c.layers - 1})
        EXPECT_EQ(op_names(calls, 2 + 3 * l, 3),
                  (std::vector<std::string>{"qk_norm_rope_cache", "attn_decode",
                                            l + 1 == c.layers ? "decode_chain_last" : "decode_chain"}));
      EXPECT_FALSE(m["modules"].contains("gemv"));
      EXPECT_FALSE(ops.contains("decode_qkv"));
    } else {
      ASSERT_EQ(calls.size(), 2 + 9 * c.layers + 3);
      EXPECT_TRUE(m["modules"].contains("gemv"));
      // Per-op launches start above the chain's rows; with the chain's range they cover every step once.
      for (const char* name : {"decode_qkv", "decode_o_residual", "decode_gate_up_silu", "decode_down_residual",
                               "decode_lm_head", "decode_rms_norm"}) {
        SCOPED_TRACE(name);
        for (const auto& l : ops[name]["impl"]["launches"])
          EXPECT_EQ(l["when"]["min"].get<std::uint64_t>() > rows, true);
        nlohmann::ordered_json both = ops[name];
        both["impl"]["launches"].push_back(ops["decode_chain"]["impl"]["launches"][0]);
        if (std::string(name) != "decode_rms_norm") expect_when_partition(both, max_seqs, name);
      }
      EXPECT_EQ(active_entries(ops["decode_qkv"], 5), std::vector<std::string>{"kern_gemv_bf16"});
    }
    // The chain of layer 5 reads attention's output and ends with layer 6's qkv_proj; the last ends with the lm_head.
    const auto& mid = call_named(m["programs"]["decode"], "layers.5.chain");
    EXPECT_EQ(mid["args"][0]["buf"], "attn");
    EXPECT_EQ(mid["args"][2]["buf"], "hidden");
    EXPECT_EQ(mid["args"][7]["buf"], "layers.6.input_norm");
    EXPECT_EQ(mid["args"][8]["buf"], "layers.6.qkv");
    EXPECT_EQ(mid["args"][9]["buf"], "qkv");
    EXPECT_EQ(mid["args"][10]["buf"], "chain_sync");
    const auto& last = call_named(m["programs"]["decode"], "layers." + std::to_string(c.layers - 1) + ".chain");
    EXPECT_EQ(last["args"][7]["buf"], "final_norm");
    EXPECT_EQ(last["args"][8]["buf"], "lm_head");
    EXPECT_EQ(last["args"][9]["buf"], "logits");
    // Geometry: 288 threads, one block per SM as asked, checked for co-residency at load, 224 KiB of shared
    // memory: x rows of the widest k (9728) and stages of 40960 bytes (8 rows of k = 2560, 5 of 4096, 2 of 9728).
    const auto& l = ops["decode_chain"]["impl"]["launches"][0];
    EXPECT_EQ(l["module"], "decode_chain");
    EXPECT_EQ(l["grid"][0], 114);
    EXPECT_EQ(l["block"][0], 288);
    EXPECT_EQ(l["shared_mem"], 224 * 1024);
    EXPECT_EQ(l["when"]["max"], rows);
    EXPECT_TRUE(l["pdl"].get<bool>());
    EXPECT_EQ(l["args"][15]["i32"], 6144);  // n_next: qkv width
    EXPECT_EQ(ops["decode_chain_last"]["impl"]["launches"][0]["args"][15]["i32"], 151936);
    EXPECT_EQ(ops["decode_chain_head"]["impl"]["launches"][0]["args"][0]["i64"], 0);  // no phase A
    EXPECT_EQ(l["args"][17]["i32"], 40960);
    EXPECT_TRUE(l["cooperative"].get<bool>());
  }
}

TEST(GenQwen3, DecodeChainSharedMemoryFitsEveryPreset) {
  for (const std::string& name : qwen3_preset_names()) {
    SCOPED_TRACE(name);
    const Qwen3Shape s = config(name);
    Qwen3GenOptions o = options();
    o.decode_chain = true;
    const auto m = generate_qwen3_manifest(s, o);
    const auto& l = m["ops"]["decode_chain"]["impl"]["launches"][0];
    const std::uint64_t shared = l["shared_mem"], stage = l["args"][17]["i32"], rows = l["when"]["max"];
    const std::uint64_t kmax = std::max<std::uint64_t>({s.hidden, s.heads * s.head_dim, s.intermediate});
    const std::uint64_t pitch = 2 * kmax;  // one weight (or x) row in shared memory
    EXPECT_LE(shared, 224u * 1024);
    EXPECT_GE(stage, pitch);  // a stage holds a whole weight row of every phase
    EXPECT_EQ(stage % 128, 0u);
    EXPECT_GE((shared - rows * pitch) / stage, 2u);
    EXPECT_GE(rows, 1u);
  }
  Qwen3GenOptions o = options();
  o.decode_attn_target_blocks = 128;  // the decode attention's work target is a literal of both its launches
  const auto few = generate_qwen3_manifest(config("0.6b"), o);
  const auto& attn = few["ops"]["attn_decode"]["impl"]["launches"];
  EXPECT_EQ(attn[0]["args"][15]["i32"], 128);
  EXPECT_EQ(attn[1]["args"][10]["i32"], 128);
  EXPECT_EQ(attn[0]["args"][16]["i32"], 0);  // split_tokens 0: ranges from the step's size
  EXPECT_EQ(attn[1]["args"][11]["i32"], 0);
  o.decode_attn_target_blocks = (1u << 20) + 1;
  EXPECT_THROW(generate_qwen3_manifest(config("0.6b"), o), kern::Error);
  // 0 (the default): the partial kernel's own target, 256 for the tensor-core one, 1024 for the f32 one.
  o.decode_attn_target_blocks = 0;
  for (bool mma : {true, false}) {
    o.decode_attn_mma = mma;
    const auto m = generate_qwen3_manifest(config("0.6b"), o);
    const auto& l = m["ops"]["attn_decode"]["impl"]["launches"];
    EXPECT_EQ(l[0]["args"][15]["i32"], mma ? 256 : 1024);
    EXPECT_EQ(l[1]["args"][10]["i32"], mma ? 256 : 1024);
  }
  o.decode_attn_mma = true;
  o.decode_attn_target_blocks = 1024;
  o.decode_chain = true;
  o.chain_blocks = 0;
  EXPECT_THROW(generate_qwen3_manifest(config("0.6b"), o), kern::Error);
  o.decode_chain = false;
  const auto off = generate_qwen3_manifest(config("0.6b"), o);
  EXPECT_FALSE(off["ops"].contains("decode_chain"));
  EXPECT_FALSE(off["buffers"].contains("chain_sync"));
  EXPECT_FALSE(off["modules"].contains("decode_chain"));
}

// The decode attention's partial kernel: the tensor-core one by default, with its dynamic shared memory
// (4 warps x 3 stages x K and V tiles of 16 keys x (head_dim + 8) bf16); --decode-attn-f32 gives the f32 one,
// which takes none. The reduce and every argument stay the same.
TEST(GenQwen3, DecodeAttentionPartialKernelChoice) {
  for (const std::string& name : qwen3_preset_names()) {
    SCOPED_TRACE(name);
    const Qwen3Shape c = config(name);
    Qwen3GenOptions o = options();
    o.decode_attn_target_blocks = 512;  // the same target for both (by default each has its own)
    o.decode_attn_items = Qwen3GenOptions::DecodeAttnItems::Block;
    const auto mma = generate_qwen3_manifest(c, o);
    o.decode_attn_mma = false;
    const auto f32 = generate_qwen3_manifest(c, o);
    const auto& a = mma["ops"]["attn_decode"]["impl"]["launches"];
    const auto& b = f32["ops"]["attn_decode"]["impl"]["launches"];
    const std::string hd = "_hd" + std::to_string(c.head_dim);
    EXPECT_EQ(a[0]["entry"], "kern_attn_decode_mma_partial" + hd);
    EXPECT_EQ(b[0]["entry"], "kern_attn_decode_partial" + hd);
    EXPECT_EQ(a[0]["shared_mem"], 4u * 3 * 2 * 16 * (c.head_dim + 8) * 2);
    EXPECT_FALSE(b[0].contains("shared_mem"));
    EXPECT_EQ(a[0]["args"], b[0]["args"]);
    EXPECT_EQ(a[0]["grid"], b[0]["grid"]);
    EXPECT_EQ(a[1], b[1]);
    // --decode-attn-warp: the warp-item kernel, the same arguments, shared memory and reduce, and a
    // fixed grid of the target's blocks (its warps stride over the items) instead of one per item.
    o.decode_attn_mma = true;
    o.decode_attn_items = Qwen3GenOptions::DecodeAttnItems::Warp;
    const auto warp = generate_qwen3_manifest(c, o);
    const auto& w = warp["ops"]["attn_decode"]["impl"]["launches"];
    EXPECT_EQ(w[0]["entry"], "kern_attn_decode_warp_partial" + hd);
    EXPECT_EQ(w[0]["shared_mem"], 4u * 2 * 2 * 16 * (c.head_dim + 8) * 2);  // two stages
    EXPECT_EQ(w[0]["args"], a[0]["args"]);
    EXPECT_EQ(w[0]["grid"], nlohmann::ordered_json::array({512, 1, 1}));
    EXPECT_NE(a[0]["grid"], w[0]["grid"]);
    EXPECT_EQ(w[1], a[1]);
    // --decode-attn-key-major: either partial's key-major entry, everything else as without.
    if (c.heads / c.kv_heads > 8) continue;
    o.decode_attn_key_major = true;
    const auto km_warp = generate_qwen3_manifest(c, o);
    o.decode_attn_items = Qwen3GenOptions::DecodeAttnItems::Block;
    const auto km_block = generate_qwen3_manifest(c, o);
    o.decode_attn_key_major = false;
    const auto& kw = km_warp["ops"]["attn_decode"]["impl"]["launches"];
    const auto& kb = km_block["ops"]["attn_decode"]["impl"]["launches"];
    EXPECT_EQ(kw[0]["entry"], "kern_attn_decode_warp_km_partial" + hd);
    EXPECT_EQ(kb[0]["entry"], "kern_attn_decode_mma_km_partial" + hd);
    for (const char* key : {"shared_mem", "args", "grid"}) {
      EXPECT_EQ(kw[0][key], w[0][key]) << key;
      EXPECT_EQ(kb[0][key], a[0][key]) << key;
    }
    EXPECT_EQ(kw[1], w[1]);
    EXPECT_EQ(kb[1], a[1]);
  }
}

// --decode-attn-key-major takes GQA groups of at most 8 (the q heads are mma's n8) and the tensor-core attention.
TEST(GenQwen3, KeyMajorDecodeAttentionNeedsGroupsOfAtMost8) {
  Qwen3Shape c = config("4b");
  Qwen3GenOptions o = options();
  o.decode_attn_key_major = true;
  EXPECT_NO_THROW(generate_qwen3_manifest(c, o));
  c.heads = 16 * c.kv_heads;
  try {
    generate_qwen3_manifest(c, o);
    ADD_FAILURE() << "a group of 16 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Api);
    EXPECT_NE(std::string(e.what()).find("at most 8"), std::string::npos) << e.what();
  }
  c = config("4b");
  o.decode_attn_mma = false;
  EXPECT_THROW(generate_qwen3_manifest(c, o), Error);
}

// Prefill attention: the s2 layout for every call, except that with a token bound of 4096 or more (and
// head_dim 128) calls of 4096+ rows take the m32n32s2 layout; the two `when` ranges partition the rows.
TEST(GenQwen3, PrefillAttentionLayoutBySize) {
  const Qwen3Shape c = config("4b");  // head_dim 128
  Qwen3GenOptions o = options();
  o.prefill_attn_wgmma = false;  // --prefill-attn-mma (the wgmma default: PrefillAttentionOnWgmma)
  o.max_tokens = 4095;
  const auto small = generate_qwen3_manifest(c, o)["ops"]["attn_prefill"]["impl"]["launches"];
  ASSERT_EQ(small.size(), 1u);
  EXPECT_EQ(small[0]["entry"], "kern_attn_prefill_mma_s2_hd128");
  EXPECT_FALSE(small[0].contains("when"));
  o.max_tokens = 8192;
  const auto big = generate_qwen3_manifest(c, o)["ops"]["attn_prefill"]["impl"]["launches"];
  ASSERT_EQ(big.size(), 2u);
  EXPECT_EQ(big[0]["entry"], "kern_attn_prefill_mma_s2_hd128");
  EXPECT_EQ(big[0]["when"]["var"], "tokens");
  EXPECT_EQ(big[0]["when"]["max"], 4095);
  EXPECT_FALSE(big[0]["when"].contains("min"));
  EXPECT_EQ(big[1]["entry"], "kern_attn_prefill_mma_m32n32s2_hd128");
  EXPECT_EQ(big[1]["when"]["var"], "tokens");
  EXPECT_EQ(big[1]["when"]["min"], 4096);
  EXPECT_FALSE(big[1]["when"].contains("max"));
  EXPECT_EQ(big[1]["block"][0], 128);
  EXPECT_EQ(big[1]["shared_mem"], (128u + 2 * 2 * 32) * (128 + 8) * 2);
  const auto& big_args = big[1]["args"];
  EXPECT_EQ(big_args[big_args.size() - 2]["i32"], 128 / 4);  // rows per block: 128 queries / G
  EXPECT_EQ(big_args.back()["param"], 9);                    // first_row: the op's (0 in the prefill program)
  EXPECT_EQ(big[0]["args"], big[1]["args"]);         // same arguments, rows per block included (both 128 queries)
  // head_dim 64 (the m32n32s2 layout is built for 128 only): one launch whatever the bound.
  Qwen3Shape s64 = qwen3_preset("0.6b");
  s64.head_dim = 64;
  const auto hd64 = generate_qwen3_manifest(s64, o)["ops"]["attn_prefill"]["impl"]["launches"];
  ASSERT_EQ(hd64.size(), 1u);
  EXPECT_EQ(hd64[0]["entry"], "kern_attn_prefill_mma_s2_hd64");
  // --prefill-long-rows: 0 keeps s2 for every call; another threshold moves the partition.
  o.prefill_long_rows = 0;
  EXPECT_EQ(generate_qwen3_manifest(c, o)["ops"]["attn_prefill"]["impl"]["launches"].size(), 1u);
  o.prefill_long_rows = 1000;
  const auto moved = generate_qwen3_manifest(c, o)["ops"]["attn_prefill"]["impl"]["launches"];
  ASSERT_EQ(moved.size(), 2u);
  EXPECT_EQ(moved[0]["when"]["max"], 999);
  EXPECT_EQ(moved[1]["when"]["min"], 1000);
}

// head_dim 128 by default: the warp-specialised wgmma kernel (384 threads, 128 queries per block, four
// stages of 64-key K and V tiles plus 1 KB), and from --prefill-long-rows rows its three-warpgroup form
// (512 threads, 192 queries, three 16 KB Q tiles more); head_dim 64 keeps the mma.sync layout.
TEST(GenQwen3, PrefillAttentionOnWgmma) {
  const Qwen3Shape c = config("4b");
  Qwen3GenOptions o = options();
  o.max_tokens = 8192;
  const auto l = generate_qwen3_manifest(c, o)["ops"]["attn_prefill"]["impl"]["launches"];
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0]["entry"], "kern_attn_prefill_wgmma_ws_hd128");
  EXPECT_EQ(l[0]["when"]["max"], 4095);
  EXPECT_EQ(l[0]["block"][0], 384);
  EXPECT_EQ(l[0]["shared_mem"], 4u * 2 * 64 * 128 * 2 + 1024);
  EXPECT_EQ(l[0]["args"][l[0]["args"].size() - 2]["i32"], 128 / 4);  // rows per block: 128 queries / G
  EXPECT_EQ(l[1]["entry"], "kern_attn_prefill_wgmma_ws3_hd128");
  EXPECT_EQ(l[1]["when"]["min"], 4096);
  EXPECT_EQ(l[1]["block"][0], 512);
  EXPECT_EQ(l[1]["shared_mem"], 4u * 2 * 64 * 128 * 2 + 3 * 64 * 128 * 2 + 1024);
  EXPECT_EQ(l[1]["args"][l[1]["args"].size() - 2]["i32"], 192 / 4);
  // Calls that never reach the threshold: the one launch, unconditional.
  o.max_tokens = 2048;
  const auto small = generate_qwen3_manifest(c, o)["ops"]["attn_prefill"]["impl"]["launches"];
  ASSERT_EQ(small.size(), 1u);
  EXPECT_EQ(small[0]["entry"], "kern_attn_prefill_wgmma_ws_hd128");
  EXPECT_FALSE(small[0].contains("when"));
  Qwen3Shape s64 = qwen3_preset("0.6b");
  s64.head_dim = 64;
  EXPECT_EQ(generate_qwen3_manifest(s64, o)["ops"]["attn_prefill"]["impl"]["launches"][0]["entry"],
            "kern_attn_prefill_mma_s2_hd64");
}

// Every kernel the decode program chains after another waits for it (kernels/common.cuh), so all
// but the first launch carry pdl; --no-pdl and --gemv-prefetch reach the launches.
TEST(GenQwen3, DecodeLaunchesCarryPdlAndPrefetchOptions) {
  const Qwen3Shape c = config("4b");
  Qwen3GenOptions o = options();
  o.max_seqs = 8;
  const auto with = generate_qwen3_manifest(c, o);
  for (const char* name : {"decode_qkv", "decode_o_residual", "decode_gate_up_silu", "decode_down_residual",
                           "decode_lm_head", "qk_norm_rope_cache", "attn_decode", "sample", "rms_norm"})
    for (const auto& l : with["ops"][name]["impl"]["launches"]) EXPECT_EQ(l.value("pdl", false), true) << name;
  EXPECT_FALSE(with["ops"]["embedding"]["impl"]["launches"][0].contains("pdl"));
  EXPECT_EQ(with["ops"]["decode_qkv"]["impl"]["launches"][0]["args"][7]["i32"], 0);  // no prefetch by default
  EXPECT_EQ(with["ops"]["decode_qkv"]["impl"]["launches"][0]["grid"][0], 6144 / 16);

  o.pdl = false;
  o.gemv_prefetch_bytes = 4096;
  const auto without = generate_qwen3_manifest(c, o);
  for (const auto& [name, op] : without["ops"].items())
    for (const auto& l : op["impl"]["launches"]) EXPECT_FALSE(l.contains("pdl")) << name;
  EXPECT_EQ(without["ops"]["decode_o_residual"]["impl"]["launches"][0]["args"][7]["i32"], 4096);
  o.gemv_prefetch_bytes = 1u << 30;  // capped at the tile: 16 rows of k = 9728
  EXPECT_EQ(generate_qwen3_manifest(c, o)["ops"]["decode_down_residual"]["impl"]["launches"][0]["args"][7]["i32"],
            16 * 9728 * 2);
  o.gemv_max_blocks = 264;  // a cap on the grid; smaller grids stay one block per tile
  const auto capped = generate_qwen3_manifest(c, o);
  EXPECT_EQ(capped["ops"]["decode_qkv"]["impl"]["launches"][0]["grid"][0], 264);
  EXPECT_EQ(capped["ops"]["decode_o_residual"]["impl"]["launches"][0]["grid"][0], 160);
  o.gemv_prefetch_bytes = std::uint64_t{1} << 31;
  EXPECT_THROW(generate_qwen3_manifest(c, o), kern::Error);
}

TEST(GenQwen3, PrefillKeepsCublasGemmsForEveryRowCount) {
  const Qwen3Shape c = config("4b");
  const auto m = generate_qwen3_manifest(c, options());
  const auto& calls = m["programs"]["prefill"]["calls"];
  ASSERT_EQ(calls.size(), 1 + 9 * c.layers + 4);
  EXPECT_EQ(op_names(calls, 1, 9),
            (std::vector<std::string>{"rms_norm", "gemm_qkv", "qk_norm_rope_cache", "attn_prefill", "gemm_o",
                                      "add_rms_norm", "gemm_gate_up", "silu_mul", "gemm_down"}));
  EXPECT_EQ(op_names(calls, 1 + 9 * (c.layers - 1), 9),
            (std::vector<std::string>{"add_rms_norm", "gemm_qkv", "qk_norm_rope_cache", "attn_prefill", "gemm_o",
                                      "add_rms_norm", "gemm_gate_up", "silu_mul", "gemm_down"}));
  EXPECT_EQ(op_names(calls, 1 + 9 * c.layers, 4),
            (std::vector<std::string>{"add_rms_norm", "gather_last", "gemm_lm_head", "sample"}));
  for (const char* name : {"gemm_qkv", "gemm_o", "gemm_gate_up", "gemm_down", "gemm_lm_head"}) {
    const auto& launches = m["ops"][name]["impl"]["launches"];
    ASSERT_EQ(launches.size(), 1u) << name;
    EXPECT_EQ(launches[0]["entry"], "extern:cublaslt_bf16_tn") << name;
    EXPECT_FALSE(launches[0].contains("when")) << name;
  }
  EXPECT_EQ(call_named(m["programs"]["prefill"], "layers.3.o_proj")["args"][3]["var"], "tokens");
}

// kern serve's manifest: the prefill program ends at the last layer (its first decode row samples a
// prompt's first token), and what only the prefill's head used is gone (the verifier refuses unused
// declarations); the decode program is the same call for call.
TEST(GenQwen3, PrefillWithoutLogitsEndsAtTheLastLayer) {
  const Qwen3Shape c = config("4b");
  Qwen3GenOptions o = options(true);
  o.max_seqs = 256;
  o.max_tokens = 512;
  const auto with = generate_qwen3_manifest(c, o);
  o.prefill_logits = false;
  const auto m = generate_qwen3_manifest(c, o);
  const core::Verified v = core::verify(parse(m));
  const core::Protocol protocol = core::check_protocol(v);
  ASSERT_TRUE(protocol.chunk().has_value());
  EXPECT_FALSE(protocol.chunk()->emits_tokens);
  ASSERT_TRUE(protocol.forward(256, 1).has_value());
  EXPECT_TRUE(protocol.forward(256, 1)->emits_tokens);
  const auto& calls = m["programs"]["prefill"]["calls"];
  ASSERT_EQ(calls.size(), 1 + 9 * c.layers);
  EXPECT_EQ(calls.back()["op"], "gemm_down");
  EXPECT_EQ(with["programs"]["prefill"]["calls"].size(), 1 + 9 * c.layers + 4);
  EXPECT_EQ(m["programs"]["decode"], with["programs"]["decode"]);
  for (const char* gone : {"gather_last", "gemm_lm_head"}) {
    EXPECT_TRUE(with["ops"].contains(gone)) << gone;
    EXPECT_FALSE(m["ops"].contains(gone)) << gone;
  }
  EXPECT_FALSE(m["buffers"].contains("last"));
}

// Mixed steps (kern serve): a third program runs decode rows then chunk rows in one forward, and every
// serving program computes a row with the decode program's ops (one GEMM algorithm per weight), so a
// row's bits do not depend on which program ran it.
TEST(GenQwen3, MixedStepsRunTheDecodeOpsOverEveryRow) {
  const Qwen3Shape c = config("4b");
  Qwen3GenOptions o = options(true);
  o.max_seqs = 256;
  o.max_tokens = 512;
  o.prefill_logits = false;
  const auto plain = generate_qwen3_manifest(c, o);
  o.mixed = true;
  const auto m = generate_qwen3_manifest(c, o);
  const core::Verified v = core::verify(parse(m));
  const core::Protocol protocol = core::check_protocol(v);
  const auto mixed = protocol.mixed();
  ASSERT_TRUE(mixed.has_value());
  EXPECT_EQ(mixed->program, "mixed");
  EXPECT_EQ(mixed->decode_var, "dseqs");
  EXPECT_EQ(mixed->decode_groups, 256u);
  EXPECT_EQ(mixed->groups, 264u);
  EXPECT_TRUE(mixed->emits_tokens);
  EXPECT_EQ(protocol.forward(256, 1)->program, "decode");
  EXPECT_EQ(protocol.chunk()->program, "prefill");
  EXPECT_EQ(m["vars"]["seqs"]["max"], 264);
  EXPECT_EQ(m["buffers"]["cu_seqlens"]["shape"][0], 265);
  // The decode program makes the same calls; the prefill-only ops are gone.
  EXPECT_EQ(m["programs"]["decode"], plain["programs"]["decode"]);
  for (const char* gone : {"gemm_qkv", "gemm_o", "gemm_gate_up", "gemm_down", "add_rms_norm", "silu_mul"})
    EXPECT_FALSE(m["ops"].contains(gone)) << gone;
  const auto& prefill = m["programs"]["prefill"]["calls"];
  const std::vector<std::string> layer = {"rms_norm",          "decode_qkv", "qk_norm_rope_cache",  "attn_prefill",
                                          "decode_o_residual", "rms_norm",   "decode_gate_up_silu", "decode_down_residual"};
  ASSERT_EQ(prefill.size(), 1 + layer.size() * c.layers);
  EXPECT_EQ(op_names(prefill, 1, layer.size()), layer);
  EXPECT_EQ(call_named(m["programs"]["prefill"], "layers.5.qkv_proj")["args"][3]["var"], "tokens");
  EXPECT_EQ(call_named(m["programs"]["prefill"], "layers.5.attn")["args"][9]["i32"], 0);
  const auto& mx = m["programs"]["mixed"];
  ASSERT_EQ(mx["calls"].size(), 1 + (layer.size() + 1) * c.layers + 3);
  EXPECT_EQ(call_named(mx, "layers.5.attn_chunks")["args"][9]["var"], "dseqs");
  EXPECT_EQ(call_named(mx, "layers.5.attn")["op"], "attn_decode");
  EXPECT_EQ(call_named(mx, "layers.5.attn")["args"][5]["var"], "dseqs");
  EXPECT_EQ(call_named(mx, "layers.5.down_proj")["args"][3]["var"], "tokens");
  EXPECT_EQ(call_named(mx, "lm_head")["args"][3]["var"], "dseqs");
  EXPECT_EQ(call_named(mx, "sample")["args"][7]["var"], "dseqs");
  // The decode ops' norms and SiLU cover every row of the call; the GEMMs keep one algorithm.
  EXPECT_EQ(m["ops"]["decode_gate_up_silu"]["impl"]["launches"][1]["grid"][0], "tokens");
  EXPECT_EQ(m["ops"]["decode_qkv"]["impl"]["launches"][0]["algo_m"],
            plain["ops"]["decode_qkv"]["impl"]["launches"][0]["algo_m"]);
  // At 64 sequences the decode algorithm is still chosen at 64, not at the tokens bound.
  o.max_seqs = 64;
  const auto m64 = generate_qwen3_manifest(c, o);
  EXPECT_NO_THROW(core::check_protocol(core::verify(parse(m64))));
  EXPECT_EQ(m64["ops"]["decode_down_residual"]["impl"]["launches"][0]["algo_m"], 64);
  // What mixed steps cannot honour.
  for (auto bad : {+[](Qwen3GenOptions& x) { x.prefill_logits = true; },
                   +[](Qwen3GenOptions& x) { x.batch_invariant = false; },
                   +[](Qwen3GenOptions& x) { x.max_seqs = 8; },
                   +[](Qwen3GenOptions& x) { x.max_tokens = 64; }}) {
    Qwen3GenOptions b = o;
    bad(b);
    EXPECT_THROW(generate_qwen3_manifest(c, b), kern::Error);
  }
}

// Packed prefill (kern serve): the prefill program takes up to prefill_chunks sequences' chunks in
// one call, rows over all of them; its calls are the plain prefill program's.
TEST(GenQwen3, PackedPrefillTakesSeveralChunks) {
  const Qwen3Shape c = config("4b");
  Qwen3GenOptions o = options(true);
  o.max_seqs = 64;
  o.max_tokens = 4096;
  o.prefill_logits = false;
  const auto plain = generate_qwen3_manifest(c, o);
  o.prefill_chunks = 8;
  const auto m = generate_qwen3_manifest(c, o);
  EXPECT_EQ(m["programs"]["prefill"]["batch"]["groups"], 8);
  EXPECT_EQ(m["programs"]["prefill"]["batch"]["rows"], "tokens");
  EXPECT_EQ(m["programs"]["prefill"]["batch"]["packed"], true);
  EXPECT_EQ(m["programs"]["prefill"]["calls"], plain["programs"]["prefill"]["calls"]);
  EXPECT_FALSE(plain["programs"]["prefill"]["batch"].contains("packed"));
  const core::Protocol protocol = core::check_protocol(core::verify(parse(m)));
  const auto chunk = protocol.chunk();
  ASSERT_TRUE(chunk.has_value());
  EXPECT_TRUE(chunk->packed);
  EXPECT_EQ(chunk->groups, 8u);
  EXPECT_EQ(chunk->rows, 4096u);
  EXPECT_EQ(protocol.chunk_vars(*chunk, 5, 3000, 1024).at("seqs"), 5u);
  for (auto bad : {+[](Qwen3GenOptions& x) { x.prefill_logits = true; },  // a packed call emits no token
                   +[](Qwen3GenOptions& x) { x.prefill_chunks = 65; },    // beyond the sequences
                   +[](Qwen3GenOptions& x) { x.prefill_chunks = 0; }}) {
    Qwen3GenOptions b = o;
    bad(b);
    EXPECT_THROW(generate_qwen3_manifest(c, b), kern::Error);
  }
}

TEST(GenQwen3, OptionsShapeTheManifest) {
  const Qwen3Shape c = config("4b");
  Qwen3GenOptions o = options();
  o.max_tokens = 512;
  o.max_seqs = 8;
  o.page_size = 32;
  o.logits_output = true;
  const auto m = generate_qwen3_manifest(c, o);
  core::Verified v = core::verify(parse(m));
  const core::Protocol protocol = core::check_protocol(v);
  EXPECT_EQ(m["vars"]["tokens"]["max"], 512);
  EXPECT_EQ(m["vars"]["seqs"]["max"], 8);
  EXPECT_EQ(m["buffers"]["block_table"]["shape"][1], 1280);
  EXPECT_EQ(m["buffers"]["cu_seqlens"]["shape"][0], 9);
  EXPECT_EQ(m["buffers"]["logits"]["kind"], "output");
  EXPECT_EQ(protocol.page_tables()[0].stride, 32u);
  EXPECT_FALSE(protocol.forward(9, 1).has_value());
}

TEST(GenQwen3, DeterministicOutput) {
  const Qwen3Shape c = config("0.6b");
  EXPECT_EQ(generate_qwen3_manifest(c, options()).dump(), generate_qwen3_manifest(c, options()).dump());
}

void expect_config_error(const Json& j, const std::string& needle) {
  try {
    parse_qwen3_config(j);
    ADD_FAILURE() << "accepted a config that should fail with: " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::WeightArtifact) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(GenQwen3, RejectsConfigsItCannotServe) {
  const Json good = qwen3_config_json(qwen3_preset("4b"));
  for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                          "num_key_value_heads", "head_dim", "vocab_size", "tie_word_embeddings", "rope_theta",
                          "rms_norm_eps", "max_position_embeddings", "model_type"}) {
    Json j = good;
    j.erase(key);
    expect_config_error(j, std::string("missing field '") + key + "'");
  }
  auto with = [&](const char* key, Json v) {
    Json j = good;
    j[key] = std::move(v);
    return j;
  };
  expect_config_error(with("model_type", "llama"), "not \"qwen3\"");
  expect_config_error(with("head_dim", 256), "head_dim 256");
  expect_config_error(with("num_key_value_heads", 5), "not a multiple");
  expect_config_error(with("num_key_value_heads", 1), "at most 16");
  expect_config_error(with("intermediate_size", 3076), "multiples of 8");  // the decode GEMV's 16-byte loads
  expect_config_error(with("hidden_size", 0), "must be positive");
  expect_config_error(with("hidden_size", -4), "must be positive");
  expect_config_error(with("hidden_size", "2560"), "must be an integer");
  expect_config_error(with("rope_theta", -1.0), "positive number");
  expect_config_error(with("tie_word_embeddings", 1), "boolean");
  expect_config_error(with("torch_dtype", "float8_e4m3fn"), "bf16");
  expect_config_error(with("dtype", "int8"), "bf16");
  expect_config_error(with("attention_bias", true), "biases");
  expect_config_error(with("rope_scaling", Json{{"type", "dynamic"}, {"factor", 4.0}}), "rope_type \"dynamic\"");
  expect_config_error(with("use_sliding_window", true), "full-causal");
  expect_config_error(Json::array(), "not a JSON object");
}

TEST(GenQwen3, RejectsOptionsItCannotHonour) {
  const Qwen3Shape c = config("0.6b");
  auto expect_api = [&](Qwen3GenOptions o, const char* needle) {
    try {
      generate_qwen3_manifest(c, o);
      ADD_FAILURE() << "accepted options that should fail with: " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  Qwen3GenOptions o = options();
  o.max_seqs = 4096;
  expect_api(o, "exceeds --max-tokens");
  o = options();
  o.page_size = 24;
  expect_api(o, "power of two");
  o = options();
  o.max_tokens = 0;
  expect_api(o, "--max-tokens");
  o = options();
  o.module_sha256.erase("attention");
  expect_api(o, "attention");
}

TEST(GenQwen3, TensorIndexMustNameEveryBoundTensor) {
  const Qwen3Shape tied = config("0.6b");
  const Qwen3Shape untied = config("8b");
  Json index{{"metadata", {{"total_size", 1}}}, {"weight_map", Json::object()}};
  for (const std::string& name : qwen3_bound_tensors(tied))
    index["weight_map"][name] = "model-00001-of-00002.safetensors";
  EXPECT_NO_THROW(check_qwen3_tensor_index(tied, index, "index"));
  // The tied index lacks lm_head.weight, which an untied config binds.
  try {
    check_qwen3_tensor_index(untied, index, "index");
    ADD_FAILURE() << "missing lm_head.weight accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::WeightArtifact);
    EXPECT_NE(std::string(e.what()).find("lm_head.weight"), std::string::npos) << e.what();
  }
  index["weight_map"].erase("model.layers.27.mlp.down_proj.weight");
  EXPECT_THROW(check_qwen3_tensor_index(tied, index, "index"), Error);
  EXPECT_THROW(check_qwen3_tensor_index(tied, Json::object(), "index"), Error);
  EXPECT_EQ(qwen3_bound_tensors(tied).size(), 2u + 11u * 28u);
  EXPECT_EQ(qwen3_bound_tensors(untied).size(), 3u + 11u * 36u);
}

TEST(GenQwen3, SamplingOpAndFillsOrArgmaxOnly) {
  const Qwen3Shape c = config("4b");
  Qwen3GenOptions o = options();
  const auto m = generate_qwen3_manifest(c, o);
  const core::Verified v = core::verify(parse(m));
  const core::Protocol p = core::check_protocol(v);
  for (core::Fill f : {core::Fill::Sampling, core::Fill::SamplingKeys, core::Fill::History, core::Fill::Logprobs,
                       core::Fill::LogprobIds})
    EXPECT_NE(p.fill(f), nullptr) << core::to_string(f);
  EXPECT_EQ(p.fill(core::Fill::History)->width, c.max_positions);  // penalties see a whole sequence
  EXPECT_TRUE(m["ops"].contains("sample"));
  EXPECT_FALSE(m["ops"].contains("argmax"));
  EXPECT_FALSE(m["modules"].contains("argmax"));
  o.sampling = false;
  const auto g = generate_qwen3_manifest(c, o);
  const core::Protocol pg = core::check_protocol(core::verify(parse(g)));
  EXPECT_EQ(pg.fill(core::Fill::Sampling), nullptr);
  EXPECT_EQ(pg.fill(core::Fill::Logprobs), nullptr);
  EXPECT_TRUE(g["ops"].contains("argmax"));
  EXPECT_FALSE(g["modules"].contains("sample"));
}

TEST(GenQwen3, HashesFatbinsAndReportsAMissingOne) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "kern_gen_qwen3_fatbins";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const std::string& f : qwen3_kernel_families()) write_file((dir / (f + ".fatbin")).string(), "fatbin " + f);
  const auto hashes = hash_kernel_fatbins(dir);
  EXPECT_EQ(hashes.at("rope"), to_hex(sha256("fatbin rope")));
  std::filesystem::remove(dir / "argmax.fatbin");
  try {
    hash_kernel_fatbins(dir);
    ADD_FAILURE() << "missing fatbin accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::KernelArtifact);
    EXPECT_NE(std::string(e.what()).find("argmax.fatbin"), std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

TEST(GenQwen3Cli, GenThenVerify) {
  const std::string kern = std::string(KERN_BINARY_DIR) + "/bin/kern";
  if (!std::filesystem::exists(kern)) GTEST_SKIP() << kern << " not built";
  const std::filesystem::path root = std::filesystem::temp_directory_path() / "kern_gen_qwen3_cli";
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root / "kernels");
  for (const std::string& f : qwen3_kernel_families())
    write_file((root / "kernels" / (f + ".fatbin")).string(), "not really a fatbin: " + f);
  for (const char* preset : {"0.6b", "14b"}) {
    const std::string name = std::string("Qwen3-") + preset;
    SCOPED_TRACE(name);
    const std::filesystem::path dir = root / name;
    std::filesystem::create_directories(dir);
    const Qwen3Shape c = config(preset);
    Json index{{"metadata", {{"total_size", 1}}}, {"weight_map", Json::object()}};
    for (const std::string& name : qwen3_bound_tensors(c)) index["weight_map"][name] = "model.safetensors";
    write_file((dir / "config.json").string(), qwen3_config_json(qwen3_preset(preset)).dump(2));
    write_file((dir / "model.safetensors.index.json").string(), index.dump(2));
    const std::string manifest = (root / (name + ".json")).string();
    auto [gen_rc, gen_out] = kern_test::run_shell(kern + " gen qwen3 " + dir.string() + " --kernels-dir " + (root / "kernels").string() +
                                 " --max-seqs 32 -o " + manifest);
    ASSERT_EQ(gen_rc, 0) << gen_out;
    auto [verify_rc, verify_out] = kern_test::run_shell(kern + " verify " + manifest);
    EXPECT_EQ(verify_rc, 0) << verify_out;
    const Json m = parse_json_strict(read_file(manifest));
    EXPECT_EQ(m["model"], name);
    EXPECT_EQ(m["modules"]["rope"]["sha256"], to_hex(sha256("not really a fatbin: rope")));
    // --decode-attn-items: auto (32 sequences: the warp-item partial), block, and a bad name refused.
    const std::string hd = "_hd" + std::to_string(c.head_dim);
    EXPECT_EQ(m["ops"]["attn_decode"]["impl"]["launches"][0]["entry"], "kern_attn_decode_warp_partial" + hd);
    auto [block_rc, block_out] = kern_test::run_shell(kern + " gen qwen3 " + dir.string() + " --kernels-dir " +
                                     (root / "kernels").string() + " --max-seqs 32 --decode-attn-items block -o " +
                                     manifest);
    ASSERT_EQ(block_rc, 0) << block_out;
    EXPECT_EQ(parse_json_strict(read_file(manifest))["ops"]["attn_decode"]["impl"]["launches"][0]["entry"],
              "kern_attn_decode_mma_partial" + hd);
    auto [items_rc, items_out] = kern_test::run_shell(kern + " gen qwen3 " + dir.string() + " --kernels-dir " +
                                     (root / "kernels").string() + " --decode-attn-items blocks");
    EXPECT_NE(items_rc, 0) << items_out;
    EXPECT_NE(items_out.find("blocks"), std::string::npos) << items_out;

    // The shard index without one bound tensor: refused, naming it.
    index["weight_map"].erase("model.layers.1.self_attn.v_proj.weight");
    write_file((dir / "model.safetensors.index.json").string(), index.dump(2));
    auto [bad_rc, bad_out] = kern_test::run_shell(kern + " gen qwen3 " + dir.string() + " --kernels-dir " + (root / "kernels").string());
    EXPECT_EQ(bad_rc, 1) << bad_out;
    EXPECT_NE(bad_out.find("model.layers.1.self_attn.v_proj.weight"), std::string::npos) << bad_out;
  }
  {  // an unsupported config: exit 1 with the reason
    const std::filesystem::path dir = root / "hd256";
    std::filesystem::create_directories(dir);
    Json j = qwen3_config_json(qwen3_preset("1.7b"));
    j["head_dim"] = 256;
    write_file((dir / "config.json").string(), j.dump());
    auto [rc, out] = kern_test::run_shell(kern + " gen qwen3 " + dir.string() + " --kernels-dir " + (root / "kernels").string());
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("head_dim 256"), std::string::npos) << out;
  }
  {  // no fatbins: exit 1 naming the missing module (a config without a shard index is fine)
    const std::filesystem::path dir = root / "config_only";
    std::filesystem::create_directories(dir);
    write_file((dir / "config.json").string(), qwen3_config_json(qwen3_preset("0.6b")).dump());
    auto [rc, out] = kern_test::run_shell(kern + " gen qwen3 " + dir.string() + " --kernels-dir " + root.string());
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find(".fatbin not found"), std::string::npos) << out;
  }
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace kern::models
