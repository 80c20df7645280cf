// Model shapes for the kern bench host tests: the 4B preset (models/qwen3_shape.hpp) and a small
// shape whose figures are worked by hand.
#pragma once

#include "kern/bench/bench.hpp"
#include "kern/models/qwen3_shape.hpp"

namespace kern::bench::test {

inline models::Qwen3Shape qwen3_4b() { return models::qwen3_preset("4b"); }

// hidden 8, intermediate 16, 2 layers, 4 / 2 heads of 2, vocab 10, untied.
inline models::Qwen3Shape small_shape() {
  return {.hidden = 8,
          .intermediate = 16,
          .layers = 2,
          .heads = 4,
          .kv_heads = 2,
          .head_dim = 2,
          .vocab = 10,
          .tied = false};
}

}  // namespace kern::bench::test
