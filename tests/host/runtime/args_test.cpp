// Argument resolution and staging without a GPU: every call-arg / launch-arg / pack-field
// form against fake addresses, little-endian slots, patches, ABI layout checks.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>

#include "kern/base/error.hpp"
#include "kern/core/manifest.hpp"
#include "kern/runtime/args.hpp"

namespace kern::runtime {
namespace {

using core::parse_manifest;

const char* kArgsManifest = R"({
  "schema_version": 5, "model": "args",
  "topology": {"groups": {"tp": 4}},
  "vars": {"tokens": {"max": 64}, "seqs": {"max": 8}},
  "states": {"kv": {"bytes_per_token": 128}},
  "buffers": {"x": {"dtype": "f32", "shape": ["tokens", 16], "kind": "input"},
              "y": {"dtype": "f32", "shape": ["tokens", 16], "kind": "output"}},
  "modules": {"k": {"source": "k.cubin", "sha256": "0000000000000000000000000000000000000000000000000000000000000000"}},
  "ops": {
    "op": {"params": ["in buffer<f32>", "out buffer<f32>", "inout state", "i32", "i64", "f32", "u8", "i32"],
      "impl": {"scratch": {"s": {"dtype": "f32", "shape": ["tokens"]}}, "launches": [
        {"module": "k", "entry": "fwd", "block": [1, 1, 1], "grid": [1, 1, 1]},
        {"module": "k", "entry": "lit", "block": [1, 1, 1], "grid": [1, 1, 1],
         "params": ["out buffer<f32>", "i32", "i64", "f32", "u8", "i32", "bytes<48>"],
         "args": [{"scratch": "s"}, {"i32": -3}, {"i64": 5000000000}, {"f32": 1.5}, {"u8": 250}, {"rank": "tp"},
                  {"pack": {"size": 48, "fields": [
                    {"at": 0, "param": 0}, {"at": 8, "var": "seqs"}, {"at": 12, "expr": {"ceil_div": ["tokens", 8]}},
                    {"at": 16, "param": 3}, {"at": 20, "f32": -2.0}, {"at": 24, "scratch": "s"}, {"at": 32, "rank": "tp"},
                    {"at": 36, "u8": 7}, {"at": 40, "width": 8, "expr": {"mul": ["tokens", 1000000]}}]}}]}]}}
  },
  "programs": {"p": {"calls": [{"op": "op", "args": [{"buf": "x", "offset": 64}, {"buf": "y"}, {"state": "kv", "offset": 256},
     {"var": "tokens"}, {"expr": {"add": ["tokens", "seqs"]}}, {"f32": 0.25}, {"u8": 9}, {"rank": "tp"}]}]}}
})";

struct Fixture {
  core::Manifest m = parse_manifest(kArgsManifest);
  VarTable vars{m};
  ResolveContext ctx;
  Fixture() {
    ctx.vars = &vars;
    ctx.pointer = [](const core::CallArg& a) {
      std::uint64_t base = a.name == "x" ? 0x10000 : a.name == "y" ? 0x20000 : 0x30000;
      return Pointer{base + a.offset, 4096 - a.offset};
    };
    ctx.scratch = [](std::string_view s) { return Pointer{0x40000, 256}; };
    ctx.rank = [](std::string_view g) -> std::uint64_t { return g == "tp" ? 2 : 99; };
    ctx.encode_tensormap = [](const cuda::TensormapSpec&) { return std::array<std::byte, 128>{}; };
  }
  std::vector<ArgValue> resolve(std::size_t launch) {
    const auto& op = m.ops.at("op");
    return resolve_launch_args(op, op.impl.launches[launch], m.programs.at("p").calls[0], ctx);
  }
  std::vector<std::uint64_t> values(std::uint64_t tokens, std::uint64_t seqs) {
    std::vector<std::uint64_t> v(vars.size());
    v[*vars.index("tokens")] = tokens;
    v[*vars.index("seqs")] = seqs;
    return v;
  }
};

std::uint64_t le(std::span<const std::byte> b, std::size_t at, std::size_t w) { return load_le(b.data() + at, w); }

TEST(RuntimeArgs, ForwardedCallArgsBecomeLittleEndianSlots) {
  Fixture f;
  auto vals = f.resolve(0);
  ASSERT_EQ(vals.size(), 8u);
  std::vector<core::ParamType> params = f.m.ops.at("op").params;
  auto offsets = natural_offsets(params);
  EXPECT_EQ(offsets, (std::vector<std::uint64_t>{0, 8, 16, 24, 32, 40, 44, 48}));
  ArgImage img(vals, offsets);
  auto v = f.values(5, 3);
  ASSERT_TRUE(img.apply(v.data()));
  auto b = img.bytes();
  EXPECT_EQ(le(b, 0, 8), 0x10000u + 64);  // buffer + call offset
  EXPECT_EQ(le(b, 8, 8), 0x20000u);
  EXPECT_EQ(le(b, 16, 8), 0x30000u + 256);  // state + offset
  EXPECT_EQ(le(b, 24, 4), 5u);              // var
  EXPECT_EQ(le(b, 32, 8), 8u);              // expr tokens + seqs
  EXPECT_EQ(le(b, 40, 4), std::bit_cast<std::uint32_t>(0.25f));
  EXPECT_EQ(le(b, 44, 1), 9u);
  EXPECT_EQ(le(b, 48, 4), 2u);  // rank
  ASSERT_TRUE(vals[0].pointer.has_value());
  EXPECT_EQ(vals[0].pointer->bytes, 4096u - 64);
  // params() point at each slot
  EXPECT_EQ(static_cast<std::byte*>(img.params()[3]), b.data() + 24);
  // a new assignment re-patches only the var-dependent slots
  auto v2 = f.values(60, 8);
  ASSERT_TRUE(img.apply(v2.data()));
  EXPECT_EQ(le(img.bytes(), 24, 4), 60u);
  EXPECT_EQ(le(img.bytes(), 32, 8), 68u);
  EXPECT_EQ(le(img.bytes(), 0, 8), 0x10000u + 64);
}

TEST(RuntimeArgs, LaunchLiteralsScratchRankAndPack) {
  Fixture f;
  auto vals = f.resolve(1);
  ASSERT_EQ(vals.size(), 7u);
  EXPECT_EQ(le(vals[0].bytes, 0, 8), 0x40000u);
  EXPECT_EQ(static_cast<std::int32_t>(le(vals[1].bytes, 0, 4)), -3);
  EXPECT_EQ(le(vals[2].bytes, 0, 8), 5000000000u);
  EXPECT_EQ(le(vals[3].bytes, 0, 4), std::bit_cast<std::uint32_t>(1.5f));
  EXPECT_EQ(le(vals[4].bytes, 0, 1), 250u);
  EXPECT_EQ(le(vals[5].bytes, 0, 4), 2u);
  const ArgValue& pack = vals[6];
  ASSERT_EQ(pack.bytes.size(), 48u);
  EXPECT_EQ(pack.patches.size(), 4u);  // seqs, ceil_div, param 3 (a var), wide expr
  std::vector<std::byte> img = pack.bytes;
  auto v = f.values(17, 6);
  for (const Patch& p : pack.patches) ASSERT_TRUE(apply_patch(p, img.data(), v.data()));
  EXPECT_EQ(le(img, 0, 8), 0x10000u + 64);
  EXPECT_EQ(le(img, 8, 4), 6u);
  EXPECT_EQ(le(img, 12, 4), 3u);
  EXPECT_EQ(le(img, 16, 4), 17u);
  EXPECT_EQ(le(img, 20, 4), std::bit_cast<std::uint32_t>(-2.0f));
  EXPECT_EQ(le(img, 24, 8), 0x40000u);
  EXPECT_EQ(le(img, 32, 4), 2u);
  EXPECT_EQ(le(img, 36, 1), 7u);
  EXPECT_EQ(le(img, 37, 3), 0u);  // uncovered bytes stay zero
  EXPECT_EQ(le(img, 40, 8), 17000000u);
}

TEST(RuntimeArgs, ArgImageIsMovableWithStablePointers) {
  Fixture f;
  auto vals = f.resolve(0);
  ArgImage a(vals, natural_offsets(f.m.ops.at("op").params));
  void* p0 = a.params()[0];
  ArgImage b(std::move(a));
  EXPECT_EQ(b.params()[0], p0);
  EXPECT_EQ(static_cast<std::byte*>(b.params()[0]), b.bytes().data());
}

TEST(RuntimeArgs, OverflowIsReportedNotWrapped) {
  core::Manifest m = parse_manifest(R"({"schema_version": 5, "model": "o", "vars": {"t": {"max": 4}},
    "buffers": {}, "modules": {}, "ops": {}, "programs": {}})");
  VarTable vars(m);
  auto e = CompiledExpr::compile(core::Expr::mul(core::Expr::variable("t"), 1ull << 62), vars);
  std::uint64_t v[1] = {4};
  EXPECT_FALSE(e.eval(v).has_value());  // 4 · 2^62 = 2^64
  v[0] = 3;
  EXPECT_EQ(*e.eval(v), 3ull << 62);
  Patch p{0, 8, false, e};
  std::byte buf[8]{};
  v[0] = 4;
  EXPECT_FALSE(apply_patch(p, buf, v));
}

TEST(RuntimeAbi, MatchingLayoutsPass) {
  std::vector<core::ParamType> params;
  for (const char* s : {"in buffer<f32>", "i32", "u8", "i64", "f32", "bytes<128>"})
    params.push_back(*core::parse_param_type(s));
  // natural: 0(8) 8(4) 12(1) 16(8) 24(4) then bytes<128> at 64 (CUtensorMap is 64-aligned)
  std::vector<cuda::ParamInfo> found = {{0, 8}, {8, 4}, {12, 1}, {16, 8}, {24, 4}, {64, 128}};
  EXPECT_FALSE(abi_mismatch(params, found).has_value());
  found[5].offset = 32;  // 8-aligned bytes is also a valid placement
  EXPECT_FALSE(abi_mismatch(params, found).has_value());
}

TEST(RuntimeAbi, MismatchesNameParamDeclaredAndFound) {
  std::vector<core::ParamType> params;
  for (const char* s : {"in buffer<f32>", "i64", "f32"}) params.push_back(*core::parse_param_type(s));
  std::vector<cuda::ParamInfo> found = {{0, 8}, {8, 4}, {12, 4}};
  auto why = abi_mismatch(params, found);
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why, "param 1: declared i64 (8 bytes at offset 8), the kernel has 4 bytes at offset 8");
  found = {{0, 8}, {8, 8}};
  EXPECT_EQ(*abi_mismatch(params, found), "declares 3 params, the kernel has 2");
  found = {{0, 8}, {16, 8}, {24, 4}};  // i64 at 16 where 8 is natural
  EXPECT_NE(abi_mismatch(params, found)->find("param 1"), std::string::npos);
  std::vector<core::ParamType> b{*core::parse_param_type("i32"), *core::parse_param_type("bytes<16>")};
  EXPECT_TRUE(abi_mismatch(b, std::vector<cuda::ParamInfo>{{0, 4}, {12, 16}})
                  .has_value());  // 12 is no power-of-two boundary after 4
  EXPECT_FALSE(abi_mismatch(b, std::vector<cuda::ParamInfo>{{0, 4}, {4, 16}}).has_value());
}

TEST(RuntimeArgs, TensormapSpanningDimUsesBytesAfterOffset) {
  core::Manifest m = parse_manifest(R"({"schema_version": 5, "model": "t", "vars": {},
    "buffers": {"x": {"dtype": "bf16", "shape": [64, 64], "kind": "input"}},
    "modules": {"k": {"source": "k.cubin", "sha256": "0000000000000000000000000000000000000000000000000000000000000000"}},
    "ops": {"o": {"params": ["in buffer<bf16>"], "impl": {"launches": [{"module": "k", "entry": "e", "block": [1,1,1], "grid": [1,1,1],
      "params": ["bytes<128>"], "args": [{"pack": {"size": 128, "fields": [{"at": 0, "tensormap": {"param": 0, "dtype": "bf16",
        "dims": [64, 0], "strides": [128], "box": [64, 8], "swizzle": 128}}]}}]}]}}},
    "programs": {"p": {"calls": [{"op": "o", "args": [{"buf": "x", "offset": 1024}]}]}}})");
  VarTable vars(m);
  cuda::TensormapSpec seen;
  ResolveContext ctx;
  ctx.vars = &vars;
  ctx.pointer = [](const core::CallArg& a) { return Pointer{0x1000 + a.offset, 8192 - a.offset}; };
  ctx.encode_tensormap = [&](const cuda::TensormapSpec& s) {
    seen = s;
    std::array<std::byte, 128> img{};
    img[0] = std::byte{0xab};
    return img;
  };
  const auto& op = m.ops.at("o");
  auto vals = resolve_launch_args(op, op.impl.launches[0], m.programs.at("p").calls[0], ctx);
  ASSERT_EQ(vals.size(), 1u);
  EXPECT_EQ(seen.address, 0x1000u + 1024);
  EXPECT_EQ(seen.dims, (std::vector<std::uint64_t>{64, (8192 - 1024) / 128}));
  EXPECT_EQ(seen.swizzle, 128u);
  EXPECT_EQ(vals[0].bytes[0], std::byte{0xab});
}

}  // namespace
}  // namespace kern::runtime
