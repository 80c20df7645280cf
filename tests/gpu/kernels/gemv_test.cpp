// GPU checks of kernels/gemv.cu (decode GEMV with fused epilogues) against a float64 host
// reference, plus bandwidth figures at the Qwen3-4B shapes (PerfGpu.Gemv*, printed, not asserted).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>

#include "harness.hpp"

namespace kern_gpu_test {
namespace {

constexpr double kTol = 1e-2;
constexpr int kMaxGemvRows = 8;  // rows of x per pass over W (kern gen uses the GEMV for seqs <= 8)
constexpr int kTail = 64;        // poisoned elements after every output, checked untouched
constexpr int kAsyncBytes = 384; // dynamic shared memory per thread of kern_gemv_bf16_async

enum class Kind { Plain, Residual, SiluMul };

const char* entry_of(Kind kind) {
  switch (kind) {
    case Kind::Plain: return "kern_gemv_bf16";
    case Kind::Residual: return "kern_gemv_residual_bf16";
    case Kind::SiluMul: return "kern_gemv_gate_up_silu_bf16";
  }
  return "";
}

int tiles_of(Kind kind, int n) { return kind == Kind::SiluMul ? (n + 7) / 8 : (n + 15) / 16; }

// One problem: x [m, ldx] (padding columns random too, they must be ignored), W [n or 2n, k], h [m, n].
struct Problem {
  Kind kind;
  int m, n, k, ldx;
  std::vector<bf16_bits> x, w, h;

  Problem(Kind kind_, int m_, int n_, int k_, int ldx_, uint64_t seed) : kind(kind_), m(m_), n(n_), k(k_), ldx(ldx_) {
    std::mt19937_64 rng(seed);
    x = random_bf16(rng, static_cast<size_t>(m) * ldx, -1.0f, 1.0f);
    const int wrows = kind == Kind::SiluMul ? 2 * n : n;
    w = random_bf16(rng, static_cast<size_t>(wrows) * k, -1.0f, 1.0f);
    // A residual of the size of the products, so an error in either term shows.
    const float s = std::sqrt(static_cast<float>(k)) * 0.5f;
    h = random_bf16(rng, static_cast<size_t>(m) * n, -s, s);
  }

  double dot(int row, int wrow) const {
    double s = 0.0;
    const size_t xo = static_cast<size_t>(row) * ldx, wo = static_cast<size_t>(wrow) * k;
    for (int c = 0; c < k; ++c) s += static_cast<double>(bf16_to_float(x[xo + c])) * bf16_to_float(w[wo + c]);
    return s;
  }

  std::vector<double> reference() const {
    std::vector<double> ref(static_cast<size_t>(m) * n);
    parallel_for(m, [&](int r) {
      for (int j = 0; j < n; ++j) {
        const size_t i = static_cast<size_t>(r) * n + j;
        switch (kind) {
          case Kind::Plain: ref[i] = dot(r, j); break;
          case Kind::Residual: ref[i] = bf16_to_float(h[i]) + dot(r, j); break;
          case Kind::SiluMul: {
            const double g = dot(r, j), u = dot(r, n + j);
            ref[i] = g / (1.0 + std::exp(-g)) * u;
            break;
          }
        }
      }
    });
    return ref;
  }

  // Launches once into a fresh output (poisoned, or h for the residual; plus a poisoned tail) and
  // returns the whole output buffer, tail included.
  std::vector<bf16_bits> run(Fatbin& fb, int grid, int block, const char* entry = nullptr) const {
    Device<bf16_bits> d_x(x), d_w(w), d_out(static_cast<size_t>(m) * n + kTail);
    if (kind == Kind::Residual) {
      std::vector<bf16_bits> init = h;
      init.resize(init.size() + kTail, 0xFFFF);
      d_out.upload(init);
    }
    fb.launch(entry != nullptr ? entry : entry_of(kind), dim3(grid), dim3(block), d_x.get(), d_w.get(), d_out.get(), m, n,
              k, ldx);
    return d_out.download();
  }
};

std::string tag(const Problem& p) {
  return std::string(entry_of(p.kind)) + " m" + std::to_string(p.m) + " n" + std::to_string(p.n) + " k" +
         std::to_string(p.k) + " ldx" + std::to_string(p.ldx);
}

void check(Kind kind, int m, int n, int k, int ldx, uint64_t seed, int block = 256, int grid = 0,
           const char* entry = nullptr) {
  const Problem p(kind, m, n, k, ldx, seed);
  SCOPED_TRACE(tag(p) + " block " + std::to_string(block) + " grid " + std::to_string(grid));
  Fatbin fb("gemv");
  if (entry != nullptr && std::string(entry) == "kern_gemv_bf16_async") fb.set_dynamic_shared(entry, block * kAsyncBytes);
  const int g = grid > 0 ? grid : tiles_of(kind, n);
  const auto out = p.run(fb, g, block, entry);
  const size_t count = static_cast<size_t>(m) * n;
  std::vector<bf16_bits> body(out.begin(), out.begin() + count), tail(out.begin() + count, out.end());
  ASSERT_EQ(count_nan(body), 0u) << "unwritten or NaN outputs";
  EXPECT_EQ(count_nan(tail), static_cast<size_t>(kTail)) << "wrote past [m, n]";
  const double err = rel_frobenius(to_double(body), p.reference());
  report("gemv rel err " + tag(p), err);
  EXPECT_LT(err, kTol);
  // Bitwise repeatable.
  EXPECT_EQ(p.run(fb, g, block, entry), out) << "two launches differ";
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
  for (const char* entry : {"kern_gemv_bf16_u2", "kern_gemv_bf16_u4", "kern_gemv_bf16_u8", "kern_gemv_bf16_async"}) {
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
  cudaLibrary_t lib = nullptr;
  const std::string path = kernels_dir() + "/gemv.fatbin";
  check_cuda(cudaLibraryLoadFromFile(&lib, path.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0), path.c_str());
  cudaKernel_t kern = nullptr;
  check_cuda(cudaLibraryGetKernel(&kern, lib, "kern_gemv_bf16_cluster4"), "kern_gemv_bf16_cluster4");
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
  cudaLibraryUnload(lib);
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
  for (Kind kind : {Kind::Plain, Kind::Residual, Kind::SiluMul}) {
    const Problem all(kind, kMaxGemvRows + 3, 1000, 2560, 2560, 900 + static_cast<int>(kind));
    SCOPED_TRACE(tag(all));
    const auto full = all.run(fb, tiles_of(kind, all.n), 256);
    for (int r : {0, 5, kMaxGemvRows + 2}) {
      Problem one = all;
      one.m = 1;
      one.x.assign(all.x.begin() + static_cast<size_t>(r) * all.ldx, all.x.begin() + static_cast<size_t>(r + 1) * all.ldx);
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
  cudaLibrary_t lib = nullptr;
  GemvKernels() {
    const std::string path = kernels_dir() + "/gemv.fatbin";
    check_cuda(cudaLibraryLoadFromFile(&lib, path.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0), path.c_str());
  }
  ~GemvKernels() { cudaLibraryUnload(lib); }
  const void* get(const char* entry) const {
    cudaKernel_t k = nullptr;
    check_cuda(cudaLibraryGetKernel(&k, lib, entry), entry);
    return reinterpret_cast<const void*>(k);
  }
  const void* get(Kind kind) const { return get(entry_of(kind)); }
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

// Median µs of one GEMV launch (x [8, k] and out [8, n] random, never zeros).
double time_gemv(const void* fn, const RotatedWeights& w, int m, int n, int k, int grid, int block, std::mt19937_64& rng,
                 size_t shared = 0, int cluster = 0) {
  Device<bf16_bits> x(random_bf16(rng, static_cast<size_t>(kMaxGemvRows) * k, -1.0f, 1.0f));
  Device<bf16_bits> out(random_bf16(rng, static_cast<size_t>(kMaxGemvRows) * n, -1.0f, 1.0f));
  return median_us(60, [&](int i, cudaStream_t st) {
    const bf16_bits* wp = w.at(i);
    bf16_bits* xp = x.get();
    bf16_bits* op = out.get();
    int mm = m, nn = n, kk = k, ldx = k;
    void* args[] = {&xp, &wp, &op, &mm, &nn, &kk, &ldx};
    if (cluster > 0)
      launch_cluster(fn, grid * cluster, block, cluster, args, st);
    else
      check_cuda(cudaLaunchKernel(fn, dim3(grid), dim3(block), args, shared, st), "gemv launch");
  });
}

const Shape kShapes4B[] = {
    {"qkv 6144x2560", Kind::Plain, 6144, 2560},          {"o_proj 2560x4096 +res", Kind::Residual, 2560, 4096},
    {"gate_up 19456x2560 silu", Kind::SiluMul, 9728, 2560}, {"down 2560x9728 +res", Kind::Residual, 2560, 9728},
    {"lm_head 151936x2560", Kind::Plain, 151936, 2560},
};

TEST(PerfGpu, GemvQwen3_4B) {
  const double copy = copy_gbps();
  report("gemv device copy GB/s (1 GiB, read+write)", copy);
  GemvKernels kernels;
  std::mt19937_64 rng(1234);
  Device<bf16_bits> pattern(random_bf16(rng, size_t{8} << 20, -1.0f, 1.0f));  // 16 MiB tiling every weight copy
  for (const Shape& s : kShapes4B) {
    const RotatedWeights w(pattern, s.kind == Kind::SiluMul ? 2 * static_cast<size_t>(s.n) : s.n, s.k);
    for (int m : {1, kMaxGemvRows})
      for (int block : {128, 256, 512}) {
        if (m != 1 && block == 128) continue;
        const double us = time_gemv(kernels.get(s.kind), w, m, s.n, s.k, tiles_of(s.kind, s.n), block, rng);
        const double gbps = w.bytes() / (us * 1e3);
        const std::string t = std::string("gemv ") + s.name + " m" + std::to_string(m) + " block " + std::to_string(block);
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
    for (const char* entry : {"kern_gemv_bf16_u2", "kern_gemv_bf16_u4", "kern_gemv_bf16_u8", "kern_gemv_bf16",
                              "kern_gemv_bf16_async"})
      for (int block : {128, 256, 512}) {
        size_t shared = 0;
        if (std::string(entry) == "kern_gemv_bf16_async") {
          shared = static_cast<size_t>(block) * kAsyncBytes;
          cudaKernel_t kern = nullptr;
          check_cuda(cudaLibraryGetKernel(&kern, kernels.lib, entry), entry);
          check_cuda(cudaKernelSetAttributeForDevice(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                     static_cast<int>(shared), 0),
                     "cudaKernelSetAttributeForDevice");
        }
        const double us = time_gemv(kernels.get(entry), w, 1, s.n, s.k, tiles_of(s.kind, s.n), block, rng, shared);
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

}  // namespace
}  // namespace kern_gpu_test
