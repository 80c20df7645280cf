// Model shapes for the kern bench host tests: the 4B preset as kern synth writes it (through the
// same config.json parser kern bench uses) and a small shape whose figures are worked by hand.
#pragma once

#include "kern/driver/bench.hpp"
#include "kern/models/qwen3_synth.hpp"

namespace kern::driver::bench::test {

inline ModelShape qwen3_4b() { return models::parse_qwen3_config(models::qwen3_config_json(models::qwen3_preset("4b"))); }

// hidden 8, intermediate 16, 2 layers, 4 / 2 heads of 2, vocab 10, untied.
inline ModelShape small_shape() {
  ModelShape s;
  s.hidden = 8;
  s.intermediate = 16;
  s.layers = 2;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 2;
  s.vocab = 10;
  s.tied = false;
  return s;
}

}  // namespace kern::driver::bench::test
