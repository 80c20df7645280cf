// Row invariance of the cuBLASLt GEMM (docs/runtime.md, "GEMM algorithm choice"): the runtime
// chooses one algorithm per launch, at m's value at the var bounds, so a row's result is the same
// bits whether it is computed alone, among 7 rows or among 709. This is what lets `kern run
// --chunk 1` and `--chunk 512` produce identical tokens. Also: a manifest-pinned `algo` is used
// as given (same bits as the heuristic's choice it copies) and a bad one is a clear error.
#include <cstring>
#include <regex>
#include <string>

#include "gpu_fixture.hpp"
#include "kern/cuda/blaslt.hpp"
#include "kern/cuda/cuda.hpp"

namespace kern::gputest {
namespace {

const char* kManifest = R"({
  "schema_version": 5, "model": "runtime-gemm-invariance",
  "vars": {"m": {"max": 2048}},
  "buffers": {
    "a": {"dtype": "bf16", "shape": ["m", 9728], "kind": "input"},
    "w": {"dtype": "bf16", "shape": [19456, 9728], "kind": "input"},
    "c": {"dtype": "bf16", "shape": ["m", 19456], "kind": "output"}
  },
  "ops": {
    "gemm": {"params": ["in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32", "i32", "i32"],
             "impl": {"launches": [{"entry": "extern:cublaslt_bf16_tn"}]}}
  },
  "modules": {},
  "programs": {
    "qkv": {"calls": [{"op": "gemm", "args": [{"buf": "a"}, {"buf": "w"}, {"buf": "c"}, {"var": "m"}, {"i32": 6144}, {"i32": 2560}]}]},
    "o": {"calls": [{"op": "gemm", "args": [{"buf": "a"}, {"buf": "w"}, {"buf": "c"}, {"var": "m"}, {"i32": 2560}, {"i32": 4096}]}]},
    "gate_up": {"calls": [{"op": "gemm", "args": [{"buf": "a"}, {"buf": "w"}, {"buf": "c"}, {"var": "m"}, {"i32": 19456}, {"i32": 2560}]}]},
    "down": {"calls": [{"op": "gemm", "args": [{"buf": "a"}, {"buf": "w"}, {"buf": "c"}, {"var": "m"}, {"i32": 2560}, {"i32": 9728}]}]}
  }
})";

struct Case {
  const char* program;
  std::uint64_t n, k;
};
constexpr Case kCases[] = {{"qkv", 6144, 2560}, {"o", 2560, 4096}, {"gate_up", 19456, 2560}, {"down", 2560, 9728}};

// Rows computed alone and in groups of 2 / 7 / 64 against the same rows among 709, bitwise, for
// every shape; `manifest` is kManifest or its algo_per_m form.
void check_rows_against_709(const std::string& manifest) {
  auto rt = load(verified(manifest));
  rt->load_weights(weights::HostTensors{});
  std::uint64_t seed = 4242;
  for (const Case& cs : kCases) {
    SCOPED_TRACE(cs.program);
    auto w = random_bf16(cs.n * cs.k, seed++);
    rt->write_input("w", as_bytes(w), true);
    const std::uint64_t m = 709;
    auto a = random_bf16(m * cs.k, seed++);
    rt->write_input("a", as_bytes(a), true);
    rt->run(cs.program, {{"m", m}});
    const auto full = from_bytes<std::uint16_t>(rt->read_output("c"));
    int checked = 0;
    // Rows alone (m = 1) and in groups of 7 / 64, written at the start of `a`.
    for (auto [row, rows] :
         {std::pair<std::uint64_t, std::uint64_t>{0, 1}, {1, 1}, {354, 1}, {708, 1}, {100, 7}, {600, 64}, {0, 2}}) {
      std::vector<std::uint16_t> part(a.begin() + static_cast<std::ptrdiff_t>(row * cs.k),
                                      a.begin() + static_cast<std::ptrdiff_t>((row + rows) * cs.k));
      rt->write_input("a", as_bytes(part), true);
      rt->run(cs.program, {{"m", rows}});
      const auto got = from_bytes<std::uint16_t>(rt->read_output("c"));
      for (std::uint64_t r = 0; r < rows; ++r) {
        ASSERT_EQ(0, std::memcmp(&got[r * cs.n], &full[(row + r) * cs.n], cs.n * 2))
            << "row " << row + r << " differs when computed among " << rows << " rows instead of " << m;
        ++checked;
      }
    }
    EXPECT_EQ(checked, 1 + 1 + 1 + 1 + 7 + 64 + 2);
  }
}

TEST(RuntimeGpuGemmInvariance, RowResultDoesNotDependOnRowsPerCall) { check_rows_against_709(kManifest); }

// With algo_per_m the runtime may run, at each m, another heuristic answer it found bit for bit
// equal to the launch's one algorithm on a probe (docs/runtime.md): rows must stay invariant.
TEST(RuntimeGpuGemmInvariance, RowResultDoesNotDependOnRowsPerCallWithPerMAnswers) {
  std::string m = kManifest;
  const std::string entry = R"("entry": "extern:cublaslt_bf16_tn")";
  const std::size_t at = m.find(entry);
  ASSERT_NE(at, std::string::npos);
  m.insert(at + entry.size(), R"(, "algo_per_m": true)");
  check_rows_against_709(m);
}

// The same through BlasLt directly: pinning the heuristic's own choice reproduces its bits, and an
// algorithm id that does not exist is refused with a clear error.
TEST(RuntimeGpuGemmInvariance, PinnedAlgorithmIsUsedAndCheckedAtEveryShape) {
  cuda::ensure_driver();
  cuda::Context ctx(0);
  cuda::Stream stream;
  cuda::BlasLt blas;
  const std::uint64_t m = 33, n = 2560, k = 4096;
  auto a = random_bf16(m * k, 11), w = random_bf16(n * k, 12);
  auto da = cuda::DeviceMemory::allocate(a.size() * 2, "a");
  auto dw = cuda::DeviceMemory::allocate(w.size() * 2, "w");
  auto dc = cuda::DeviceMemory::allocate(m * n * 2, "c");
  cuda::copy_h2d_async(da.ptr(), a.data(), a.size() * 2, stream);
  cuda::copy_h2d_async(dw.ptr(), w.data(), w.size() * 2, stream);
  cuda::GemmShape s;
  s.m = m, s.n = n, s.k = k, s.lda = k, s.ldc = n, s.m_ref = 512;
  blas.gemm_bf16_tn(s, da.ptr(), dw.ptr(), dc.ptr(), stream);
  std::vector<std::uint16_t> ref(m * n), got(m * n);
  cuda::copy_d2h_async(ref.data(), dc.ptr(), ref.size() * 2, stream);
  stream.synchronize();

  const std::string text = blas.describe(s);
  std::printf("heuristic choice at m_ref=512 for n=%llu k=%llu: %s\n", (unsigned long long)n, (unsigned long long)k,
              text.c_str());
  auto field = [&](const char* name) {
    std::smatch mt;
    const std::regex re(std::string(name) + "=(-?[0-9]+)");
    if (!std::regex_search(text, mt, re)) ADD_FAILURE() << name << " missing in " << text;
    return std::stoll(mt[1].str());
  };
  cuda::GemmAlgo pin{field("id"),      field("tile"),   field("stages"),      field("split_k"),      field("reduction"),
                     field("swizzle"), field("custom"), field("inner_shape"), field("cluster_shape")};
  cuda::GemmShape pinned = s;
  pinned.m_ref = 0;
  pinned.algo = pin;
  cuda::memset_d8_async(dc.ptr(), 0xff, m * n * 2, stream);
  blas.gemm_bf16_tn(pinned, da.ptr(), dw.ptr(), dc.ptr(), stream);
  cuda::copy_d2h_async(got.data(), dc.ptr(), got.size() * 2, stream);
  stream.synchronize();
  EXPECT_EQ(0, std::memcmp(got.data(), ref.data(), got.size() * 2)) << "pinned copy of the heuristic's choice differs";
  EXPECT_NE(blas.describe(pinned).find("pinned by the manifest"), std::string::npos);

  cuda::GemmShape bogus = s;
  bogus.algo = cuda::GemmAlgo{};
  bogus.algo->id = 987654;
  try {
    blas.gemm_bf16_tn(bogus, da.ptr(), dw.ptr(), dc.ptr(), stream);
    ADD_FAILURE() << "an algorithm id cuBLASLt does not have was accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(e.root_kind() == ErrorKind::Blas || e.root_kind() == ErrorKind::Manifest) << e.what();
    std::printf("bogus algo refused: %s\n", e.what());
  }
}

}  // namespace
}  // namespace kern::gputest
