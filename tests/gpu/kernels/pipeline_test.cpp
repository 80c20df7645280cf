// The kernels composed the way a Qwen3 layer uses them: q/k norm + RoPE + paged KV write, then
// chunked-prefill attention over two chunks, then one decode step, all through one block table
// with permuted pages. Attention outputs are checked against float64 attention over the keys and
// values the writer produced.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "decode_launch.hpp"
#include "harness.hpp"

namespace kern_gpu_test {
namespace {

TEST(PipelineGpu, ChunkedPrefillThenDecode) {
  std::mt19937_64 rng(91);
  const int H = 32, KV = 8, hd = 128, P = 16, layers = 2, layer = 1, n = 40, max_pos = 64;
  const int width = (H + 2 * KV) * hd, pages = 6, max_pages = 4;
  const float eps = 1e-6f, scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t block = static_cast<int64_t>(P) * KV * hd, page_stride = layers * 2 * block,
                layer_off = layer * 2 * block;

  std::vector<int32_t> perm(pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> table(perm.begin(), perm.begin() + max_pages);  // 40 tokens use 3 pages
  std::vector<int64_t> slots(n), positions(n);
  for (int r = 0; r < n; ++r) {
    positions[r] = r;
    slots[r] = static_cast<int64_t>(table[r / P]) * P + r % P;
  }
  const auto qkv_all = random_bf16(rng, static_cast<size_t>(n) * width, -2.0f, 2.0f);
  const auto qw = random_bf16(rng, hd, 0.5f, 1.5f), kw = random_bf16(rng, hd, 0.5f, 1.5f);

  Fatbin rope("rope"), attn("attention");
  Device<float> d_rope(static_cast<size_t>(max_pos) * hd);
  rope.launch("kern_rope_table_f32", dim3((max_pos * hd / 2 + 255) / 256), dim3(256), d_rope.get(), max_pos, hd,
              1000000.0f);
  Device<bf16_bits> d_cache(static_cast<size_t>(pages) * page_stride), d_qw(qw), d_kw(kw);
  Device<int32_t> d_table(table);

  std::vector<bf16_bits> rotated(qkv_all.size());  // q/k as the writer left them, per row
  std::vector<bf16_bits> attn_out(static_cast<size_t>(n) * H * hd);

  // Runs the q/k writer over rows [r0, r1) and returns the device qkv of that chunk.
  auto write_chunk = [&](int r0, int r1, Device<bf16_bits>& d_qkv, Device<int64_t>& d_pos, Device<int64_t>& d_slots) {
    const int rows = r1 - r0;
    d_qkv.upload(std::vector<bf16_bits>(qkv_all.begin() + static_cast<size_t>(r0) * width,
                                        qkv_all.begin() + static_cast<size_t>(r1) * width));
    d_pos.upload(std::vector<int64_t>(positions.begin() + r0, positions.begin() + r1));
    d_slots.upload(std::vector<int64_t>(slots.begin() + r0, slots.begin() + r1));
    rope.launch("kern_qk_norm_rope_cache_bf16", dim3(rows, (H + 2 * KV + 3) / 4), dim3(128), d_qkv.get(), d_qw.get(),
                d_kw.get(), d_rope.get(), d_pos.get(), d_slots.get(), d_cache.get() + layer_off, rows, H, KV, hd, P,
                page_stride, max_pos, eps);
    const auto out = d_qkv.download();
    std::copy(out.begin(), out.end(), rotated.begin() + static_cast<size_t>(r0) * width);
  };

  for (auto [r0, r1] : {std::pair{0, 33}, std::pair{33, 39}}) {  // two prefill chunks
    const int rows = r1 - r0;
    Device<bf16_bits> d_qkv(static_cast<size_t>(rows) * width), d_out(static_cast<size_t>(rows) * H * hd);
    Device<int64_t> d_pos(rows), d_slots(rows);
    write_chunk(r0, r1, d_qkv, d_pos, d_slots);
    Device<int32_t> d_lens(std::vector<int32_t>{r1}), d_cu(std::vector<int32_t>{0, rows});
    const int per_block = 16 / (H / KV);
    attn.launch("kern_attn_prefill_hd128", dim3((rows + per_block - 1) / per_block, KV), dim3(hd), d_qkv.get(), width,
                d_cache.get() + layer_off, d_table.get(), max_pages, d_lens.get(), d_cu.get(), d_pos.get(), d_out.get(),
                rows, 1, H, KV, P, page_stride, scale, per_block);
    const auto out = d_out.download();
    std::copy(out.begin(), out.end(), attn_out.begin() + static_cast<size_t>(r0) * H * hd);
  }
  {                                  // the last prompt token through decode
    const DecodeSplit split{4, 16};  // 2 ranges per kv head: the reduce runs
    Device<bf16_bits> d_qkv(width), d_out(static_cast<size_t>(H) * hd);
    Device<int64_t> d_pos(1), d_slots(1);
    write_chunk(n - 1, n, d_qkv, d_pos, d_slots);
    Device<int32_t> d_lens(std::vector<int32_t>{n});
    Device<float> d_po(static_cast<size_t>(H) * split.splits_max * hd);
    Device<float> d_pml(static_cast<size_t>(H) * split.splits_max * 2);
    DecodeCall call;
    call.head_dim = hd;
    call.qkv = d_qkv.get();
    call.q_stride = width;
    call.cache = d_cache.get() + layer_off;
    call.block_table = d_table.get();
    call.max_pages = max_pages;
    call.seq_lens = d_lens.get();
    call.part_o = d_po.get();
    call.part_ml = d_pml.get();
    call.out = d_out.get();
    call.seqs = 1;
    call.heads = H;
    call.kv_heads = KV;
    call.page_size = P;
    call.page_stride = page_stride;
    call.split = split;
    call.scale = scale;
    call.run(attn);
    const auto out = d_out.download();
    std::copy(out.begin(), out.end(), attn_out.begin() + static_cast<size_t>(n - 1) * H * hd);
  }
  ASSERT_EQ(count_nan(attn_out), 0u);

  // float64 causal attention over the rotated keys and the values, per row.
  std::vector<double> ref(attn_out.size());
  for (int r = 0; r < n; ++r)
    for (int h = 0; h < H; ++h) {
      const int kvh = h / (H / KV);
      std::vector<double> s(r + 1);
      double m = -INFINITY;
      for (int t = 0; t <= r; ++t) {
        double dot = 0;
        for (int d = 0; d < hd; ++d)
          dot += bf16_to_float(rotated[static_cast<size_t>(r) * width + h * hd + d]) *
                 bf16_to_float(rotated[static_cast<size_t>(t) * width + (H + kvh) * hd + d]);
        s[t] = dot * scale;
        m = std::max(m, s[t]);
      }
      double den = 0;
      for (auto& x : s) den += (x = std::exp(x - m));
      for (int d = 0; d < hd; ++d) {
        double acc = 0;
        for (int t = 0; t <= r; ++t)
          acc += s[t] * bf16_to_float(qkv_all[static_cast<size_t>(t) * width + (H + KV + kvh) * hd + d]);
        ref[(static_cast<size_t>(r) * H + h) * hd + d] = acc / den;
      }
    }
  for (auto [r0, r1, what] :
       {std::tuple{0, 33, "chunk 1"}, std::tuple{33, 39, "chunk 2"}, std::tuple{39, 40, "decode"}}) {
    std::vector<double> o, rr;
    for (size_t i = static_cast<size_t>(r0) * H * hd; i < static_cast<size_t>(r1) * H * hd; ++i) {
      o.push_back(bf16_to_float(attn_out[i]));
      rr.push_back(ref[i]);
    }
    const double err = rel_frobenius(o, rr);
    report(std::string("pipeline rel err ") + what, err);
    EXPECT_LT(err, 1e-2) << what;
  }
}

}  // namespace
}  // namespace kern_gpu_test
