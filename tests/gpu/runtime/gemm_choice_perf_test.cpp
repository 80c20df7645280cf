// Which cuBLASLt algorithm should a batch-invariant decode GEMM use (docs/perf.md, thirteenth
// session)? The runtime chooses one algorithm per launch, at m_ref, and runs it at every m of that
// launch, so a row's bits do not depend on the batch (docs/runtime.md, "GEMM algorithm choice").
// This sweep times, for the Qwen3-4B decode shapes, the heuristic's choice at each m_ref when it
// runs at each m from 1 to 256, next to the weight-streaming floor, and checks that each choice is
// row-invariant across those m. Speed is printed, never asserted; invariance is asserted.
//
// Timing: 16 launches captured into one graph, each on its own copy of the weights (more than the
// L2 holds in all, as in a decode step that streams every layer's weights once), median of 9 replays.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>

#include "gpu_fixture.hpp"
#include "kern/base/error.hpp"
#include "kern/cuda/blaslt.hpp"
#include "kern/cuda/cuda.hpp"
#include "kern/cuda/event.hpp"

namespace kern::gputest {
namespace {

struct DecodeGemm {
  const char* name;
  std::uint64_t n, k, per_step;  // launches of this shape in one decode step of the 4B shape (36 layers)
};
constexpr DecodeGemm kShapes[] = {
    {"qkv", 6144, 2560, 36}, {"o", 2560, 4096, 36}, {"gate_up", 19456, 2560, 36}, {"down", 2560, 9728, 36},
    {"lm_head", 151936, 2560, 1}};
constexpr std::uint64_t kMs[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
constexpr double kCopyBytesPerUs = 4.25e6;  // the H200's measured device copy, for the floor column

// Median µs of one GEMM of shape `s`: `launches` of it captured into a graph, launch i on weight copy
// i % copies, timed over `replays` replays after a warm one.
double graph_gemm_us(cuda::BlasLt& blas, const cuda::GemmShape& s, const cuda::DeviceMemory& a,
                     const std::vector<cuda::DeviceMemory>& w, const cuda::DeviceMemory& c, cuda::Stream& stream,
                     int launches, int replays) {
  const int copies = static_cast<int>(w.size());
  cuda::Graph graph = cuda::Graph::capture(stream, [&] {
    for (int i = 0; i < launches; ++i) blas.gemm_bf16_tn(s, a.ptr(), w[i % copies].ptr(), c.ptr(), stream);
  });
  graph.launch(stream);  // warm
  std::vector<double> t;
  for (int r = 0; r < replays; ++r) {
    cuda::TimingEvent e0, e1;
    e0.record(stream);
    graph.launch(stream);
    e1.record(stream);
    t.push_back(1e3 * cuda::elapsed_ms(e0, e1) / launches);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// One shape's device operands: `launches` weight copies (up to ~400 MB, more than the L2 holds, as a
// decode step streams every layer's weights once; at least one), A of `rows` rows, C for them.
struct Operands {
  std::vector<cuda::DeviceMemory> w;
  cuda::DeviceMemory a, c;
};

Operands upload(const DecodeGemm& g, std::uint64_t rows, int launches, std::uint64_t& seed, const cuda::Stream& stream) {
  const std::size_t wbytes = g.n * g.k * 2;
  const int copies = static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>(launches, (400u << 20) / wbytes + 1)));
  const auto w = random_bf16(g.n * g.k, seed++);
  const auto a = random_bf16(rows * g.k, seed++);
  Operands o;
  for (int i = 0; i < copies; ++i) {
    o.w.push_back(cuda::DeviceMemory::allocate(wbytes, "w"));
    cuda::copy_h2d_async(o.w.back().ptr(), w.data(), wbytes, stream);
  }
  o.a = cuda::DeviceMemory::allocate(a.size() * 2, "a");
  o.c = cuda::DeviceMemory::allocate(rows * g.n * 2, "c");
  cuda::copy_h2d_async(o.a.ptr(), a.data(), a.size() * 2, stream);
  stream.synchronize();
  return o;
}

TEST(PerfGpuGemm, DecodeChoiceAcrossBatchSizes) {
  cuda::ensure_driver();
  cuda::Context ctx(0);
  cuda::Stream stream;
  cuda::BlasLt blas;
  constexpr int kLaunches = 16, kReplays = 9;
  const std::uint64_t max_m = kMs[std::size(kMs) - 1];
  // per m_ref: the step's GEMM time (µs) at each m, summed over shapes with their per-step counts
  std::vector<std::vector<double>> step_us(std::size(kMs), std::vector<double>(std::size(kMs), 0.0));
  std::vector<double> best_step_us(std::size(kMs), 0.0);
  std::uint64_t seed = 77;
  for (const DecodeGemm& g : kShapes) {
    const std::size_t wbytes = g.n * g.k * 2;
    const Operands ops = upload(g, max_m, kLaunches, seed, stream);
    const std::vector<cuda::DeviceMemory>& dw = ops.w;
    const cuda::DeviceMemory &da = ops.a, &dc = ops.c;
    const double floor_us = static_cast<double>(wbytes) / kCopyBytesPerUs;
    std::printf("\n%s n=%llu k=%llu: weights %.1f MB, floor %.2f us; us per GEMM (x floor) by m\n", g.name,
                (unsigned long long)g.n, (unsigned long long)g.k, wbytes / 1e6, floor_us);
    std::printf("%-8s", "m_ref");
    for (std::uint64_t m : kMs) std::printf(" %13llu", (unsigned long long)m);
    std::printf("  choice\n");
    std::vector<double> best(std::size(kMs), 1e30);
    for (std::size_t ri = 0; ri < std::size(kMs); ++ri) {
      cuda::GemmShape s;
      s.n = g.n, s.k = g.k, s.lda = g.k, s.ldc = g.n, s.m_ref = kMs[ri];
      std::printf("%-8llu", (unsigned long long)kMs[ri]);
      std::vector<std::uint16_t> row0_ref;
      for (std::size_t mi = 0; mi < std::size(kMs); ++mi) {
        s.m = kMs[mi];
        blas.prepare(s);
        // invariance: row 0 and row m-1 against the same rows computed at m = max_m
        blas.gemm_bf16_tn(s, da.ptr(), dw[0].ptr(), dc.ptr(), stream);
        std::vector<std::uint16_t> got(s.m * g.n);
        cuda::copy_d2h_async(got.data(), dc.ptr(), got.size() * 2, stream);
        stream.synchronize();
        if (mi == 0) row0_ref.assign(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(g.n));
        EXPECT_EQ(0, std::memcmp(got.data(), row0_ref.data(), g.n * 2))
            << g.name << ": m_ref " << kMs[ri] << ": row 0 at m=" << s.m << " differs from m=1";
        const double us = graph_gemm_us(blas, s, da, dw, dc, stream, kLaunches, kReplays);
        best[mi] = std::min(best[mi], us);
        step_us[ri][mi] += us * static_cast<double>(g.per_step);
        std::printf(" %7.2f(%4.2f)", us, us / floor_us);
      }
      std::printf("  %s\n", blas.describe(s).c_str());
    }
    for (std::size_t mi = 0; mi < std::size(kMs); ++mi) best_step_us[mi] += best[mi] * static_cast<double>(g.per_step);
  }
  double floor_step = 0;
  for (const DecodeGemm& g : kShapes) floor_step += static_cast<double>(g.n * g.k * 2 * g.per_step) / kCopyBytesPerUs;
  std::printf("\ndecode step's GEMMs (4B shape, 36 layers + lm_head), us by m; floor %.0f us\n%-8s", floor_step, "m_ref");
  for (std::uint64_t m : kMs) std::printf(" %7llu", (unsigned long long)m);
  std::printf("   worst x best-per-m\n");
  for (std::size_t ri = 0; ri < std::size(kMs); ++ri) {
    std::printf("%-8llu", (unsigned long long)kMs[ri]);
    double worst = 0;
    for (std::size_t mi = 0; mi < std::size(kMs); ++mi) {
      std::printf(" %7.0f", step_us[ri][mi]);
      worst = std::max(worst, step_us[ri][mi] / best_step_us[mi]);
    }
    std::printf("   %.3f\n", worst);
  }
  std::printf("%-8s", "best/m");
  for (std::size_t mi = 0; mi < std::size(kMs); ++mi) std::printf(" %7.0f", best_step_us[mi]);
  std::printf("\n");
}

// Beyond the heuristic's first answer: its first candidates (that also run at m = 1) at m_ref 64, 128
// and 256, each timed at m = 1, 64, 128, 256 and, for a prefill-sized step run with the same
// algorithm (one algorithm for decode and prefill rows would let them share a GEMM), 512 and 2048;
// row 0's bits at every m against m = 1 are asserted for each. Reported only (docs/perf.md,
// fifteenth session). Each candidate's line also carries a hash of its row 0 (the same input for
// every candidate of a shape): candidates with the same hash compute the same bits, so a
// batch-invariant launch could run any of them at any m (docs/perf.md, session 35).
TEST(PerfGpuGemm, DecodeCandidatesAcrossBatchSizes) {
  cuda::ensure_driver();
  cuda::Context ctx(0);
  cuda::Stream stream;
  cuda::BlasLt blas;
  constexpr int kLaunches = 16, kReplays = 7, kCandidates = 8;
  constexpr std::uint64_t kRefs[] = {1, 8, 32, 64, 128, 256, 2048};  // 2048: the prefill chunk's own choice, first answer only
  constexpr std::uint64_t kAt[] = {1, 64, 128, 256, 512, 2048};
  std::uint64_t seed = 91;
  for (const DecodeGemm& g : kShapes) {
    const std::size_t wbytes = g.n * g.k * 2;
    const Operands ops = upload(g, 2048, kLaunches, seed, stream);
    const std::vector<cuda::DeviceMemory>& dw = ops.w;
    const cuda::DeviceMemory &da = ops.a, &dc = ops.c;
    const double floor_us = static_cast<double>(wbytes) / kCopyBytesPerUs;
    std::printf("\n%s n=%llu k=%llu: floor %.2f us; us per GEMM at m = 1 / 64 / 128 / 256 / 512 / 2048\n", g.name,
                (unsigned long long)g.n, (unsigned long long)g.k, floor_us);
    for (std::uint64_t ref : kRefs)
      for (std::uint32_t cand = 0; cand < (ref == 2048 ? 1u : kCandidates); ++cand) {
        cuda::GemmShape s;
        s.n = g.n, s.k = g.k, s.lda = g.k, s.ldc = g.n, s.m_ref = ref, s.candidate = cand, s.strict_candidate = true;
        std::string text;
        try {
          s.m = 1;
          blas.prepare(s);
          text = blas.describe(s);
        } catch (const kern::Error&) {
          break;  // no more candidates at this m_ref
        }
        std::printf("[cand] %s m_ref %llu #%u:", g.name, (unsigned long long)ref, cand);
        std::vector<std::uint16_t> row0;
        for (std::uint64_t m : kAt) {
          s.m = m;
          try {
            blas.prepare(s);
          } catch (const kern::Error&) {
            std::printf(" %8s", "n/a");  // this algorithm does not run at this m
            continue;
          }
          blas.gemm_bf16_tn(s, da.ptr(), dw[0].ptr(), dc.ptr(), stream);
          std::vector<std::uint16_t> got(g.n);
          cuda::copy_d2h_async(got.data(), dc.ptr(), got.size() * 2, stream);
          stream.synchronize();
          if (m == 1) row0 = got;
          EXPECT_EQ(0, std::memcmp(got.data(), row0.data(), g.n * 2)) << g.name << " m_ref " << ref << " #" << cand << " m " << m;
          std::printf(" %8.2f", graph_gemm_us(blas, s, da, dw, dc, stream, kLaunches, kReplays));
        }
        std::uint64_t h = 1469598103934665603ull;  // FNV-1a over row 0's bytes
        for (std::uint16_t v : row0) h = ((h ^ (v & 0xffu)) * 1099511628211ull ^ (v >> 8)) * 1099511628211ull;
        std::printf("  bits %016llx  %s\n", (unsigned long long)h, text.c_str());
      }
  }
}


// The per_m_equivalent search (docs/runtime.md, "GEMM algorithm choice") on the 4B decode shapes,
// the launch's one algorithm chosen at m_ref 128: at each m, what runs, its time beside the launch's
// one algorithm's, and every row of its output against the one algorithm's at m = 256 (asserted
// bitwise: the search may only substitute an answer with the same bits). Step totals weight each
// shape by its launches per decode step. Speed reported only.
TEST(PerfGpuGemm, PerMEquivalentAnswers) {
  cuda::ensure_driver();
  cuda::Context ctx(0);
  cuda::Stream stream;
  cuda::BlasLt blas;
  constexpr int kLaunches = 16, kReplays = 9;
  constexpr std::uint64_t kAt[] = {1, 8, 32, 64, 128, 256};
  double step_ref[std::size(kAt)] = {}, step_per_m[std::size(kAt)] = {};
  std::uint64_t seed = 191;
  for (const DecodeGemm& g : kShapes) {
    const Operands ops = upload(g, 256, kLaunches, seed, stream);
    const std::vector<cuda::DeviceMemory>& dw = ops.w;
    const cuda::DeviceMemory &da = ops.a, &dc = ops.c;
    cuda::GemmShape ref;
    ref.n = g.n, ref.k = g.k, ref.lda = g.k, ref.ldc = g.n, ref.m_ref = 128, ref.m = 256;
    blas.gemm_bf16_tn(ref, da.ptr(), dw[0].ptr(), dc.ptr(), stream);
    std::vector<std::uint16_t> want(256 * g.n);
    cuda::copy_d2h_async(want.data(), dc.ptr(), want.size() * 2, stream);
    stream.synchronize();
    std::printf("\n%s n=%llu k=%llu, the launch's one algorithm: %s\n", g.name, (unsigned long long)g.n,
                (unsigned long long)g.k, blas.describe(ref).c_str());
    for (std::size_t i = 0; i < std::size(kAt); ++i) {
      cuda::GemmShape s = ref, one = ref;
      s.m = one.m = kAt[i];
      s.per_m_equivalent = true;
      blas.prepare(s, cuda::GemmOperands{da.ptr(), dw[0].ptr(), dc.ptr()});
      blas.gemm_bf16_tn(s, da.ptr(), dw[0].ptr(), dc.ptr(), stream);
      std::vector<std::uint16_t> got(s.m * g.n);
      cuda::copy_d2h_async(got.data(), dc.ptr(), got.size() * 2, stream);
      stream.synchronize();
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 2)) << g.name << " m " << s.m;
      const double t_one = graph_gemm_us(blas, one, da, dw, dc, stream, kLaunches, kReplays);
      const double t_per_m = graph_gemm_us(blas, s, da, dw, dc, stream, kLaunches, kReplays);
      step_ref[i] += t_one * static_cast<double>(g.per_step);
      step_per_m[i] += t_per_m * static_cast<double>(g.per_step);
      std::printf("[per-m] %s m %3llu: one algorithm %8.2f us, per m %8.2f us  %s\n", g.name, (unsigned long long)s.m,
                  t_one, t_per_m, blas.describe_at_m(s).c_str());
    }
  }
  for (std::size_t i = 0; i < std::size(kAt); ++i)
    std::printf("[per-m] step GEMMs at m %3llu: one algorithm %8.1f us, per m %8.1f us (%.3f x)\n",
                (unsigned long long)kAt[i], step_ref[i], step_per_m[i], step_per_m[i] / step_ref[i]);
}

}  // namespace
}  // namespace kern::gputest
