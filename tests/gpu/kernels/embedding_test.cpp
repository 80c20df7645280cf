// GPU checks of kernels/embedding.cu against host gathers (exact: pure copies).
#include <gtest/gtest.h>

#include "harness.hpp"

namespace kern_gpu_test {
namespace {

void check_embedding(int vocab, int hidden, int rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto table = random_bf16(rng, static_cast<size_t>(vocab) * hidden, -1.0f, 1.0f);
  std::vector<int64_t> ids(rows);
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  for (auto& id : ids) id = pick(rng);
  ids[0] = vocab - 1;
  if (rows > 2) ids[rows / 2] = vocab;  // out of range -> zero row
  if (rows > 3) ids[rows - 1] = -3;     // out of range -> zero row

  Fatbin fb("embedding");
  Device<int64_t> d_ids(ids);
  Device<bf16_bits> d_table(table);
  Device<bf16_bits> d_out(static_cast<size_t>(rows) * hidden);
  fb.launch("kern_embedding_bf16", dim3(rows > 7 ? rows / 3 : rows), dim3(128), d_ids.get(), d_table.get(), d_out.get(),
            rows, hidden, vocab);
  const auto out = d_out.download();
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < hidden; ++c) {
      const bool valid = ids[r] >= 0 && ids[r] < vocab;
      const bf16_bits want = valid ? table[ids[r] * hidden + c] : 0;
      ASSERT_EQ(out[static_cast<size_t>(r) * hidden + c], want) << "row " << r << " col " << c;
    }
}

TEST(EmbeddingGpu, VectorisedRows) { check_embedding(1000, 4096, 37, 11); }
TEST(EmbeddingGpu, OddHidden) { check_embedding(517, 1001, 13, 12); }
TEST(EmbeddingGpu, SingleRow) { check_embedding(151936, 1024, 1, 13); }

TEST(EmbeddingGpu, GatherLastRows) {
  std::mt19937_64 rng(14);
  const int hidden = 2560;
  const std::vector<int32_t> cu = {0, 5, 5, 12, 13};  // lengths 5, 0, 7, 1
  const int seqs = 4, rows = 13;
  const auto x = random_bf16(rng, static_cast<size_t>(rows) * hidden, -2.0f, 2.0f);
  Fatbin fb("embedding");
  Device<bf16_bits> d_x(x);
  Device<int32_t> d_cu(cu);
  Device<bf16_bits> d_out(static_cast<size_t>(seqs) * hidden);
  fb.launch("kern_gather_last_rows_bf16", dim3(2), dim3(256), d_x.get(), d_cu.get(), d_out.get(), seqs, hidden);
  const auto out = d_out.download();
  for (int s = 0; s < seqs; ++s)
    for (int c = 0; c < hidden; ++c) {
      const bf16_bits want = cu[s + 1] > cu[s] ? x[static_cast<size_t>(cu[s + 1] - 1) * hidden + c] : 0;
      ASSERT_EQ(out[static_cast<size_t>(s) * hidden + c], want) << "seq " << s << " col " << c;
    }
}

}  // namespace
}  // namespace kern_gpu_test
