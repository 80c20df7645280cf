// GPU checks of kernels/rmsnorm.cu against a float64 host reference.
#include <gtest/gtest.h>

#include "harness.hpp"

namespace kern_gpu_test {
namespace {

constexpr double kTol = 1e-2;

std::vector<double> rms_ref(const std::vector<double>& x, const std::vector<double>& w, int rows, int hidden,
                            double eps) {
  std::vector<double> y(x.size());
  for (int r = 0; r < rows; ++r) {
    double ss = 0.0;
    for (int c = 0; c < hidden; ++c)
      ss += x[static_cast<size_t>(r) * hidden + c] * x[static_cast<size_t>(r) * hidden + c];
    const double rstd = 1.0 / std::sqrt(ss / hidden + eps);
    for (int c = 0; c < hidden; ++c)
      y[static_cast<size_t>(r) * hidden + c] = x[static_cast<size_t>(r) * hidden + c] * rstd * w[c];
  }
  return y;
}

void check_rms(int rows, int hidden, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const float eps = 1e-6f;
  const auto x = random_bf16(rng, static_cast<size_t>(rows) * hidden, -3.0f, 3.0f);
  const auto w = random_bf16(rng, hidden, 0.5f, 1.5f);
  Fatbin fb("rmsnorm");
  Device<bf16_bits> d_x(x), d_w(w), d_y(static_cast<size_t>(rows) * hidden);
  fb.launch("kern_rms_norm_bf16", dim3(rows), dim3(256), d_x.get(), d_w.get(), d_y.get(), rows, hidden, eps);
  const auto y = d_y.download();
  ASSERT_EQ(count_nan(y), 0u);
  const double err = rel_frobenius(to_double(y), rms_ref(to_double(x), to_double(w), rows, hidden, eps));
  report("rms_norm rel err " + std::to_string(rows) + "x" + std::to_string(hidden), err);
  EXPECT_LT(err, kTol) << "rows " << rows << " hidden " << hidden;
  EXPECT_EQ(d_x.download(), x);  // input untouched
}

TEST(RmsNormGpu, Shapes) {
  check_rms(1, 1024, 21);
  check_rms(7, 2560, 22);
  check_rms(33, 5120, 23);
  check_rms(5, 1001, 24);  // odd width: scalar path
  check_rms(3, 128, 25);
  check_rms(2, 12288, 26);  // more chunks than the registers hold: the two-pass path
}

void check_fused(int rows, int hidden, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const float eps = 1e-6f;
  const auto res = random_bf16(rng, static_cast<size_t>(rows) * hidden, -3.0f, 3.0f);
  const auto delta = random_bf16(rng, static_cast<size_t>(rows) * hidden, -1.0f, 1.0f);
  const auto w = random_bf16(rng, hidden, 0.5f, 1.5f);
  Fatbin fb("rmsnorm");
  Device<bf16_bits> d_res(res), d_delta(delta), d_w(w), d_y(static_cast<size_t>(rows) * hidden);
  // A grid smaller than rows exercises the row-strided loop.
  fb.launch("kern_fused_add_rms_norm_bf16", dim3(rows > 4 ? rows / 2 : rows), dim3(512), d_res.get(), d_delta.get(),
            d_w.get(), d_y.get(), rows, hidden, eps);
  const auto new_res = d_res.download();
  const auto y = d_y.download();
  ASSERT_EQ(count_nan(new_res), 0u);
  ASSERT_EQ(count_nan(y), 0u);
  std::vector<double> sum(res.size());
  const auto rd = to_double(res), dd = to_double(delta);
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = rd[i] + dd[i];
  EXPECT_LT(rel_frobenius(to_double(new_res), sum), kTol);
  const double err = rel_frobenius(to_double(y), rms_ref(sum, to_double(w), rows, hidden, eps));
  report("add_rms_norm rel err " + std::to_string(rows) + "x" + std::to_string(hidden), err);
  EXPECT_LT(err, kTol);
}

TEST(FusedAddRmsNormGpu, Shapes) {
  check_fused(1, 1024, 31);
  check_fused(9, 4096, 32);
  check_fused(17, 5120, 33);
  check_fused(6, 999, 34);
}

}  // namespace
}  // namespace kern_gpu_test
