// GPU checks of the split-KV decode attention of kernels/attention.cu (partial + reduce) against a
// float64 host reference over randomly permuted pages, for both partial kernels (the f32 CUDA-core one
// and the tensor-core one kern gen uses); bitwise repeatability; and timings at Qwen3-4B serving sizes
// (PerfGpu.DecodeAttention*, printed as "[figure]", never asserted).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include "decode_launch.hpp"
#include "harness.hpp"
#include "paged_kv.hpp"

namespace kern_gpu_test {
namespace {

// float64 softmax(q k^T * scale) v for every q head of kv head kvh of sequence seq (q row at q):
// out[h * hd + d]; an empty context gives zeros.
void reference_kv_head(const PagedKv& c, int seq, int len, int kvh, const bf16_bits* q, double scale, double* out) {
  const AttnGeometry& g = c.g;
  const int group = g.heads / g.kv_heads, hd = g.head_dim;
  std::vector<double> k(static_cast<size_t>(len) * hd), v(static_cast<size_t>(len) * hd), s(len);
  for (int t = 0; t < len; ++t) {
    c.row(seq, t, kvh, false, &k[static_cast<size_t>(t) * hd]);
    c.row(seq, t, kvh, true, &v[static_cast<size_t>(t) * hd]);
  }
  for (int h = kvh * group; h < (kvh + 1) * group; ++h) {
    std::vector<double> qd(hd);
    for (int d = 0; d < hd; ++d) qd[d] = bf16_to_float(q[h * hd + d]);
    double m = -INFINITY;
    for (int t = 0; t < len; ++t) {
      double dot = 0.0;
      for (int d = 0; d < hd; ++d) dot += qd[d] * k[static_cast<size_t>(t) * hd + d];
      s[t] = dot * scale;
      m = std::max(m, s[t]);
    }
    double den = 0.0;
    for (int t = 0; t < len; ++t) den += (s[t] = std::exp(s[t] - m));
    std::vector<double> acc(hd, 0.0);
    for (int t = 0; t < len; ++t)
      for (int d = 0; d < hd; ++d) acc[d] += s[t] * v[static_cast<size_t>(t) * hd + d];
    for (int d = 0; d < hd; ++d) out[h * hd + d] = len > 0 ? acc[d] / den : 0.0;
  }
}

// Device buffers of one decode call over a PagedKv.
struct DecodeRun {
  const PagedKv& cache;
  std::vector<bf16_bits> qkv;
  Device<bf16_bits> d_qkv, d_cache, d_out;
  Device<int32_t> d_table, d_lens;
  Device<float> d_part_o, d_part_ml;
  DecodeCall call;

  DecodeRun(std::mt19937_64& rng, const PagedKv& c, const std::vector<int>& lens, const DecodeSplit& split)
      : cache(c),
        qkv(random_bf16(rng, lens.size() * c.g.q_stride(), -1.0f, 1.0f)),
        d_qkv(qkv),
        d_cache(c.data),
        d_out(lens.size() * c.g.heads * c.g.head_dim),
        d_table(c.table),
        d_lens(std::vector<int32_t>(lens.begin(), lens.end())),
        d_part_o(static_cast<size_t>(lens.size()) * c.g.heads * split.splits_max * c.g.head_dim),
        d_part_ml(static_cast<size_t>(lens.size()) * c.g.heads * split.splits_max * 2) {
    const AttnGeometry& g = c.g;
    call.head_dim = g.head_dim;
    call.qkv = d_qkv.get();
    call.q_stride = g.q_stride();
    call.cache = d_cache.get() + c.layer_off;
    call.block_table = d_table.get();
    call.max_pages = c.max_pages;
    call.seq_lens = d_lens.get();
    call.part_o = d_part_o.get();
    call.part_ml = d_part_ml.get();
    call.out = d_out.get();
    call.seqs = static_cast<int32_t>(lens.size());
    call.heads = g.heads;
    call.kv_heads = g.kv_heads;
    call.page_size = g.page_size;
    call.page_stride = c.page_stride;
    call.split = split;
    call.scale = 1.0f / std::sqrt(static_cast<float>(g.head_dim));
  }

  // Poisons the outputs and scratch, runs the call, returns the bf16 output.
  std::vector<bf16_bits> run(Fatbin& fb) {
    d_out.poison();
    d_part_o.poison();
    d_part_ml.poison();
    call.run(fb);
    return d_out.download();
  }
};

// The partial kernels every correctness test runs: the f32 one, the tensor-core ones, and the
// tensor-core ones with the key-major products (which take GQA groups of up to 8 only: kind_takes).
const std::vector<std::string> kPartialKinds = {"", "mma", "warp", "mma_km", "warp_km"};

std::string kind_tag(const std::string& kind) { return kind.empty() ? "f32" : kind; }
bool kind_takes(const std::string& kind, const AttnGeometry& g) {
  return kind.find("_km") == std::string::npos || g.heads / g.kv_heads <= 8;
}

// One decode call over `lens` with each partial kernel, checked per sequence against the float64
// reference.
void check_decode(const AttnGeometry& g, const std::vector<int>& lens, uint64_t seed, DecodeSplit split = {}) {
  std::mt19937_64 rng(seed);
  const PagedKv cache(rng, g, lens, 2, 1, fast_kv);
  DecodeRun r(rng, cache, lens, split);
  Fatbin fb("attention");
  const int seqs = static_cast<int>(lens.size());
  const size_t n = static_cast<size_t>(g.heads) * g.head_dim;
  std::vector<double> ref(static_cast<size_t>(seqs) * n);
  parallel_for(seqs * g.kv_heads, [&](int i) {
    const int s = i / g.kv_heads, kvh = i % g.kv_heads;
    reference_kv_head(cache, s, lens[s], kvh, r.qkv.data() + static_cast<size_t>(s) * g.q_stride(), r.call.scale,
                      ref.data() + s * n);
  });
  for (const std::string& kind : kPartialKinds) {
    if (!kind_takes(kind, g)) continue;
    r.call.kind = kind;
    const auto out = r.run(fb);
    EXPECT_EQ(count_nan(out), 0u) << kind_tag(kind);
    for (int s = 0; s < seqs; ++s) {
      std::vector<double> o(n), rr(ref.begin() + s * n, ref.begin() + (s + 1) * n);
      for (size_t i = 0; i < n; ++i) o[i] = bf16_to_float(out[s * n + i]);
      if (lens[s] == 0) {
        for (size_t i = 0; i < n; ++i)
          EXPECT_EQ(out[s * n + i], 0) << kind_tag(kind) << ": empty context must give zeros, seq " << s;
        continue;
      }
      const double err = rel_frobenius(o, rr);
      report("decode " + kind_tag(kind) + " rel err " + geometry_tag(g) + " seqs " + std::to_string(seqs) + " len " +
                 std::to_string(lens[s]),
             err);
      EXPECT_LT(err, 1e-2) << kind_tag(kind) << " " << geometry_tag(g) << " seq " << s << " len " << lens[s];
    }
  }
}

const AttnGeometry kQwen4B{32, 8, 128, 16};

TEST(AttnDecodeGpu, BriefContextsEachAlone) {
  // One sequence per call: the most ranges per sequence (64), ranges of 32 tokens up to 2k.
  uint64_t seed = 500;
  for (int len : {1, 15, 16, 17, 255, 1000, 4097}) check_decode(kQwen4B, {len}, ++seed);
}

TEST(AttnDecodeGpu, BriefContextsInOneCall) {
  check_decode(kQwen4B, {1, 15, 16, 17, 255, 1000, 4097, 2049, 33, 32}, 510);
}

TEST(AttnDecodeGpu, LongContext32k) { check_decode(kQwen4B, {32768}, 511); }

TEST(AttnDecodeGpu, LongContextsAroundPowerOfTwo) { check_decode(kQwen4B, {32767, 32769, 100}, 512); }

TEST(AttnDecodeGpu, GqaGroups1To8HeadDim128) {
  for (int group = 1; group <= 8; ++group) check_decode({2 * group, 2, 128, 16}, {1, 17, 1000, 2049}, 520 + group);
}

TEST(AttnDecodeGpu, GqaGroups1To8HeadDim64) {
  for (int group = 1; group <= 8; ++group) check_decode({4 * group, 4, 64, 32}, {7, 16, 65, 4097}, 530 + group);
}

TEST(AttnDecodeGpu, Qwen3Shapes) {
  check_decode({16, 8, 128, 16}, {100, 1000, 4097}, 536);  // 0.6B / 1.7B: G 2
  check_decode({40, 8, 128, 32}, {255, 257, 33}, 537);     // 14B: G 5 (a second pass of one head)
  check_decode({64, 8, 128, 16}, {100, 1000, 4097}, 538);  // 32B: G 8
}

// Pages smaller than the tensor-core kernel's 16-key tiles: a tile spans pages (one lookup per key).
TEST(AttnDecodeGpu, PagesSmallerThanATile) {
  check_decode({32, 8, 128, 8}, {1, 17, 1000, 4097}, 539);
  check_decode({8, 4, 64, 4}, {3, 33, 700}, 549);
}

TEST(AttnDecodeGpu, Gqa16TakesFourPasses) { check_decode({16, 1, 128, 16}, {300, 5}, 540); }

TEST(AttnDecodeGpu, ManySequencesOneRangeEach) {
  // 64 sequences x 8 kv heads >= target_blocks: one range per sequence, written by the partial
  // kernel directly; an empty context among them.
  std::mt19937_64 rng(541);
  std::vector<int> lens(64);
  for (auto& l : lens) l = static_cast<int>(rng() % 2500);
  lens[5] = 0;
  lens[6] = 1;
  lens[7] = 2048;
  check_decode(kQwen4B, lens, 542);
}

TEST(AttnDecodeGpu, FewRangesPerSequence) {
  // 16 x 8 units, target 1024: 8 ranges per sequence of different lengths each.
  check_decode(kQwen4B, {0, 3000, 8192, 257, 31, 4096, 1, 77, 5000, 640, 999, 16, 15, 2, 1500, 8191}, 543);
}

TEST(AttnDecodeGpu, SplitParameters) {
  check_decode(kQwen4B, {4097, 1}, 544, {1, 1024});    // one range whatever the length
  check_decode(kQwen4B, {4097, 31}, 545, {64, 1});     // target 1 block: one range per sequence
  check_decode(kQwen4B, {4097, 300}, 546, {7, 4096});  // odd capacity
  check_decode(kQwen4B, {32768}, 547, {1024, 8192});   // the most ranges allowed
}

// The batch-invariant split (kern gen's default, split_tokens 256): ranges from each length alone,
// blocks striding over the items; against the float64 reference, including odd range lengths, a grid
// much smaller than the work, and the most ranges allowed.
TEST(AttnDecodeGpu, LengthOnlySplit) {
  check_decode(kQwen4B, {1, 15, 255, 256, 257, 1000, 4097, 32768, 0, 16385}, 560, {64, 256, 256});
  check_decode(kQwen4B, {4097, 31, 700}, 561, {64, 1, 100});    // 100 -> ranges of 128 keys; grid = units + 1
  check_decode(kQwen4B, {32768, 5}, 562, {1024, 4096, 32});     // 1024 ranges of 32 keys
  check_decode({16, 1, 128, 16}, {300, 5, 9000}, 563, {64, 256, 64});  // GQA 16: four passes per item
  check_decode({8, 4, 64, 4}, {3, 33, 700, 2049}, 564, {64, 256, 256}); // hd 64, pages smaller than a tile
  // Two blocks for everything: each warp of the warp kernel streams many items back to back (its ring
  // runs across their boundaries), the block kernels' blocks many items each.
  check_decode(kQwen4B, {1, 15, 255, 256, 257, 1000, 4097, 0, 33}, 566, {64, 256, 64, 1, 2});
  check_decode({8, 4, 64, 4}, {3, 33, 700, 2049, 0}, 567, {64, 256, 64, 1, 3});
}

// Batch invariance: with the length-only split a sequence's output bits do not depend on the other
// sequences of the call (their number or lengths), for both partial kernels; with split_tokens 0 they
// may (the call's size sets the ranges), which this test does not assert.
// For every partial kind: one call over all of `lens`, then for each (first, count) a call over those
// sequences alone; each of them must come out bit for bit as in the whole call.
void expect_sub_calls_bitwise(uint64_t seed, const std::vector<int>& lens, const DecodeSplit& split,
                              const std::vector<std::pair<int, int>>& subs) {
  std::mt19937_64 rng(seed);
  const PagedKv cache(rng, kQwen4B, lens, 2, 0, fast_kv);
  DecodeRun all(rng, cache, lens, split);
  Fatbin fb("attention");
  const size_t n = static_cast<size_t>(kQwen4B.heads) * kQwen4B.head_dim;
  for (const std::string& kind : kPartialKinds) {
    all.call.kind = kind;
    const auto together = all.run(fb);
    for (const auto& [first, count] : subs) {
      DecodeCall sub = all.call;
      sub.seqs = count;
      sub.qkv = static_cast<const bf16_bits*>(all.call.qkv) + static_cast<size_t>(first) * all.call.q_stride;
      sub.block_table = all.call.block_table + static_cast<size_t>(first) * all.call.max_pages;
      sub.seq_lens = all.call.seq_lens + first;
      Device<bf16_bits> out(static_cast<size_t>(count) * n);
      out.poison();
      sub.out = out.get();
      sub.run(fb);
      const auto got = out.download();
      for (int i = 0; i < count; ++i)
        EXPECT_EQ(std::memcmp(got.data() + static_cast<size_t>(i) * n,
                              together.data() + static_cast<size_t>(first + i) * n, n * sizeof(bf16_bits)),
                  0)
            << kind_tag(kind) << ": sequence " << first + i << " (len " << lens[first + i] << ") among " << count
            << " differs from the same sequence among " << lens.size();
    }
  }
}

TEST(AttnDecodeGpu, LengthOnlySplitIsBatchInvariant) {
  std::mt19937_64 rng(565);
  std::vector<int> lens(64);
  for (auto& l : lens) l = 1 + static_cast<int>(rng() % 6000);
  lens[3] = 32768;
  // Each of a few sequences alone and as the first of 1 + 7 (the 64-sequence call keeps the warp
  // kernel's used-range table, the smaller ones do not).
  std::vector<std::pair<int, int>> subs;
  for (int first : {0, 3, 17, 63})
    for (int others : {0, 7}) subs.emplace_back(first, std::min(1 + others, 64 - first));
  expect_sub_calls_bitwise(566, lens, {64, 256, 256}, subs);
}

// More sequences than the warp kernel's shared-memory table of used ranges (decode_warp::kUsedTable,
// 512): that call walks with seq_lens loads, a call of its first 40 sequences with the table, one of
// 8 without; against the float64 reference, and bitwise across the three calls.
TEST(AttnDecodeGpu, LengthOnlySplitBeyondTheUsedTable) {
  std::mt19937_64 rng(568);
  std::vector<int> lens(600);
  for (auto& l : lens) l = static_cast<int>(rng() % 400);
  lens[2] = 5000;
  lens[5] = 0;
  const DecodeSplit split{64, 256, 128};
  check_decode(kQwen4B, lens, 569, split);
  expect_sub_calls_bitwise(570, lens, split, {{0, 40}, {0, 8}, {590, 10}});
}

TEST(AttnDecodeGpu, BitwiseRepeatable) {
  std::mt19937_64 rng(550);
  const std::vector<int> lens = {4097, 1000, 32, 1, 12345};
  const PagedKv cache(rng, kQwen4B, lens, 2, 0, fast_kv);
  DecodeRun r(rng, cache, lens, {});
  Fatbin fb("attention");
  std::vector<std::vector<bf16_bits>> outs(kPartialKinds.size());
  for (size_t k = 0; k < kPartialKinds.size(); ++k) {
    r.call.kind = kPartialKinds[k];
    const auto first = r.run(fb);
    ASSERT_EQ(count_nan(first), 0u) << kind_tag(r.call.kind);
    for (int i = 0; i < 3; ++i) {
      const auto again = r.run(fb);
      ASSERT_EQ(std::memcmp(first.data(), again.data(), first.size() * sizeof(bf16_bits)), 0)
          << kind_tag(r.call.kind) << " run " << i;
    }
    outs[k] = first;
  }
  // The kernels round differently (P in f32 or bf16, warps merged per block or not), so they agree
  // closely but not bit for bit.
  for (size_t k = 1; k < outs.size(); ++k) {
    std::vector<double> a(outs[0].size()), b(outs[k].size());
    for (size_t i = 0; i < a.size(); ++i) a[i] = bf16_to_float(outs[0][i]), b[i] = bf16_to_float(outs[k][i]);
    EXPECT_LT(rel_frobenius(b, a), 1e-2) << kind_tag(kPartialKinds[k]);
  }
}

// The warp-item kernel's tuning point (3 stages at 2 blocks per SM) changes how many stages a warp
// has and how many blocks share an SM, never the arithmetic: it gives the production kernel's bits.
TEST(AttnDecodeGpu, WarpTuningPointsGiveTheWarpKernelsBits) {
  std::mt19937_64 rng(551);
  const std::vector<int> lens = {4097, 1000, 32, 1, 12345, 129, 256, 17};
  const PagedKv cache(rng, kQwen4B, lens, 2, 0, fast_kv);
  Fatbin fb("attention");
  for (int grid : {256, 396}) {
    DecodeSplit split;
    split.splits_max = 128;
    split.split_tokens = 128;
    split.grid = grid;
    DecodeRun r(rng, cache, lens, split);
    r.call.kind = "warp";
    const auto want = r.run(fb);
    ASSERT_EQ(count_nan(want), 0u);
    for (const std::string kind : {"warp_s3"}) {
      r.call.kind = kind;
      const auto got = r.run(fb);
      EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(bf16_bits)), 0) << kind << " grid " << grid;
    }
  }
}

// ---- timings -----------------------------------------------------------------------------------

// The attention fatbin's two decode kernels, for graph capture.
class DecodeKernels {
 public:
  explicit DecodeKernels(const std::string& kind = "") : kind_(kind), smem_(decode_partial_smem(kind, 128)) {
    partial_ = family_kernel("attention", decode_partial_entry(kind, 128));
    reduce_ = family_kernel("attention", "kern_attn_decode_reduce_hd128");
    if (smem_ > 0) {
      int device = 0;
      check_cuda(cudaGetDevice(&device), "cudaGetDevice");
      check_cuda(cudaKernelSetAttributeForDevice(partial_, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_, device),
                 "partial shared memory");
    }
  }
  DecodeKernels(const DecodeKernels&) = delete;
  DecodeKernels& operator=(const DecodeKernels&) = delete;

  // Enqueues one decode call (the reduce too when with_reduce); pdl: both launches allow
  // programmatic dependent launch (the kernels wait for the previous grid before reading).
  void enqueue(DecodeCall c, cudaStream_t st, bool with_reduce, bool pdl = false) const {
    c.kind = kind_;
    void* pa[] = {&c.qkv,
                  &c.q_stride,
                  &c.cache,
                  &c.block_table,
                  &c.max_pages,
                  &c.seq_lens,
                  &c.part_o,
                  &c.part_ml,
                  &c.out,
                  &c.seqs,
                  &c.heads,
                  &c.kv_heads,
                  &c.page_size,
                  &c.page_stride,
                  &c.split.splits_max,
                  &c.split.target_blocks,
                  &c.split.split_tokens,
                  &c.scale};
    launch(partial_, dim3(c.partial_blocks()), dim3(kDecodePartialThreads), pa, st, pdl, "partial", smem_);
    if (!with_reduce) return;
    void* ra[] = {&c.part_o, &c.part_ml,  &c.out,       &c.seq_lens,         &c.max_pages,          &c.seqs,
                  &c.heads,  &c.kv_heads, &c.page_size, &c.split.splits_max, &c.split.target_blocks,
                  &c.split.split_tokens};
    launch(reduce_, dim3(c.seqs, c.heads), dim3(c.head_dim), ra, st, pdl, "reduce", 0);
  }

 private:
  static void launch(cudaKernel_t k, dim3 grid, dim3 block, void** args, cudaStream_t st, bool pdl, const char* what,
                     int smem) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = static_cast<size_t>(smem);
    cfg.stream = st;
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = pdl ? 1 : 0;
    check_cuda(cudaLaunchKernelExC(&cfg, reinterpret_cast<const void*>(k), args), what);
  }

  std::string kind_;
  int smem_ = 0;
  cudaKernel_t partial_ = nullptr, reduce_ = nullptr;
};

// Mean microseconds per decode call: a CUDA graph of `calls.size()` calls (one per layer) replayed.
double graph_us_per_call(const DecodeKernels& k, const std::vector<DecodeCall>& calls, bool with_reduce, int replays,
                         bool pdl = false) {
  cudaStream_t st;
  check_cuda(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream");
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check_cuda(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), "begin capture");
  for (const auto& c : calls) k.enqueue(c, st, with_reduce, pdl);
  check_cuda(cudaStreamEndCapture(st, &graph), "end capture");
  check_cuda(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  check_cuda(cudaGraphLaunch(exec, st), "warm-up");
  cudaEvent_t a, b;
  check_cuda(cudaEventCreate(&a), "event");
  check_cuda(cudaEventCreate(&b), "event");
  check_cuda(cudaEventRecord(a, st), "record");
  for (int i = 0; i < replays; ++i) check_cuda(cudaGraphLaunch(exec, st), "replay");
  check_cuda(cudaEventRecord(b, st), "record");
  check_cuda(cudaEventSynchronize(b), "sync");
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, a, b), "elapsed");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(st);
  return 1000.0 * ms / (static_cast<double>(replays) * calls.size());
}

// Device-to-device cudaMemcpy bandwidth (read + write bytes per second) over 1 GiB.
double memcpy_bandwidth() {
  const size_t bytes = size_t{1} << 30;
  void *src = nullptr, *dst = nullptr;
  check_cuda(cudaMalloc(&src, bytes), "malloc");
  check_cuda(cudaMalloc(&dst, bytes), "malloc");
  check_cuda(cudaMemset(src, 0x3c, bytes), "memset");
  check_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "warm-up copy");
  cudaEvent_t a, b;
  check_cuda(cudaEventCreate(&a), "event");
  check_cuda(cudaEventCreate(&b), "event");
  const int iters = 5;
  check_cuda(cudaEventRecord(a, nullptr), "record");
  for (int i = 0; i < iters; ++i)
    check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, nullptr), "copy");
  check_cuda(cudaEventRecord(b, nullptr), "record");
  check_cuda(cudaEventSynchronize(b), "sync");
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, a, b), "elapsed");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaFree(src);
  cudaFree(dst);
  return 2.0 * bytes * iters / (ms * 1e-3);
}

// Qwen3-4B decode at (seqs, len): a paged KV state of `layers` layers (every page holds all of
// them, as in kern), enough layers that one pass over them does not fit in L2 (as in a real step,
// where the weights stream through L2 between two attention calls).
struct PerfState {
  static constexpr int H = 32, KV = 8, hd = 128, P = 16;
  int seqs, len, layers, max_pages;  // len: the longest sequence's
  std::vector<int32_t> seq_lens;
  int64_t page_stride;
  std::unique_ptr<Device<bf16_bits>> cache, qkv, out;
  std::unique_ptr<Device<int32_t>> table, lens;
  std::unique_ptr<Device<float>> part_o, part_ml;

  PerfState(int seqs_, int len_, int splits_max, int min_layers = 1)
      : PerfState(std::vector<int32_t>(seqs_, len_), splits_max, min_layers) {}
  // Sequences of their own lengths; pages only for the keys each one has (the rest of its block-table
  // row points at page 0 and is never read).
  PerfState(std::vector<int32_t> lens_, int splits_max, int min_layers = 1)
      : seqs(static_cast<int>(lens_.size())),
        len(*std::max_element(lens_.begin(), lens_.end())),
        seq_lens(std::move(lens_)) {
    const double layer_bytes = kv_bytes();
    layers = std::max(min_layers, static_cast<int>(std::clamp(std::ceil(256e6 / layer_bytes), 1.0, 512.0)));
    max_pages = (len + P - 1) / P;
    page_stride = static_cast<int64_t>(layers) * 2 * P * KV * hd;
    size_t pages = 0;
    for (int32_t l : seq_lens) pages += static_cast<size_t>((l + P - 1) / P);
    cache = std::make_unique<Device<bf16_bits>>(fast_random_bf16(77, pages * page_stride));
    std::mt19937_64 rng(78);
    std::vector<int32_t> order(pages);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<int32_t> t(static_cast<size_t>(seqs) * max_pages, 0);
    size_t next = 0;
    for (int sq = 0; sq < seqs; ++sq)
      for (int pg = 0; pg < (seq_lens[sq] + P - 1) / P; ++pg) t[static_cast<size_t>(sq) * max_pages + pg] = order[next++];
    table = std::make_unique<Device<int32_t>>(t);
    lens = std::make_unique<Device<int32_t>>(seq_lens);
    qkv =
        std::make_unique<Device<bf16_bits>>(random_bf16(rng, static_cast<size_t>(seqs) * (H + 2 * KV) * hd, -1.f, 1.f));
    out = std::make_unique<Device<bf16_bits>>(static_cast<size_t>(seqs) * H * hd);
    part_o = std::make_unique<Device<float>>(static_cast<size_t>(seqs) * H * splits_max * hd);
    part_ml = std::make_unique<Device<float>>(static_cast<size_t>(seqs) * H * splits_max * 2);
  }
  double kv_bytes() const {  // K and V, one layer
    double keys = 0;
    for (int32_t l : seq_lens) keys += l;
    return 2.0 * keys * KV * hd * 2;
  }

  std::vector<DecodeCall> calls(const DecodeSplit& split) const {
    std::vector<DecodeCall> v;
    for (int l = 0; l < layers; ++l) {
      DecodeCall c;
      c.qkv = qkv->get();
      c.q_stride = (H + 2 * KV) * hd;
      c.cache = cache->get() + static_cast<int64_t>(l) * 2 * P * KV * hd;
      c.block_table = table->get();
      c.max_pages = max_pages;
      c.seq_lens = lens->get();
      c.part_o = part_o->get();
      c.part_ml = part_ml->get();
      c.out = out->get();
      c.seqs = seqs;
      c.heads = H;
      c.kv_heads = KV;
      c.page_size = P;
      c.page_stride = page_stride;
      c.split = split;
      c.scale = 1.0f / std::sqrt(static_cast<float>(hd));
      v.push_back(c);
    }
    return v;
  }
};

const std::vector<std::pair<int, int>> kPerfShapes = {{1, 128},  {1, 1024},  {1, 2048},
                                                      {1, 8192}, {1, 32768}, {64, 2048}};

// Two layers' decode calls back to back sharing the scratch, launched with programmatic dependent
// launch: the second call's partial kernel must not overwrite part_o before the first call's
// reduce has read it (griddepcontrol.wait), so both outputs equal plain launches bit for bit.
TEST(AttnDecodeGpu, PdlLaunchesMatchPlainLaunches) {
  std::mt19937_64 rng(560);
  const std::vector<int> lens = {4097, 1000, 1, 300};
  const PagedKv cache(rng, kQwen4B, lens, 2, 1, fast_kv);
  DecodeRun r(rng, cache, lens, {});
  Device<bf16_bits> out0(r.d_out.size());
  DecodeCall layer0 = r.call, layer1 = r.call;
  layer0.cache = r.d_cache.get();  // layer 0 of the same pages
  layer0.out = out0.get();
  for (const std::string& kind : kPartialKinds) {
    SCOPED_TRACE(kind_tag(kind));
    r.call.kind = layer0.kind = layer1.kind = kind;
    DecodeKernels k(kind);
    std::vector<bf16_bits> plain[2], pdl[2];
    for (bool use_pdl : {false, true}) {
      r.d_out.poison();
      out0.poison();
      r.d_part_o.poison();
      cudaStream_t st;
      check_cuda(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream");
      for (int rep = 0; rep < 3; ++rep) {
        k.enqueue(layer0, st, true, use_pdl);
        k.enqueue(layer1, st, true, use_pdl);
      }
      check_cuda(cudaStreamSynchronize(st), "sync");
      check_cuda(cudaStreamDestroy(st), "stream destroy");
      (use_pdl ? pdl : plain)[0] = out0.download();
      (use_pdl ? pdl : plain)[1] = r.d_out.download();
    }
    for (int l = 0; l < 2; ++l) {
      ASSERT_EQ(count_nan(plain[l]), 0u);
      EXPECT_EQ(std::memcmp(plain[l].data(), pdl[l].data(), plain[l].size() * sizeof(bf16_bits)), 0) << "layer " << l;
    }
    // Layer 1 alone through Fatbin::launch (check_decode's path) gives the same bits; layer 0 differs.
    Fatbin fb("attention");
    const auto alone = r.run(fb);
    EXPECT_EQ(std::memcmp(alone.data(), plain[1].data(), alone.size() * sizeof(bf16_bits)), 0);
    EXPECT_NE(std::memcmp(plain[0].data(), plain[1].data(), plain[0].size() * sizeof(bf16_bits)), 0);
  }
}

TEST(PerfGpu, DecodeAttention) {
  const double copy_bw = memcpy_bandwidth();
  report("decode: cudaMemcpy D2D 1 GiB GB/s (read+write)", copy_bw / 1e9);
  for (const std::string kind : {"", "mma", "mma_s2", "mma_s4"}) {
    DecodeSplit split;  // as kern gen: target 1024 blocks for the f32 kernel, 256 for the tensor-core ones
    split.target_blocks = kind.empty() ? 1024 : 256;
    DecodeKernels k(kind);
    for (auto [seqs, len] : kPerfShapes) {
      PerfState s(seqs, len, split.splits_max);
      const auto calls = s.calls(split);
      const int replays = std::max(2, static_cast<int>(2000 / calls.size()));
      const double total = graph_us_per_call(k, calls, true, replays);
      const double part = graph_us_per_call(k, calls, false, replays);
      const double with_pdl = graph_us_per_call(k, calls, true, replays, true);
      const std::string t =
          "decode " + kind_tag(kind) + " seqs " + std::to_string(seqs) + " len " + std::to_string(len);
      report(t + " us per layer (partial+reduce, graph of " + std::to_string(calls.size()) + " layers)", total);
      report(t + " partial-only us", part);
      report(t + " us per layer with PDL launches", with_pdl);
      report(t + " KV GB/s", s.kv_bytes() / (total * 1e3));
      report(t + " KV bandwidth / memcpy bandwidth", s.kv_bytes() / (total * 1e-6) / copy_bw);
    }
  }
}

// Tuning table: the same shapes over target_blocks (the split rule's one knob), for both kernels.
TEST(PerfGpu, DecodeAttentionSplitSweep) {
  for (const std::string kind : {"", "mma"}) {
    DecodeKernels k(kind);
    for (auto [seqs, len] : kPerfShapes) {
      PerfState s(seqs, len, 64);
      for (int target : {128, 192, 256, 512, 1024}) {
        const auto calls = s.calls({64, target});
        const int replays = std::max(2, static_cast<int>(1000 / calls.size()));
        report("decode sweep " + kind_tag(kind) + " seqs " + std::to_string(seqs) + " len " + std::to_string(len) +
                   " target " + std::to_string(target) + " us",
               graph_us_per_call(k, calls, true, replays, true));
      }
    }
  }
}

// Tuning table for the batch-invariant split (split_tokens > 0, kern gen's default): the block
// kernel (mma) as kern gen launched it through session 19 (8 blocks per (sequence, kv head) + 256)
// and at longer ranges, against the warp-item kernel at a few range lengths and fixed grids, from one
// sequence to 256 (kern serve's batches). Reported only; docs/perf.md holds the choice.
TEST(PerfGpu, DecodeAttentionLengthOnlySplit) {
  const double copy_bw = memcpy_bandwidth();
  report("decode length-only: cudaMemcpy D2D GB/s (read+write)", copy_bw / 1e9);
  struct Config {
    std::string kind;
    int split_tokens, items_per_unit, grid;
  };
  const std::vector<Config> configs = {{"mma", 256, 8, 0},         {"mma_km", 256, 8, 0},
                                       {"warp", 64, 1, 396},
                                       {"warp", 128, 1, 396},       {"warp", 256, 1, 396},
                                       {"warp_s3", 128, 1, 256},    {"warp_km", 128, 1, 396}};
  // Every configuration over one state; `what` names the lengths, `partial_only` adds the partial
  // kernel's time alone.
  auto time_configs = [&](const PerfState& s, const std::string& what, bool partial_only) {
    for (const Config& c : configs) {
      DecodeKernels k(c.kind);
      DecodeSplit split;
      split.splits_max = 64;
      split.target_blocks = 256;
      split.split_tokens = c.split_tokens;
      split.items_per_unit = c.items_per_unit;
      split.grid = c.grid;
      const auto calls = s.calls(split);
      const int replays = std::max(20, static_cast<int>(2000 / calls.size()));
      const double us = graph_us_per_call(k, calls, true, replays, true);
      const std::string t = "decode length-only " + c.kind + " split " + std::to_string(c.split_tokens) + " grid " +
                            (c.grid > 0 ? std::to_string(c.grid) : "units*" + std::to_string(c.items_per_unit) + "+256") +
                            " seqs " + std::to_string(s.seqs) + " " + what;
      report(t + " us per layer", us);
      report(t + " KV bandwidth / memcpy bandwidth", s.kv_bytes() / (us * 1e-6) / copy_bw);
      if (partial_only) report(t + " partial-only us", graph_us_per_call(k, calls, false, replays, true));
    }
  };
  const std::vector<std::pair<int, int>> shapes = {{1, 1024}, {1, 32768}, {8, 1024},
                                                   {64, 1024}, {64, 4096}, {256, 1024}};
  for (auto [seqs, len] : shapes)
    time_configs(PerfState(seqs, len, 64), "len " + std::to_string(len), seqs == 64 && len == 1024);
  // Lengths far apart, as a server's batch has them: one 32k sequence among 63 of 1k (the walks'
  // bound is the long one's 64 ranges), and 64 lengths drawn from 256 .. 4,096 (session 37: the
  // shared-memory table of each sequence's ranges).
  std::mt19937_64 rng(37);
  std::vector<int32_t> spread(64);
  for (int32_t& l : spread) l = 256 + static_cast<int32_t>(rng() % 3841);
  std::vector<int32_t> one_long(64, 1024);
  one_long[17] = 32768;
  time_configs(PerfState(one_long, 64), "lens 1x32k+63x1k", false);
  time_configs(PerfState(spread, 64), "lens 256..4096", false);
}

// What a call costs beside its bytes at kern serve's batch: 64 sequences of 1,024 .. 4,096 keys, a
// graph of 8 layers (a replay's launch spread over 8 calls), the warp kernel as kern serve runs it.
// The slope over the lengths is the streaming rate, the intercept the per-call cost (start, ramp,
// tail; the reduce too in the first figure). Reported only (docs/perf.md, session 30).
TEST(PerfGpu, DecodeAttentionPerCallCost) {
  const double copy_bw = memcpy_bandwidth();
  report("decode per-call: cudaMemcpy D2D GB/s (read+write)", copy_bw / 1e9);
  for (const std::string kind : {"warp", "warp_km"}) {
  DecodeKernels k(kind);
  for (int len : {1024, 2048, 4096}) {
    PerfState s(64, len, 64, 8);
    DecodeSplit split;
    split.splits_max = 64;
    split.target_blocks = 256;
    split.split_tokens = 128;
    split.grid = 396;
    const auto calls = s.calls(split);
    const int replays = std::max(20, static_cast<int>(2000 / calls.size()));
    const std::string t = "decode per-call " + kind + " grid 396 seqs 64 len " + std::to_string(len) + " (" +
                          std::to_string(calls.size()) + " layers)";
    const double us = graph_us_per_call(k, calls, true, replays, true);
    report(t + " us per layer", us);
    report(t + " partial-only us", graph_us_per_call(k, calls, false, replays, true));
    report(t + " KV bandwidth / memcpy bandwidth", s.kv_bytes() / (us * 1e-6) / copy_bw);
  }
  }
}

// One decode call at 32k keys with the tensor-core partial at kern gen's target (256 blocks), launched
// plainly twice (no graph): the second launch is the one Nsight Compute looks at
// (ncu -k regex:kern_attn_decode_mma_partial_hd128 --launch-skip 1 -c 1).
TEST(PerfGpu, DecodeAttentionMma32kOnce) {
  PerfState s(1, 32768, 64);
  DecodeKernels k("mma");
  const auto calls = s.calls({64, 256});
  cudaStream_t st;
  check_cuda(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream");
  cudaEvent_t a, b;
  check_cuda(cudaEventCreate(&a), "event");
  check_cuda(cudaEventCreate(&b), "event");
  k.enqueue(calls[0], st, true);
  check_cuda(cudaEventRecord(a, st), "record");
  k.enqueue(calls[1 % calls.size()], st, true);
  check_cuda(cudaEventRecord(b, st), "record");
  check_cuda(cudaEventSynchronize(b), "sync");
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, a, b), "elapsed");
  report("decode mma 32k one plain call (partial + reduce) us", 1000.0 * ms);
  report("decode mma 32k one plain call KV GB/s", s.kv_bytes() / (ms * 1e6));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaStreamDestroy(st);
}

// The warp-item partial as kern serve runs it at concurrency 64 (64 sequences of 1k keys, ranges of
// 128 keys, kern gen's grid of 396 blocks), launched plainly twice: the second call is the one Nsight Compute
// looks at (ncu -k regex:kern_attn_decode_warp_partial_hd128 --launch-skip 1 -c 1).
// KERN_DECODE_ONCE_KIND picks another kind (warp_s3: its grid is 2 blocks per SM).
TEST(PerfGpu, DecodeAttentionWarp64x1kOnce) {
  const char* len_env = std::getenv("KERN_DECODE_ONCE_LEN");  // keys per sequence (default 1,024)
  PerfState s(64, len_env != nullptr && *len_env != 0 ? std::atoi(len_env) : 1024, 64);
  const char* env = std::getenv("KERN_DECODE_ONCE_KIND");
  const std::string kind = env != nullptr && *env != 0 ? env : "warp";
  DecodeKernels k(kind);
  DecodeSplit split;
  split.splits_max = 64;
  split.target_blocks = 256;
  split.split_tokens = 128;
  split.items_per_unit = 1;
  split.grid = kind == "warp_s3" ? 256 : 396;
  const auto calls = s.calls(split);
  cudaStream_t st;
  check_cuda(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream");
  for (int i = 0; i < 2; ++i) k.enqueue(calls[i % calls.size()], st, true);
  check_cuda(cudaStreamSynchronize(st), "sync");
  cudaStreamDestroy(st);
}

}  // namespace
}  // namespace kern_gpu_test
