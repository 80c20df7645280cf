// The paged KV cache the attention tests build on the host (layout of docs/kernels.md): random K/V
// for every slot of every sequence's pages, one block-table row per sequence over randomly permuted
// pages, and float64 access to any key/value for the references. Shared by attention_test.cpp,
// attention_prefill_test.cpp and attention_decode_test.cpp.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "harness.hpp"

namespace kern_gpu_test {

// Attention shape: q heads, kv heads (GQA group = heads / kv_heads), head dim, tokens per page.
struct AttnGeometry {
  int heads, kv_heads, head_dim, page_size;
  int group() const { return heads / kv_heads; }
  int q_stride() const { return (heads + 2 * kv_heads) * head_dim; }  // one row of packed q|k|v
  int out_width() const { return heads * head_dim; }
};

// "H32 KV8 hd128 P16": the geometry in failure messages and reported figures.
std::string geometry_tag(const AttnGeometry& g);

// Fills a cache of n elements from rng (called once, before the page permutation draws from rng).
using KvFill = std::vector<bf16_bits> (*)(std::mt19937_64& rng, size_t n);

// random_bf16(rng, n, -1, 1): uniform bf16 in [-1, 1).
std::vector<bf16_bits> uniform_kv(std::mt19937_64& rng, size_t n);

// fast_random_bf16(rng(), n): the cheaper filler for long contexts.
std::vector<bf16_bits> fast_kv(std::mt19937_64& rng, size_t n);

// Fast deterministic filler for large caches (uniform bf16 in [-1, 1), never all zero).
std::vector<bf16_bits> fast_random_bf16(uint64_t seed, size_t n);

// A paged cache of `layers` layers, checked at layer `layer`. Every page holds all layers
// ([layers][K, V][page_size][kv_heads][head_dim] per page), so page p's K of layer l starts at
// p * page_stride + l * 2 * block. Besides the sequences' pages there is one spare page nobody
// references; the pages are randomly permuted, and table entries past a sequence's pages point far
// outside the cache (1 << 30), so reading one would fault.
struct PagedKv {
  AttnGeometry g;
  int layers, layer, max_pages = 1;
  int64_t block = 0;        // elements of one K (or V) block of a page for one layer
  int64_t page_stride = 0;  // elements between pages
  int64_t layer_off = 0;    // elements from a page's start to the checked layer's K
  std::vector<bf16_bits> data;
  std::vector<int32_t> table;  // [seqs, max_pages]

  // context[s]: the tokens of sequence s the cache holds.
  PagedKv(std::mt19937_64& rng, const AttnGeometry& geo, const std::vector<int>& context, int layers, int layer,
          KvFill fill = uniform_kv);

  // Index into data of K (v = false) or V at dim 0 of one token of sequence seq, kv head kvh.
  int64_t index(int seq, int token, int kvh, bool v) const;

  double k(int seq, int token, int kvh, int d) const { return bf16_to_float(data[index(seq, token, kvh, false) + d]); }
  double v(int seq, int token, int kvh, int d) const { return bf16_to_float(data[index(seq, token, kvh, true) + d]); }

  // K (v = false) or V of one token, head_dim doubles into dst.
  void row(int seq, int token, int kvh, bool v, double* dst) const;
};

// Float64 softmax attention of one query row (all q heads at q) of sequence seq over keys
// [0, end) scaled by scale: out[h * head_dim + d]; an empty range gives zeros.
void reference_attention_row(const PagedKv& c, int seq, const bf16_bits* q, int end, double scale, double* out);

}  // namespace kern_gpu_test
