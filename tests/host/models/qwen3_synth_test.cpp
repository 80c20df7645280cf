// kern synth qwen3: config values per preset (and their round trip through kern gen's reader),
// sharded checkpoint consistency, determinism, weight statistics.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/base/json.hpp"
#include "kern/models/qwen3_gen.hpp"
#include "kern/models/qwen3_synth.hpp"
#include "temp_dir.hpp"
#include "thrown.hpp"

namespace kern::models {
namespace {

namespace fs = std::filesystem;

using test::TempDir;

// A small shape (vocab 1000) for tests that write several checkpoints.
Qwen3Shape small_shape() {
  Qwen3Shape s = qwen3_preset("tiny");
  s.vocab = 1000;
  s.layers = 2;
  return s;
}

struct Shard {
  Json header;
  std::uint64_t data_start = 0;
  std::uint64_t file_size = 0;
};

Shard read_shard(const std::string& path) {
  File f(path);
  std::uint64_t n = 0;
  f.read_exact(&n, 8, 0);
  std::string json(n, '\0');
  f.read_exact(json.data(), n, 8);
  return {parse_json_strict(json, {ErrorKind::WeightArtifact, path, 64}), 8 + n, f.size()};
}

std::vector<float> read_bf16_tensor(const std::string& dir, const std::string& name) {
  Json index = parse_json_strict(read_file(dir + "/model.safetensors.index.json"));
  std::string shard = dir + "/" + index["weight_map"][name].get<std::string>();
  Shard s = read_shard(shard);
  auto off = s.header[name]["data_offsets"];
  std::uint64_t a = off[0], b = off[1];
  std::vector<std::uint16_t> raw((b - a) / 2);
  File(shard).read_exact(raw.data(), b - a, s.data_start + a);
  std::vector<float> out;
  for (auto r : raw) {
    std::uint32_t u = std::uint32_t{r} << 16;
    float f;
    std::memcpy(&f, &u, 4);
    out.push_back(f);
  }
  return out;
}

TEST(Qwen3Synth, PresetConfigsMatchTheReleasedModels) {
  struct Want {
    const char* preset;
    int hidden, inter, layers, heads, kv, head_dim;
    bool tied;
  };
  const Want wants[] = {{"0.6b", 1024, 3072, 28, 16, 8, 128, true},  {"1.7b", 2048, 6144, 28, 16, 8, 128, true},
                        {"4b", 2560, 9728, 36, 32, 8, 128, true},    {"8b", 4096, 12288, 36, 32, 8, 128, false},
                        {"14b", 5120, 17408, 40, 40, 8, 128, false}, {"32b", 5120, 25600, 64, 64, 8, 128, false},
                        {"tiny", 256, 768, 4, 4, 2, 64, true}};
  for (const auto& w : wants) {
    Json c = qwen3_config_json(qwen3_preset(w.preset));
    SCOPED_TRACE(w.preset);
    EXPECT_EQ(c["architectures"], Json::array({"Qwen3ForCausalLM"}));
    EXPECT_EQ(c["model_type"], "qwen3");
    EXPECT_EQ(c["hidden_size"], w.hidden);
    EXPECT_EQ(c["intermediate_size"], w.inter);
    EXPECT_EQ(c["num_hidden_layers"], w.layers);
    EXPECT_EQ(c["num_attention_heads"], w.heads);
    EXPECT_EQ(c["num_key_value_heads"], w.kv);
    EXPECT_EQ(c["head_dim"], w.head_dim);
    EXPECT_EQ(c["tie_word_embeddings"], w.tied);
    EXPECT_EQ(c["vocab_size"], 151936);
    EXPECT_EQ(c["rope_theta"], 1000000);
    EXPECT_DOUBLE_EQ(c["rms_norm_eps"].get<double>(), 1e-6);
    EXPECT_EQ(c["max_position_embeddings"], 40960);
    EXPECT_EQ(c["torch_dtype"], "bfloat16");
    EXPECT_EQ(c["bos_token_id"], 151643);
    EXPECT_EQ(c["eos_token_id"], 151645);
    EXPECT_EQ(c["attention_bias"], false);
    EXPECT_EQ(c["hidden_act"], "silu");
  }
  Json g = qwen3_generation_config_json();
  EXPECT_EQ(g["eos_token_id"], Json::array({151645, 151643}));
  EXPECT_THROW(qwen3_preset("72b"), Error);
  EXPECT_EQ(qwen3_preset_names(), (std::vector<std::string>{"tiny", "0.6b", "1.7b", "4b", "8b", "14b", "32b"}));
}

// What kern synth writes into config.json, kern gen's reader gives back field for field.
TEST(Qwen3Synth, EveryPresetRoundTripsThroughConfigJson) {
  for (const std::string& name : qwen3_preset_names()) {
    SCOPED_TRACE(name);
    const Qwen3Shape s = qwen3_preset(name);
    const Qwen3Shape r = parse_qwen3_config(qwen3_config_json(s));
    EXPECT_EQ(r.hidden, s.hidden);
    EXPECT_EQ(r.intermediate, s.intermediate);
    EXPECT_EQ(r.layers, s.layers);
    EXPECT_EQ(r.heads, s.heads);
    EXPECT_EQ(r.kv_heads, s.kv_heads);
    EXPECT_EQ(r.head_dim, s.head_dim);
    EXPECT_EQ(r.vocab, s.vocab);
    EXPECT_EQ(r.tied, s.tied);
    EXPECT_EQ(r.rope_theta, s.rope_theta);
    EXPECT_EQ(r.rms_norm_eps, s.rms_norm_eps);
    EXPECT_EQ(r.max_positions, s.max_positions);
  }
}

TEST(Qwen3Synth, TensorNamesFollowHuggingFace) {
  auto tied = qwen3_tensors(qwen3_preset("0.6b"));
  EXPECT_EQ(tied.size(), 1u + 28u * 11u + 1u);
  EXPECT_EQ(tied.front().name, "model.embed_tokens.weight");
  EXPECT_EQ(tied.back().name, "model.norm.weight");
  auto untied = qwen3_tensors(qwen3_preset("8b"));
  EXPECT_EQ(untied.back().name, "lm_head.weight");
  EXPECT_EQ(untied.back().shape, (std::vector<std::uint64_t>{151936, 4096}));
  std::set<std::string> names;
  for (const auto& t : untied) names.insert(t.name);
  for (const char* n : {"model.layers.35.self_attn.q_proj.weight", "model.layers.0.self_attn.k_norm.weight",
                        "model.layers.7.mlp.down_proj.weight", "model.layers.3.post_attention_layernorm.weight"})
    EXPECT_TRUE(names.count(n)) << n;
  for (const auto& t : untied) {
    if (t.name == "model.layers.0.self_attn.k_proj.weight") {
      EXPECT_EQ(t.shape, (std::vector<std::uint64_t>{8 * 128, 4096}));
    }
    if (t.name == "model.layers.0.mlp.down_proj.weight") {
      EXPECT_EQ(t.shape, (std::vector<std::uint64_t>{4096, 12288}));
    }
    if (t.name == "model.layers.0.self_attn.q_norm.weight") {
      EXPECT_EQ(t.shape, (std::vector<std::uint64_t>{128}));
    }
  }
}

TEST(Qwen3Synth, TinyTwoLayersIsAConsistentShardedCheckpoint) {
  TempDir d;
  SynthOptions o;
  o.shape = qwen3_preset("tiny");
  o.shape.layers = 2;
  o.out_dir = d.file("ckpt");
  o.seed = 7;
  o.tokenizer_dir = find_qwen3_tokenizer_dir({KERN_SOURCE_DIR});
  SynthResult r = synth_qwen3(o);
  EXPECT_GE(r.shards, 2u);

  Json config = parse_json_strict(read_file(o.out_dir + "/config.json"));
  EXPECT_EQ(config["num_hidden_layers"], 2);
  EXPECT_TRUE(fs::exists(o.out_dir + "/generation_config.json"));
  if (!o.tokenizer_dir.empty()) {
    EXPECT_TRUE(fs::exists(o.out_dir + "/tokenizer.json"));
  }

  Json index = parse_json_strict(read_file(o.out_dir + "/model.safetensors.index.json"));
  auto expected = qwen3_tensors(o.shape);
  ASSERT_EQ(index["weight_map"].size(), expected.size());
  std::uint64_t expected_total = 0;
  std::map<std::string, std::vector<std::uint64_t>> shapes;
  for (const auto& t : expected) {
    std::uint64_t n = 2;
    for (auto x : t.shape) n *= x;
    expected_total += n;
    shapes[t.name] = t.shape;
  }
  EXPECT_EQ(index["metadata"]["total_size"], expected_total);

  // Every shard's own header lists exactly the tensors the index maps to it, packed back to back.
  std::map<std::string, std::set<std::string>> by_shard;
  for (const auto& [name, shard] : index["weight_map"].items()) by_shard[shard.get<std::string>()].insert(name);
  EXPECT_EQ(by_shard.size(), r.shards);
  std::uint64_t seen_total = 0;
  for (const auto& [shard, names] : by_shard) {
    SCOPED_TRACE(shard);
    EXPECT_NE(shard.find(fmt::format("-of-{:05}.safetensors", r.shards)), std::string::npos);
    Shard s = read_shard(o.out_dir + "/" + shard);
    std::set<std::string> in_header;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
    for (const auto& [name, info] : s.header.items()) {
      if (name == "__metadata__") continue;
      in_header.insert(name);
      EXPECT_EQ(info["dtype"], "BF16");
      EXPECT_EQ(info["shape"].get<std::vector<std::uint64_t>>(), shapes[name]) << name;
      ranges.emplace_back(info["data_offsets"][0], info["data_offsets"][1]);
    }
    EXPECT_EQ(in_header, names);
    std::sort(ranges.begin(), ranges.end());
    std::uint64_t at = 0;
    for (auto [a, b] : ranges) {
      EXPECT_EQ(a, at);
      at = b;
    }
    EXPECT_EQ(s.data_start + at, s.file_size);
    seen_total += at;
  }
  EXPECT_EQ(seen_total, expected_total);
}

TEST(Qwen3Synth, SameSeedSameBytesOtherSeedOtherBytes) {
  TempDir d;
  auto write = [&](const std::string& name, std::uint64_t seed, unsigned threads) {
    SynthOptions o;
    o.shape = small_shape();
    o.out_dir = d.file(name);
    o.seed = seed;
    o.threads = threads;
    return synth_qwen3(o);
  };
  SynthResult a = write("a", 1, 2), b = write("b", 1, 1), c = write("c", 2, 2);
  ASSERT_EQ(a.files.size(), b.files.size());
  for (std::size_t i = 0; i < a.files.size(); ++i) {
    std::string name = fs::path(a.files[i]).filename().string();
    std::string fa = read_file(a.files[i]);
    EXPECT_EQ(fa, read_file(d.file("b/" + name))) << name;
    if (name.ends_with(".safetensors")) {
      EXPECT_NE(fa, read_file(d.file("c/" + name))) << name;
    }
  }
}

TEST(Qwen3Synth, ChunkedSamplingIsOffsetIndependent) {
  SynthTensor t{"x", {3u << 20}, 0.5f, 2.0f};
  std::vector<std::uint16_t> whole(3u << 20), part(1u << 20);
  synth_fill_bf16(t, 9, 0, whole.size(), whole.data());
  const std::uint64_t first = (1u << 20) - 12345;  // straddles a chunk boundary
  synth_fill_bf16(t, 9, first, part.size(), part.data());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), whole.begin() + static_cast<std::ptrdiff_t>(first)));
}

TEST(Qwen3Synth, WeightStatisticsMatchTheirScales) {
  TempDir d;
  SynthOptions o;
  o.shape = small_shape();
  o.out_dir = d.file("s");
  o.seed = 3;
  synth_qwen3(o);
  auto expected = qwen3_tensors(o.shape);
  int checked = 0;
  for (const auto& t : expected) {
    if (t.name.find("layers.1.") == std::string::npos && t.name.find("embed") == std::string::npos &&
        t.name != "model.norm.weight")
      continue;
    SCOPED_TRACE(t.name);
    auto v = read_bf16_tensor(o.out_dir, t.name);
    double sum = 0, sq = 0, maxdev = 0;
    for (float x : v) sum += x;
    double mean = sum / static_cast<double>(v.size());
    for (float x : v) {
      sq += (x - mean) * (x - mean);
      maxdev = std::max(maxdev, static_cast<double>(std::abs(x - t.mean) / t.stddev));
    }
    double sd = std::sqrt(sq / static_cast<double>(v.size()));
    double n = static_cast<double>(v.size());
    EXPECT_NEAR(mean, t.mean, 5.0 * t.stddev / std::sqrt(n) + 0.004 * std::abs(t.mean));
    EXPECT_NEAR(sd, t.stddev, t.stddev * (0.02 + 6.0 / std::sqrt(n)));
    EXPECT_LT(maxdev, 3.5);  // bounded samples: no wild outliers
    ++checked;
  }
  EXPECT_EQ(checked, 13);
}

TEST(Qwen3Synth, ConfigOnlyWritesNoWeights) {
  TempDir d;
  SynthOptions o;
  o.shape = qwen3_preset("8b");
  o.out_dir = d.file("cfg");
  o.config_only = true;
  SynthResult r = synth_qwen3(o);
  EXPECT_EQ(r.files.size(), 2u);
  EXPECT_EQ(r.shards, 0u);
  EXPECT_FALSE(fs::exists(o.out_dir + "/model.safetensors.index.json"));
  EXPECT_EQ(parse_json_strict(read_file(o.out_dir + "/config.json"))["tie_word_embeddings"], false);
}

TEST(Qwen3Synth, BadOptionsAreApiErrors) {
  TempDir d;
  write_file(d.file("note.txt"), "not empty");
  SynthOptions o;
  o.shape = small_shape();
  o.out_dir = d.path().string();
  o.config_only = true;
  const Error not_empty = test::thrown([&] { synth_qwen3(o); });
  EXPECT_EQ(not_empty.kind(), ErrorKind::Api);
  EXPECT_NE(std::string(not_empty.what()).find("not empty"), std::string::npos) << not_empty.what();
  o.force = true;
  EXPECT_NO_THROW(synth_qwen3(o));
  o.tokenizer_dir = d.file("no-such-dir");
  const Error no_tokenizer = test::thrown([&] { synth_qwen3(o); });
  EXPECT_EQ(no_tokenizer.kind(), ErrorKind::Api);
  EXPECT_NE(std::string(no_tokenizer.what()).find("tokenizer.json"), std::string::npos) << no_tokenizer.what();
}

}  // namespace
}  // namespace kern::models
