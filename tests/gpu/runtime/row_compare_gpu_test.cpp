// kern test's compare kernels (kernels/compare.cu) through runtime::DeviceRowCompare against their
// float64 host reference core::compare_rows, row for row: every integer field (tops, counts, rank,
// overlap, identity) exactly, kl / max |diff| / margin within 1e-9 relative (only kl's f64 sum order
// and exp / log differ from the host). Rows of 1, 2, 19, 20, 21, 1000, 151936 (Qwen3's vocab) and
// 262144 entries, bf16 and f32, padded and interleaved strides: identical rows, noise, permutations,
// ties (many equal maxima, constant rows), NaN / +-inf on one side, on both (same and other kinds,
// at the tops), rows with no finite entry or none finite in both, signed zeros, extremes, sorted
// rows, masked rows with fewer than 20 finite entries. Then determinism, argument refusals and the
// fatbin's errors (missing, not a fatbin, without the entries).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/core/ab_compare.hpp"
#include "kern/cuda/cuda.hpp"
#include "kern/runtime/row_compare.hpp"

namespace kern::runtime {
namespace {

std::string kernels_dir() {
  if (const char* env = std::getenv("KERN_KERNELS_DIR"); env != nullptr && *env != '\0') return env;
  return std::string(KERN_BINARY_DIR) + "/kernels";
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::uint16_t bf16_bits(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x40u);    // stays a (quiet) NaN
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);  // round to nearest even
}
float bf16_value(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

struct RowPair {
  std::string what;
  std::vector<float> ref, test;
};

std::size_t host_argmax(const std::vector<float>& row) {
  std::size_t best = 0;
  bool any = false;
  for (std::size_t i = 0; i < row.size(); ++i)
    if (std::isfinite(row[i]) && (!any || row[i] > row[best])) best = i, any = true;
  return best;
}

// The rows every size is tested on (values as f32; a bf16 run rounds them to bf16 first).
std::vector<RowPair> make_cases(std::size_t v, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> logit(0.0f, 3.0f), noise(0.0f, 0.02f);
  std::uniform_int_distribution<std::size_t> pos(0, v - 1);
  std::uniform_int_distribution<int> small(0, 3);
  auto random_row = [&] {
    std::vector<float> r(v);
    for (float& x : r) x = logit(rng);
    return r;
  };
  auto noisy = [&](std::vector<float> r) {
    for (float& x : r) x += noise(rng);
    return r;
  };
  const float special[] = {kNaN, kInf, -kInf};
  auto inject = [&](std::vector<float>& r, std::size_t count) {
    for (std::size_t k = 0; k < count; ++k) r[pos(rng)] = special[k % 3];
  };
  std::vector<RowPair> c;
  {
    std::vector<float> r = random_row();
    c.push_back({"noise", r, noisy(r)});
    c.push_back({"identical", r, r});
    std::vector<float> p = r;
    std::shuffle(p.begin(), p.end(), rng);
    c.push_back({"permuted", r, p});
  }
  {
    std::vector<float> r(v), t(v);
    for (std::size_t i = 0; i < v; ++i) r[i] = static_cast<float>(small(rng)), t[i] = static_cast<float>(small(rng));
    c.push_back({"ties (values 0..3)", r, t});
    std::vector<float> t2 = r;
    for (std::size_t k = 0; k < std::max<std::size_t>(1, v / 50); ++k) t2[pos(rng)] = 3.0f;
    c.push_back({"ties, test adds maxima", r, t2});
    c.push_back({"constant rows", std::vector<float>(v, 5.0f), std::vector<float>(v, 5.0f)});
    std::vector<float> t3(v, 5.0f);
    t3[v - 1] = 5.5f;
    c.push_back({"constant ref, test's last entry above", std::vector<float>(v, 5.0f), t3});
  }
  {
    std::vector<float> r = random_row();
    std::vector<float> t = noisy(r);
    inject(t, std::max<std::size_t>(1, v / 100));
    c.push_back({"nonfinite in test", r, t});
    std::vector<float> t1 = noisy(r);
    t1[host_argmax(r)] = kNaN;  // ref's top-1 not finite in test: rank -1
    c.push_back({"NaN at ref's top-1 in test", r, t1});
    std::vector<float> t2 = noisy(r);
    t2[host_argmax(r)] = kInf;
    c.push_back({"+inf at ref's top-1 in test", r, t2});
    std::vector<float> r2 = r;
    inject(r2, std::max<std::size_t>(1, v / 100));
    std::vector<float> t4 = noisy(r);
    r2[host_argmax(t4)] = -kInf;  // the test's top-1 is -inf in ref
    c.push_back({"nonfinite in ref", r2, t4});
    std::vector<float> r3 = r, t5 = noisy(r);
    for (std::size_t k = 0; k < std::max<std::size_t>(1, v / 60); ++k) {
      const std::size_t i = pos(rng);
      r3[i] = special[k % 3];
      t5[i] = special[(k + (k % 2)) % 3];  // every other one the same kind on both sides
    }
    c.push_back({"nonfinite on both sides", r3, t5});
  }
  {
    c.push_back({"no finite entry in either", std::vector<float>(v, kNaN), std::vector<float>(v, -kInf)});
    std::vector<float> all(v);
    for (std::size_t i = 0; i < v; ++i) all[i] = special[i % 3];
    c.push_back({"no finite entry, same kinds", all, all});
    c.push_back({"no finite entry in ref", std::vector<float>(v, kInf), random_row()});
    c.push_back({"no finite entry in test", random_row(), std::vector<float>(v, kNaN)});
    std::vector<float> r = random_row(), t = random_row();
    for (std::size_t i = 0; i < v; ++i) (i % 2 == 0 ? t : r)[i] = kNaN;
    c.push_back({"none finite in both, each has some", r, t});
  }
  {
    std::vector<float> r(v, 0.0f), t(v, 0.0f);
    for (std::size_t i = 0; i < v; i += 3) t[i] = -0.0f;
    c.push_back({"signed zeros", r, t});
    std::vector<float> up(v), down(v);
    for (std::size_t i = 0; i < v; ++i)
      up[i] = static_cast<float>(i) * 0.25f, down[i] = static_cast<float>(v - i) * 0.25f;
    c.push_back({"ascending vs descending", up, down});
    std::vector<float> e = random_row(), f = random_row();
    for (std::size_t i = 0; i < v; ++i) {
      if (i % 4 == 0) e[i] = 3.0e38f, f[i] = -3.0e38f;
      if (i % 4 == 1) e[i] = 1.0e-40f, f[i] = -1.0e-40f;  // subnormal in f32 (flushed to 0 or a bf16 subnormal)
      if (i % 7 == 2) e[i] *= 1.0e4f;
    }
    c.push_back({"extremes", e, f});
    std::vector<float> m(v, -kInf), n(v, -kInf);
    for (std::size_t k = 0; k < 7; ++k) m[pos(rng)] = logit(rng), n[pos(rng)] = logit(rng);
    n[pos(rng)] = m[pos(rng)];
    c.push_back({"masked: a few finite entries", m, n});
    std::vector<float> one(v, -kInf);
    one[v / 2] = 1.0f;
    c.push_back({"masked: one finite entry each", one, one});
  }
  return c;
}

bool close(double got, double want) { return std::fabs(got - want) <= 1e-9 * std::max(1.0, std::fabs(want)); }

void expect_same(const core::PositionCompare& got, const core::PositionCompare& want, const std::string& where) {
  EXPECT_EQ(got.top1_ref, want.top1_ref) << where;
  EXPECT_EQ(got.top1_test, want.top1_test) << where;
  EXPECT_EQ(got.nonfinite, want.nonfinite) << where;
  EXPECT_EQ(got.identical, want.identical) << where;
  EXPECT_EQ(got.rank_in_test, want.rank_in_test) << where;
  EXPECT_EQ(got.top20_overlap, want.top20_overlap) << where;
  EXPECT_TRUE(close(got.kl, want.kl)) << where << ": kl " << got.kl << " vs host " << want.kl;
  EXPECT_TRUE(close(got.max_abs_diff, want.max_abs_diff))
      << where << ": max_abs_diff " << got.max_abs_diff << " vs host " << want.max_abs_diff;
  EXPECT_TRUE(close(got.margin_ref, want.margin_ref))
      << where << ": margin_ref " << got.margin_ref << " vs host " << want.margin_ref;
}

enum class Layout { Padded, Interleaved };

class RowCompareGpu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    try {
      cuda::ensure_driver();
      context_ = new cuda::Context(0);
      compare_ = new DeviceRowCompare(0, kernels_dir());
    } catch (const Error& e) {
      setup_error_ = e.what();
    }
  }
  void SetUp() override { ASSERT_NE(compare_, nullptr) << setup_error_; }
  static void TearDownTestSuite() {
    delete compare_;
    delete context_;
    compare_ = nullptr;
    context_ = nullptr;
  }

  // Uploads the cases' rows (one row per case) in `layout`, compares them on the device, checks
  // every row against compare_rows of the same (dtype-rounded) values.
  static std::vector<core::PositionCompare> run_and_check(const std::vector<RowPair>& cases, DType dtype, Layout layout,
                                                          const std::string& label) {
    const std::size_t v = cases.at(0).ref.size(), rows = cases.size();
    const std::size_t elem = dtype == DType::BF16 ? 2 : 4;
    // Padded: two buffers, rows `v + 5` apart, the padding NaN / +inf (read it and a result changes).
    // Interleaved: one buffer, ref row r then test row r, rows 2v apart.
    const std::size_t stride = layout == Layout::Padded ? v + 5 : 2 * v;
    const std::size_t ref_off = 0, test_off = layout == Layout::Padded ? 0 : v;
    std::vector<float> ref_host(rows * stride + 8, kNaN), test_host(rows * stride + 8, kInf);
    std::vector<core::PositionCompare> want;
    for (std::size_t r = 0; r < rows; ++r) {
      std::vector<float> a = cases[r].ref, b = cases[r].test;
      if (dtype == DType::BF16)
        for (std::size_t i = 0; i < v; ++i) a[i] = bf16_value(bf16_bits(a[i])), b[i] = bf16_value(bf16_bits(b[i]));
      want.push_back(core::compare_rows(a, b));
      std::vector<float>& ref_dst = ref_host;
      std::vector<float>& test_dst = layout == Layout::Padded ? test_host : ref_host;
      std::copy(a.begin(), a.end(), ref_dst.begin() + static_cast<std::ptrdiff_t>(r * stride + ref_off));
      std::copy(b.begin(), b.end(), test_dst.begin() + static_cast<std::ptrdiff_t>(r * stride + test_off));
    }
    auto to_device = [&](const std::vector<float>& host) {
      cuda::DeviceMemory mem = cuda::DeviceMemory::allocate(host.size() * elem, "row compare test rows");
      cuda::Stream s;
      if (dtype == DType::BF16) {
        std::vector<std::uint16_t> bits(host.size());
        for (std::size_t i = 0; i < host.size(); ++i) bits[i] = bf16_bits(host[i]);
        cuda::copy_h2d_async(mem.ptr(), bits.data(), bits.size() * 2, s);
        s.synchronize();
      } else {
        cuda::copy_h2d_async(mem.ptr(), host.data(), host.size() * 4, s);
        s.synchronize();
      }
      return mem;
    };
    const cuda::DeviceMemory ref_dev = to_device(ref_host);
    const cuda::DeviceMemory test_dev = layout == Layout::Padded ? to_device(test_host) : cuda::DeviceMemory();
    const std::uint64_t ref_ptr = ref_dev.ptr() + ref_off * elem;
    const std::uint64_t test_ptr = (layout == Layout::Padded ? test_dev.ptr() : ref_dev.ptr()) + test_off * elem;
    const std::vector<core::PositionCompare> got = compare_->compare(ref_ptr, stride, test_ptr, stride, dtype, v, rows);
    EXPECT_EQ(got.size(), rows);
    for (std::size_t r = 0; r < std::min(rows, got.size()); ++r)
      expect_same(got[r], want[r],
                  label + " vocab " + std::to_string(v) + " row " + std::to_string(r) + " (" + cases[r].what + ")");
    return got;
  }

  static cuda::Context* context_;
  static DeviceRowCompare* compare_;
  static std::string setup_error_;
};

cuda::Context* RowCompareGpu::context_ = nullptr;
DeviceRowCompare* RowCompareGpu::compare_ = nullptr;
std::string RowCompareGpu::setup_error_;

TEST_F(RowCompareGpu, MatchesComputeRowsF32) {
  for (std::size_t v : {1, 2, 19, 20, 21, 1000, 151936}) {
    const std::vector<RowPair> cases = make_cases(v, 1000 + v);
    run_and_check(cases, DType::F32, Layout::Padded, "f32 padded");
    run_and_check(cases, DType::F32, Layout::Interleaved, "f32 interleaved");
  }
}

TEST_F(RowCompareGpu, MatchesComputeRowsBf16) {
  for (std::size_t v : {1, 2, 19, 20, 21, 1000, 151936}) {
    const std::vector<RowPair> cases = make_cases(v, 2000 + v);
    run_and_check(cases, DType::BF16, Layout::Padded, "bf16 padded");
    run_and_check(cases, DType::BF16, Layout::Interleaved, "bf16 interleaved");
  }
}

TEST_F(RowCompareGpu, LongestRows) {
  const std::vector<RowPair> cases = make_cases(262144, 7);
  run_and_check(cases, DType::F32, Layout::Padded, "f32");
  run_and_check(cases, DType::BF16, Layout::Padded, "bf16");
}

TEST_F(RowCompareGpu, ManyRandomRowsOfTheRealVocab) {
  std::mt19937_64 rng(99);
  std::normal_distribution<float> logit(0.0f, 4.0f), noise(0.0f, 0.05f);
  std::vector<RowPair> cases;
  for (int r = 0; r < 24; ++r) {
    RowPair p{"random " + std::to_string(r), std::vector<float>(151936), std::vector<float>(151936)};
    for (std::size_t i = 0; i < p.ref.size(); ++i) p.ref[i] = logit(rng), p.test[i] = p.ref[i] + noise(rng);
    cases.push_back(std::move(p));
  }
  run_and_check(cases, DType::BF16, Layout::Padded, "bf16");
  run_and_check(cases, DType::F32, Layout::Interleaved, "f32");
}

TEST_F(RowCompareGpu, Deterministic) {
  const std::vector<RowPair> cases = make_cases(151936, 5);
  const std::vector<core::PositionCompare> a = run_and_check(cases, DType::F32, Layout::Padded, "first");
  const std::vector<core::PositionCompare> b = run_and_check(cases, DType::F32, Layout::Padded, "second");
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t r = 0; r < a.size(); ++r) {
    EXPECT_EQ(std::bit_cast<std::uint64_t>(a[r].kl), std::bit_cast<std::uint64_t>(b[r].kl)) << r;
    EXPECT_EQ(std::bit_cast<std::uint64_t>(a[r].max_abs_diff), std::bit_cast<std::uint64_t>(b[r].max_abs_diff)) << r;
  }
}

template <typename F>
void expect_error(F&& f, ErrorKind kind, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an error of kind " << to_string(kind) << " containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.root_kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST_F(RowCompareGpu, RefusesBadArguments) {
  cuda::DeviceMemory mem = cuda::DeviceMemory::allocate(4096, "row compare test");
  EXPECT_TRUE(compare_->compare(mem.ptr(), 16, mem.ptr(), 16, DType::F32, 16, 0).empty());
  expect_error([&] { compare_->compare(mem.ptr(), 16, mem.ptr(), 16, DType::F16, 16, 1); }, ErrorKind::Api, "f16");
  expect_error([&] { compare_->compare(mem.ptr(), 16, mem.ptr(), 16, DType::F32, 0, 1); }, ErrorKind::Api, "0 entries");
  expect_error([&] { compare_->compare(0, 16, mem.ptr(), 16, DType::F32, 16, 1); }, ErrorKind::Api, "null");
}

TEST(RowCompareFatbin, MissingFatbinIsAKernelArtifactError) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "kern_row_compare_missing";
  std::filesystem::create_directories(dir);
  std::filesystem::remove(dir / "compare.fatbin");
  expect_error([&] { DeviceRowCompare c(0, dir.string()); }, ErrorKind::KernelArtifact,
               (dir / "compare.fatbin").string());
  write_file((dir / "compare.fatbin").string(), "not a fatbin");
  expect_error([&] { DeviceRowCompare c(0, dir.string()); }, ErrorKind::KernelArtifact,
               (dir / "compare.fatbin").string());
  std::filesystem::remove_all(dir);
}

TEST(RowCompareFatbin, AFatbinWithoutTheEntriesIsRefused) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "kern_row_compare_other";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(std::filesystem::path(kernels_dir()) / "argmax.fatbin", dir / "compare.fatbin",
                             std::filesystem::copy_options::overwrite_existing);
  expect_error([&] { DeviceRowCompare c(0, dir.string()); }, ErrorKind::KernelArtifact, "kern_compare_rows_bf16");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kern::runtime
