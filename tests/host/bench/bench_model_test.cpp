// kern bench arithmetic: byte counts and FLOPs checked against figures worked out by hand.
#include <gtest/gtest.h>

#include "bench_shapes.hpp"
#include "kern/bench/bench.hpp"
#include "kern/base/error.hpp"

namespace kern::bench {
namespace {

using test::qwen3_4b;
using test::small_shape;

TEST(BenchModel, DecodeWeightBytesOf4BWorkedByHand) {
  // Per layer: q 4096x2560 = 10,485,760; k and v 1024x2560 = 2,621,440 each; o 2560x4096 =
  // 10,485,760; gate, up, down 9728x2560 = 24,903,680 each -> 100,925,440; norms 2560 + 2560 +
  // 128 + 128 = 5,376. 36 layers: 3,633,509,376. Plus final norm 2,560, lm_head 151936x2560 =
  // 388,956,160, one embedding row 2,560: 4,022,470,656 elements, 2 bytes each.
  EXPECT_EQ(decode_weight_bytes(qwen3_4b()), 8'044'941'312ull);
}

TEST(BenchModel, KvBytesOf4B) {
  EXPECT_EQ(kv_bytes_per_token(qwen3_4b()), 147'456u);  // 36 layers x (K, V) x 8 heads x 128 x 2 bytes
  EXPECT_EQ(decode_kv_bytes(qwen3_4b(), 1024), 150'994'944ull);
  EXPECT_EQ(decode_kv_bytes(qwen3_4b(), 32768), 4'831'838'208ull);
}

TEST(BenchModel, SmallShapeByHand) {
  const models::Qwen3Shape s = small_shape();
  // Layer: q 64, k 32, v 32, o 64, gate+up 256, down 128 = 576; norms 20 -> 596 x 2 layers = 1192;
  // + final norm 8 + lm_head 80 + embedding row 8 = 1288 elements.
  EXPECT_EQ(decode_weight_bytes(s), 2576u);
  // kern gen --fp8: the 1152 layer-matrix elements at one byte, the other 136 elements bf16.
  EXPECT_EQ(decode_weight_bytes(s, 1), 1152u + 136u * 2);
  EXPECT_THROW(decode_weight_bytes(s, 0), Error);
  EXPECT_EQ(kv_bytes_per_token(s), 2u * 2 * 2 * 2 * 2);
  // Prefill of 3 tokens: 2 x 3 x 1152 (two layers' matrices) + 4 x 2 x 4 x 2 x 6 (1 + 2 + 3 pairs) + 2 x 80.
  EXPECT_DOUBLE_EQ(prefill_flops(s, 3), 2.0 * 3 * 1152 + 4.0 * 2 * 4 * 2 * 6 + 160);
}

TEST(BenchModel, PrefillFlopsOf4B) {
  const double n = 2048;
  const double expected = 2.0 * n * 3'633'315'840.0 + 4.0 * 36 * 32 * 128 * (n * (n + 1) / 2) + 2.0 * 151936 * 2560;
  EXPECT_DOUBLE_EQ(prefill_flops(qwen3_4b(), 2048), expected);
  EXPECT_GT(prefill_flops(qwen3_4b(), 4096), 2 * prefill_flops(qwen3_4b(), 2048));  // attention grows faster
}

TEST(BenchModel, Median) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({7}), 7);
  EXPECT_THROW(median({}), Error);
}

TEST(BenchModel, CeilingsCountReadAndWrittenBytes) {
  // 2 GiB copied in 1.25 ms: 4 GiB moved -> 3435.97 GB/s. 8192^3 GEMM in 2 ms: 549.76 TFLOP/s.
  const Ceilings c = make_ceilings(2ull << 30, 1.25, 8192, 8192, 8192, 2.0);
  EXPECT_NEAR(c.copy_gbps, 2.0 * 2147483648.0 / 1.25e-3 / 1e9, 1e-9);
  EXPECT_NEAR(c.copy_gbps, 3435.97, 0.01);
  EXPECT_NEAR(c.gemm_tflops, 549.755813888, 1e-6);
  EXPECT_THROW(make_ceilings(0, 1, 1, 1, 1, 1), Error);
  EXPECT_THROW(make_ceilings(1, 1, 1, 1, 1, 0), Error);
}

TEST(BenchModel, DecodePointFloorAndRatio) {
  const models::Qwen3Shape s = qwen3_4b();
  // Bytes at 1024: 8,044,941,312 + 150,994,944 = 8,195,936,256; at 4000 GB/s the floor is
  // 2048.984064 us; a 2500 us median step is 1.2201 x the floor.
  const DecodePoint p = make_decode_point(s, 1024, {2.6, 2.5, 2.4}, {2.53, 2.52, 2.9}, 4000);
  EXPECT_EQ(p.bytes, 8'195'936'256ull);
  EXPECT_NEAR(p.floor_us, 2048.984064, 1e-6);
  EXPECT_NEAR(p.gpu_step_us, 2500, 1e-9);
  EXPECT_NEAR(p.e2e_us, 2530, 1e-9);
  EXPECT_NEAR(p.ratio, 2500 / 2048.984064, 1e-12);
  EXPECT_EQ(p.replays, 3u);
  // kern gen --fp8: 36 x 100,925,440 layer-matrix elements at one byte, 389,154,816 others bf16.
  const DecodePoint f = make_decode_point(s, 1024, {2.6, 2.5, 2.4}, {2.53, 2.52, 2.9}, 4000, 1);
  EXPECT_EQ(f.weight_bytes, 4'411'625'472ull);
  EXPECT_EQ(f.bytes, 4'411'625'472ull + 150'994'944ull);
  EXPECT_THROW(make_decode_point(s, 1024, {}, {}, 4000), Error);
  EXPECT_THROW(make_decode_point(s, 1024, {1.0}, {}, 0), Error);
}

TEST(BenchModel, BatchedPointCountsEverySequencesKv) {
  const models::Qwen3Shape s = qwen3_4b();
  // 64 sequences at 1024: 8,044,941,312 + 64 x 150,994,944 = 17,708,617,728 bytes; at 4000 GB/s the
  // floor is 4427.154432 us; 64 tokens per 5 ms call are 12,800 tok/s.
  const BatchedPoint p = make_batched_point(s, 64, 1024, 64, {5.0, 4.5, 6.0}, {5.2, 5.0, 4.9}, 4000);
  EXPECT_EQ(p.bytes, 17'708'617'728ull);
  EXPECT_NEAR(p.floor_us, 4427.154432, 1e-6);
  EXPECT_NEAR(p.gpu_step_us, 5000, 1e-9);
  EXPECT_NEAR(p.ratio, 5000 / 4427.154432, 1e-12);
  EXPECT_NEAR(p.tokens_per_s, 64 / 5.0e-3, 1e-6);
  EXPECT_THROW(make_batched_point(s, 64, 1024, 64, {}, {1.0}, 4000), Error);
  EXPECT_THROW(make_batched_point(s, 0, 1024, 64, {1.0}, {1.0}, 4000), Error);
  Report r;
  r.shape = s;
  r.batched.push_back(p);
  EXPECT_NE(format_table(r).find("decode at batch B"), std::string::npos);
  EXPECT_EQ(to_json(r)["batched"][0]["bytes"], 17'708'617'728ull);
}

TEST(BenchModel, PrefillPointRates) {
  const models::Qwen3Shape s = qwen3_4b();
  const PrefillPoint p = make_prefill_point(s, 2048, 512, {40, 32, 36}, 500);
  EXPECT_NEAR(p.ms, 36, 1e-12);
  EXPECT_NEAR(p.tokens_per_s, 2048 / 0.036, 1e-6);
  EXPECT_NEAR(p.tflops, prefill_flops(s, 2048) / 0.036 / 1e12, 1e-9);
  EXPECT_NEAR(p.gemm_fraction, p.tflops / 500, 1e-12);
  EXPECT_EQ(make_prefill_point(s, 16, 16, {1}, 0).gemm_fraction, 0);
}

TEST(BenchModel, OpSharesAggregateAndSort) {
  const auto shares = op_shares(
      {{"gemm_qkv", 0.010}, {"attn_decode", 0.020}, {"gemm_qkv", 0.015}, {"argmax", 0.005}, {"rms_norm", 0.005}});
  ASSERT_EQ(shares.size(), 4u);
  EXPECT_EQ(shares[0].op, "gemm_qkv");
  EXPECT_EQ(shares[0].calls, 2u);
  EXPECT_NEAR(shares[0].us, 25, 1e-9);
  EXPECT_NEAR(shares[0].share, 25.0 / 55, 1e-12);
  EXPECT_EQ(shares[1].op, "attn_decode");
  EXPECT_EQ(shares[2].op, "argmax");  // a tie keeps name order
  EXPECT_EQ(shares[3].op, "rms_norm");
}

TEST(BenchModel, ParseSizes) {
  EXPECT_EQ(parse_sizes("128,1024,32768", "--contexts"), (std::vector<std::uint64_t>{128, 1024, 32768}));
  EXPECT_EQ(parse_sizes("7", "--prefill"), (std::vector<std::uint64_t>{7}));
  for (const char* bad : {"", "1,,2", "0", "12a", "-3", "1,", "99999999999999999999"}) {
    try {
      parse_sizes(bad, "--contexts");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Api);
      EXPECT_NE(std::string(e.what()).find("--contexts"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace kern::bench
