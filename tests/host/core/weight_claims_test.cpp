// kern test's shared weights (include/kern/core/weight_claims.hpp): which of a candidate
// manifest's weights may use the reference runtime's copy.
#include "kern/core/weight_claims.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kern/base/json.hpp"
#include "kern/base/sha256.hpp"
#include "kern/core/manifest.hpp"
#include "kern/models/qwen3_gen.hpp"
#include "kern/models/qwen3_synth.hpp"

namespace kern::core {
namespace {

Json generated(const models::Qwen3GenOptions& base) {
  models::Qwen3GenOptions o = base;
  for (const std::string& f : models::qwen3_kernel_families()) o.module_sha256[f] = to_hex(sha256(f));
  o.model = "test";
  const models::Qwen3Shape shape = models::parse_qwen3_config(models::qwen3_config_json(models::qwen3_preset("tiny")));
  return models::generate_qwen3_manifest(shape, o);
}

Manifest parsed(const Json& j) { return parse_manifest(j.dump(), "generated"); }

std::size_t weights_of(const Manifest& m) {
  std::size_t n = 0;
  for (const auto& [name, b] : m.buffers) n += b.kind == BufferKind::Weight;
  return n;
}

// A bf16 weight no other buffer is bound to the same tensor as (the tiny preset ties lm_head to
// the embedding).
std::string untied_weight(const Manifest& m) {
  for (const auto& [name, b] : m.buffers) {
    if (b.kind != BufferKind::Weight || b.bind.size() != 1 || b.dtype != DType::BF16) continue;
    std::size_t same_tensor = 0;
    for (const auto& [other, o] : m.buffers)
      same_tensor += o.kind == BufferKind::Weight && !o.bind.empty() && o.bind[0].tensor.name == b.bind[0].tensor.name;
    if (same_tensor == 1) return name;
  }
  return {};
}

TEST(WeightClaims, TwoVariantsOfOneModelShareEveryWeight) {
  models::Qwen3GenOptions variant;
  variant.pdl = false;
  variant.logits_output = true;
  const Manifest ref = parsed(generated({})), cand = parsed(generated(variant));
  const WeightClaims c = weight_claims(cand, ref);
  ASSERT_GT(weights_of(cand), 0u);
  EXPECT_EQ(c.claimed.size(), weights_of(cand));
  EXPECT_TRUE(c.not_claimed.empty()) << c.not_claimed.front().buffer << ": " << c.not_claimed.front().why;
  // matched by content: a tied lm_head claims the embedding it is bound to
  for (const WeightClaim& w : c.claimed) {
    ASSERT_EQ(cand.buffers.at(w.buffer).bind.size(), ref.buffers.at(w.reference).bind.size());
    EXPECT_EQ(cand.buffers.at(w.buffer).bind[0].tensor.name, ref.buffers.at(w.reference).bind[0].tensor.name);
    EXPECT_EQ(cand.buffers.at(w.buffer).dtype, ref.buffers.at(w.reference).dtype);
  }
}

TEST(WeightClaims, ADifferentDeclarationOrBindingIsNotClaimed) {
  const Json base = generated({});
  const Manifest ref = parsed(base);
  const std::string w = untied_weight(ref);
  ASSERT_FALSE(w.empty());
  Json dtype = base;
  dtype["buffers"][w]["dtype"] = "f32";
  WeightClaims c = weight_claims(parsed(dtype), ref);
  ASSERT_EQ(c.not_claimed.size(), 1u);
  EXPECT_EQ(c.not_claimed[0].buffer, w);
  EXPECT_NE(c.not_claimed[0].why.find("no weight of the reference"), std::string::npos) << c.not_claimed[0].why;
  EXPECT_EQ(c.claimed.size(), weights_of(ref) - 1);
  Json rebound = base;
  rebound["buffers"][w]["bind"] = Json::array({Json{{"tensor", "some.other.tensor"}}});
  c = weight_claims(parsed(rebound), ref);
  ASSERT_EQ(c.not_claimed.size(), 1u);
  EXPECT_EQ(c.not_claimed[0].buffer, w);
  // the same tensor under another buffer name is claimed by content
  Json renamed = base;
  renamed["buffers"]["renamed." + w] = renamed["buffers"][w];
  c = weight_claims(parsed(renamed), ref);
  bool found = false;
  for (const WeightClaim& x : c.claimed) found = found || (x.buffer == "renamed." + w && x.reference == w);
  EXPECT_TRUE(found);
}

TEST(WeightClaims, AWeightAProgramWritesIsNeverClaimed) {
  const Json base = generated({});
  const Manifest ref = parsed(base);
  // a weight some call writes: pass it as an op's output in a once program of the candidate
  const std::string w = untied_weight(ref);
  std::string out_op;
  std::size_t out_param = 0;
  for (const auto& [name, op] : ref.ops) {
    for (std::size_t i = 0; i < op.params.size(); ++i)
      if (op.params[i].writes() && op.params[i].kind == ParamType::Kind::Buffer && op.params[i].dtype == DType::BF16) {
        out_op = name;
        out_param = i;
        break;
      }
    if (!out_op.empty()) break;
  }
  ASSERT_FALSE(w.empty());
  ASSERT_FALSE(out_op.empty());
  const Manifest m = parsed(base);
  Manifest cand = m;
  Call call;
  call.label = "overwrites";
  call.op = out_op;
  call.args.resize(m.ops.at(out_op).params.size());
  call.args[out_param].name = w;
  Program p;
  p.once = true;
  p.calls.push_back(call);
  cand.programs["derive_it"] = p;
  const std::string writer = weight_writer(cand, w);
  EXPECT_NE(writer.find("program derive_it call 0 (overwrites) writes it"), std::string::npos) << writer;
  WeightClaims c = weight_claims(cand, ref);
  bool refused = false;
  for (const WeightNotClaimed& x : c.not_claimed) refused = refused || (x.buffer == w && x.why.find("derived") != std::string::npos);
  EXPECT_TRUE(refused);
  // and on the reference's side: the candidate's plain weight finds no shareable twin
  c = weight_claims(m, cand);
  refused = false;
  for (const WeightNotClaimed& x : c.not_claimed)
    refused = refused || (x.buffer == w && x.why.find("the reference's `" + w + "` has the same declaration") != std::string::npos);
  EXPECT_TRUE(refused);
  EXPECT_TRUE(weight_writer(m, w).empty());
}

// An fp8 variant (kern gen --fp8) over the bf16 manifest: what it keeps in bf16 (embedding, lm_head, norms)
// is claimed; its layer weights are no weights at all (bf16 sources the derive program reads, e4m3 carries
// and scales it writes) and none of them is claimed. The other way round the bf16 layer weights find no twin.
TEST(WeightClaims, AnFp8VariantClaimsTheBf16WeightsItKeepsAndNotItsFp8Ones) {
  models::Qwen3GenOptions fp8;
  fp8.fp8 = true;
  const Manifest ref = parsed(generated({})), cand = parsed(generated(fp8));
  const WeightClaims c = weight_claims(cand, ref);
  EXPECT_TRUE(c.not_claimed.empty()) << c.not_claimed.front().buffer << ": " << c.not_claimed.front().why;
  std::set<std::string> claimed, want = {"embed", "lm_head", "final_norm"};
  for (const WeightClaim& w : c.claimed) {
    claimed.insert(w.buffer);
    EXPECT_EQ(cand.buffers.at(w.buffer).dtype, DType::BF16) << w.buffer;
    EXPECT_EQ(cand.buffers.at(w.buffer).kind, BufferKind::Weight) << w.buffer;
    EXPECT_EQ(ref.buffers.at(w.reference).bind[0].tensor.name, cand.buffers.at(w.buffer).bind[0].tensor.name);
  }
  std::size_t layers = 0;
  for (const auto& [name, b] : cand.buffers) layers += name.size() > 10 && name.ends_with(".input_norm");
  ASSERT_GT(layers, 0u);
  for (std::size_t l = 0; l < layers; ++l)
    for (const char* w : {"input_norm", "q_norm", "k_norm", "post_norm"})
      want.insert("layers." + std::to_string(l) + "." + w);
  EXPECT_EQ(claimed, want);
  std::size_t fp8_buffers = 0, sources = 0;
  for (const auto& [name, b] : cand.buffers) {
    if (b.dtype != DType::FP8E4M3 && b.kind != BufferKind::Source) continue;
    fp8_buffers += b.dtype == DType::FP8E4M3;
    sources += b.kind == BufferKind::Source;
    EXPECT_FALSE(claimed.count(name)) << name;
  }
  EXPECT_EQ(fp8_buffers, 4 * layers);
  EXPECT_EQ(sources, 4 * layers);
  // The e4m3 weights are the derive program's output: derived, whatever their declaration.
  EXPECT_NE(weight_writer(cand, "layers.0.qkv").find("program quantize call 0 (layers.0.qkv) writes it"),
            std::string::npos)
      << weight_writer(cand, "layers.0.qkv");
  EXPECT_NE(weight_writer(cand, "layers.0.qkv_scale").find("program quantize"), std::string::npos);
  // The bf16 manifest as the candidate: the norms, embedding and lm_head are claimed, its layer GEMM
  // weights find no weight of the fp8 manifest to use (there they are sources).
  const WeightClaims r = weight_claims(ref, cand);
  EXPECT_EQ(r.claimed.size(), want.size());
  std::set<std::string> refused;
  for (const WeightNotClaimed& x : r.not_claimed) {
    refused.insert(x.buffer);
    EXPECT_NE(x.why.find("no weight of the reference"), std::string::npos) << x.buffer << ": " << x.why;
  }
  EXPECT_EQ(refused.size(), 4 * layers);
  EXPECT_TRUE(refused.count("layers.0.qkv"));
  EXPECT_TRUE(refused.count("layers.0.down"));
}

}  // namespace
}  // namespace kern::core
