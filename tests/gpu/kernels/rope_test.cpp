// GPU checks of kernels/rope.cu: the RoPE table and the fused q/k RMSNorm + NeoX RoPE + paged
// KV write, against float64 host references.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "harness.hpp"
#include "paged_kv.hpp"

namespace kern_gpu_test {
namespace {

// The documented table convention (HF transformers'): f32 frequency and f32 angle, cos/sin in f64.
std::vector<float> rope_table_host(int max_pos, int head_dim, float theta) {
  const int half = head_dim / 2;
  std::vector<float> t(static_cast<size_t>(max_pos) * head_dim);
  for (int p = 0; p < max_pos; ++p)
    for (int i = 0; i < half; ++i) {
      const float expo = static_cast<float>(2 * i) / static_cast<float>(head_dim);
      const float inv = static_cast<float>(1.0 / std::pow(static_cast<double>(theta), static_cast<double>(expo)));
      volatile float angle = static_cast<float>(p) * inv;
      t[static_cast<size_t>(p) * head_dim + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      t[static_cast<size_t>(p) * head_dim + half + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  return t;
}

void check_table(int max_pos, int head_dim, float theta) {
  Fatbin fb("rope");
  Device<float> d_table(static_cast<size_t>(max_pos) * head_dim);
  const int half = head_dim / 2;
  const int blocks = static_cast<int>((static_cast<int64_t>(max_pos) * half + 255) / 256);
  fb.launch("kern_rope_table_f32", dim3(blocks), dim3(256), d_table.get(), max_pos, head_dim, theta);
  const auto got = d_table.download();
  const auto want = rope_table_host(max_pos, head_dim, theta);
  double max_diff = 0.0;
  std::vector<double> g(got.size()), exact(got.size());
  for (size_t e = 0; e < got.size(); ++e) {
    ASSERT_FALSE(std::isnan(got[e])) << "element " << e << " unwritten";
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[e]) - want[e]));
    g[e] = got[e];
  }
  report("rope table max |diff| vs host convention", max_diff);
  EXPECT_LT(max_diff, 1e-6);
  // Against pure float64 angles: only the f32 angle rounding of the convention differs.
  for (int p = 0; p < max_pos; ++p)
    for (int i = 0; i < half; ++i) {
      const double a = p / std::pow(static_cast<double>(theta), 2.0 * i / head_dim);
      exact[static_cast<size_t>(p) * head_dim + i] = std::cos(a);
      exact[static_cast<size_t>(p) * head_dim + half + i] = std::sin(a);
    }
  EXPECT_LT(rel_frobenius(g, exact), 2e-3);
}

TEST(RopeTableGpu, Qwen3) { check_table(40960, 128, 1000000.0f); }
TEST(RopeTableGpu, SmallTheta) { check_table(777, 64, 10000.0f); }

struct QkCase {
  int rows, heads, kv_heads, head_dim, page_size, pages, layers, layer;
  uint64_t seed;
  int grid_x = 0;  // blocks along rows (0: one per row); block x takes ceil(rows / grid_x) rows
};

// Checks one launch against float64; returns qkv and the cache after it.
std::pair<std::vector<bf16_bits>, std::vector<bf16_bits>> check_qk_norm_rope_cache(const QkCase& c) {
  std::mt19937_64 rng(c.seed);
  const int hd = c.head_dim, half = hd / 2, total = c.heads + 2 * c.kv_heads, max_pos = 4099;
  const float eps = 1e-6f;
  const auto table = rope_table_host(max_pos, hd, 1000000.0f);
  const auto qkv = random_bf16(rng, static_cast<size_t>(c.rows) * total * hd, -2.0f, 2.0f);
  const auto qw = random_bf16(rng, hd, 0.5f, 1.5f), kw = random_bf16(rng, hd, 0.5f, 1.5f);
  std::vector<int64_t> slots(static_cast<size_t>(c.pages) * c.page_size);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(c.rows);
  if (c.rows > 5) slots[5] = -1;  // skipped row
  std::vector<int64_t> pos(c.rows);
  std::uniform_int_distribution<int64_t> pick(0, max_pos - 1);
  for (auto& p : pos) p = pick(rng);
  pos[0] = 0;
  if (c.rows > 1) pos[1] = max_pos - 1;

  const int64_t block = static_cast<int64_t>(c.page_size) * c.kv_heads * hd;  // one K or V block of a page
  const int64_t page_stride = static_cast<int64_t>(c.layers) * 2 * block;
  const int64_t layer_off = static_cast<int64_t>(c.layer) * 2 * block;
  Fatbin fb("rope");
  Device<bf16_bits> d_qkv(qkv), d_qw(qw), d_kw(kw), d_cache(static_cast<size_t>(c.pages) * page_stride);
  Device<float> d_table(table);
  Device<int64_t> d_pos(pos), d_slots(slots);
  fb.launch("kern_qk_norm_rope_cache_bf16", dim3(c.grid_x > 0 ? c.grid_x : c.rows, (total + 3) / 4), dim3(128),
            d_qkv.get(), d_qw.get(), d_kw.get(), d_table.get(), d_pos.get(), d_slots.get(), d_cache.get() + layer_off,
            c.rows, c.heads, c.kv_heads, hd, c.page_size, page_stride, max_pos, eps);
  const auto out = d_qkv.download();
  const auto cache = d_cache.download();
  EXPECT_EQ(count_nan(out), 0u);

  // q and k heads: float64 RMSNorm then rotation (with the table's cos/sin).
  std::vector<double> got, ref;
  for (int r = 0; r < c.rows; ++r)
    for (int h = 0; h < c.heads + c.kv_heads; ++h) {
      const size_t base = (static_cast<size_t>(r) * total + h) * hd;
      const auto& w = h < c.heads ? qw : kw;
      double ss = 0.0;
      for (int d = 0; d < hd; ++d) ss += std::pow(static_cast<double>(bf16_to_float(qkv[base + d])), 2);
      const double rstd = 1.0 / std::sqrt(ss / hd + eps);
      for (int i = 0; i < half; ++i) {
        const double n1 = bf16_to_float(qkv[base + i]) * rstd * bf16_to_float(w[i]);
        const double n2 = bf16_to_float(qkv[base + half + i]) * rstd * bf16_to_float(w[half + i]);
        const double cs = table[pos[r] * hd + i], sn = table[pos[r] * hd + half + i];
        ref.push_back(n1 * cs - n2 * sn);
        ref.push_back(n2 * cs + n1 * sn);
        got.push_back(bf16_to_float(out[base + i]));
        got.push_back(bf16_to_float(out[base + half + i]));
      }
    }
  const double err = rel_frobenius(got, ref);
  report("qk_norm_rope rel err rows " + std::to_string(c.rows) + " heads " + std::to_string(c.heads), err);
  EXPECT_LT(err, 1e-2);

  // v heads untouched in qkv; the cache holds exactly k (as rotated) and v at each slot, and
  // nothing else in the cache was written.
  std::vector<bf16_bits> want_cache(cache.size(), 0xFFFF);
  for (int r = 0; r < c.rows; ++r) {
    for (int h = c.heads + c.kv_heads; h < total; ++h)
      for (int d = 0; d < hd; ++d) {
        const size_t e = (static_cast<size_t>(r) * total + h) * hd + d;
        EXPECT_EQ(out[e], qkv[e]) << "v head modified";
      }
    if (slots[r] < 0) continue;
    const int64_t page = slots[r] / c.page_size, row = slots[r] % c.page_size;
    for (int kvh = 0; kvh < c.kv_heads; ++kvh)
      for (int d = 0; d < hd; ++d) {
        const int64_t at = page * page_stride + layer_off + (row * c.kv_heads + kvh) * hd + d;
        want_cache[at] = out[(static_cast<size_t>(r) * total + c.heads + kvh) * hd + d];
        want_cache[at + block] = qkv[(static_cast<size_t>(r) * total + c.heads + c.kv_heads + kvh) * hd + d];
      }
  }
  size_t mismatches = 0;
  for (size_t e = 0; e < cache.size(); ++e) mismatches += cache[e] != want_cache[e] ? 1 : 0;
  EXPECT_EQ(mismatches, 0u);
  return {out, cache};
}

TEST(QkNormRopeCacheGpu, Gqa4) { check_qk_norm_rope_cache({19, 32, 8, 128, 16, 8, 3, 1, 61}); }
TEST(QkNormRopeCacheGpu, Gqa2) { check_qk_norm_rope_cache({33, 16, 8, 128, 16, 4, 2, 0, 62}); }
TEST(QkNormRopeCacheGpu, Gqa5LastLayer) { check_qk_norm_rope_cache({7, 40, 8, 128, 32, 2, 4, 3, 63}); }
TEST(QkNormRopeCacheGpu, HeadDim64) { check_qk_norm_rope_cache({11, 8, 4, 64, 16, 3, 1, 0, 64}); }
// Several rows per block (kern gen's prefill uses 16; the kernel stages up to 16 rows at once, fewer past
// head_dim 128): every grid gives the same bits as one block per row, including a last block with fewer
// rows and a last head group of fewer than 4 heads (5 + 2 heads).
TEST(QkNormRopeCacheGpu, RowsPerBlockDoNotChangeTheResult) {
  for (const QkCase base : {QkCase{37, 32, 8, 128, 16, 8, 3, 1, 66}, QkCase{21, 8, 4, 64, 16, 3, 1, 0, 67},
                            QkCase{19, 8, 2, 256, 16, 2, 1, 0, 68}, QkCase{45, 5, 1, 128, 16, 3, 1, 0, 69},
                            QkCase{13, 8, 2, 128, 12, 3, 1, 0, 70}}) {  // the last: pages of 12 (division)
    const auto one = check_qk_norm_rope_cache(base);
    for (int grid_x : {(base.rows + 15) / 16, (base.rows + 3) / 4, (base.rows + 2) / 3, (base.rows + 6) / 7, 1}) {
      QkCase c = base;
      c.grid_x = grid_x;
      const auto got = check_qk_norm_rope_cache(c);
      EXPECT_TRUE(got.first == one.first) << "qkv, rows " << c.rows << " grid " << grid_x;
      EXPECT_TRUE(got.second == one.second) << "cache, rows " << c.rows << " grid " << grid_x;
    }
  }
}

TEST(QkNormRopeCacheGpu, SingleRow) { check_qk_norm_rope_cache({1, 64, 8, 128, 16, 1, 2, 1, 65}); }

// Timing (printed, never asserted): the q/k norm + RoPE + cache kernel over a Qwen3-4B prefill of 8192
// rows, grid as kern gen (ceil(rows/16) row blocks) and one row per block, and the bytes it moves
// (q and k heads read and written, v read, k and v written to the cache) per second.
TEST(PerfGpu, QkNormRopeCachePrefill) {
  const int rows = 8192, heads = 32, kv = 8, hd = 128, page = 16, total = heads + 2 * kv, max_pos = rows;
  const int64_t block = static_cast<int64_t>(page) * kv * hd, page_stride = 2 * block;
  Fatbin fb("rope");
  Device<bf16_bits> qkv(fast_random_bf16(301, static_cast<size_t>(rows) * total * hd));
  std::mt19937_64 rng(302);
  const auto w = random_bf16(rng, hd, 0.5f, 1.5f);
  Device<bf16_bits> qw(w), kw(w), cache(static_cast<size_t>(rows / page) * page_stride);
  Device<float> table(rope_table_host(max_pos, hd, 1000000.0f));
  std::vector<int64_t> pos(rows);
  std::iota(pos.begin(), pos.end(), 0);
  Device<int64_t> d_pos(pos), d_slots(pos);
  const double bytes = static_cast<double>(rows) * hd * 2 * (2.0 * (heads + kv) + kv + 2.0 * kv);
  for (int per_block : {16, 1}) {
    const double us =
        fb.time_us("kern_qk_norm_rope_cache_bf16", 20, dim3((rows + per_block - 1) / per_block, total / 4), dim3(128),
                   qkv.get(), qw.get(), kw.get(), table.get(), d_pos.get(), d_slots.get(), cache.get(), rows, heads, kv,
                   hd, page, page_stride, max_pos, 1e-6f);
    const std::string t = "qk_norm_rope 4B prefill 8192 rows, " + std::to_string(per_block) + " rows per block";
    report(t + " us", us);
    report(t + " GB/s", bytes / (us * 1e3));
  }
}
}  // namespace
}  // namespace kern_gpu_test
