// GPU checks of the chunked prefill of kernels/attention.cu against a float64 host reference, over
// randomly permuted pages (the decode kernels are checked in attention_decode_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>

#include "harness.hpp"
#include "paged_kv.hpp"

namespace kern_gpu_test {
namespace {

std::string suffix(const AttnGeometry& g) { return "_hd" + std::to_string(g.head_dim); }

struct PrefillSeq {
  int prefix, rows;
};

// rows_per_block 0 = what kern gen uses (16 / G); extra_rows rows follow the last sequence and
// belong to none (they must come out zero).
void check_prefill(const AttnGeometry& g, const std::vector<PrefillSeq>& seqs_in, uint64_t seed, int rows_per_block = 0,
                   int extra_rows = 0) {
  std::mt19937_64 rng(seed);
  const int seqs = static_cast<int>(seqs_in.size());
  std::vector<int> lens;
  std::vector<int32_t> cu = {0};
  std::vector<int64_t> pos;
  std::vector<int> row_seq;
  for (int s = 0; s < seqs; ++s) {
    lens.push_back(seqs_in[s].prefix + seqs_in[s].rows);
    cu.push_back(cu.back() + seqs_in[s].rows);
    for (int i = 0; i < seqs_in[s].rows; ++i) {
      pos.push_back(seqs_in[s].prefix + i);
      row_seq.push_back(s);
    }
  }
  const int used_rows = cu.back(), rows = used_rows + extra_rows;
  for (int i = 0; i < extra_rows; ++i) pos.push_back(i);
  const int per_block = rows_per_block > 0 ? rows_per_block : std::max(1, 16 / (g.heads / g.kv_heads));
  const PagedKv cache(rng, g, lens, 3, 2);
  const int q_stride = (g.heads + 2 * g.kv_heads) * g.head_dim;
  const auto qkv = random_bf16(rng, static_cast<size_t>(rows) * q_stride, -1.0f, 1.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(g.head_dim));

  Fatbin fb("attention");
  Device<bf16_bits> d_qkv(qkv), d_cache(cache.data), d_out(static_cast<size_t>(rows) * g.heads * g.head_dim);
  Device<int32_t> d_table(cache.table), d_lens(std::vector<int32_t>(lens.begin(), lens.end())), d_cu(cu);
  Device<int64_t> d_pos(pos);
  fb.launch("kern_attn_prefill" + suffix(g), dim3((rows + per_block - 1) / per_block, g.kv_heads), dim3(g.head_dim),
            d_qkv.get(), q_stride, d_cache.get() + cache.layer_off, d_table.get(), cache.max_pages, d_lens.get(),
            d_cu.get(), d_pos.get(), d_out.get(), rows, seqs, g.heads, g.kv_heads, g.page_size, cache.page_stride,
            scale, per_block);
  const auto out = d_out.download();
  ASSERT_EQ(count_nan(out), 0u);
  const size_t n = static_cast<size_t>(g.heads) * g.head_dim;
  std::vector<double> ref(out.size());
  for (size_t i = static_cast<size_t>(used_rows) * n; i < out.size(); ++i)
    ASSERT_EQ(out[i], 0) << "row outside every sequence not zero";
  parallel_for(used_rows, [&](int r) {
    reference_attention_row(cache, row_seq[r], qkv.data() + static_cast<size_t>(r) * q_stride,
                            static_cast<int>(pos[r]) + 1, scale, ref.data() + r * n);
  });
  // Per sequence, and per row for the first and last rows (causality at the chunk's edges).
  for (int s = 0; s < seqs; ++s) {
    std::vector<double> o, rr;
    for (size_t i = cu[s] * n; i < cu[s + 1] * n; ++i) {
      o.push_back(bf16_to_float(out[i]));
      rr.push_back(ref[i]);
    }
    const double err = rel_frobenius(o, rr);
    report("prefill rel err H" + std::to_string(g.heads) + " prefix " + std::to_string(seqs_in[s].prefix) + " rows " +
               std::to_string(seqs_in[s].rows),
           err);
    EXPECT_LT(err, 1e-2) << "seq " << s;
    for (int r : {cu[s], cu[s + 1] - 1}) {
      std::vector<double> a(n), b(ref.begin() + r * n, ref.begin() + (r + 1) * n);
      for (size_t i = 0; i < n; ++i) a[i] = bf16_to_float(out[r * n + i]);
      EXPECT_LT(rel_frobenius(a, b), 1e-2) << "row " << r;
    }
  }
}

TEST(AttnPrefillGpu, FirstChunk) { check_prefill({32, 8, 128, 16}, {{0, 33}}, 81); }
TEST(AttnPrefillGpu, PrefixPagePlusOne) { check_prefill({16, 8, 128, 16}, {{17, 16}}, 82); }
TEST(AttnPrefillGpu, PrefixPageMinusOneSingleRow) { check_prefill({32, 8, 128, 16}, {{15, 1}}, 83); }
TEST(AttnPrefillGpu, TwoSequences) { check_prefill({32, 8, 128, 16}, {{0, 20}, {31, 37}}, 84); }
TEST(AttnPrefillGpu, Gqa8Chunk) { check_prefill({64, 8, 128, 16}, {{200, 300}}, 85); }
TEST(AttnPrefillGpu, HeadDim64) { check_prefill({16, 4, 64, 16}, {{5, 29}}, 86); }
TEST(AttnPrefillGpu, LongContext32k) { check_prefill({32, 8, 128, 16}, {{32760, 9}}, 87); }
TEST(AttnPrefillGpu, OneRowPerBlock) { check_prefill({32, 8, 128, 16}, {{0, 20}, {31, 37}}, 88, 1); }
TEST(AttnPrefillGpu, BlocksSpanSequences) { check_prefill({40, 8, 128, 16}, {{3, 7}, {0, 5}, {16, 11}}, 89, 5, 4); }
TEST(AttnPrefillGpu, WideBlocksGqa2) { check_prefill({16, 8, 128, 16}, {{100, 61}, {7, 9}}, 90, 13); }

}  // namespace
}  // namespace kern_gpu_test
