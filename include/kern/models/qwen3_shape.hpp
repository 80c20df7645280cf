// The dense Qwen3 shape: what kern synth writes into config.json, what kern gen reads back from it
// (read_qwen3_config in qwen3_gen.hpp) and what kern bench sizes its figures by; and its presets,
// the one table of named shapes (src/models/qwen3/shape.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kern::models {

// RoPE scaling as transformers computes it (`rope_scaling` in older configs, `rope_parameters`
// in transformers 5): none, or YaRN (Qwen3's documented way to 128k context).
struct Qwen3RopeScaling {
  enum class Type : std::uint8_t { None, Yarn };
  Type type = Type::None;
  double factor = 1;                         // yarn: the scaling factor
  std::uint64_t original_max_positions = 0;  // yarn: original_max_position_embeddings
  double beta_fast = 32, beta_slow = 1;      // yarn: the correction range's rotation counts
  double attention_factor = 1;               // yarn: the cos/sin multiplier (given, or from factor)
  bool truncate = true;                      // yarn: floor/ceil the correction range
};

// The defaults are the values every released dense Qwen3 shares.
struct Qwen3Shape {
  std::uint64_t hidden = 0;
  std::uint64_t intermediate = 0;
  std::uint64_t layers = 0;
  std::uint64_t heads = 0;
  std::uint64_t kv_heads = 0;
  std::uint64_t head_dim = 0;
  std::uint64_t vocab = 151936;
  bool tied = true;  // tie_word_embeddings: the lm_head is the embedding
  double rope_theta = 1e6;
  double rms_norm_eps = 1e-6;
  std::uint64_t max_positions = 40960;  // max_position_embeddings
  Qwen3RopeScaling rope_scaling{};
};

// The released dense shapes (config.json of Qwen/Qwen3-0.6B .. 32B: "0.6b", "1.7b", "4b", "8b", "14b",
// "32b") and "tiny" (4 layers of 256 with the real vocabulary); Error(Api) listing them for any other name.
Qwen3Shape qwen3_preset(std::string_view name);
// Every preset name, "tiny" first, then the released shapes from small to large.
std::vector<std::string> qwen3_preset_names();
// The preset whose sizes these are (hidden, intermediate, layers, heads, kv heads, head dim,
// vocabulary and tying equal; RoPE, epsilon and positions, which change no byte read per token, are
// not compared); none for any other shape (e.g. a layer count overridden by kern synth --layers).
std::optional<std::string> qwen3_preset_name(const Qwen3Shape& shape);

}  // namespace kern::models
