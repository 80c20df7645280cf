// GPU checks of kernels/attention_prefill.cu (tensor-core chunked prefill over the paged cache):
// against a float64 host reference on random data over randomly permuted pages; bitwise row
// invariance (one call vs one row per call vs 7-row calls vs other block widths); repeatability.
// PerfGpu.PrefillMma prints timings at Qwen3-4B shapes (never asserted).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "harness.hpp"
#include "paged_kv.hpp"

namespace kern_gpu_test {
namespace {

// One compiled configuration of the kernel: entry, threads per block, queries per block (kern gen
// passes rows_per_block = queries / G), keys per tile, whether Q is staged in shared memory, and
// K/V stages. All but the single-stage register-Q layout use dynamic shared memory:
// ((Q staged ? queries : 0) + 2 * stages * keys) * (hd + 8) * 2 bytes.
struct Variant {
  std::string name;
  int threads, queries, keys;
  bool q_in_smem;
  int stages = 1;
  int smem = 0;  // dynamic shared memory in bytes where the formula below does not give it
  std::string entry(const AttnGeometry& g) const { return name + "_hd" + std::to_string(g.head_dim); }
  int rows_per_block(const AttnGeometry& g) const { return std::max(1, queries / g.group()); }
  bool dynamic() const { return q_in_smem || stages > 1; }
  int shared(const AttnGeometry& g) const {
    if (smem > 0) return smem;
    return dynamic() ? ((q_in_smem ? queries : 0) + 2 * stages * keys) * (g.head_dim + 8) * 2 : 0;
  }
};

const Variant kProduction{"kern_attn_prefill_mma_s2", 256, 128, 64, false, 2};  // 8 warps x 16 queries, two K/V stages
const Variant kOneStage{"kern_attn_prefill_mma", 256, 128, 64, false};          // the production layout before s2
// Tuning variants (hd 128 only).
const Variant kFourWarps{"kern_attn_prefill_mma_w4", 128, 64, 64, false};          // 4 warps x 16 queries
const Variant kM32{"kern_attn_prefill_mma_m32", 128, 128, 64, true};               // 4 warps x 32 queries
const Variant kM32N32{"kern_attn_prefill_mma_m32n32", 128, 128, 32, true};         // the same, key tiles of 32
const Variant kS2N32{"kern_attn_prefill_mma_s2n32", 256, 128, 32, false, 2};       // the same, key tiles of 32
const Variant kM32N32S2{"kern_attn_prefill_mma_m32n32s2", 128, 128, 32, true, 2};  // m32n32, two stages
const Variant kW4S2{"kern_attn_prefill_mma_w4s2", 128, 64, 64, false, 2};          // 4 warps x 16 queries, two stages
// The two-warpgroup wgmma kernel of session 28 (sm_90a, test-only now): 2 warpgroups x 64 queries, key
// tiles of 64 in two stages; its shared memory (66,560 bytes, swizzled tiles) is within what the formula
// gives.
const Variant kWgmma{"kern_attn_prefill_wgmma", 256, 128, 64, true, 2};
// The warp-specialised wgmma kernel (sm_90a; kern gen's default at head_dim 128): a producer warpgroup
// and two consumer warpgroups, four stages of 64-key K/V tiles (132,096 bytes), the lean softmax.
constexpr int kWsShared = 4 * 32768 + 1024;
const Variant kWgmmaWs{"kern_attn_prefill_wgmma_ws", 384, 128, 64, true, 4, kWsShared};
// Its long-call form (kern gen from --prefill-long-rows rows): three consumer warpgroups (192 queries per
// block, Q in shared memory), four stages of 64 keys; the same bits.
const Variant kWgmmaWs3{"kern_attn_prefill_wgmma_ws3", 512, 192, 64, true, 4, 4 * 32768 + 3 * 16384 + 1024};
// Its test-only variants: with the two-warpgroup kernel's softmax (that kernel's bits), and with
// tiles of 128 keys in three stages (its own bits: the online softmax moves per 128 keys).
const Variant kWgmmaWsOld{"kern_attn_prefill_wgmma_wsold", 384, 128, 64, true, 4, kWsShared};
const Variant kWgmmaWs128{"kern_attn_prefill_wgmma_ws128", 384, 128, 128, true, 3, 3 * 65536 + 1024};

void prepare(Fatbin& fb, const Variant& v, const AttnGeometry& g) {
  if (v.dynamic()) fb.set_dynamic_shared(v.entry(g), v.shared(g));
}

struct Chunk {
  int prefix, rows;  // rows at positions prefix .. prefix + rows - 1
};

// One call's inputs: sequences of chunks, then extra_rows rows that belong to no sequence.
struct Problem {
  AttnGeometry g;
  std::vector<Chunk> chunks;
  std::vector<int> lens;  // seq_lens
  std::vector<int32_t> cu = {0};
  std::vector<int64_t> pos;
  std::vector<int> row_seq;  // -1: outside every sequence
  int rows = 0;
  std::unique_ptr<PagedKv> kv;
  std::vector<bf16_bits> qkv;
  float scale;

  Problem(const AttnGeometry& geo, std::vector<Chunk> c, uint64_t seed, int extra_rows = 0)
      : g(geo), chunks(std::move(c)) {
    std::mt19937_64 rng(seed);
    for (size_t s = 0; s < chunks.size(); ++s) {
      lens.push_back(chunks[s].prefix + chunks[s].rows);
      cu.push_back(cu.back() + chunks[s].rows);
      for (int i = 0; i < chunks[s].rows; ++i) {
        pos.push_back(chunks[s].prefix + i);
        row_seq.push_back(static_cast<int>(s));
      }
    }
    for (int i = 0; i < extra_rows; ++i) {
      pos.push_back(i);
      row_seq.push_back(-1);
    }
    rows = static_cast<int>(pos.size());
    kv = std::make_unique<PagedKv>(rng, g, lens, 3, 1);
    qkv = random_bf16(rng, static_cast<size_t>(rows) * g.q_stride(), -1.0f, 1.0f);
    scale = 1.0f / std::sqrt(static_cast<float>(g.head_dim));
  }

  std::vector<double> reference() const {
    const int n = g.out_width();
    std::vector<double> ref(static_cast<size_t>(rows) * n, 0.0);
    parallel_for(rows, [&](int r) {
      if (row_seq[r] >= 0)
        reference_attention_row(*kv, row_seq[r], qkv.data() + static_cast<size_t>(r) * g.q_stride(),
                                static_cast<int>(pos[r]) + 1, scale, ref.data() + static_cast<size_t>(r) * n);
    });
    return ref;
  }
};

// Device copies of a problem, and the launch over rows [r0, r1) as one call of its own (the row
// slice's qkv/positions/out pointers, one sequence per chunk overlapping the slice).
struct DeviceProblem {
  const Problem& p;
  Device<bf16_bits> qkv, cache, out;
  Device<int32_t> table;
  Device<int64_t> pos;

  explicit DeviceProblem(const Problem& pr)
      : p(pr),
        qkv(pr.qkv),
        cache(pr.kv->data),
        out(static_cast<size_t>(pr.rows) * pr.g.out_width()),
        table(pr.kv->table),
        pos(pr.pos) {}

  // The whole problem in one call (rows_per_block 0: the variant's default).
  void run(Fatbin& fb, const Variant& v, int rows_per_block = 0, int first_row = 0) {
    std::vector<int32_t> lens(p.lens.begin(), p.lens.end());
    call(fb, v, 0, p.rows, p.cu, lens, rows_per_block > 0 ? rows_per_block : v.rows_per_block(p.g), first_row);
  }

  // Rows [r0, r1) of sequence 0 (no extra rows) as their own call: seq_len = end of the slice
  // (what the serving path passes for a chunk), the cache already holding later keys too.
  void run_slice(Fatbin& fb, const Variant& v, int r0, int r1) {
    call(fb, v, r0, r1, {0, r1 - r0}, {static_cast<int32_t>(p.pos[r1 - 1] + 1)}, v.rows_per_block(p.g));
  }

  void call(Fatbin& fb, const Variant& v, int r0, int r1, const std::vector<int32_t>& cu,
            const std::vector<int32_t>& lens, int rows_per_block, int first_row = 0) {
    const AttnGeometry& g = p.g;
    const int rows = r1 - r0, seqs = static_cast<int>(lens.size());
    Device<int32_t> d_cu(cu), d_lens(lens);
    fb.launch(v.entry(g), dim3((rows + rows_per_block - 1) / rows_per_block, g.kv_heads), dim3(v.threads),
              qkv.get() + static_cast<int64_t>(r0) * g.q_stride(), g.q_stride(), cache.get() + p.kv->layer_off,
              table.get(), p.kv->max_pages, d_lens.get(), d_cu.get(), pos.get() + r0,
              out.get() + static_cast<int64_t>(r0) * g.out_width(), rows, seqs, g.heads, g.kv_heads, g.page_size,
              p.kv->page_stride, p.scale, rows_per_block, first_row);
  }
};

// Runs the problem in one call and checks it against the float64 reference: every sequence (and
// its first and last row) within 1e-2 relative Frobenius error, rows outside every sequence zero.
// Returns the output for further bitwise comparisons.
std::vector<bf16_bits> check(const Problem& p, int rows_per_block = 0, const Variant& v = kProduction) {
  const AttnGeometry& g = p.g;
  Fatbin fb("attention_prefill");
  prepare(fb, v, g);
  DeviceProblem d(p);
  d.run(fb, v, rows_per_block);
  const auto out = d.out.download();
  EXPECT_EQ(count_nan(out), 0u);
  const auto ref = p.reference();
  const size_t n = g.out_width();
  size_t outside = 0, nonzero = 0;
  for (int r = 0; r < p.rows; ++r) {
    if (p.row_seq[r] >= 0) continue;
    ++outside;
    for (size_t i = 0; i < n; ++i) nonzero += out[r * n + i] != 0 ? 1 : 0;
  }
  EXPECT_EQ(nonzero, 0u) << "values not zero in the " << outside << " rows outside every sequence";
  auto err_of = [&](size_t b, size_t e) {
    std::vector<double> o, rr;
    for (size_t i = b; i < e; ++i) {
      o.push_back(bf16_to_float(out[i]));
      rr.push_back(ref[i]);
    }
    return rel_frobenius(o, rr);
  };
  for (size_t s = 0; s < p.chunks.size(); ++s) {
    if (p.chunks[s].rows == 0) continue;
    const double err = err_of(p.cu[s] * n, p.cu[s + 1] * n);
    report(v.name + " rel err " + geometry_tag(g) + " prefix " + std::to_string(p.chunks[s].prefix) + " rows " +
               std::to_string(p.chunks[s].rows),
           err);
    EXPECT_LT(err, 1e-2) << "sequence " << s;
    for (int r : {p.cu[s], p.cu[s + 1] - 1}) EXPECT_LT(err_of(r * n, (r + 1) * n), 1e-2) << "row " << r;
  }
  return out;
}

TEST(AttentionPrefillMmaGpu, Qwen3FirstChunkOddLength) { check(Problem({32, 8, 128, 16}, {{0, 77}}, 201)); }
TEST(AttentionPrefillMmaGpu, Gqa1HeadDim64) { check(Problem({16, 16, 64, 16}, {{5, 131}}, 202)); }
TEST(AttentionPrefillMmaGpu, Gqa2PagePlusOne) { check(Problem({16, 8, 128, 16}, {{17, 16}}, 203)); }
TEST(AttentionPrefillMmaGpu, Gqa4HeadDim64Page32) { check(Problem({16, 4, 64, 32}, {{31, 65}}, 204)); }
TEST(AttentionPrefillMmaGpu, Gqa8PrefixLongerThanChunk) { check(Problem({64, 8, 128, 16}, {{1000, 100}}, 205)); }
TEST(AttentionPrefillMmaGpu, Gqa16HeadDim128Page8) { check(Problem({32, 2, 128, 8}, {{63, 41}}, 206)); }
TEST(AttentionPrefillMmaGpu, SingleRowAtPageEnd) { check(Problem({32, 8, 128, 16}, {{15, 1}}, 207)); }
TEST(AttentionPrefillMmaGpu, TwoSequencesOneCall) { check(Problem({32, 8, 128, 16}, {{0, 20}, {31, 37}}, 208)); }
TEST(AttentionPrefillMmaGpu, EmptySequenceAndRowsOutside) {
  check(Problem({32, 8, 128, 16}, {{3, 7}, {9, 0}, {16, 45}}, 209, 5));
}
TEST(AttentionPrefillMmaGpu, BlocksSpanSequences) {
  check(Problem({32, 8, 128, 16}, {{3, 7}, {0, 5}, {16, 11}, {64, 33}}, 210, 4), 13);
}
TEST(AttentionPrefillMmaGpu, OneRowPerBlock) { check(Problem({32, 8, 128, 16}, {{0, 20}, {31, 37}}, 211), 1); }
// kern gen allows only power-of-two pages (the kernel then shifts); any other size divides.
TEST(AttentionPrefillMmaGpu, PageSizeNotAPowerOfTwo) { check(Problem({32, 8, 128, 12}, {{30, 50}}, 214)); }
TEST(AttentionPrefillMmaGpu, Long4kKeys) { check(Problem({32, 8, 128, 16}, {{4000, 96}}, 212)); }
TEST(AttentionPrefillMmaGpu, FirstChunkOfManyTiles) { check(Problem({32, 8, 128, 16}, {{0, 1100}}, 213)); }

// A mixed step's layout (kern serve): one-row sequences first (decode rows, which the decode kernel
// takes), then chunks; with first_row = the chunk rows' start the kernel leaves the rows below alone
// (still poisoned) and gives the chunk rows bitwise what a call without the one-row sequences gives.
TEST(AttentionPrefillMmaGpu, FirstRowLeavesDecodeRowsAlone) {
  const AttnGeometry g{32, 8, 128, 16};
  const int decode_rows = 37;
  std::vector<Chunk> chunks;
  for (int i = 0; i < decode_rows; ++i) chunks.push_back({100 + 13 * i, 1});
  chunks.push_back({64, 200});
  chunks.push_back({0, 75});
  const Problem p(g, chunks, 231);
  Fatbin fb("attention_prefill");
  prepare(fb, kProduction, g);
  DeviceProblem d(p);
  d.run(fb, kProduction, 0, decode_rows);
  const auto mixed = d.out.download();
  d.out.poison();
  d.run(fb, kProduction, 0, 0);
  const auto whole = d.out.download();
  const size_t n = g.out_width();
  ASSERT_EQ(count_nan(whole), 0u);
  EXPECT_EQ(count_nan(std::vector<bf16_bits>(mixed.begin(), mixed.begin() + decode_rows * n)), decode_rows * n)
      << "rows below first_row were written";
  EXPECT_EQ(std::memcmp(mixed.data() + decode_rows * n, whole.data() + decode_rows * n,
                        (p.rows - decode_rows) * n * sizeof(bf16_bits)),
            0)
      << "the chunk rows differ from the call that computed every row";
  // ... and they are attention: the last chunk's last row against the float64 reference.
  std::vector<double> ref(n), got(n);
  reference_attention_row(*p.kv, decode_rows + 1, p.qkv.data() + static_cast<size_t>(p.rows - 1) * g.q_stride(), 75,
                          p.scale, ref.data());
  for (size_t i = 0; i < n; ++i) got[i] = bf16_to_float(mixed[(p.rows - 1) * n + i]);
  EXPECT_LT(rel_frobenius(got, ref), 1e-2);
}

// Row invariance: rows 0..n-1 of one sequence give bitwise the same output in one call, in n calls
// of one row, in calls of 7 rows, and with other block widths.
void check_row_invariance(const AttnGeometry& g, int n, uint64_t seed, const Variant& v = kProduction) {
  const Problem p(g, {{0, n}}, seed);
  Fatbin fb("attention_prefill");
  prepare(fb, v, g);
  DeviceProblem d(p);
  d.run(fb, v);
  const auto whole = d.out.download();
  ASSERT_EQ(count_nan(whole), 0u);
  const size_t bytes = whole.size() * sizeof(bf16_bits);

  d.out.poison();
  for (int r = 0; r < n; ++r) d.run_slice(fb, v, r, r + 1);
  const auto single = d.out.download();
  EXPECT_EQ(std::memcmp(whole.data(), single.data(), bytes), 0) << geometry_tag(g) << ": one row per call differs";

  d.out.poison();
  for (int r = 0; r < n; r += 7) d.run_slice(fb, v, r, std::min(n, r + 7));
  const auto sevens = d.out.download();
  EXPECT_EQ(std::memcmp(whole.data(), sevens.data(), bytes), 0) << geometry_tag(g) << ": 7-row calls differ";

  for (int per_block : {1, 3, v.rows_per_block(g) + 5}) {
    d.out.poison();
    d.run(fb, v, per_block);
    const auto other = d.out.download();
    EXPECT_EQ(std::memcmp(whole.data(), other.data(), bytes), 0) << geometry_tag(g) << ": rows_per_block " << per_block;
  }
  // The outputs compared are real attention outputs, not a constant.
  std::vector<double> ref(static_cast<size_t>(g.out_width()));
  reference_attention_row(*p.kv, 0, p.qkv.data() + static_cast<size_t>(n - 1) * g.q_stride(), n, p.scale, ref.data());
  std::vector<double> last(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) last[i] = bf16_to_float(whole[(n - 1) * ref.size() + i]);
  EXPECT_LT(rel_frobenius(last, ref), 1e-2);
}

TEST(AttentionPrefillMmaGpu, RowInvarianceQwen3) { check_row_invariance({32, 8, 128, 16}, 511, 221); }
TEST(AttentionPrefillMmaGpu, RowInvarianceGqa1HeadDim64) { check_row_invariance({8, 8, 64, 16}, 300, 222); }
TEST(AttentionPrefillMmaGpu, RowInvarianceGqa8) { check_row_invariance({64, 8, 128, 16}, 200, 223); }

// The tuning variants (hd 128 only) meet the same bar, so either can replace the production entry.
TEST(AttentionPrefillMmaGpu, VariantFourWarps) {
  check(Problem({32, 8, 128, 16}, {{3, 7}, {0, 5}, {1000, 150}}, 251, 4), 0, kFourWarps);
  check_row_invariance({32, 8, 128, 16}, 200, 252, kFourWarps);
}
TEST(AttentionPrefillMmaGpu, VariantM32) {
  check(Problem({32, 8, 128, 16}, {{3, 7}, {0, 5}, {1000, 150}}, 253, 4), 0, kM32);
  check(Problem({16, 16, 128, 16}, {{31, 100}}, 254), 0, kM32);
  check(Problem({64, 8, 128, 16}, {{0, 77}}, 255), 0, kM32);
  check_row_invariance({32, 8, 128, 16}, 511, 256, kM32);
}
TEST(AttentionPrefillMmaGpu, VariantsTwoStages) {
  for (const Variant* v : {&kOneStage, &kS2N32, &kM32N32S2, &kW4S2}) {
    check(Problem({32, 8, 128, 16}, {{3, 7}, {0, 5}, {1000, 150}}, 261, 4), 0, *v);
    check(Problem({64, 8, 128, 16}, {{33, 77}}, 262), 0, *v);
    check_row_invariance({32, 8, 128, 16}, 300, 263, *v);
  }
}
TEST(AttentionPrefillMmaGpu, VariantM32N32) {
  check(Problem({32, 8, 128, 16}, {{3, 7}, {0, 5}, {1000, 150}}, 257, 4), 0, kM32N32);
  check(Problem({64, 8, 128, 16}, {{33, 77}}, 258), 0, kM32N32);
  check_row_invariance({32, 8, 128, 16}, 511, 259, kM32N32);
}

TEST(AttentionPrefillMmaGpu, VariantsWgmma) {
  for (const Variant* v : {&kWgmmaWs, &kWgmma, &kWgmmaWsOld, &kWgmmaWs128, &kWgmmaWs3}) {
    SCOPED_TRACE(v->name);
    check(Problem({32, 8, 128, 16}, {{0, 77}}, 271), 0, *v);
    check(Problem({32, 8, 128, 16}, {{3, 7}, {0, 5}, {1000, 150}}, 272, 4), 0, *v);
    check(Problem({64, 8, 128, 16}, {{33, 77}}, 273), 0, *v);
    check(Problem({16, 16, 128, 16}, {{31, 100}}, 274), 0, *v);
    check(Problem({32, 2, 128, 8}, {{63, 41}}, 275), 0, *v);
    check(Problem({32, 8, 128, 12}, {{30, 50}}, 276), 0, *v);
    check(Problem({32, 8, 128, 16}, {{4000, 96}}, 277), 0, *v);
    check(Problem({32, 8, 128, 16}, {{0, 1100}}, 278), 0, *v);
    check(Problem({32, 8, 128, 16}, {{0, 20}, {31, 37}}, 279), 1, *v);
    check_row_invariance({32, 8, 128, 16}, 511, 280, *v);
    check_row_invariance({64, 8, 128, 16}, 200, 281, *v);
  }
  // wsold changes who copies the tiles and how the warpgroups meet, not the arithmetic: the
  // two-warpgroup kernel's bits.
  const Problem p({32, 8, 128, 16}, {{100, 300}, {0, 50}, {2000, 129}}, 282, 3);
  EXPECT_EQ(check(p, 0, kWgmmaWsOld), check(p, 0, kWgmma));
  // ws3 computes each query as ws does (Q·Kᵀ with Q from shared memory instead of registers): the same
  // bits, so kern gen's switch between them at --prefill-long-rows changes no row.
  EXPECT_EQ(check(p, 0, kWgmmaWs3), check(p, 0, kWgmmaWs));
}

// The warp-specialised kernels' barriers under load: a long first chunk, a prefix and a block that
// spans two sequences (the ring's count runs on across segments and wraps many times), each run three
// times: wsold bitwise the two-warpgroup kernel, the others their own first run (no host reference:
// VariantsWgmma checks them against float64).
TEST(AttentionPrefillMmaGpu, WarpSpecialisedBitwiseUnderLoad) {
  const Problem p({32, 8, 128, 16}, {{0, 1500}, {3000, 37}, {0, 90}, {700, 300}}, 291, 5);
  DeviceProblem d(p);
  Fatbin fb("attention_prefill");
  auto run = [&](const Variant& v) {
    prepare(fb, v, p.g);
    d.out.poison();
    d.run(fb, v);
    return d.out.download();
  };
  auto expect_runs = [&](const std::vector<bf16_bits>& bits, std::initializer_list<const Variant*> variants) {
    for (const Variant* v : variants)
      for (int i = 0; i < 3; ++i) {
        const auto got = run(*v);
        ASSERT_EQ(std::memcmp(bits.data(), got.data(), bits.size() * sizeof(bf16_bits)), 0) << v->name << " run " << i;
      }
  };
  expect_runs(run(kWgmma), {&kWgmmaWsOld});
  expect_runs(run(kWgmmaWs), {&kWgmmaWs, &kWgmmaWs3});
  expect_runs(run(kWgmmaWs128), {&kWgmmaWs128});
}

TEST(AttentionPrefillMmaGpu, Repeatable) {
  const Problem p({32, 8, 128, 16}, {{100, 300}, {0, 50}}, 231);
  Fatbin fb("attention_prefill");
  prepare(fb, kProduction, p.g);
  DeviceProblem d(p);
  d.run(fb, kProduction);
  const auto a = d.out.download();
  for (int i = 0; i < 3; ++i) {
    d.out.poison();
    d.run(fb, kProduction);
    const auto b = d.out.download();
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(bf16_bits)), 0) << "run " << i;
  }
}

// One prefill chunk at the Qwen3-4B shape (H 32, KV 8, hd 128, page 16) on one sequence: `rows` new
// rows after `prefix` cached keys, the pages shuffled, random K/V/Q; flops counts the causal work.
struct PerfCase {
  static constexpr AttnGeometry g{32, 8, 128, 16};
  int prefix, rows, len, max_pages;
  int64_t page_stride;
  std::mt19937_64 rng;
  Device<bf16_bits> cache;
  Device<int32_t> table, lens, cu;
  Device<bf16_bits> qkv, out;
  Device<int64_t> pos;
  float scale;
  double flops = 0.0;  // 2 (q·k) + 2 (p·v) per key, head dim and q head

  PerfCase(int prefix_, int rows_)
      : prefix(prefix_),
        rows(rows_),
        len(prefix_ + rows_),
        max_pages((len + g.page_size - 1) / g.page_size),
        page_stride(2LL * g.page_size * g.kv_heads * g.head_dim),  // one layer
        rng(241),
        cache(random_bf16(rng, static_cast<size_t>(max_pages) * page_stride, -1.f, 1.f)),
        table(shuffled_pages(rng, max_pages)),
        lens(std::vector<int32_t>{len}),
        cu(std::vector<int32_t>{0, rows}),
        qkv(random_bf16(rng, static_cast<size_t>(rows) * g.q_stride(), -1.f, 1.f)),
        out(static_cast<size_t>(rows) * g.out_width()),
        pos(positions(prefix_, rows_)),
        scale(1.0f / std::sqrt(static_cast<float>(g.head_dim))) {
    for (int r = 0; r < rows; ++r) flops += 4.0 * g.head_dim * g.heads * (prefix + r + 1);
  }
  static std::vector<int32_t> shuffled_pages(std::mt19937_64& rng, int n) {
    std::vector<int32_t> t(n);
    std::iota(t.begin(), t.end(), 0);
    std::shuffle(t.begin(), t.end(), rng);
    return t;
  }
  static std::vector<int64_t> positions(int prefix, int rows) {
    std::vector<int64_t> p(rows);
    std::iota(p.begin(), p.end(), prefix);
    return p;
  }
  // Median µs of n launches of `name` (per_block rows per block).
  double time(Fatbin& f, const std::string& name, int threads, int per_block, int n) {
    return f.time_us(name, n, dim3((rows + per_block - 1) / per_block, g.kv_heads), dim3(threads), qkv.get(),
                     g.q_stride(), cache.get(), table.get(), max_pages, lens.get(), cu.get(), pos.get(), out.get(),
                     rows, 1, g.heads, g.kv_heads, g.page_size, page_stride, scale, per_block, 0);
  }
};

const std::vector<const Variant*> kPerfVariants = {&kProduction, &kWgmmaWs,   &kWgmmaWs128, &kWgmmaWs3, &kWgmma,
                                                   &kWgmmaWsOld, &kFourWarps, &kM32,        &kM32N32,   &kOneStage,
                                                   &kS2N32,      &kM32N32S2,  &kW4S2};

// Timings at the Qwen3-4B shape next to the FMA kernel of attention.cu.
TEST(PerfGpu, PrefillMma) {
  constexpr int kLayers = 36;
  Fatbin fb("attention_prefill"), old("attention");
  for (auto [prefix, rows] : {std::pair{0, 512}, std::pair{0, 2048}, std::pair{0, 8192}, std::pair{7680, 512}}) {
    PerfCase c(prefix, rows);
    const std::string what = "prefill attn rows " + std::to_string(rows) + " prefix " + std::to_string(prefix);
    const int iters = rows >= 8192 ? 5 : 20;
    for (const Variant* v : kPerfVariants) {
      prepare(fb, *v, c.g);
      const double us = c.time(fb, v->entry(c.g), v->threads, v->rows_per_block(c.g), iters);
      const std::string name = what + " " + v->name;
      report(name + " ms/layer", us / 1e3);
      report(name + " TFLOP/s", c.flops / (us * 1e6));
      report(name + " ms for 36 layers", us * kLayers / 1e3);
    }
    if (rows <= 2048) {  // the FMA kernel grows too slow past that
      const double fma = c.time(old, "kern_attn_prefill_hd128", c.g.head_dim, 16 / c.g.group(), 2);
      report(what + " fma (attention.cu) ms/layer", fma / 1e3);
      report(what + " fma TFLOP/s", c.flops / (fma * 1e6));
    }
  }
}

// For Nsight Compute: each wgmma variant on the 8,192-row chunk, 3 warm-up launches and 2 timed (profile
// one: ncu -k regex:<entry>$ --launch-skip 3 -c 1).
TEST(PerfGpu, PrefillWgmma8k) {
  Fatbin fb("attention_prefill");
  PerfCase c(0, 8192);
  for (const Variant* v : kPerfVariants) {
    if (v->name.find("wgmma") == std::string::npos) continue;
    prepare(fb, *v, c.g);
    report(v->name + " TFLOP/s", c.flops / (c.time(fb, v->entry(c.g), v->threads, v->rows_per_block(c.g), 2) * 1e6));
  }
}

}  // namespace
}  // namespace kern_gpu_test
