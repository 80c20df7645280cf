// config.json -> Qwen3Config for the manifest generator, with every check on what the kernels
// can serve; and the shard-index check of the bound tensor names.
#include <set>

#include "kern/error.hpp"
#include "kern/file.hpp"
#include "kern/models/qwen3_gen.hpp"

namespace kern::models {
namespace {

constexpr std::uint64_t kMaxGroup = 16;      // q heads per kv head the attention kernels hold
constexpr std::uint64_t kI32Max = 0x7fffffff;

const Json& field(const Json& c, const std::string& what, const char* key) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) fail(ErrorKind::WeightArtifact, "{}: missing field '{}'", what, key);
  return *it;
}

std::uint64_t positive(const Json& c, const std::string& what, const char* key) {
  const Json& v = field(c, what, key);
  if (!v.is_number_integer()) fail(ErrorKind::WeightArtifact, "{}: '{}' must be an integer, got {}", what, key, v.dump());
  if (v.is_number_unsigned() ? v.get<std::uint64_t>() == 0 : v.get<std::int64_t>() <= 0)
    fail(ErrorKind::WeightArtifact, "{}: '{}' must be positive, got {}", what, key, v.dump());
  const std::uint64_t n = v.get<std::uint64_t>();
  if (n > kI32Max) fail(ErrorKind::WeightArtifact, "{}: '{}' = {} exceeds the kernels' i32 range", what, key, n);
  return n;
}

double positive_number(const Json& c, const std::string& what, const char* key) {
  const Json& v = field(c, what, key);
  if (!v.is_number()) fail(ErrorKind::WeightArtifact, "{}: '{}' must be a number, got {}", what, key, v.dump());
  const double d = v.get<double>();
  if (!(d > 0.0) || d > 1e30) fail(ErrorKind::WeightArtifact, "{}: '{}' must be a positive number, got {}", what, key, v.dump());
  return d;
}

// An optional field that, when present and not null, must equal one of the served values.
void optional_string_is(const Json& c, const std::string& what, const char* key, const std::set<std::string>& ok,
                        const char* reason) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return;
  if (!it->is_string() || ok.count(it->get<std::string>()) == 0)
    fail(ErrorKind::WeightArtifact, "{}: '{}' = {} is not supported ({})", what, key, it->dump(), reason);
}

void optional_false(const Json& c, const std::string& what, const char* key, const char* reason) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return;
  if (!it->is_boolean() || it->get<bool>())
    fail(ErrorKind::WeightArtifact, "{}: '{}' = {} is not supported ({})", what, key, it->dump(), reason);
}

}  // namespace

Qwen3Config parse_qwen3_config(const Json& c, const std::string& what) {
  if (!c.is_object()) fail(ErrorKind::WeightArtifact, "{}: not a JSON object", what);
  const Json& type = field(c, what, "model_type");
  if (!type.is_string() || type.get<std::string>() != "qwen3")
    fail(ErrorKind::WeightArtifact, "{}: model_type {} is not \"qwen3\" (kern gen qwen3 serves dense Qwen3 only)", what,
         type.dump());

  Qwen3Config q;
  q.hidden = positive(c, what, "hidden_size");
  q.intermediate = positive(c, what, "intermediate_size");
  q.layers = positive(c, what, "num_hidden_layers");
  q.heads = positive(c, what, "num_attention_heads");
  q.kv_heads = positive(c, what, "num_key_value_heads");
  q.head_dim = positive(c, what, "head_dim");
  q.vocab = positive(c, what, "vocab_size");
  q.max_positions = positive(c, what, "max_position_embeddings");
  const Json& tied = field(c, what, "tie_word_embeddings");
  if (!tied.is_boolean()) fail(ErrorKind::WeightArtifact, "{}: 'tie_word_embeddings' must be a boolean, got {}", what, tied.dump());
  q.tied = tied.get<bool>();
  q.rope_theta = positive_number(c, what, "rope_theta");
  q.rms_norm_eps = positive_number(c, what, "rms_norm_eps");

  if (q.head_dim != 64 && q.head_dim != 128)
    fail(ErrorKind::WeightArtifact, "{}: head_dim {} is not supported by kern's attention kernels (64 or 128)", what,
         q.head_dim);
  if (q.heads % q.kv_heads != 0)
    fail(ErrorKind::WeightArtifact, "{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", what,
         q.heads, q.kv_heads);
  if (q.heads / q.kv_heads > kMaxGroup)
    fail(ErrorKind::WeightArtifact, "{}: {} q heads per kv head; the attention kernels hold at most {}", what,
         q.heads / q.kv_heads, kMaxGroup);
  if (q.hidden % 8 != 0 || q.intermediate % 8 != 0)
    fail(ErrorKind::WeightArtifact, "{}: hidden_size {} and intermediate_size {} must be multiples of 8", what, q.hidden,
         q.intermediate);
  if ((q.heads + 2 * q.kv_heads) * q.head_dim > kI32Max || 2 * q.intermediate > kI32Max)
    fail(ErrorKind::WeightArtifact, "{}: projection widths exceed the kernels' i32 range", what);

  optional_string_is(c, what, "torch_dtype", {"bfloat16"}, "kern binds bf16 weights");
  optional_string_is(c, what, "dtype", {"bfloat16"}, "kern binds bf16 weights");
  optional_string_is(c, what, "hidden_act", {"silu"}, "the MLP kernel is SiLU·mul");
  optional_false(c, what, "attention_bias", "the manifest has no q/k/v/o biases");
  optional_false(c, what, "use_sliding_window", "the attention kernels are full-causal");
  if (auto it = c.find("rope_scaling"); it != c.end() && !it->is_null())
    fail(ErrorKind::WeightArtifact, "{}: rope_scaling {} is not supported (plain NeoX RoPE only)", what, it->dump());
  return q;
}

Qwen3Config read_qwen3_config(const std::filesystem::path& hf_dir) {
  const std::filesystem::path path = hf_dir / "config.json";
  const std::string text = read_file(path.string());
  const Json j = parse_json_strict(text, {ErrorKind::WeightArtifact, path.string()});
  return parse_qwen3_config(j, path.string());
}

void check_qwen3_tensor_index(const Qwen3Config& config, const Json& index, const std::string& what) {
  auto it = index.is_object() ? index.find("weight_map") : index.end();
  if (it == index.end() || !it->is_object())
    fail(ErrorKind::WeightArtifact, "{}: no 'weight_map' object", what);
  std::vector<std::string> missing;
  for (const std::string& name : qwen3_bound_tensors(config))
    if (!it->contains(name)) missing.push_back(name);
  if (missing.empty()) return;
  std::string list;
  for (std::size_t i = 0; i < missing.size() && i < 8; ++i) list += (i ? ", " : "") + missing[i];
  if (missing.size() > 8) list += fmt::format(", … ({} in all)", missing.size());
  fail(ErrorKind::WeightArtifact, "{}: the manifest binds tensors the checkpoint lacks: {}", what, list);
}

}  // namespace kern::models
