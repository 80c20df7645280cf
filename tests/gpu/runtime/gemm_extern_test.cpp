// extern:cublas_bf16_tn_f32, extern:cublaslt_fp8_tn and extern:cublaslt_fp8_tn_f32 through a
// manifest on random inputs, against a float64 host reference (relative Frobenius error on
// sampled rows, every column of each; printed as "[figure]" lines):
// - bf16 -> f32 (cuBLAS): bf16 products are exact in f32, so only f32 accumulation differs: 1e-5.
// - fp8: A and W are quantized to e4m3 on the host (per-tensor scale amax / 448) and the reference
//   is the float64 product of the dequantized values, so the error is the GEMM's accumulation
//   (f32 output: 2e-3) plus, for bf16 output, its rounding (5e-3).
// Also: fp8's k % 16 refused at load (literal k) and per run (var k), the fp8 row invariance
// (a row's bits do not depend on the rows beside it), a pinned fp8 algorithm reproducing the
// heuristic's bits, and each extern captured into a graph (replay = eager, bitwise; scales read
// from device memory at replay).
#include <cmath>
#include <cstring>
#include <regex>
#include <string_view>

#include "gpu_fixture.hpp"
#include "kern/cuda/blaslt.hpp"
#include "kern/cuda/cuda.hpp"

namespace kern::gputest {
namespace {

// e4m3 (1 sign, 4 exponent bits with bias 7, 3 mantissa bits; no infinity, S.1111.111 is NaN).
float from_e4m3(std::uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return NAN;
  const float v = e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(1.0f + m / 8.0f, e - 7);
  return (b & 0x80) ? -v : v;
}

// Round to nearest even, saturating at ±448 (finite inputs).
std::uint8_t to_e4m3(float x) {
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const float a = std::fabs(x);
  if (a >= 448.0f) return sign | 0x7e;
  if (a < std::ldexp(1.0f, -6)) return sign | static_cast<std::uint8_t>(std::nearbyint(a * 512.0f));  // 8: 2^-6
  int e2 = 0;
  (void)std::frexp(a, &e2);
  int e = e2 - 1;  // a = 1.f × 2^e, e in [-6, 8]
  int m = static_cast<int>(std::nearbyint((std::ldexp(a, -e) - 1.0f) * 8.0f));
  if (m == 8) {
    m = 0;
    ++e;
  }
  if (e > 8 || (e == 8 && m == 7)) return sign | 0x7e;
  return sign | static_cast<std::uint8_t>(((e + 7) << 3) | m);
}

// x quantized with one scale: x ≈ from_e4m3(q[i]) × scale.
struct Quantized {
  std::vector<std::uint8_t> q;
  float scale = 1;
};
Quantized quantize(const std::vector<float>& x) {
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  Quantized out;
  out.scale = amax / 448.0f;
  out.q.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out.q[i] = to_e4m3(x[i] / out.scale);
  return out;
}

std::vector<float> random_scaled(std::size_t n, std::uint64_t seed, float scale) {
  auto v = random_f32(n, seed);  // [-4, 4)
  for (float& x : v) x *= scale;
  return v;
}

std::vector<std::uint64_t> sampled_rows(std::uint64_t m) {
  if (m <= 8) {
    std::vector<std::uint64_t> rows;
    for (std::uint64_t r = 0; r < m; ++r) rows.push_back(r);
    return rows;
  }
  return {0, m - 1, m / 2, m / 3, (m * 7) / 9, 1, m - 2, (m * 5) / 11};
}

// Relative Frobenius error of `got(r, col)` (row stride n) against sum_j a(r, j) · w(col, j) in
// float64, over sampled rows.
template <typename A, typename W, typename Got>
double rel_frobenius(std::uint64_t m, std::uint64_t n, std::uint64_t k, A a, W w, Got got) {
  double num = 0, den = 0;
  std::vector<double> arow(k), wcol(k);
  for (std::uint64_t r : sampled_rows(m)) {
    for (std::uint64_t j = 0; j < k; ++j) arow[j] = a(r * k + j);
    for (std::uint64_t col = 0; col < n; ++col) {
      double ref = 0;
      for (std::uint64_t j = 0; j < k; ++j) ref += arow[j] * w(col * k + j);
      const double g = got(r * n + col);
      if (!std::isfinite(g)) return INFINITY;
      num += (g - ref) * (g - ref);
      den += ref * ref;
    }
  }
  return std::sqrt(num / den);
}

void figure(const std::string& what, double value) { std::printf("[figure] %s: %.4g\n", what.c_str(), value); }

const char* kExternManifest = R"({
  "schema_version": 5, "model": "runtime-gemm-extern-test",
  "vars": {"m": {"max": 256}, "n": {"max": 4096}, "k": {"max": 4096}},
  "buffers": {
    "a16": {"dtype": "bf16", "shape": ["m", "k"], "kind": "input"},
    "w16": {"dtype": "bf16", "shape": ["n", "k"], "kind": "input"},
    "a8": {"dtype": "fp8e4m3", "shape": ["m", "k"], "kind": "input"},
    "w8": {"dtype": "fp8e4m3", "shape": ["n", "k"], "kind": "input"},
    "sa": {"dtype": "f32", "shape": [1], "kind": "input"},
    "sw": {"dtype": "f32", "shape": [1], "kind": "input"},
    "c16": {"dtype": "bf16", "shape": ["m", "n"], "kind": "output"},
    "c32": {"dtype": "f32", "shape": ["m", "n"], "kind": "output"}
  },
  "ops": {
    "bf16_f32": {"params": ["in buffer<bf16>", "in buffer<bf16>", "out buffer<f32>", "i32", "i32", "i32"],
                 "impl": {"launches": [{"entry": "extern:cublas_bf16_tn_f32"}]}},
    "fp8": {"params": ["in buffer<fp8e4m3>", "in buffer<fp8e4m3>", "out buffer<bf16>", "in buffer<f32>", "in buffer<f32>", "i32", "i32", "i32"],
            "impl": {"launches": [{"entry": "extern:cublaslt_fp8_tn"}]}},
    "fp8_f32": {"params": ["in buffer<fp8e4m3>", "in buffer<fp8e4m3>", "out buffer<f32>", "in buffer<f32>", "in buffer<f32>", "i32", "i32", "i32"],
                "impl": {"launches": [{"entry": "extern:cublaslt_fp8_tn_f32"}]}}
  },
  "modules": {},
  "programs": {
    "bf16_f32": {"calls": [{"op": "bf16_f32", "args": [{"buf": "a16"}, {"buf": "w16"}, {"buf": "c32"}, {"var": "m"}, {"var": "n"}, {"var": "k"}]}]},
    "fp8": {"calls": [{"op": "fp8", "args": [{"buf": "a8"}, {"buf": "w8"}, {"buf": "c16"}, {"buf": "sa"}, {"buf": "sw"}, {"var": "m"}, {"var": "n"}, {"var": "k"}]}]},
    "fp8_f32": {"calls": [{"op": "fp8_f32", "args": [{"buf": "a8"}, {"buf": "w8"}, {"buf": "c32"}, {"buf": "sa"}, {"buf": "sw"}, {"var": "m"}, {"var": "n"}, {"var": "k"}]}]},
    "bf16_f32_graph": {"batch": {"groups": 1, "rows": "m"}, "graph": true,
      "calls": [{"op": "bf16_f32", "args": [{"buf": "a16"}, {"buf": "w16"}, {"buf": "c32"}, {"var": "m"}, {"i32": 1024}, {"i32": 2048}]}]},
    "fp8_graph": {"batch": {"groups": 1, "rows": "m"}, "graph": true,
      "calls": [{"op": "fp8", "args": [{"buf": "a8"}, {"buf": "w8"}, {"buf": "c16"}, {"buf": "sa"}, {"buf": "sw"}, {"var": "m"}, {"i32": 1024}, {"i32": 2048}]}]},
    "fp8_f32_graph": {"batch": {"groups": 1, "rows": "m"}, "graph": true,
      "calls": [{"op": "fp8_f32", "args": [{"buf": "a8"}, {"buf": "w8"}, {"buf": "c32"}, {"buf": "sa"}, {"buf": "sw"}, {"var": "m"}, {"i32": 1024}, {"i32": 2048}]}]}
  }
})";

struct ExternShape {
  std::uint64_t n, k;
};
constexpr ExternShape kExternShapes[] = {{2560, 2560}, {1024, 4096}, {4096, 1024}};
constexpr std::uint64_t kExternMs[] = {1, 7, 128, 256};

class RuntimeGpuGemmExtern : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    rt_ = load(verified(kExternManifest)).release();
    rt_->load_weights(weights::HostTensors{});
  }
  static void TearDownTestSuite() {
    delete rt_;
    rt_ = nullptr;
  }
  static void write_scales(float sa, float sw) {
    rt_->write_input("sa", as_bytes(std::vector<float>{sa}));
    rt_->write_input("sw", as_bytes(std::vector<float>{sw}));
  }
  static runtime::Runtime* rt_;
};
runtime::Runtime* RuntimeGpuGemmExtern::rt_ = nullptr;

TEST(RuntimeGpuGemmExternCodec, E4m3RoundTripsEveryFiniteCode) {
  for (int b = 0; b < 256; ++b) {
    const float v = from_e4m3(static_cast<std::uint8_t>(b));
    if (std::isnan(v)) {
      EXPECT_EQ(b & 0x7f, 0x7f);
      continue;
    }
    EXPECT_EQ(to_e4m3(v), b) << "code " << b << " = " << v;
  }
  EXPECT_EQ(from_e4m3(0x7e), 448.0f);
  EXPECT_EQ(from_e4m3(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(to_e4m3(1000.0f), 0x7e);
  EXPECT_EQ(to_e4m3(-1000.0f), 0xfe);
}

TEST_F(RuntimeGpuGemmExtern, CublasBf16F32MatchesFloat64Reference) {
  std::uint64_t seed = 2000;
  for (const ExternShape& s : kExternShapes) {
    auto w = random_bf16(s.n * s.k, seed++);
    rt_->write_input("w16", as_bytes(w), true);
    for (std::uint64_t m : kExternMs) {
      SCOPED_TRACE(fmt::format("m={} n={} k={}", m, s.n, s.k));
      auto a = random_bf16(m * s.k, seed++);
      rt_->write_input("a16", as_bytes(a), true);
      rt_->run("bf16_f32", {{"m", m}, {"n", s.n}, {"k", s.k}});
      auto c = from_bytes<float>(rt_->read_output("c32"));
      const double e = rel_frobenius(
          m, s.n, s.k, [&](std::size_t i) { return static_cast<double>(from_bf16(a[i])); },
          [&](std::size_t i) { return static_cast<double>(from_bf16(w[i])); },
          [&](std::size_t i) { return static_cast<double>(c[i]); });
      figure(fmt::format("gemm cublas_bf16_tn_f32 m={} n={} k={} rel_frobenius", m, s.n, s.k), e);
      EXPECT_LT(e, 1e-5);
    }
  }
}

TEST_F(RuntimeGpuGemmExtern, Fp8MatchesFloat64ReferenceOfTheDequantizedInputs) {
  std::uint64_t seed = 3000;
  for (const ExternShape& s : kExternShapes) {
    const Quantized w = quantize(random_scaled(s.n * s.k, seed++, 1.0f / 64));  // weights in [-1/16, 1/16)
    rt_->write_input("w8", as_bytes(w.q), true);
    for (std::uint64_t m : kExternMs) {
      SCOPED_TRACE(fmt::format("m={} n={} k={}", m, s.n, s.k));
      const Quantized a = quantize(random_scaled(m * s.k, seed++, 1.0f));  // activations in [-4, 4)
      rt_->write_input("a8", as_bytes(a.q), true);
      write_scales(a.scale, w.scale);
      const double sa = a.scale, sw = w.scale;
      auto deq_a = [&](std::size_t i) { return from_e4m3(a.q[i]) * sa; };
      auto deq_w = [&](std::size_t i) { return from_e4m3(w.q[i]) * sw; };
      const core::Vars vars{{"m", m}, {"n", s.n}, {"k", s.k}};

      rt_->run("fp8_f32", vars);
      auto c32 = from_bytes<float>(rt_->read_output("c32"));
      const double e32 = rel_frobenius(m, s.n, s.k, deq_a, deq_w, [&](std::size_t i) { return double{c32[i]}; });
      figure(fmt::format("gemm cublaslt_fp8_tn_f32 m={} n={} k={} rel_frobenius", m, s.n, s.k), e32);
      EXPECT_LT(e32, 2e-3);

      rt_->run("fp8", vars);
      auto c16 = from_bytes<std::uint16_t>(rt_->read_output("c16"));
      const double e16 =
          rel_frobenius(m, s.n, s.k, deq_a, deq_w, [&](std::size_t i) { return double{from_bf16(c16[i])}; });
      figure(fmt::format("gemm cublaslt_fp8_tn m={} n={} k={} rel_frobenius", m, s.n, s.k), e16);
      EXPECT_LT(e16, 5e-3);
    }
  }
}

// Row invariance, as for the bf16 pair: the algorithm is chosen at m = 256 (the var bound) and
// used for every m, so a row computed alone or among 7 has the bits it has among 256.
TEST_F(RuntimeGpuGemmExtern, Fp8RowResultDoesNotDependOnRowsPerCall) {
  const std::uint64_t n = 2560, k = 4096, m = 256;
  const Quantized w = quantize(random_scaled(n * k, 51, 1.0f / 64));
  const Quantized a = quantize(random_scaled(m * k, 52, 1.0f));
  rt_->write_input("w8", as_bytes(w.q), true);
  rt_->write_input("a8", as_bytes(a.q), true);
  write_scales(a.scale, w.scale);
  for (const char* program : {"fp8", "fp8_f32"}) {
    SCOPED_TRACE(program);
    const bool f32 = std::string_view(program) == "fp8_f32";
    const char* out = f32 ? "c32" : "c16";
    const std::size_t row_bytes = n * (f32 ? 4 : 2);
    rt_->write_input("a8", as_bytes(a.q), true);
    rt_->run(program, {{"m", m}, {"n", n}, {"k", k}});
    const auto full = rt_->read_output(out);
    int checked = 0;
    for (auto [row, rows] : {std::pair<std::uint64_t, std::uint64_t>{0, 1}, {131, 1}, {255, 1}, {40, 7}, {0, 2}}) {
      std::vector<std::uint8_t> part(a.q.begin() + static_cast<std::ptrdiff_t>(row * k),
                                     a.q.begin() + static_cast<std::ptrdiff_t>((row + rows) * k));
      rt_->write_input("a8", as_bytes(part), true);
      rt_->run(program, {{"m", rows}, {"n", n}, {"k", k}});
      const auto got = rt_->read_output(out);
      for (std::uint64_t r = 0; r < rows; ++r) {
        ASSERT_EQ(0, std::memcmp(got.data() + r * row_bytes, full.data() + (row + r) * row_bytes, row_bytes))
            << "row " << row + r << " differs when computed among " << rows << " rows instead of " << m;
        ++checked;
      }
    }
    EXPECT_EQ(checked, 1 + 1 + 1 + 7 + 2);
  }
}

TEST_F(RuntimeGpuGemmExtern, Fp8KNotAMultipleOf16IsRefusedPerRun) {
  expect_error(
      [] {
        rt_->run("fp8", {{"m", 4}, {"n", 64}, {"k", 40}});
      },
      ErrorKind::Manifest, "extern:cublaslt_fp8_tn needs k to be a multiple of 16");
  rt_->run("fp8", {{"m", 4}, {"n", 64}, {"k", 64}});  // still usable
}

// Each extern captured into a graph: the first graph run equals eager, a replay on new inputs
// equals eager on them, and the fp8 scales are read from device memory at replay (a doubled
// a_scale doubles the output exactly).
TEST_F(RuntimeGpuGemmExtern, GraphReplayIsBitIdenticalToEager) {
  const std::uint64_t n = 1024, k = 2048;
  const auto w16 = random_bf16(n * k, 61);
  const Quantized w8 = quantize(random_scaled(n * k, 62, 1.0f / 64));
  rt_->write_input("w16", as_bytes(w16), true);
  rt_->write_input("w8", as_bytes(w8.q), true);
  for (const char* program : {"bf16_f32_graph", "fp8_graph", "fp8_f32_graph"}) {
    const bool fp8 = std::string_view(program) != "bf16_f32_graph";
    const char* out = std::string_view(program) == "fp8_graph" ? "c16" : "c32";
    for (std::uint64_t m : {1u, 7u, 64u}) {
      SCOPED_TRACE(fmt::format("{} m={}", program, m));
      const core::Vars vars{{"m", m}};
      float a_scale = 1;
      auto write_a = [&](std::uint64_t seed) {
        if (fp8) {
          const Quantized a = quantize(random_scaled(m * k, seed, 1.0f));
          rt_->write_input("a8", as_bytes(a.q), true);
          a_scale = a.scale;
          write_scales(a_scale, w8.scale);
        } else {
          rt_->write_input("a16", as_bytes(random_bf16(m * k, seed)), true);
        }
      };
      write_a(100 + m);
      rt_->set_eager(true);
      rt_->run(program, vars);
      const auto eager = rt_->read_output(out);
      rt_->set_eager(false);
      const auto captures = rt_->stats().graph_captures;
      rt_->run(program, vars);
      EXPECT_EQ(rt_->stats().graph_captures, captures + 1);
      const auto graph = rt_->read_output(out);
      ASSERT_EQ(graph, eager);

      write_a(200 + m);
      const auto launches = rt_->stats().graph_launches;
      rt_->replay(program, vars);
      EXPECT_EQ(rt_->stats().graph_launches, launches + 1);
      const auto replayed = rt_->read_output(out);
      rt_->set_eager(true);
      rt_->run(program, vars);
      rt_->set_eager(false);
      EXPECT_EQ(replayed, rt_->read_output(out));
      EXPECT_NE(replayed, graph) << "new inputs must change the output";
      if (!fp8) continue;
      write_scales(2 * a_scale, w8.scale);
      rt_->replay(program, vars);
      const auto doubled = rt_->read_output(out);
      rt_->set_eager(true);
      rt_->run(program, vars);
      rt_->set_eager(false);
      EXPECT_EQ(doubled, rt_->read_output(out));
      // the first m rows (the buffer beyond them is left from earlier runs)
      const std::size_t rows = m * n;
      if (std::string_view(out) == "c32") {
        const auto before = from_bytes<float>(replayed), after = from_bytes<float>(doubled);
        for (std::size_t i = 0; i < rows; ++i) ASSERT_EQ(after[i], 2 * before[i]) << "element " << i;
      } else {
        const auto before = from_bytes<std::uint16_t>(replayed), after = from_bytes<std::uint16_t>(doubled);
        for (std::size_t i = 0; i < rows; ++i)
          ASSERT_EQ(from_bf16(after[i]), 2 * from_bf16(before[i])) << "element " << i;
      }
    }
  }
}

TEST(RuntimeGpuGemmExternChecks, Fp8LiteralKNotAMultipleOf16IsRefusedAtLoad) {
  std::string json = kExternManifest;
  const std::string from = R"({"var": "m"}, {"i32": 1024}, {"i32": 2048}]}]},
    "fp8_f32_graph")";
  const std::size_t at = json.find(from);
  ASSERT_NE(at, std::string::npos);
  json.replace(at, from.size(), R"({"var": "m"}, {"i32": 1024}, {"i32": 2040}]}]},
    "fp8_f32_graph")");
  expect_error([&] { load(verified(json)); }, ErrorKind::Manifest,
               "extern:cublaslt_fp8_tn: k = 2040 is not a multiple of 16");
}

// An fp8 call offset that leaves a scale (or A, W, C) off 16 bytes is refused at load: cuBLASLt's
// checks see no addresses (on the H200, 2026-12-04, cublasLtMatmul answered
// CUBLAS_STATUS_NOT_SUPPORTED to the one call with a w_scale 4 bytes into its allocation).
TEST(RuntimeGpuGemmExternChecks, Fp8MisalignedScaleIsRefusedAtLoad) {
  std::string json = kExternManifest;
  const std::string buffer = R"("sw": {"dtype": "f32", "shape": [1], "kind": "input"})";
  const std::size_t b = json.find(buffer);
  ASSERT_NE(b, std::string::npos);
  json.replace(b, buffer.size(), R"("sw": {"dtype": "f32", "shape": [8], "kind": "input"})");
  const std::string from = R"({"buf": "sa"}, {"buf": "sw"}, {"var": "m"}, {"i32": 1024}, {"i32": 2048}]}]},
    "fp8_f32_graph")";
  const std::size_t at = json.find(from);
  ASSERT_NE(at, std::string::npos);
  json.replace(at, from.size(), R"({"buf": "sa"}, {"buf": "sw", "offset": 4}, {"var": "m"}, {"i32": 1024}, {"i32": 2048}]}]},
    "fp8_f32_graph")");
  expect_error([&] { load(verified(json)); }, ErrorKind::Manifest, "arg 4 (w_scale) at 0x");
  // 16 bytes in is accepted
  json.replace(json.find(R"("offset": 4)"), 11, R"("offset": 16)");
  auto rt = load(verified(json));
  EXPECT_TRUE(rt != nullptr);
}

// A pinned fp8 algorithm cuBLASLt cannot build or run for a launch whose n and k are literals is a
// Blas error at load naming the call and the shape, not one at the first run.
TEST(RuntimeGpuGemmExternChecks, Fp8UnsupportedPinnedAlgorithmIsRefusedAtLoad) {
  std::string json = kExternManifest;
  const std::string from = R"("impl": {"launches": [{"entry": "extern:cublaslt_fp8_tn_f32"}]})";
  const std::size_t at = json.find(from);
  ASSERT_NE(at, std::string::npos);
  json.replace(at, from.size(),
               R"("impl": {"launches": [{"entry": "extern:cublaslt_fp8_tn_f32", "algo": {"id": 987654, "tile": 0, "stages": 0, "split_k": 1, "reduction": 0, "swizzle": 0, "custom": 0, "inner_shape": 0, "cluster_shape": 0}}]})");
  try {
    load(verified(json));
    ADD_FAILURE() << "an fp8 algorithm id cuBLASLt does not have was accepted at load";
  } catch (const Error& e) {
    EXPECT_EQ(e.root_kind(), ErrorKind::Blas) << e.what();
    const std::string what = e.what();
    EXPECT_NE(what.find("fp8_f32_graph"), std::string::npos) << what;
    EXPECT_NE(what.find("n=1024 k=2048"), std::string::npos) << what;
    std::printf("unsupported pinned fp8 algo refused at load: %s\n", what.c_str());
  }
}

// Through BlasLt directly, as RuntimeGpuGemmInvariance does for bf16: pinning the heuristic's own
// fp8 choice reproduces its bits. The scales sit 16 bytes apart (BlasLt::kFp8Alignment); a
// 4-byte-aligned one is refused before anything is enqueued (with w_scale at +4, as this test first
// had it, cublasLtMatmul answered CUBLAS_STATUS_NOT_SUPPORTED after every check had passed).
TEST(RuntimeGpuGemmExternChecks, Fp8PinnedAlgorithmReproducesTheHeuristicsChoice) {
  cuda::ensure_driver();
  cuda::Context ctx(0);
  cuda::Stream stream;
  cuda::BlasLt blas;
  const std::uint64_t m = 33, n = 2560, k = 4096;
  const Quantized a = quantize(random_scaled(m * k, 71, 1.0f)), w = quantize(random_scaled(n * k, 72, 1.0f / 64));
  auto da = cuda::DeviceMemory::allocate(a.q.size(), "a");
  auto dw = cuda::DeviceMemory::allocate(w.q.size(), "w");
  auto dc = cuda::DeviceMemory::allocate(m * n * 4, "c");
  auto ds = cuda::DeviceMemory::allocate(2 * cuda::BlasLt::kFp8Alignment, "scales");
  const float scales[2] = {a.scale, w.scale};
  cuda::copy_h2d_async(da.ptr(), a.q.data(), a.q.size(), stream);
  cuda::copy_h2d_async(dw.ptr(), w.q.data(), w.q.size(), stream);
  cuda::copy_h2d_async(ds.ptr(), &scales[0], 4, stream);
  cuda::copy_h2d_async(ds.ptr() + cuda::BlasLt::kFp8Alignment, &scales[1], 4, stream);
  cuda::GemmShape s;
  s.in = DType::FP8E4M3, s.out = DType::F32;
  s.m = m, s.n = n, s.k = k, s.lda = k, s.ldc = n, s.m_ref = 512;
  const cuda::GemmOperands ops{da.ptr(), dw.ptr(), dc.ptr(), ds.ptr(), ds.ptr() + cuda::BlasLt::kFp8Alignment};
  blas.gemm(s, ops, stream);
  std::vector<float> ref(m * n), got(m * n);
  cuda::copy_d2h_async(ref.data(), dc.ptr(), ref.size() * 4, stream);
  stream.synchronize();
  const double e = rel_frobenius(
      m, n, k, [&](std::size_t i) { return from_e4m3(a.q[i]) * double{a.scale}; },
      [&](std::size_t i) { return from_e4m3(w.q[i]) * double{w.scale}; },
      [&](std::size_t i) { return double{ref[i]}; });
  EXPECT_LT(e, 2e-3);

  const std::string text = blas.describe(s);
  std::printf("fp8 heuristic choice at m_ref=512 for n=%llu k=%llu: %s\n", (unsigned long long)n, (unsigned long long)k,
              text.c_str());
  auto field = [&](const char* name) {
    std::smatch mt;
    const std::regex re(std::string(name) + "=(-?[0-9]+)");
    if (!std::regex_search(text, mt, re)) ADD_FAILURE() << name << " missing in " << text;
    return std::stoll(mt[1].str());
  };
  cuda::GemmShape pinned = s;
  pinned.m_ref = 0;
  pinned.algo =
      cuda::GemmAlgo{field("id"),      field("tile"),   field("stages"),      field("split_k"),      field("reduction"),
                     field("swizzle"), field("custom"), field("inner_shape"), field("cluster_shape")};
  cuda::memset_d8_async(dc.ptr(), 0xff, m * n * 4, stream);
  blas.gemm(pinned, ops, stream);
  cuda::copy_d2h_async(got.data(), dc.ptr(), got.size() * 4, stream);
  stream.synchronize();
  EXPECT_EQ(0, std::memcmp(got.data(), ref.data(), got.size() * 4)) << "pinned copy of the heuristic's choice differs";
  EXPECT_NE(blas.describe(pinned).find("pinned by the manifest"), std::string::npos);
  // an FP8 GEMM without its scales is refused before anything is enqueued
  expect_error(
      [&] {
        blas.gemm(s, cuda::GemmOperands{da.ptr(), dw.ptr(), dc.ptr()}, stream);
      },
      ErrorKind::Api, "a_scale and w_scale must both be given");
  // nor with a scale off 16 bytes (the layout this test first had: both in one 8-byte allocation)
  expect_error(
      [&] {
        blas.gemm(s, cuda::GemmOperands{da.ptr(), dw.ptr(), dc.ptr(), ds.ptr(), ds.ptr() + 4}, stream);
      },
      ErrorKind::Api, "w_scale at 0x");
  expect_error(
      [&] {
        blas.gemm(pinned, cuda::GemmOperands{da.ptr(), dw.ptr(), dc.ptr(), ds.ptr() + 8, ds.ptr() + 16}, stream);
      },
      ErrorKind::Api, "is not 16-byte aligned");
}

}  // namespace
}  // namespace kern::gputest
