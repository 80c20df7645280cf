// GPU checks of kernels/argmax.cu: exact indices, ties resolved to the lowest index.
#include <gtest/gtest.h>

#include "harness.hpp"

namespace kern_gpu_test {
namespace {

int64_t host_argmax(const std::vector<bf16_bits>& row) {
  int64_t best = 0;
  for (size_t i = 1; i < row.size(); ++i)
    if (bf16_to_float(row[i]) > bf16_to_float(row[best])) best = static_cast<int64_t>(i);
  return best;
}

void check_argmax(int rows, int vocab, int nblocks, bool plant_ties, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto logits = random_bf16(rng, static_cast<size_t>(rows) * vocab, -20.0f, 20.0f);
  std::uniform_int_distribution<int> col(0, vocab - 1);
  if (plant_ties) {
    for (int r = 0; r < rows; ++r) {
      // The same maximum at several columns (often in different stage-1 blocks).
      const bf16_bits top = float_to_bf16(31.0f + r);
      for (int k = 0; k < 4; ++k) logits[static_cast<size_t>(r) * vocab + col(rng)] = top;
      if (r == 0) logits[static_cast<size_t>(vocab - 1)] = top;         // last column tied too
      if (r == 1 % rows) logits[static_cast<size_t>(r) * vocab] = top;  // first column tied
    }
  }
  Fatbin fb("argmax");
  Device<bf16_bits> d_logits(logits);
  Device<float> d_pmax(static_cast<size_t>(rows) * nblocks);
  Device<int32_t> d_pidx(static_cast<size_t>(rows) * nblocks);
  Device<int64_t> d_out(rows);
  fb.launch("kern_argmax_partial_bf16", dim3(nblocks, rows), dim3(256), d_logits.get(), d_pmax.get(), d_pidx.get(),
            rows, vocab, nblocks);
  fb.launch("kern_argmax_final", dim3(rows), dim3(64), d_pmax.get(), d_pidx.get(), d_out.get(), rows, nblocks);
  const auto out = d_out.download();
  for (int r = 0; r < rows; ++r) {
    std::vector<bf16_bits> row(logits.begin() + static_cast<size_t>(r) * vocab,
                               logits.begin() + static_cast<size_t>(r + 1) * vocab);
    EXPECT_EQ(out[r], host_argmax(row)) << "row " << r << " vocab " << vocab;
  }
}

TEST(ArgmaxGpu, Qwen3Vocab) { check_argmax(4, 151936, 64, false, 51); }
TEST(ArgmaxGpu, TiesPickLowestIndex) { check_argmax(5, 151936, 64, true, 52); }
TEST(ArgmaxGpu, OddVocab) { check_argmax(3, 1001, 64, true, 53); }
TEST(ArgmaxGpu, FewerColumnsThanBlocks) { check_argmax(2, 37, 64, true, 54); }
TEST(ArgmaxGpu, ManyRows) { check_argmax(64, 32003, 17, true, 55); }

TEST(ArgmaxGpu, AllEqualRowPicksZero) {
  const int vocab = 4099, nblocks = 64;
  std::vector<bf16_bits> logits(vocab, float_to_bf16(-2.5f));
  Fatbin fb("argmax");
  Device<bf16_bits> d_logits(logits);
  Device<float> d_pmax(nblocks);
  Device<int32_t> d_pidx(nblocks);
  Device<int64_t> d_out(1);
  fb.launch("kern_argmax_partial_bf16", dim3(nblocks, 1), dim3(128), d_logits.get(), d_pmax.get(), d_pidx.get(), 1,
            vocab, nblocks);
  fb.launch("kern_argmax_final", dim3(1), dim3(32), d_pmax.get(), d_pidx.get(), d_out.get(), 1, nblocks);
  EXPECT_EQ(d_out.download()[0], 0);
}

}  // namespace
}  // namespace kern_gpu_test
