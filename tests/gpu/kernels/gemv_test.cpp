// GPU checks of kernels/gemv.cu (decode GEMV with fused epilogues) against a float64 host
// reference, plus bandwidth figures at the Qwen3-4B shapes (PerfGpu.Gemv*, printed, not asserted).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>

#include "harness.hpp"

namespace kern_gpu_test {
namespace {

constexpr double kTol = 1e-2;
constexpr int kMaxGemvRows = 8;   // rows of x per pass over W (kern gen uses the GEMV for seqs <= 8)
constexpr int kTail = 64;         // poisoned elements after every output, checked untouched
constexpr int kAsyncBytes = 384;  // dynamic shared memory per thread of kern_gemv_bf16_async

enum class Kind { Plain, Residual, SiluMul, NormPlain, NormSiluMul };

const char* entry_of(Kind kind) {
  switch (kind) {
    case Kind::Plain: return "kern_gemv_bf16";
    case Kind::Residual: return "kern_gemv_residual_bf16";
    case Kind::SiluMul: return "kern_gemv_gate_up_silu_bf16";
    case Kind::NormPlain: return "kern_gemv_rms_norm_bf16";
    case Kind::NormSiluMul: return "kern_gemv_rms_norm_gate_up_silu_bf16";
  }
  return "";
}

bool is_silu(Kind kind) { return kind == Kind::SiluMul || kind == Kind::NormSiluMul; }
bool is_norm(Kind kind) { return kind == Kind::NormPlain || kind == Kind::NormSiluMul; }
int tiles_of(Kind kind, int n) { return is_silu(kind) ? (n + 7) / 8 : (n + 15) / 16; }
// The tuning variants keep the old parameter list (no prefetch).
bool is_tuning(const char* entry) {
  return entry != nullptr && std::string(entry) != "kern_gemv_bf16" &&
         std::string(entry).rfind("kern_gemv_bf16_", 0) == 0;
}
// Dynamic shared memory a norm entry needs for `rows` rows of x per pass.
int norm_shared(int k, int rows) { return (k + 8) * 2 * rows; }

constexpr float kEps = 1e-6f;

// One problem: x [m, ldx] (padding columns random too, they must be ignored), W [n or 2n, k], h [m, n],
// norm_w [k] (norm kinds).
struct Problem {
  Kind kind;
  int m, n, k, ldx;
  std::vector<bf16_bits> x, w, h, norm_w;

  Problem(Kind kind_, int m_, int n_, int k_, int ldx_, uint64_t seed) : kind(kind_), m(m_), n(n_), k(k_), ldx(ldx_) {
    std::mt19937_64 rng(seed);
    x = random_bf16(rng, static_cast<size_t>(m) * ldx, is_norm(kind) ? -4.0f : -1.0f, is_norm(kind) ? 4.0f : 1.0f);
    const int wrows = is_silu(kind) ? 2 * n : n;
    w = random_bf16(rng, static_cast<size_t>(wrows) * k, -1.0f, 1.0f);
    // A residual of the size of the products, so an error in either term shows.
    const float s = std::sqrt(static_cast<float>(k)) * 0.5f;
    h = random_bf16(rng, static_cast<size_t>(m) * n, -s, s);
    norm_w = random_bf16(rng, static_cast<size_t>(k), 0.25f, 2.0f);
  }

  // The B operand row: x, or HF's bf16(norm_w · bf16(x · rsqrt(mean(x²) + eps))).
  std::vector<double> input_row(int row) const {
    const size_t xo = static_cast<size_t>(row) * ldx;
    std::vector<double> v(k);
    for (int c = 0; c < k; ++c) v[c] = bf16_to_float(x[xo + c]);
    if (is_norm(kind)) {
      double ss = 0.0;
      for (double f : v) ss += f * f;
      const double rstd = 1.0 / std::sqrt(ss / k + kEps);
      for (int c = 0; c < k; ++c) {
        const float inner = bf16_to_float(float_to_bf16(static_cast<float>(v[c] * rstd)));
        v[c] = bf16_to_float(float_to_bf16(bf16_to_float(norm_w[c]) * inner));
      }
    }
    return v;
  }

  std::vector<double> reference() const {
    std::vector<double> ref(static_cast<size_t>(m) * n);
    parallel_for(m, [&](int r) {
      const std::vector<double> in = input_row(r);
      auto dot = [&](int wrow) {
        double s = 0.0;
        const size_t wo = static_cast<size_t>(wrow) * k;
        for (int c = 0; c < k; ++c) s += in[c] * bf16_to_float(w[wo + c]);
        return s;
      };
      for (int j = 0; j < n; ++j) {
        const size_t i = static_cast<size_t>(r) * n + j;
        if (kind == Kind::Residual) {
          ref[i] = bf16_to_float(h[i]) + dot(j);
        } else if (is_silu(kind)) {
          const double g = dot(j), u = dot(n + j);
          ref[i] = g / (1.0 + std::exp(-g)) * u;
        } else {
          ref[i] = dot(j);
        }
      }
    });
    return ref;
  }

  // Launches once into a fresh output (poisoned, or h for the residual; plus a poisoned tail) and
  // returns the whole output buffer, tail included.
  std::vector<bf16_bits> run(Fatbin& fb, int grid, int block, const char* entry = nullptr, int prefetch = 0) const {
    Device<bf16_bits> d_x(x), d_w(w), d_nw(norm_w), d_out(static_cast<size_t>(m) * n + kTail);
    if (kind == Kind::Residual) {
      std::vector<bf16_bits> init = h;
      init.resize(init.size() + kTail, 0xFFFF);
      d_out.upload(init);
    }
    const std::string e = entry != nullptr ? entry : entry_of(kind);
    if (is_tuning(entry))
      fb.launch(e, dim3(grid), dim3(block), d_x.get(), d_w.get(), d_out.get(), m, n, k, ldx);
    else if (is_norm(kind))
      fb.launch(e, dim3(grid), dim3(block), d_x.get(), d_nw.get(), d_w.get(), d_out.get(), m, n, k, ldx, kEps,
                prefetch);
    else
      fb.launch(e, dim3(grid), dim3(block), d_x.get(), d_w.get(), d_out.get(), m, n, k, ldx, prefetch);
    return d_out.download();
  }
};

std::string tag(const Problem& p) {
  return std::string(entry_of(p.kind)) + " m" + std::to_string(p.m) + " n" + std::to_string(p.n) + " k" +
         std::to_string(p.k) + " ldx" + std::to_string(p.ldx);
}

// norm_rows: rows of x per pass the norm entries get shared memory for.
void check(Kind kind, int m, int n, int k, int ldx, uint64_t seed, int block = 256, int grid = 0,
           const char* entry = nullptr, int norm_rows = kMaxGemvRows) {
  const Problem p(kind, m, n, k, ldx, seed);
  SCOPED_TRACE(tag(p) + " block " + std::to_string(block) + " grid " + std::to_string(grid) + " norm rows " +
               std::to_string(norm_rows));
  Fatbin fb("gemv");
  if (entry != nullptr && std::string(entry) == "kern_gemv_bf16_async")
    fb.set_dynamic_shared(entry, block * kAsyncBytes);
  if (is_norm(kind)) fb.set_dynamic_shared(entry_of(kind), norm_shared(k, norm_rows));
  const int g = grid > 0 ? grid : tiles_of(kind, n);
  const auto out = p.run(fb, g, block, entry);
  const size_t count = static_cast<size_t>(m) * n;
  std::vector<bf16_bits> body(out.begin(), out.begin() + count), tail(out.begin() + count, out.end());
  ASSERT_EQ(count_nan(body), 0u) << "unwritten or NaN outputs";
  EXPECT_EQ(count_nan(tail), static_cast<size_t>(kTail)) << "wrote past [m, n]";
  const double err = rel_frobenius(to_double(body), p.reference());
  report("gemv rel err " + tag(p), err);
  EXPECT_LT(err, kTol);
  // Bitwise repeatable, and the L2 prefetch is only a hint.
  EXPECT_EQ(p.run(fb, g, block, entry), out) << "two launches differ";
  if (!is_tuning(entry)) {
    EXPECT_EQ(p.run(fb, g, block, entry, 1 << 20), out) << "prefetch changed the result";
  }
}

TEST(GemvGpu, PlainShapes) {
  uint64_t seed = 500;
  for (int k : {8, 2560, 9728})
    for (int n : {37, 1000})
      for (int m : {1, 2, 3, kMaxGemvRows}) check(Kind::Plain, m, n, k, k + 24, ++seed);
}

TEST(GemvGpu, ResidualShapes) {
  uint64_t seed = 600;
  for (int k : {8, 2560, 9728})
    for (int n : {37, 1000})
      for (int m : {1, 2, 3, kMaxGemvRows}) check(Kind::Residual, m, n, k, k + 8, ++seed);
}

TEST(GemvGpu, GateUpSiluShapes) {
  uint64_t seed = 700;
  for (int k : {8, 2560, 9728})
    for (int n : {37, 1000})
      for (int m : {1, 2, 3, kMaxGemvRows}) check(Kind::SiluMul, m, n, k, k + 16, ++seed);
}

TEST(GemvGpu, RmsNormShapes) {
  uint64_t seed = 720;
  for (int k : {8, 2560, 4096})
    for (int n : {37, 1000})
      for (int m : {1, 3, kMaxGemvRows}) check(Kind::NormPlain, m, n, k, k + 8, ++seed);
}

TEST(GemvGpu, RmsNormGateUpSiluShapes) {
  uint64_t seed = 740;
  for (int k : {8, 2560, 4096})
    for (int n : {37, 1000})
      for (int m : {1, 3, kMaxGemvRows}) check(Kind::NormSiluMul, m, n, k, k + 16, ++seed);
}

// Fewer rows of shared memory than rows of x (several normalise-and-stream passes), more rows
// than 8, strided grids.
TEST(GemvGpu, RmsNormPassesAndStridedGrids) {
  check(Kind::NormPlain, 8, 1000, 2560, 2560, 761, 256, 0, nullptr, 3);
  check(Kind::NormPlain, 11, 1000, 2560, 2560, 762, 256, 0, nullptr, 1);
  check(Kind::NormSiluMul, 9, 1000, 2560, 2568, 763, 128, 7, nullptr, 8);
  check(Kind::NormPlain, 2, 37, 4096, 4096, 764, 512, 1, nullptr, 2);
  check(Kind::NormSiluMul, 5, 1000, 2560, 2560, 765, 256, 0, nullptr, 2);
}

// More rows than one pass takes (W streamed twice), a strided grid smaller than the tile count,
// and other block sizes (other k splits between warps).
TEST(GemvGpu, ManyRowsStridedGridOtherBlocks) {
  check(Kind::Plain, 11, 1000, 2560, 2560, 801);
  check(Kind::Residual, 17, 37, 4096, 4104, 802);
  check(Kind::SiluMul, 9, 1000, 2560, 2568, 803);
  check(Kind::Plain, 3, 1000, 2560, 2560, 804, 256, 5);
  check(Kind::SiluMul, 2, 1000, 9728, 9728, 805, 128, 7);
  check(Kind::Residual, 8, 1000, 9728, 9728, 806, 512);
  check(Kind::Plain, 1, 37, 9728, 9728, 807, 32);
}

// The tuning variants (other numbers of loads in flight) compute the same thing.
TEST(GemvGpu, TuningVariants) {
  for (const char* entry :
       {"kern_gemv_bf16_u2", "kern_gemv_bf16_u4", "kern_gemv_bf16_u8", "kern_gemv_bf16_p4", "kern_gemv_bf16_async"}) {
    check(Kind::Plain, 1, 1000, 2560, 2568, 811, 256, 0, entry);
    check(Kind::Plain, 8, 37, 9728, 9728, 812, 512, 0, entry);  // async: > 48 KiB of shared memory
    check(Kind::Plain, 3, 1000, 8, 8, 813, 256, 0, entry);
  }
}

// Launches `entry` with cluster dims (cluster, 1, 1) (cudaLaunchKernelEx) on `stream`.
void launch_cluster(const void* fn, int grid, int block, int cluster, void** args, cudaStream_t stream) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(block);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  check_cuda(cudaLaunchKernelExC(&cfg, fn, args), "cluster launch");
}

constexpr int kClusterK = 4;  // kern_gemv_bf16_cluster4

void check_cluster(int m, int n, int k, int ldx, uint64_t seed, int block) {
  const Problem p(Kind::Plain, m, n, k, ldx, seed);
  SCOPED_TRACE(tag(p) + " cluster4 block " + std::to_string(block));
  cudaKernel_t kern = family_kernel("gemv", "kern_gemv_bf16_cluster4");
  auto run = [&] {
    Device<bf16_bits> d_x(p.x), d_w(p.w), d_out(static_cast<size_t>(m) * n + kTail);
    bf16_bits *xp = d_x.get(), *wp = d_w.get(), *op = d_out.get();
    int mm = m, nn = n, kk = k, ll = ldx;
    void* args[] = {&xp, &wp, &op, &mm, &nn, &kk, &ll};
    launch_cluster(reinterpret_cast<const void*>(kern), tiles_of(Kind::Plain, n) * kClusterK, block, kClusterK, args,
                   nullptr);
    check_cuda(cudaDeviceSynchronize(), "cluster gemv");
    return d_out.download();
  };
  const auto out = run();
  const size_t count = static_cast<size_t>(m) * n;
  std::vector<bf16_bits> body(out.begin(), out.begin() + count), tail(out.begin() + count, out.end());
  EXPECT_EQ(count_nan(body), 0u);
  EXPECT_EQ(count_nan(tail), static_cast<size_t>(kTail));
  const double err = rel_frobenius(to_double(body), p.reference());
  report("gemv rel err cluster4 " + tag(p), err);
  EXPECT_LT(err, kTol);
  EXPECT_EQ(run(), out);
}

TEST(GemvGpu, ClusterSplitKVariant) {
  check_cluster(1, 1000, 2560, 2568, 821, 256);
  check_cluster(8, 37, 9728, 9728, 822, 512);
  check_cluster(11, 1000, 4096, 4096, 823, 128);
  check_cluster(3, 37, 8, 8, 824, 256);
}

// A row of x gives the same bits whatever the other rows of the launch (batch invariance: a
// sequence's decode result must not depend on what it is batched with).
TEST(GemvGpu, RowResultsIndependentOfBatch) {
  Fatbin fb("gemv");
  fb.set_dynamic_shared(entry_of(Kind::NormPlain), norm_shared(2560, kMaxGemvRows));
  fb.set_dynamic_shared(entry_of(Kind::NormSiluMul), norm_shared(2560, kMaxGemvRows));
  for (Kind kind : {Kind::Plain, Kind::Residual, Kind::SiluMul, Kind::NormPlain, Kind::NormSiluMul}) {
    const Problem all(kind, kMaxGemvRows + 3, 1000, 2560, 2560, 900 + static_cast<int>(kind));
    SCOPED_TRACE(tag(all));
    const auto full = all.run(fb, tiles_of(kind, all.n), 256);
    for (int r : {0, 5, kMaxGemvRows + 2}) {
      Problem one = all;
      one.m = 1;
      one.x.assign(all.x.begin() + static_cast<size_t>(r) * all.ldx,
                   all.x.begin() + static_cast<size_t>(r + 1) * all.ldx);
      one.h.assign(all.h.begin() + static_cast<size_t>(r) * all.n, all.h.begin() + static_cast<size_t>(r + 1) * all.n);
      const auto single = one.run(fb, tiles_of(kind, all.n), 256);
      EXPECT_TRUE(std::equal(single.begin(), single.begin() + all.n, full.begin() + static_cast<size_t>(r) * all.n))
          << "row " << r;
    }
  }
}

// ---- bandwidth ----

// Timing: the stream is held by a host function until every launch and event is queued, so the
// launches run back to back and each sample is one kernel's time on the device.
struct Gate {
  std::atomic<bool> open{false};
  static void CUDART_CB wait(void* p) {
    auto* g = static_cast<Gate*>(p);
    while (!g->open.load(std::memory_order_acquire)) {
    }
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median µs of `samples` launches of fn(i) (i = sample index), timed one by one with events.
template <typename Fn>
double median_us(int samples, Fn&& fn) {
  cudaStream_t stream;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  std::vector<cudaEvent_t> ev(2 * samples);
  for (auto& e : ev) check_cuda(cudaEventCreate(&e), "cudaEventCreate");
  for (int i = 0; i < 3; ++i) fn(i, stream);  // warm-up
  Gate gate;
  check_cuda(cudaLaunchHostFunc(stream, &Gate::wait, &gate), "cudaLaunchHostFunc");
  for (int i = 0; i < samples; ++i) {
    check_cuda(cudaEventRecord(ev[2 * i], stream), "cudaEventRecord");
    fn(i, stream);
    check_cuda(cudaEventRecord(ev[2 * i + 1], stream), "cudaEventRecord");
  }
  gate.open.store(true, std::memory_order_release);
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  check_cuda(cudaGetLastError(), "timed launches");
  std::vector<double> us(samples);
  for (int i = 0; i < samples; ++i) {
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]), "cudaEventElapsedTime");
    us[i] = 1000.0 * ms;
  }
  for (auto& e : ev) cudaEventDestroy(e);
  cudaStreamDestroy(stream);
  return median(us);
}

// Device-to-device copy bandwidth, read + write bytes, over a 1 GiB copy.
double copy_gbps() {
  const size_t bytes = size_t{1} << 30;
  void *a = nullptr, *b = nullptr;
  check_cuda(cudaMalloc(&a, bytes), "cudaMalloc");
  check_cuda(cudaMalloc(&b, bytes), "cudaMalloc");
  check_cuda(cudaMemset(a, 0x3c, bytes), "cudaMemset");
  const double us = median_us(7, [&](int, cudaStream_t s) {
    check_cuda(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
  });
  cudaFree(a);
  cudaFree(b);
  return 2.0 * static_cast<double>(bytes) / (us * 1e3);
}

// Raw kernel handle (the harness launches synchronously; timing needs stream launches).
struct GemvKernels {
  const void* get(const char* entry) const { return reinterpret_cast<const void*>(family_kernel("gemv", entry)); }
  const void* get(Kind kind) const { return get(entry_of(kind)); }
  // Lets `entry` take `bytes` of dynamic shared memory (its static shared memory counts against
  // the 48 KiB default too).
  void allow_shared(const char* entry, int bytes) const {
    cudaKernel_t k = family_kernel("gemv", entry);
    check_cuda(cudaKernelSetAttributeForDevice(k, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes, 0),
               "cudaKernelSetAttributeForDevice");
  }
};

struct Shape {
  const char* name;
  Kind kind;
  int n, k;  // n = output columns (inter for gate_up: W has 2n rows)
};

// Weights of one shape, rotated among copies totalling >= 256 MiB (so none is served from L2).
struct RotatedWeights {
  size_t welems, copies;
  std::unique_ptr<Device<bf16_bits>> w;
  RotatedWeights(const Device<bf16_bits>& pattern, size_t wrows, size_t k) : welems(wrows * k) {
    const size_t rotate = size_t{256} << 20, wbytes = welems * 2;
    copies = std::max<size_t>(1, (rotate + wbytes - 1) / wbytes);
    w = std::make_unique<Device<bf16_bits>>(welems * copies);
    for (size_t off = 0; off < w->size(); off += pattern.size())
      check_cuda(cudaMemcpy(w->get() + off, pattern.get(), std::min(pattern.size(), w->size() - off) * 2,
                            cudaMemcpyDeviceToDevice),
                 "fill weights");
  }
  const bf16_bits* at(int i) const { return w->get() + (static_cast<size_t>(i) % copies) * welems; }
  double bytes() const { return 2.0 * static_cast<double>(welems); }
};

// Median µs of one GEMV launch (x [8, k], norm_w [k] and out [8, n] random, never zeros).
// prefetch < 0: the tuning variants' parameter list (no prefetch).
double time_gemv(const void* fn, const RotatedWeights& w, int m, int n, int k, int grid, int block,
                 std::mt19937_64& rng, size_t shared = 0, int cluster = 0, int prefetch = -1, bool norm = false) {
  Device<bf16_bits> x(random_bf16(rng, static_cast<size_t>(kMaxGemvRows) * k, -1.0f, 1.0f));
  Device<bf16_bits> nw(random_bf16(rng, static_cast<size_t>(k), 0.5f, 1.5f));
  Device<bf16_bits> out(random_bf16(rng, static_cast<size_t>(kMaxGemvRows) * n, -1.0f, 1.0f));
  return median_us(60, [&](int i, cudaStream_t st) {
    const bf16_bits* wp = w.at(i);
    bf16_bits* xp = x.get();
    bf16_bits* np = nw.get();
    bf16_bits* op = out.get();
    int mm = m, nn = n, kk = k, ldx = k, pf = prefetch;
    float eps = kEps;
    void* legacy[] = {&xp, &wp, &op, &mm, &nn, &kk, &ldx};
    void* plain[] = {&xp, &wp, &op, &mm, &nn, &kk, &ldx, &pf};
    void* normed[] = {&xp, &np, &wp, &op, &mm, &nn, &kk, &ldx, &eps, &pf};
    void** args = prefetch < 0 ? legacy : norm ? normed : plain;
    if (cluster > 0)
      launch_cluster(fn, grid * cluster, block, cluster, args, st);
    else
      check_cuda(cudaLaunchKernel(fn, dim3(grid), dim3(block), args, shared, st), "gemv launch");
  });
}

const Shape kShapes4B[] = {
    {"qkv 6144x2560", Kind::Plain, 6144, 2560},
    {"norm+qkv 6144x2560", Kind::NormPlain, 6144, 2560},
    {"o_proj 2560x4096 +res", Kind::Residual, 2560, 4096},
    {"gate_up 19456x2560 silu", Kind::SiluMul, 9728, 2560},
    {"norm+gate_up 19456x2560 silu", Kind::NormSiluMul, 9728, 2560},
    {"down 2560x9728 +res", Kind::Residual, 2560, 9728},
    {"norm+lm_head 151936x2560", Kind::NormPlain, 151936, 2560},
};

TEST(PerfGpu, GemvQwen3_4B) {
  const double copy = copy_gbps();
  report("gemv device copy GB/s (1 GiB, read+write)", copy);
  GemvKernels kernels;
  std::mt19937_64 rng(1234);
  Device<bf16_bits> pattern(random_bf16(rng, size_t{8} << 20, -1.0f, 1.0f));  // 16 MiB tiling every weight copy
  for (const Shape& s : kShapes4B) {
    const RotatedWeights w(pattern, is_silu(s.kind) ? 2 * static_cast<size_t>(s.n) : s.n, s.k);
    for (int m : {1, kMaxGemvRows})
      for (int block : {128, 256, 512}) {
        if (m != 1 && block == 128) continue;
        const size_t shared = is_norm(s.kind) ? static_cast<size_t>(norm_shared(s.k, m)) : 0;
        if (shared > 0) kernels.allow_shared(entry_of(s.kind), static_cast<int>(shared));
        const double us = time_gemv(kernels.get(s.kind), w, m, s.n, s.k, tiles_of(s.kind, s.n), block, rng, shared, 0,
                                    0, is_norm(s.kind));
        const double gbps = w.bytes() / (us * 1e3);
        const std::string t =
            std::string("gemv ") + s.name + " m" + std::to_string(m) + " block " + std::to_string(block);
        report(t + " us", us);
        report(t + " GB/s", gbps);
        report(t + " of copy", gbps / copy);
      }
  }
}

// Loads per batch (2, 4, 8, not pipelined; kern gen's: pipelined 4), cp.async and cluster variants, block sizes; m = 1.
TEST(PerfGpu, GemvTuning) {
  GemvKernels kernels;
  std::mt19937_64 rng(4321);
  Device<bf16_bits> pattern(random_bf16(rng, size_t{8} << 20, -1.0f, 1.0f));
  const Shape shapes[] = {{"6144x2560", Kind::Plain, 6144, 2560},
                          {"2560x4096", Kind::Plain, 2560, 4096},
                          {"2560x9728", Kind::Plain, 2560, 9728},
                          {"19456x2560", Kind::Plain, 19456, 2560}};
  for (const Shape& s : shapes) {
    const RotatedWeights w(pattern, s.n, s.k);
    for (const char* entry : {"kern_gemv_bf16_u2", "kern_gemv_bf16_u4", "kern_gemv_bf16_u8", "kern_gemv_bf16_p4",
                              "kern_gemv_bf16", "kern_gemv_bf16_async"})
      for (int block : {128, 256, 512}) {
        size_t shared = 0;
        if (std::string(entry) == "kern_gemv_bf16_async") {
          shared = static_cast<size_t>(block) * kAsyncBytes;
          cudaKernel_t kern = family_kernel("gemv", entry);
          check_cuda(cudaKernelSetAttributeForDevice(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                     static_cast<int>(shared), 0),
                     "cudaKernelSetAttributeForDevice");
        }
        const double us = time_gemv(kernels.get(entry), w, 1, s.n, s.k, tiles_of(s.kind, s.n), block, rng, shared, 0,
                                    is_tuning(entry) ? -1 : 0);
        report(std::string("gemv tuning ") + s.name + " " + entry + " block " + std::to_string(block) + " GB/s",
               w.bytes() / (us * 1e3));
      }
    for (int block : {128, 256, 512}) {
      const double us = time_gemv(kernels.get("kern_gemv_bf16_cluster4"), w, 1, s.n, s.k, tiles_of(s.kind, s.n), block,
                                  rng, 0, kClusterK);
      report(std::string("gemv tuning ") + s.name + " kern_gemv_bf16_cluster4 block " + std::to_string(block) + " GB/s",
             w.bytes() / (us * 1e3));
    }
  }
}

// A chain of dependent GEMVs (each reads what the previous wrote, and the residuals overwrite
// what the norms read) launched with programmatic dependent launch, directly and as a captured
// CUDA graph, gives the bits of the same chain launched plainly. Each kernel waits for its
// predecessor before touching x or its output, so the early launch may only overlap weights.
void launch_maybe_pdl(const void* fn, int grid, int block, size_t shared, void** args, cudaStream_t st, bool pdl) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(block);
  cfg.dynamicSmemBytes = shared;
  cfg.stream = st;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  check_cuda(cudaLaunchKernelExC(&cfg, fn, args), "gemv chain launch");
}

TEST(GemvGpu, PdlChainMatchesPlainLaunches) {
  constexpr int m = 2, K = 2560, K1 = 512, N2 = 1000, I = 1000, iters = 12, block = 256;
  std::mt19937_64 rng(990);
  const auto h0 = random_bf16(rng, static_cast<size_t>(m) * K, -2.0f, 2.0f);
  const auto x1 = random_bf16(rng, static_cast<size_t>(m) * K1, -1.0f, 1.0f);
  Device<bf16_bits> d_x1(x1), nw1(random_bf16(rng, K, 0.5f, 1.5f)), nw2(random_bf16(rng, K, 0.5f, 1.5f));
  Device<bf16_bits> w1(random_bf16(rng, static_cast<size_t>(K) * K1, -0.05f, 0.05f));
  Device<bf16_bits> w2(random_bf16(rng, static_cast<size_t>(N2) * K, -0.05f, 0.05f));
  Device<bf16_bits> w3(random_bf16(rng, static_cast<size_t>(K) * N2, -0.05f, 0.05f));
  Device<bf16_bits> wgu(random_bf16(rng, static_cast<size_t>(2 * I) * K, -0.05f, 0.05f));
  Device<bf16_bits> w4(random_bf16(rng, static_cast<size_t>(K) * I, -0.05f, 0.05f));
  GemvKernels kernels;
  const void* res = kernels.get("kern_gemv_residual_bf16");
  const void* norm = kernels.get("kern_gemv_rms_norm_bf16");
  const void* norm_silu = kernels.get("kern_gemv_rms_norm_gate_up_silu_bf16");
  const size_t shared = static_cast<size_t>(norm_shared(K, m));
  kernels.allow_shared("kern_gemv_rms_norm_bf16", static_cast<int>(shared));
  kernels.allow_shared("kern_gemv_rms_norm_gate_up_silu_bf16", static_cast<int>(shared));
  cudaStream_t st;
  check_cuda(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");

  // Runs the chain `iters` times from h0; returns h (and act) afterwards.
  auto chain = [&](bool pdl, bool graph) {
    Device<bf16_bits> h(h0), y(static_cast<size_t>(m) * N2), act(static_cast<size_t>(m) * I);
    bf16_bits *hp = h.get(), *yp = y.get(), *ap = act.get(), *x1p = d_x1.get(), *n1 = nw1.get(), *n2 = nw2.get();
    bf16_bits *w1p = w1.get(), *w2p = w2.get(), *w3p = w3.get(), *wgp = wgu.get(), *w4p = w4.get();
    int mm = m, k_ = K, k1 = K1, n2_ = N2, i_ = I, pf = 65536;
    float eps = kEps;
    void* a1[] = {&x1p, &w1p, &hp, &mm, &k_, &k1, &k1, &pf};
    void* a2[] = {&hp, &n1, &w2p, &yp, &mm, &n2_, &k_, &k_, &eps, &pf};
    void* a3[] = {&yp, &w3p, &hp, &mm, &k_, &n2_, &n2_, &pf};
    void* a4[] = {&hp, &n2, &wgp, &ap, &mm, &i_, &k_, &k_, &eps, &pf};
    void* a5[] = {&ap, &w4p, &hp, &mm, &k_, &i_, &i_, &pf};
    auto enqueue = [&] {
      for (int it = 0; it < iters; ++it) {
        launch_maybe_pdl(res, tiles_of(Kind::Residual, K), block, 0, a1, st, pdl && it > 0);
        launch_maybe_pdl(norm, tiles_of(Kind::NormPlain, N2), block, shared, a2, st, pdl);
        launch_maybe_pdl(res, tiles_of(Kind::Residual, K), block, 0, a3, st, pdl);
        launch_maybe_pdl(norm_silu, tiles_of(Kind::NormSiluMul, I), block, shared, a4, st, pdl);
        launch_maybe_pdl(res, tiles_of(Kind::Residual, K), block, 0, a5, st, pdl);
      }
    };
    if (graph) {
      cudaGraph_t g;
      cudaGraphExec_t ge;
      check_cuda(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), "begin capture");
      enqueue();
      check_cuda(cudaStreamEndCapture(st, &g), "end capture");
      check_cuda(cudaGraphInstantiate(&ge, g, 0), "instantiate");
      check_cuda(cudaGraphLaunch(ge, st), "graph launch");
      check_cuda(cudaStreamSynchronize(st), "graph chain");
      cudaGraphExecDestroy(ge);
      cudaGraphDestroy(g);
    } else {
      enqueue();
      check_cuda(cudaStreamSynchronize(st), "chain");
    }
    std::vector<bf16_bits> out = h.download(), a = act.download();
    out.insert(out.end(), a.begin(), a.end());
    return out;
  };
  const auto plain = chain(false, false);
  EXPECT_EQ(count_nan(plain), 0u);
  EXPECT_NE(std::vector<bf16_bits>(plain.begin(), plain.begin() + static_cast<size_t>(m) * K), h0);
  EXPECT_EQ(chain(true, false), plain) << "pdl launches differ from plain launches";
  EXPECT_EQ(chain(true, true), plain) << "a captured pdl chain differs from plain launches";
  cudaStreamDestroy(st);
}

}  // namespace
}  // namespace kern_gpu_test
