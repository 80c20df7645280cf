// f16 / f32 checkpoints served to bf16 buffers: the conversions round to nearest even as torch's
// .to(torch.bfloat16) does, the view converts only the named tensors, a bind plan over the view
// fills a bf16 buffer with the converted rows (strided slices included), and tensors_to_bf16
// names exactly the f16 / f32 tensors bf16 weight buffers bind.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kern/base/error.hpp"
#include "kern/weights/bf16_view.hpp"
#include "kern/weights/bind_plan.hpp"

namespace kern::weights {
namespace {

std::vector<std::byte> f32_bytes(const std::vector<float>& v) {
  std::vector<std::byte> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}
std::vector<std::byte> u16_bytes(const std::vector<std::uint16_t>& v) {
  std::vector<std::byte> b(v.size() * 2);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}
float bits_f32(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Bf16View, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16_bits(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_bf16_bits(bits_f32(0x3f808000u)), 0x3f80);  // tie, even below
  EXPECT_EQ(f32_to_bf16_bits(bits_f32(0x3f818000u)), 0x3f82);  // tie, even above
  EXPECT_EQ(f32_to_bf16_bits(bits_f32(0x3f808001u)), 0x3f81);  // just above the tie
  EXPECT_EQ(f32_to_bf16_bits(bits_f32(0x7f7fffffu)), 0x7f80);  // max float rounds to inf
  EXPECT_EQ(f32_to_bf16_bits(std::numeric_limits<float>::infinity()), 0x7f80);
  const std::uint16_t nan = f32_to_bf16_bits(bits_f32(0x7f800001u));  // a signalling NaN stays a NaN
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
  EXPECT_EQ(f32_to_bf16_bits(bits_f32(0x00000001u)), 0x0000);  // the smallest subnormal rounds to zero
}

TEST(Bf16View, F16DecodesExactly) {
  EXPECT_EQ(f16_bits_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_bits_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_bits_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_bits_to_f32(0x0001), std::ldexp(1.0f, -24));     // smallest subnormal
  EXPECT_EQ(f16_bits_to_f32(0x03ff), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(f16_bits_to_f32(0x8000), -0.0f);
  EXPECT_TRUE(std::signbit(f16_bits_to_f32(0x8000)));
  EXPECT_TRUE(std::isinf(f16_bits_to_f32(0x7c00)));
  EXPECT_TRUE(std::isnan(f16_bits_to_f32(0x7e00)));
  // Every finite f16 round-trips through f32 (the decode is exact).
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    if (((h >> 10) & 0x1f) == 0x1f) continue;
    const float f = f16_bits_to_f32(static_cast<std::uint16_t>(h));
    const int e = ((h >> 10) & 0x1f) == 0 ? -24 : static_cast<int>((h >> 10) & 0x1f) - 25;
    const float m = ((h >> 10) & 0x1f) == 0 ? static_cast<float>(h & 0x3ff) : static_cast<float>((h & 0x3ff) | 0x400);
    EXPECT_EQ(f, (h & 0x8000 ? -1.0f : 1.0f) * std::ldexp(m, e)) << h;
  }
}

core::Buffer bf16_weight(std::vector<core::BindSegment> bind) {
  core::Buffer b;
  b.dtype = DType::BF16;
  b.kind = core::BufferKind::Weight;
  b.bind = std::move(bind);
  return b;
}
core::BindSegment seg(std::string name, std::optional<core::RangeRef> cols = {}) {
  return core::BindSegment{core::TensorRef{std::move(name), {}, {}}, {}, std::move(cols), {}};
}

TEST(Bf16View, BindPlanOverTheViewFillsBf16) {
  HostTensors t;
  // f32 [2, 3], f16 [2, 2], and a bf16 tensor the view leaves alone.
  t.add("w32", DType::F32, {2, 3}, f32_bytes({1.0f, -0.5f, 3.0f, bits_f32(0x3f818000u), 0.25f, -8.0f}));
  t.add("w16", DType::F16, {2, 2}, u16_bytes({0x3c00, 0x4000, 0xbc00, 0x3800}));
  t.add("w", DType::BF16, {2}, u16_bytes({0x1234, 0x5678}));
  EXPECT_THROW(plan_bind("b", bf16_weight({seg("w32")}), 12, t, {}), Error);  // no view: a dtype mismatch
  const Bf16View view(t, {"w16", "w32"});
  EXPECT_EQ(view.find("w32")->dtype, DType::BF16);
  EXPECT_EQ(view.find("w32")->bytes, 12u);
  EXPECT_EQ(view.find("w")->dtype, DType::BF16);
  EXPECT_EQ(view.names(), t.names());
  // Columns 1..3 of w32 (a strided slice), then w16 whole, then w.
  const core::Buffer b = bf16_weight({seg("w32", core::RangeRef{core::Range{1, 3}, {}, {}}), seg("w16"), seg("w")});
  const BindPlan plan = plan_bind("b", b, 8 + 8 + 4, view, {});
  std::vector<std::uint16_t> out(10);
  execute_bind_plan_on_host(plan, view, std::as_writable_bytes(std::span(out)));
  EXPECT_EQ(out, (std::vector<std::uint16_t>{0xbf00, 0x4040, 0x3e80, 0xc100, 0x3f80, 0x4000, 0xbf80, 0x3f00, 0x1234,
                                             0x5678}));
  std::uint16_t one = 0;
  EXPECT_THROW(view.read("w32", 1, 2, &one), Error);  // half an element
}

TEST(Bf16View, OnlyF16AndF32TensorsConvert) {
  HostTensors t;
  t.add("i", DType::I32, {1}, f32_bytes({1.0f}));
  EXPECT_THROW(Bf16View(t, {"i"}), Error);
  EXPECT_THROW(Bf16View(t, {"missing"}), Error);
}

TEST(Bf16View, TensorsToBf16NamesWhatBf16WeightsBind) {
  HostTensors t;
  t.add("a", DType::F32, {1}, f32_bytes({1.0f}));
  t.add("b", DType::F16, {1}, u16_bytes({0x3c00}));
  t.add("c", DType::BF16, {1}, u16_bytes({0x3f80}));
  t.add("d", DType::F32, {1}, f32_bytes({2.0f}));
  core::Manifest m;
  m.buffers["wa"] = bf16_weight({seg("a"), seg("c")});
  m.buffers["wb"] = bf16_weight({seg("b")});
  core::Buffer f32 = bf16_weight({seg("d")});
  f32.dtype = DType::F32;  // an f32 buffer binds its f32 tensor as it is
  m.buffers["wd"] = f32;
  EXPECT_EQ(tensors_to_bf16(m, t, {}), (std::set<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace kern::weights
