// GPU checks of kernels/activation.cu against a float64 host reference.
#include <gtest/gtest.h>

#include "harness.hpp"

namespace kern_gpu_test {
namespace {

void check_silu(int rows, int inter, int grid_y, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto gu = random_bf16(rng, static_cast<size_t>(rows) * 2 * inter, -6.0f, 6.0f);
  Fatbin fb("activation");
  Device<bf16_bits> d_gu(gu), d_out(static_cast<size_t>(rows) * inter);
  fb.launch("kern_silu_mul_bf16", dim3(rows, grid_y), dim3(256), d_gu.get(), d_out.get(), rows, inter);
  const auto out = d_out.download();
  ASSERT_EQ(count_nan(out), 0u);
  std::vector<double> ref(out.size());
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < inter; ++i) {
      const double g = bf16_to_float(gu[static_cast<size_t>(r) * 2 * inter + i]);
      const double u = bf16_to_float(gu[static_cast<size_t>(r) * 2 * inter + inter + i]);
      ref[static_cast<size_t>(r) * inter + i] = g / (1.0 + std::exp(-g)) * u;
    }
  const double err = rel_frobenius(to_double(out), ref);
  report("silu_mul rel err " + std::to_string(rows) + "x" + std::to_string(inter), err);
  EXPECT_LT(err, 1e-2) << rows << "x" << inter;
}

TEST(SiluMulGpu, Shapes) {
  check_silu(1, 3072, 4, 41);
  check_silu(5, 9728, 8, 42);
  check_silu(3, 1001, 1, 43);
  check_silu(64, 25600, 16, 44);
}

}  // namespace
}  // namespace kern_gpu_test
