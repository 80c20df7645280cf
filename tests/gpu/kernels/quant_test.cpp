// GPU checks of kernels/quant.cu (per-tensor e4m3 quantization, kern gen --fp8) against a host reference:
// the absmax in float64 (exact: it is one of the inputs), the scale absmax / 448 in f32, bitwise (and within
// half an f32 ulp of the float64 quotient), and every e4m3 byte equal to the round-to-nearest-even,
// saturating conversion of the f32 quotient x / scale (the kernel divides in f32) by the encoder below,
// which is checked against cuda_fp8.h's own host conversion first. Several sizes (vector and scalar
// paths, misaligned pointers), grids, zeros, large and subnormal values, an all-zero tensor (scale 1).
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "harness.hpp"

namespace kern_gpu_test {
namespace {

// e4m3 (OCP FN: bias 7, 3 mantissa bits, no infinities, S.1111.111 NaN, largest finite 448) of f, rounded
// to nearest even and saturated to ±448 (infinities too), as __nv_cvt_float_to_fp8(f, __NV_SATFINITE,
// __NV_E4M3). Exact in double: f is an f32, and every scaling below is by a power of two.
uint8_t e4m3_rne_sat(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 448.0) return sign | 0x7e;  // above 448 the nearest even is 448 up to 464, then saturation
  if (a == 0.0) return sign;
  int e = 0;
  std::frexp(a, &e);
  const int exp = e - 1;  // a in [2^exp, 2^(exp+1))
  if (exp < -6) return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0));  // subnormals: k · 2^-9; 8 is 2^-6
  double mant = std::nearbyint((a / std::ldexp(1.0, exp) - 1.0) * 8.0);
  int biased = exp + 7;
  if (mant == 8.0) mant = 0.0, ++biased;
  return sign | static_cast<uint8_t>(std::min(0x7e, (biased << 3) | static_cast<int>(mant)));
}

float f32_of(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// The encoder above against cuda_fp8.h's host conversion (no GPU needed): every bf16 value, a stride
// through all f32 values, and each e4m3 midpoint with its neighbours.
TEST(QuantE4m3Host, EncoderMatchesCudaFp8Header) {
  int64_t checked = 0, differ = 0;
  auto check = [&](float f) {
    ++checked;
    const uint8_t want = __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3);
    if (e4m3_rne_sat(f) != want && differ++ < 10)
      ADD_FAILURE() << "f = " << f << " (" << std::hexfloat << f << "): " << int(e4m3_rne_sat(f)) << " vs " << int(want);
  };
  for (uint32_t b = 0; b < (1u << 16); ++b)
    if (!std::isnan(f32_of(b << 16))) check(f32_of(b << 16));
  for (uint64_t u = 0; u < (1ull << 32); u += 9973)
    if (!std::isnan(f32_of(static_cast<uint32_t>(u)))) check(f32_of(static_cast<uint32_t>(u)));
  auto value = [](int c) { return (c >> 3) == 0 ? (c & 7) / 512.0 : std::ldexp(1.0 + (c & 7) / 8.0, (c >> 3) - 7); };
  for (int c = 0; c < 0x7e; ++c) {
    const float mid = static_cast<float>((value(c) + value(c + 1)) / 2);
    for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f), static_cast<float>(value(c))}) {
      check(f);
      check(-f);
    }
  }
  check(464.0f);
  check(std::nextafter(464.0f, 1e9f));
  check(INFINITY);
  check(-INFINITY);
  EXPECT_EQ(differ, 0) << "of " << checked;
}

// absmax -> partials (`blocks` CTAs), then quant (`quant_grid` CTAs) of rows x cols elements of x; x and q
// start `x_off` / `q_off` elements into their allocations (x off 16 bytes or q off 8: the scalar path).
void check_quant(const std::string& what, int rows, int cols, const std::vector<bf16_bits>& x, int blocks,
                 int quant_grid, size_t x_off = 0, size_t q_off = 0) {
  SCOPED_TRACE(what + ": " + std::to_string(rows) + " x " + std::to_string(cols) + ", " + std::to_string(blocks) +
               " / " + std::to_string(quant_grid) + " blocks");
  const size_t n = static_cast<size_t>(rows) * cols;
  ASSERT_EQ(x.size(), n);
  std::vector<bf16_bits> x_host(n + x_off, 0);
  std::copy(x.begin(), x.end(), x_host.begin() + static_cast<std::ptrdiff_t>(x_off));
  Fatbin fb("quant");
  Device<bf16_bits> d_x(x_host);
  Device<float> d_parts(static_cast<size_t>(blocks)), d_scale(4);
  Device<uint8_t> d_q(n + q_off);  // 0xFF poison: an e4m3 NaN, which no finite input gives
  fb.launch("kern_absmax_partial_bf16", dim3(blocks), dim3(256), d_x.get() + x_off, d_parts.get(), rows, cols);
  fb.launch("kern_quant_e4m3_bf16", dim3(quant_grid), dim3(256), d_x.get() + x_off,
            static_cast<const float*>(d_parts.get()), d_scale.get(), d_q.get() + q_off, rows, cols, blocks);
  const auto parts = d_parts.download();
  const auto scale = d_scale.download();
  const auto q = d_q.download();

  double amax = 0.0;
  for (bf16_bits b : x) amax = std::max(amax, std::fabs(static_cast<double>(bf16_to_float(b))));
  const double parts_max = *std::max_element(parts.begin(), parts.end());
  EXPECT_EQ(parts_max, amax);
  for (float p : parts) EXPECT_TRUE(p >= 0.0f && p <= amax) << p;
  const float want = amax > 0.0 ? static_cast<float>(amax) / 448.0f : 1.0f;  // amax is a bf16: exact in f32
  EXPECT_EQ(bits_of(scale[0]), bits_of(want)) << scale[0] << " vs " << want << " (absmax " << amax << ")";
  if (amax > 0.0) {
    // correctly rounded: half an ulp, and an f32 subnormal's ulp is 2^-149 (a bf16-subnormal absmax)
    EXPECT_LE(std::fabs(static_cast<double>(scale[0]) - amax / 448.0),
              std::max(std::ldexp(static_cast<double>(want), -24), std::ldexp(1.0, -150)));
  }
  for (int i = 1; i < 4; ++i) EXPECT_EQ(bits_of(scale[i]), 0xFFFFFFFFu) << "scale[" << i << "] written";
  for (size_t i = 0; i < q_off; ++i) EXPECT_EQ(q[i], 0xFF) << "byte " << i << " before q written";
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const float quotient = bf16_to_float(x[i]) / want;  // f32 division, as the kernel
    const uint8_t ref = e4m3_rne_sat(quotient), got = q[q_off + i];
    const bool both_zero = (ref & 0x7f) == 0 && (got & 0x7f) == 0;  // ±0 (a tiny negative quotient)
    if (got != ref && !both_zero && bad++ < 8)
      ADD_FAILURE() << "element " << i << ": x " << bf16_to_float(x[i]) << ", x/scale " << quotient << ": got 0x"
                    << std::hex << int(got) << ", want 0x" << int(ref);
  }
  EXPECT_EQ(bad, 0u) << "of " << n;
  // The dequantized values: within half an e4m3 ulp of x (2^-4 relative for normals; 2^-10 · scale in the
  // subnormal range and below), with room for the f32 division's rounding.
  size_t far = 0;
  for (size_t i = 0; i < n && bad == 0; ++i) {
    const uint8_t c = q[q_off + i];
    const double mag = (c & 0x78) == 0 ? (c & 7) / 512.0 : std::ldexp(1.0 + (c & 7) / 8.0, ((c >> 3) & 15) - 7);
    const double deq = ((c & 0x80) ? -mag : mag) * want, xv = bf16_to_float(x[i]);
    if (std::fabs(deq - xv) > std::max(std::fabs(xv) / 16.0, want / 1024.0) * (1.0 + 1e-5) && far++ < 4)
      ADD_FAILURE() << "element " << i << ": x " << xv << " dequantizes to " << deq;
  }
  EXPECT_EQ(far, 0u);
}

using Grid = std::pair<int, int>;  // (absmax blocks, quant blocks), or (rows, cols)

std::vector<bf16_bits> uniform(uint64_t seed, size_t n, float lo, float hi) {
  std::mt19937_64 rng(seed);
  return random_bf16(rng, n, lo, hi);
}

TEST(QuantE4m3Gpu, RandomShapesAndGrids) {
  // (rows, cols): a decode row, a 64-sequence down_proj input, an odd count (scalar path), a prefill chunk,
  // a weight.
  const Grid shapes[] = {{1, 2560}, {64, 9728}, {3, 1001}, {2048, 384}, {1536, 768}, {7, 17}};
  const Grid grids[] = {{1, 1}, {20, 20}, {256, 256}, {37, 5}};
  uint64_t seed = 500;
  for (const auto& [rows, cols] : shapes)
    for (const auto& [blocks, grid] : grids) {
      const auto x = uniform(++seed, static_cast<size_t>(rows) * cols, -3.0f, 3.0f);
      check_quant("uniform", rows, cols, x, blocks, grid);
    }
}

TEST(QuantE4m3Gpu, ZerosLargeAndTinyValues) {
  const int rows = 48, cols = 2048;
  const size_t n = static_cast<size_t>(rows) * cols;
  std::mt19937_64 rng(77);
  // A third zeros; the largest magnitude negative.
  auto x = uniform(1, n, -40.0f, 40.0f);
  for (size_t i = 0; i < n; i += 3) x[i] = 0;
  x[12345] = float_to_bf16(-1000.0f);
  check_quant("zeros", rows, cols, x, 64, 64);
  // Large values: bf16's largest finite (0x7F7F, 3.39e38) beside ordinary ones, which then quantize to
  // zero or to e4m3 subnormals.
  x = uniform(2, n, -1e3f, 1e3f);
  x[7] = 0x7F7F;
  x[n - 1] = 0xFF7F;
  for (size_t i = 100; i < n; i += 997) x[i] = float_to_bf16(std::ldexp(1.0f, 120 + static_cast<int>(i % 7)));
  check_quant("large", rows, cols, x, 128, 128);
  // Around the absmax: values that land on and beyond 448 · scale after the division (saturation).
  x = uniform(3, n, -1.0f, 1.0f);
  x[0] = float_to_bf16(3.140625f);
  for (size_t i = 1; i < n; i += 101) x[i] = (i & 2) ? x[0] : static_cast<bf16_bits>(x[0] | 0x8000);
  check_quant("at the absmax", rows, cols, x, 96, 32);
  // Tiny values: bf16 subnormals only, so the scale is an f32 subnormal (no flush to zero).
  std::vector<bf16_bits> tiny(n);
  std::uniform_int_distribution<int> mant(0, 0x7f);
  for (size_t i = 0; i < n; ++i) tiny[i] = static_cast<bf16_bits>(mant(rng) | ((i & 1) ? 0x8000 : 0));
  check_quant("subnormal", rows, cols, tiny, 16, 16);
  // Values spanning the whole bf16 range.
  std::vector<bf16_bits> wide(n);
  std::uniform_int_distribution<int> bits(0, 0xFFFF);
  for (auto& b : wide) {
    do b = static_cast<bf16_bits>(bits(rng));
    while ((b & 0x7F80) == 0x7F80);  // finite only
  }
  check_quant("every exponent", rows, cols, wide, 256, 200);
}

TEST(QuantE4m3Gpu, AllZeroTensorGetsScaleOne) {
  const Grid shapes[] = {{1, 256}, {33, 768}, {5, 3}};
  for (const auto& [rows, cols] : shapes) {
    const std::vector<bf16_bits> zeros(static_cast<size_t>(rows) * cols, 0);
    check_quant("zeros", rows, cols, zeros, 8, 8);
  }
  check_quant("no rows", 0, 256, {}, 4, 4);
}

TEST(QuantE4m3Gpu, MisalignedPointersTakeTheScalarPath) {
  const int rows = 9, cols = 1024;
  const auto x = uniform(9, static_cast<size_t>(rows) * cols, -5.0f, 5.0f);
  check_quant("x off 2 bytes", rows, cols, x, 12, 12, 1, 0);
  check_quant("q off 1 byte", rows, cols, x, 12, 12, 0, 1);
  check_quant("aligned", rows, cols, x, 12, 12, 8, 16);
}

// Repeated runs over other grids give the same bytes (no atomics, an exact maximum).
TEST(QuantE4m3Gpu, BitwiseAcrossGridsAndRepeats) {
  const int rows = 128, cols = 2560;
  const size_t n = static_cast<size_t>(rows) * cols;
  const auto x = uniform(11, n, -8.0f, 8.0f);
  Fatbin fb("quant");
  Device<bf16_bits> d_x(x);
  Device<float> d_parts(256), d_scale(4);
  std::vector<uint8_t> first;
  float first_scale = 0;
  const Grid grids[] = {{256, 256}, {1, 1}, {256, 256}, {40, 160}, {3, 256}};
  for (const auto& [blocks, grid] : grids) {
    Device<uint8_t> d_q(n);
    fb.launch("kern_absmax_partial_bf16", dim3(blocks), dim3(256), d_x.get(), d_parts.get(), rows, cols);
    fb.launch("kern_quant_e4m3_bf16", dim3(grid), dim3(128), d_x.get(), static_cast<const float*>(d_parts.get()),
              d_scale.get(), d_q.get(), rows, cols, blocks);
    const auto q = d_q.download();
    const float s = d_scale.download()[0];
    if (first.empty()) {
      first = q;
      first_scale = s;
      continue;
    }
    EXPECT_EQ(bits_of(s), bits_of(first_scale)) << blocks << " / " << grid;
    EXPECT_TRUE(q == first) << blocks << " / " << grid;
  }
}

}  // namespace
}  // namespace kern_gpu_test
