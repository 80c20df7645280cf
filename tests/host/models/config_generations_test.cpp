// config.json as each transformers generation writes it: the fields of 4.x (top-level rope_theta,
// torch_dtype, rope_scaling) and of 5.x (rope_parameters, dtype, layer_types) give the same shape;
// YaRN is read from either; what would change the arithmetic and is not implemented is refused
// naming the field and its value.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "kern/base/error.hpp"
#include "kern/base/json.hpp"
#include "kern/models/qwen3_gen.hpp"

namespace kern::models {
namespace {

// Qwen3-4B's config.json as transformers 4.51 wrote it (Qwen/Qwen3-4B on the Hub).
Json v4_config() {
  return Json::parse(R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 2560, "initializer_range": 0.02, "intermediate_size": 9728, "max_position_embeddings": 40960,
  "max_window_layers": 36, "model_type": "qwen3", "num_attention_heads": 32, "num_hidden_layers": 36,
  "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000,
  "sliding_window": null, "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})");
}

// The same model saved by transformers 5.17's save_pretrained (the form of assets/default-model).
Json v5_config() {
  Json c = Json::parse(R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "dtype": "bfloat16", "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 2560, "initializer_range": 0.02, "intermediate_size": 9728, "max_position_embeddings": 40960,
  "max_window_layers": 36, "model_type": "qwen3", "num_attention_heads": 32, "num_hidden_layers": 36,
  "num_key_value_heads": 8, "pad_token_id": null, "rms_norm_eps": 1e-06,
  "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"}, "sliding_window": null,
  "tie_word_embeddings": true, "transformers_version": "5.17.0", "use_cache": true, "use_sliding_window": false,
  "vocab_size": 151936})");
  c["layer_types"] = Json::array();
  for (int i = 0; i < 36; ++i) c["layer_types"].push_back("full_attention");
  return c;
}

std::string refusal(const Json& c) {
  try {
    parse_qwen3_config(c);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::WeightArtifact) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted " << c.dump();
  return "";
}

void expect_same_shape(const Qwen3Shape& a, const Qwen3Shape& b) {
  EXPECT_EQ(a.hidden, b.hidden);
  EXPECT_EQ(a.intermediate, b.intermediate);
  EXPECT_EQ(a.layers, b.layers);
  EXPECT_EQ(a.heads, b.heads);
  EXPECT_EQ(a.kv_heads, b.kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.vocab, b.vocab);
  EXPECT_EQ(a.tied, b.tied);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.max_positions, b.max_positions);
  EXPECT_EQ(a.rope_scaling.type, b.rope_scaling.type);
}

TEST(Qwen3ConfigGenerations, BothGenerationsGiveTheSameShape) {
  const Qwen3Shape v4 = parse_qwen3_config(v4_config());
  const Qwen3Shape v5 = parse_qwen3_config(v5_config());
  expect_same_shape(v4, v5);
  expect_same_shape(v4, qwen3_preset("4b"));
  EXPECT_EQ(v5.rope_theta, 1e6);
  EXPECT_EQ(v5.rope_scaling.type, Qwen3RopeScaling::Type::None);
}

TEST(Qwen3ConfigGenerations, FieldsThatDoNotChangeTheArithmeticAreIgnored) {
  Json c = v5_config();
  c["some_future_field"] = Json{{"a", 1}};
  c["output_router_logits"] = false;
  c["dtype"] = "float32";  // storage dtype: converted to bf16 while loading
  EXPECT_EQ(parse_qwen3_config(c).hidden, 2560u);
  c["dtype"] = "float16";
  EXPECT_EQ(parse_qwen3_config(c).hidden, 2560u);
}

TEST(Qwen3ConfigGenerations, RopeThetaFromEitherPlaceMustAgree) {
  Json c = v5_config();
  c["rope_parameters"].erase("rope_theta");
  EXPECT_NE(refusal(c).find("missing field 'rope_theta'"), std::string::npos);
  c = v5_config();
  c["rope_theta"] = 10000.0;
  EXPECT_NE(refusal(c).find("disagree"), std::string::npos);
  c["rope_theta"] = 1000000;
  EXPECT_EQ(parse_qwen3_config(c).rope_theta, 1e6);
}

TEST(Qwen3ConfigGenerations, YarnFromEitherGeneration) {
  Json v4 = v4_config();
  v4["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  Json v5 = v5_config();
  v5["rope_parameters"] = {
      {"rope_type", "yarn"}, {"rope_theta", 1000000.0}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  for (const Json& c : {v4, v5}) {
    const Qwen3Shape s = parse_qwen3_config(c);
    EXPECT_EQ(s.rope_scaling.type, Qwen3RopeScaling::Type::Yarn);
    EXPECT_EQ(s.rope_scaling.factor, 4.0);
    EXPECT_EQ(s.rope_scaling.original_max_positions, 32768u);
    EXPECT_EQ(s.rope_scaling.beta_fast, 32.0);
    EXPECT_EQ(s.rope_scaling.beta_slow, 1.0);
    EXPECT_DOUBLE_EQ(s.rope_scaling.attention_factor, 0.1 * std::log(4.0) + 1.0);
  }
  // The older spelling `type`, explicit betas and attention factor.
  v4["rope_scaling"] = {
      {"type", "yarn"}, {"factor", 2.0}, {"beta_fast", 16}, {"beta_slow", 2}, {"attention_factor", 1.25}};
  const Qwen3Shape s = parse_qwen3_config(v4);
  EXPECT_EQ(s.rope_scaling.beta_fast, 16.0);
  EXPECT_EQ(s.rope_scaling.beta_slow, 2.0);
  EXPECT_EQ(s.rope_scaling.attention_factor, 1.25);
  EXPECT_EQ(s.rope_scaling.original_max_positions, 40960u);  // max_position_embeddings when absent
}

TEST(Qwen3ConfigGenerations, YarnChangesOnlyTheRopeTableLaunch) {
  Json c = v5_config();
  c["rope_parameters"] = {
      {"rope_type", "yarn"}, {"rope_theta", 1000000.0}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  Qwen3GenOptions o;
  for (const std::string& f : qwen3_kernel_families()) o.module_sha256[f] = std::string(64, 'a');
  const Json plain = generate_qwen3_manifest(parse_qwen3_config(v5_config()), o);
  const Json yarn = generate_qwen3_manifest(parse_qwen3_config(c), o);
  const Json& l = yarn["ops"]["rope_table"]["impl"]["launches"][0];
  EXPECT_EQ(l["entry"], "kern_rope_table_yarn_f32");
  ASSERT_EQ(l["args"].size(), 8u);
  // head_dim 128, theta 1e6, original window 32768: transformers' correction range is [23, 40].
  EXPECT_EQ(l["args"][5]["f32"].get<double>(), 23.0);
  EXPECT_EQ(l["args"][6]["f32"].get<double>(), 40.0);
  Json a = yarn, b = plain;
  a["ops"].erase("rope_table");
  b["ops"].erase("rope_table");
  EXPECT_EQ(a, b);
}

TEST(Qwen3ConfigGenerations, WhatIsNotImplementedIsRefusedByName) {
  Json c = v5_config();
  c["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 1e6}, {"factor", 8.0}};
  EXPECT_NE(refusal(c).find("rope_type \"llama3\""), std::string::npos);
  c["rope_parameters"] = {{"rope_type", "linear"}, {"rope_theta", 1e6}, {"factor", 2.0}};
  EXPECT_NE(refusal(c).find("rope_type \"linear\""), std::string::npos);
  c["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 1e6}, {"factor", 2.0}, {"long_factor", 3}};
  EXPECT_NE(refusal(c).find("'long_factor'"), std::string::npos);
  c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}, {"factor", 2.0}};
  EXPECT_NE(refusal(c).find("'factor'"), std::string::npos);
  c = v5_config();
  c["layer_types"][7] = "sliding_attention";
  const std::string why = refusal(c);
  EXPECT_NE(why.find("layer_types[7]"), std::string::npos) << why;
  EXPECT_NE(why.find("sliding_attention"), std::string::npos) << why;
  c = v5_config();
  c["layer_types"].erase(0);
  EXPECT_NE(refusal(c).find("array of 36"), std::string::npos);
  c = v5_config();
  c["partial_rotary_factor"] = 0.5;
  EXPECT_NE(refusal(c).find("partial_rotary_factor"), std::string::npos);
  c = v4_config();
  c["rope_scaling"] = "yarn";
  EXPECT_NE(refusal(c).find("must be an object"), std::string::npos);
}

}  // namespace
}  // namespace kern::models
