// Layouts shared by the pool tests: a pure-KV one and one with per-seq (recurrent) states.
#pragma once

#include <gtest/gtest.h>

#include <utility>

#include "kern/pool/layout.hpp"
#include "kern/pool/pool.hpp"

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

// A pool sized for `tokens` positions and `seqs` sequences, `chunk` pages per chunk.
inline Pool make_pool(const PoolLayout& l, std::uint64_t tokens, std::uint64_t seqs, std::uint64_t chunk = 40) {
  auto [pool, plan] = Pool::create(l, PoolConfig::from_capacity(l, chunk, Capacity{tokens, seqs}));
  return std::move(pool);
}

// The granted value (a test failure, and a moved-from value, when denied).
template <typename T>
T take(Granted<T>&& g) {
  if (!g.ok()) ADD_FAILURE() << "denied: " << g.denied().describe();
  return std::move(g).value();
}

}  // namespace kern::pool::testing
