// Layouts shared by the pool tests: a pure-KV one and one with per-seq (recurrent) states.
#pragma once

#include "kern/pool/layout.hpp"

namespace kern::pool::testing {

// Two paged states; a target table of stride 4 and a draft table of stride 2: unit 4,
// row = min(32*4, 64*2) / 4 = 32 pages.
inline PoolLayout pure_kv() {
  PoolLayout l;
  l.paged = {{"k", 8}, {"v", 24}};
  l.page_tables = {{"block_table", "k", 4, 32}, {"draft_table", "v", 2, 64}};
  return l;
}

// One paged state plus two per-seq states, one with three lines per slot and a wide table.
inline PoolLayout stateful() {
  PoolLayout l;
  l.paged = {{"kv", 16}};
  l.per_seq = {{"conv", 48}, {"ssm", 96}};
  l.page_tables = {{"block_table", "kv", 4, 32}};
  l.line_tables = {{"conv_lines", "conv", 16, 3, 1}, {"ssm_lines", "ssm", 96, 4, 2}};
  return l;
}

}  // namespace kern::pool::testing
