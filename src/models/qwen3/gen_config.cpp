// config.json -> Qwen3Shape for the manifest generator, with every check on what the kernels
// can serve; and the shard-index check of the bound tensor names.
#include <cmath>
#include <set>
#include <utility>

#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/models/qwen3_gen.hpp"

namespace kern::models {
namespace {

constexpr std::uint64_t kMaxGroup = 16;  // q heads per kv head the attention kernels hold
constexpr std::uint64_t kI32Max = 0x7fffffff;

const Json& field(const Json& c, const std::string& what, const char* key) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) fail(ErrorKind::WeightArtifact, "{}: missing field '{}'", what, key);
  return *it;
}

std::uint64_t positive(const Json& c, const std::string& what, const char* key) {
  const Json& v = field(c, what, key);
  if (!v.is_number_integer())
    fail(ErrorKind::WeightArtifact, "{}: '{}' must be an integer, got {}", what, key, v.dump());
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
  if (!(d > 0.0) || d > 1e30)
    fail(ErrorKind::WeightArtifact, "{}: '{}' must be a positive number, got {}", what, key, v.dump());
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

const Json* present(const Json& c, const char* key) {
  auto it = c.find(key);
  return it == c.end() || it->is_null() ? nullptr : &*it;
}

// The RoPE block of either config generation: `rope_parameters` (transformers 5: rope_theta and
// rope_type inside it) or `rope_scaling` (older: null, or an object with `rope_type` / `type`)
// beside a top-level `rope_theta`. `where` names the block in messages.
struct RopeBlock {
  const Json* params = nullptr;  // the object with rope_type and its parameters, if any
  std::string where;
};

RopeBlock rope_block(const Json& c, const std::string& what) {
  const Json* v5 = present(c, "rope_parameters");
  const Json* old = present(c, "rope_scaling");
  for (const auto& [name, j] : {std::pair{"rope_parameters", v5}, std::pair{"rope_scaling", old}})
    if (j && !j->is_object())
      fail(ErrorKind::WeightArtifact, "{}: '{}' must be an object, got {}", what, name, j->dump());
  if (v5 && old && *v5 != *old)
    fail(ErrorKind::WeightArtifact, "{}: 'rope_parameters' {} and 'rope_scaling' {} disagree", what, v5->dump(),
         old->dump());
  if (v5) return {v5, "rope_parameters"};
  if (old) return {old, "rope_scaling"};
  return {};
}

double rope_theta(const Json& c, const RopeBlock& b, const std::string& what) {
  const Json* top = present(c, "rope_theta");
  const Json* inner = b.params ? present(*b.params, "rope_theta") : nullptr;
  if (!top && !inner)
    fail(ErrorKind::WeightArtifact, "{}: missing field 'rope_theta' (top level, or inside 'rope_parameters')", what);
  const double t =
      top ? positive_number(c, what, "rope_theta") : positive_number(*b.params, what + ": " + b.where, "rope_theta");
  if (top && inner && positive_number(*b.params, what + ": " + b.where, "rope_theta") != t)
    fail(ErrorKind::WeightArtifact, "{}: 'rope_theta' {} and '{}.rope_theta' {} disagree", what, top->dump(), b.where,
         inner->dump());
  return t;
}

// transformers' yarn: beta_fast 32 and beta_slow 1 unless given; attention_factor given, or
// 0.1·ln(factor) + 1 (mscale / mscale_all_dim when both are given, as transformers does).
Qwen3RopeScaling yarn(const Json& r, std::uint64_t max_positions, const std::string& at) {
  Qwen3RopeScaling y;
  y.type = Qwen3RopeScaling::Type::Yarn;
  y.factor = positive_number(r, at, "factor");
  y.original_max_positions = present(r, "original_max_position_embeddings")
                                 ? positive(r, at, "original_max_position_embeddings")
                                 : max_positions;
  if (present(r, "beta_fast")) y.beta_fast = positive_number(r, at, "beta_fast");
  if (present(r, "beta_slow")) y.beta_slow = positive_number(r, at, "beta_slow");
  if (const Json* t = present(r, "truncate")) {
    if (!t->is_boolean()) fail(ErrorKind::WeightArtifact, "{}: 'truncate' must be a boolean, got {}", at, t->dump());
    y.truncate = t->get<bool>();
  }
  auto mscale = [&](double m) { return y.factor <= 1 ? 1.0 : 0.1 * m * std::log(y.factor) + 1.0; };
  if (present(r, "attention_factor")) {
    y.attention_factor = positive_number(r, at, "attention_factor");
  } else if (present(r, "mscale") && present(r, "mscale_all_dim")) {
    y.attention_factor = mscale(positive_number(r, at, "mscale")) / mscale(positive_number(r, at, "mscale_all_dim"));
  } else {
    y.attention_factor = mscale(1.0);
  }
  static const std::set<std::string, std::less<>> known = {
      "rope_type",     "type",      "rope_theta", "factor",           "original_max_position_embeddings",
      "beta_fast",     "beta_slow", "truncate",   "attention_factor", "mscale",
      "mscale_all_dim"};
  for (const auto& [key, v] : r.items())
    if (!known.count(key))
      fail(ErrorKind::WeightArtifact, "{}: '{}' = {} is not supported (kern implements transformers' yarn fields)", at,
           key, v.dump());
  return y;
}

Qwen3RopeScaling rope_scaling(const RopeBlock& b, std::uint64_t max_positions, const std::string& what) {
  if (!b.params) return {};
  const Json& r = *b.params;
  const std::string at = what + ": " + b.where;
  const Json* type = present(r, "rope_type");
  if (!type) type = present(r, "type");
  if (!type) {
    if (r.size() == 1 && r.contains("rope_theta")) return {};  // rope_parameters with a theta alone
    fail(ErrorKind::WeightArtifact, "{}: no 'rope_type' in {}", at, r.dump());
  }
  if (!type->is_string()) fail(ErrorKind::WeightArtifact, "{}: 'rope_type' must be a string, got {}", at, type->dump());
  const std::string t = type->get<std::string>();
  if (t == "default") {
    for (const auto& [key, v] : r.items())
      if (key != "rope_type" && key != "type" && key != "rope_theta")
        fail(ErrorKind::WeightArtifact, "{}: '{}' = {} is not supported with rope_type \"default\"", at, key, v.dump());
    return {};
  }
  if (t == "yarn") return yarn(r, max_positions, at);
  fail(ErrorKind::WeightArtifact, "{}: rope_type \"{}\" is not supported (kern implements \"default\" and \"yarn\")",
       at, t);
}

// transformers 5's per-layer attention kinds: every layer must be full attention.
void check_layer_types(const Json& c, std::uint64_t layers, const std::string& what) {
  const Json* lt = present(c, "layer_types");
  if (!lt) return;
  if (!lt->is_array() || lt->size() != layers)
    fail(ErrorKind::WeightArtifact, "{}: 'layer_types' must be an array of {} strings, got {}", what, layers,
         lt->dump().substr(0, 200));
  for (std::size_t i = 0; i < lt->size(); ++i)
    if (!(*lt)[i].is_string() || (*lt)[i].get<std::string>() != "full_attention")
      fail(ErrorKind::WeightArtifact,
           "{}: layer_types[{}] = {} is not supported (kern's attention kernels are full-causal: \"full_attention\")",
           what, i, (*lt)[i].dump());
}

}  // namespace

Qwen3Shape parse_qwen3_config(const Json& c, const std::string& what) {
  if (!c.is_object()) fail(ErrorKind::WeightArtifact, "{}: not a JSON object", what);
  const Json& type = field(c, what, "model_type");
  if (!type.is_string() || type.get<std::string>() != "qwen3")
    fail(ErrorKind::WeightArtifact, "{}: model_type {} is not \"qwen3\" (kern gen qwen3 serves dense Qwen3 only)", what,
         type.dump());

  Qwen3Shape q;
  q.hidden = positive(c, what, "hidden_size");
  q.intermediate = positive(c, what, "intermediate_size");
  q.layers = positive(c, what, "num_hidden_layers");
  q.heads = positive(c, what, "num_attention_heads");
  q.kv_heads = positive(c, what, "num_key_value_heads");
  q.head_dim = positive(c, what, "head_dim");
  q.vocab = positive(c, what, "vocab_size");
  q.max_positions = positive(c, what, "max_position_embeddings");
  const Json& tied = field(c, what, "tie_word_embeddings");
  if (!tied.is_boolean())
    fail(ErrorKind::WeightArtifact, "{}: 'tie_word_embeddings' must be a boolean, got {}", what, tied.dump());
  q.tied = tied.get<bool>();
  const RopeBlock rope = rope_block(c, what);
  q.rope_theta = rope_theta(c, rope, what);
  q.rope_scaling = rope_scaling(rope, q.max_positions, what);
  q.rms_norm_eps = positive_number(c, what, "rms_norm_eps");
  check_layer_types(c, q.layers, what);

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
    fail(ErrorKind::WeightArtifact, "{}: hidden_size {} and intermediate_size {} must be multiples of 8", what,
         q.hidden, q.intermediate);
  if ((q.heads + 2 * q.kv_heads) * q.head_dim > kI32Max || 2 * q.intermediate > kI32Max)
    fail(ErrorKind::WeightArtifact, "{}: projection widths exceed the kernels' i32 range", what);

  // The checkpoint's storage dtype (`torch_dtype` before transformers 5, `dtype` since): kern computes
  // in bf16 and converts f16 / f32 tensors while binding them.
  for (const char* key : {"torch_dtype", "dtype"})
    optional_string_is(c, what, key, {"bfloat16", "float16", "float32"},
                       "kern serves bf16 weights and converts float16 / float32 ones while loading");
  if (const Json* f = present(c, "partial_rotary_factor"); f && !(f->is_number() && f->get<double>() == 1.0))
    fail(ErrorKind::WeightArtifact, "{}: 'partial_rotary_factor' = {} is not supported (RoPE over the whole head)",
         what, f->dump());
  optional_string_is(c, what, "hidden_act", {"silu"}, "the MLP kernel is SiLU·mul");
  optional_false(c, what, "attention_bias", "the manifest has no q/k/v/o biases");
  optional_false(c, what, "use_sliding_window", "the attention kernels are full-causal");
  return q;
}

Qwen3Shape read_qwen3_config(const std::filesystem::path& hf_dir) {
  const std::filesystem::path path = hf_dir / "config.json";
  const std::string text = read_file(path.string());
  const Json j = parse_json_strict(text, {ErrorKind::WeightArtifact, path.string()});
  return parse_qwen3_config(j, path.string());
}

void check_qwen3_tensor_index(const Qwen3Shape& config, const Json& index, const std::string& what) {
  auto it = index.is_object() ? index.find("weight_map") : index.end();
  if (it == index.end() || !it->is_object()) fail(ErrorKind::WeightArtifact, "{}: no 'weight_map' object", what);
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
