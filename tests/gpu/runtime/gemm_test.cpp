// extern:cublaslt_bf16_tn and _acc against a float64 host reference on random inputs, for
// m ∈ {1, 7, 128, 709, 2048} and Qwen3-4B's (n, k); strided C and A; relative Frobenius
// error below 1e-2 on sampled rows (every column of each sampled row, first and last row always).
#include <cmath>
#include <string_view>

#include "gpu_fixture.hpp"

namespace kern::gputest {
namespace {

constexpr std::uint64_t kPadC = 64, kPadA = 32;

const char* kGemmManifest = R"({
  "schema_version": 5, "model": "runtime-gemm-test",
  "vars": {"m": {"max": 2048}, "n": {"max": 19456}, "k": {"max": 9728}},
  "buffers": {
    "a": {"dtype": "bf16", "shape": ["m", 9760], "kind": "input"},
    "w": {"dtype": "bf16", "shape": ["n", "k"], "kind": "input"},
    "c": {"dtype": "bf16", "shape": ["m", 19520], "kind": "output"}
  },
  "ops": {
    "gemm": {"params": ["in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32", "i32", "i32"],
             "impl": {"launches": [{"entry": "extern:cublaslt_bf16_tn"}]}},
    "gemm_acc": {"params": ["in buffer<bf16>", "in buffer<bf16>", "inout buffer<bf16>", "i32", "i32", "i32"],
             "impl": {"launches": [{"entry": "extern:cublaslt_bf16_tn_acc"}]}},
    "gemm_strided": {"params": ["in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32", "i32", "i32", "i32", "i32"],
             "impl": {"launches": [{"entry": "extern:cublaslt_bf16_tn"}]}}
  },
  "modules": {},
  "programs": {
    "plain": {"calls": [{"op": "gemm", "args": [{"buf": "a"}, {"buf": "w"}, {"buf": "c"}, {"var": "m"}, {"var": "n"}, {"var": "k"}]}]},
    "acc": {"calls": [
      {"op": "gemm", "args": [{"buf": "a"}, {"buf": "w"}, {"buf": "c"}, {"var": "m"}, {"var": "n"}, {"var": "k"}]},
      {"op": "gemm_acc", "args": [{"buf": "a"}, {"buf": "w"}, {"buf": "c"}, {"var": "m"}, {"var": "n"}, {"var": "k"}]}]},
    "strided": {"calls": [{"op": "gemm_strided", "args": [{"buf": "a"}, {"buf": "w"}, {"buf": "c"}, {"var": "m"}, {"var": "n"}, {"var": "k"},
      {"expr": {"add": ["n", 64]}}, {"expr": {"add": ["k", 32]}}]}]}
  }
})";

struct Shape {
  std::uint64_t n, k;
};
constexpr Shape kQwenShapes[] = {{6144, 2560}, {2560, 4096}, {19456, 2560}, {2560, 9728}};
constexpr std::uint64_t kMs[] = {1, 7, 128, 709, 2048};

std::vector<std::uint64_t> sample_rows(std::uint64_t m) {
  std::vector<std::uint64_t> rows;
  if (m <= 8) {
    for (std::uint64_t r = 0; r < m; ++r) rows.push_back(r);
    return rows;
  }
  rows = {0, m - 1, m / 2, m / 3, (m * 7) / 9, 1, m - 2, (m * 5) / 11};
  return rows;
}

// Relative Frobenius error of C (row stride ldc) vs reference on sampled rows.
// mode 0: C = A·Wᵀ; mode 1: C = bf16(A·Wᵀ) + A·Wᵀ.
double rel_error(const std::vector<std::uint16_t>& a, std::uint64_t lda, const std::vector<std::uint16_t>& w,
                 const std::vector<std::uint16_t>& c, std::uint64_t ldc, std::uint64_t m, std::uint64_t n,
                 std::uint64_t k, int mode) {
  double num = 0, den = 0;
  std::vector<double> arow(k);
  for (std::uint64_t r : sample_rows(m)) {
    for (std::uint64_t j = 0; j < k; ++j) arow[j] = from_bf16(a[r * lda + j]);
    for (std::uint64_t col = 0; col < n; ++col) {
      double ref = 0;
      const std::uint16_t* wr = &w[col * k];
      for (std::uint64_t j = 0; j < k; ++j) ref += arow[j] * from_bf16(wr[j]);
      if (mode == 1) ref = static_cast<double>(from_bf16(to_bf16(static_cast<float>(ref)))) + ref;
      const double got = from_bf16(c[r * ldc + col]);
      if (!std::isfinite(got)) return INFINITY;
      num += (got - ref) * (got - ref);
      den += ref * ref;
    }
  }
  return std::sqrt(num / den);
}

class RuntimeGpuGemm : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    rt_ = load(verified(kGemmManifest)).release();
    rt_->load_weights(weights::HostTensors{});
  }
  static void TearDownTestSuite() {
    delete rt_;
    rt_ = nullptr;
  }
  static runtime::Runtime* rt_;
};
runtime::Runtime* RuntimeGpuGemm::rt_ = nullptr;

TEST_F(RuntimeGpuGemm, Bf16AndAccMatchFloat64Reference) {
  std::uint64_t seed = 1000;
  for (const Shape& s : kQwenShapes) {
    auto w = random_bf16(s.n * s.k, seed++);
    rt_->write_input("w", as_bytes(w), true);
    for (std::uint64_t m : kMs) {
      SCOPED_TRACE(fmt::format("m={} n={} k={}", m, s.n, s.k));
      auto a = random_bf16(m * s.k, seed++);
      rt_->write_input("a", as_bytes(a), true);
      const core::Vars vars{{"m", m}, {"n", s.n}, {"k", s.k}};
      // plain: C = A·Wᵀ; acc: C = A·Wᵀ then C += A·Wᵀ
      for (const char* program : {"plain", "acc"}) {
        const int acc = std::string_view(program) == "acc" ? 1 : 0;
        if (acc && m != 7 && m != 709) continue;
        rt_->run(program, vars);
        auto c = from_bytes<std::uint16_t>(rt_->read_output("c"));
        const double e = rel_error(a, s.k, w, c, s.n, m, s.n, s.k, acc);
        std::printf("gemm %-5s m=%4llu n=%5llu k=%4llu rel_frobenius=%.3e\n", program, (unsigned long long)m,
                    (unsigned long long)s.n, (unsigned long long)s.k, e);
        EXPECT_LT(e, 1e-2);
      }
    }
  }
}

TEST_F(RuntimeGpuGemm, StridedCAndA) {
  for (auto [m, s] : {std::pair<std::uint64_t, Shape>{7, {2560, 4096}}, {709, {6144, 2560}}, {128, {2560, 9728}}}) {
    SCOPED_TRACE(fmt::format("m={} n={} k={}", m, s.n, s.k));
    const std::uint64_t lda = s.k + kPadA, ldc = s.n + kPadC;
    auto w = random_bf16(s.n * s.k, 77 + m);
    auto a = random_bf16(m * lda, 78 + m);  // padding columns hold random values the GEMM must not read
    rt_->write_input("w", as_bytes(w), true);
    rt_->write_input("a", as_bytes(a), true);
    auto before = from_bytes<std::uint16_t>(rt_->read_output("c"));
    rt_->run("strided", {{"m", m}, {"n", s.n}, {"k", s.k}});
    auto c = from_bytes<std::uint16_t>(rt_->read_output("c"));
    const double e = rel_error(a, lda, w, c, ldc, m, s.n, s.k, 0);
    std::printf("gemm strided m=%4llu n=%5llu k=%4llu rel_frobenius=%.3e\n", (unsigned long long)m,
                (unsigned long long)s.n, (unsigned long long)s.k, e);
    EXPECT_LT(e, 1e-2);
    for (std::uint64_t r = 0; r < m; ++r)
      for (std::uint64_t col = s.n; col < ldc; ++col)
        ASSERT_EQ(c[r * ldc + col], before[r * ldc + col]) << "C padding written at row " << r;
  }
}

TEST(RuntimeGpuGemmChecks, ShapeBeyondBufferIsRejectedAndZeroIsNoOp) {
  const char* json = R"({
  "schema_version": 5, "model": "runtime-gemm-check",
  "vars": {"m": {"max": 8}},
  "buffers": {"a": {"dtype": "bf16", "shape": [4, 8], "kind": "input"},
              "w": {"dtype": "bf16", "shape": [8, 8], "kind": "input"},
              "c": {"dtype": "bf16", "shape": [8, 8], "kind": "output"}},
  "modules": {},
  "ops": {"gemm": {"params": ["in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32", "i32", "i32"],
                   "impl": {"launches": [{"entry": "extern:cublaslt_bf16_tn"}]}}},
  "programs": {"p": {"calls": [{"label": "g", "op": "gemm", "args": [{"buf": "a"}, {"buf": "w"}, {"buf": "c"}, {"var": "m"}, {"i32": 8}, {"i32": 8}]}]}}
})";
  std::unique_ptr<runtime::Runtime> rt;
  try {
    rt = load(verified(json));
  } catch (const Error& e) {
    ASSERT_EQ(e.root_kind(), ErrorKind::ManifestVerify) << e.what();  // the verifier caught it statically
    return;
  }
  rt->load_weights(weights::HostTensors{});
  auto a = random_bf16(32, 3), w = random_bf16(64, 4);
  rt->write_input("a", as_bytes(a));
  rt->write_input("w", as_bytes(w));
  rt->run("p", {{"m", 4}});  // fits
  auto c = from_bytes<std::uint16_t>(rt->read_output("c"));
  EXPECT_LT(rel_error(a, 8, w, c, 8, 4, 8, 8, 0), 1e-2);
  expect_error([&] { rt->run("p", {{"m", 5}}); }, ErrorKind::Manifest, "A needs 80 bytes but its buffer has 64");
  rt->run("p", {{"m", 3}});  // still usable
}

}  // namespace
}  // namespace kern::gputest
