// The Qwen3 presets: the one table of named shapes (kern synth, the gen and bench tests).
#include "kern/models/qwen3_shape.hpp"

#include <fmt/format.h>

#include "kern/base/error.hpp"

namespace kern::models {
namespace {

struct Preset {
  std::string_view name;
  Qwen3Shape shape;
};
// config.json of Qwen/Qwen3-0.6B .. 32B (rope_theta, rms_norm_eps, max_position_embeddings and the
// vocabulary as the defaults), plus a tiny one with the real vocabulary.
constexpr Preset kPresets[] = {
    {"tiny", {.hidden = 256, .intermediate = 768, .layers = 4, .heads = 4, .kv_heads = 2, .head_dim = 64}},
    {"0.6b", {.hidden = 1024, .intermediate = 3072, .layers = 28, .heads = 16, .kv_heads = 8, .head_dim = 128}},
    {"1.7b", {.hidden = 2048, .intermediate = 6144, .layers = 28, .heads = 16, .kv_heads = 8, .head_dim = 128}},
    {"4b", {.hidden = 2560, .intermediate = 9728, .layers = 36, .heads = 32, .kv_heads = 8, .head_dim = 128}},
    {"8b",
     {.hidden = 4096, .intermediate = 12288, .layers = 36, .heads = 32, .kv_heads = 8, .head_dim = 128, .tied = false}},
    {"14b",
     {.hidden = 5120, .intermediate = 17408, .layers = 40, .heads = 40, .kv_heads = 8, .head_dim = 128, .tied = false}},
    {"32b",
     {.hidden = 5120, .intermediate = 25600, .layers = 64, .heads = 64, .kv_heads = 8, .head_dim = 128, .tied = false}},
};

}  // namespace

std::vector<std::string> qwen3_preset_names() {
  std::vector<std::string> out;
  for (const Preset& p : kPresets) out.emplace_back(p.name);
  return out;
}

std::optional<std::string> qwen3_preset_name(const Qwen3Shape& s) {
  for (const Preset& p : kPresets) {
    const Qwen3Shape& q = p.shape;
    if (q.hidden == s.hidden && q.intermediate == s.intermediate && q.layers == s.layers && q.heads == s.heads &&
        q.kv_heads == s.kv_heads && q.head_dim == s.head_dim && q.vocab == s.vocab && q.tied == s.tied)
      return std::string(p.name);
  }
  return std::nullopt;
}

Qwen3Shape qwen3_preset(std::string_view name) {
  for (const Preset& p : kPresets)
    if (name == p.name) return p.shape;
  fail(ErrorKind::Api, "no Qwen3 preset `{}` (presets: {})", name, fmt::join(qwen3_preset_names(), ", "));
}

}  // namespace kern::models
