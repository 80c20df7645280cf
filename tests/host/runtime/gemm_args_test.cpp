// GEMM extern launches without a GPU: the catalogue rows the runtime runs, where each arg sits,
// what load refuses (arity, buffers / integers, fp8's k % 16), the shape at a var assignment and the
// per-run size checks, on args resolved from parsed manifests against fake addresses.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "kern/core/externs.hpp"
#include "kern/core/manifest.hpp"
#include "kern/runtime/args.hpp"
#include "runtime/gemm_args.hpp"

namespace kern::runtime {
namespace {

using core::ExternSpec;

const ExternSpec& row(std::string_view name) {
  const ExternSpec* x = core::find_extern(name);
  if (!x) throw std::runtime_error("no extern " + std::string(name));
  return *x;
}

// One op `g` (params `params`, one launch of `entry`) called once by program `p` with `args`.
struct Launch {
  core::Manifest m;
  VarTable vars;
  std::vector<ArgValue> values;
  const ExternSpec* x = nullptr;

  Launch(const std::string& entry, const std::string& params, const std::string& args)
      : m(core::parse_manifest(R"({
  "schema_version": 5, "model": "gemm-args",
  "vars": {"m": {"max": 64}, "k": {"max": 256}},
  "buffers": {"a8": {"dtype": "fp8e4m3", "shape": [4096], "kind": "input"},
              "w8": {"dtype": "fp8e4m3", "shape": [4096], "kind": "input"},
              "a16": {"dtype": "bf16", "shape": [4096], "kind": "input"},
              "w16": {"dtype": "bf16", "shape": [4096], "kind": "input"},
              "c16": {"dtype": "bf16", "shape": [4096], "kind": "output"},
              "c32": {"dtype": "f32", "shape": [4096], "kind": "output"},
              "sa": {"dtype": "f32", "shape": [1], "kind": "input"},
              "sw": {"dtype": "f32", "shape": [1], "kind": "input"}},
  "modules": {},
  "ops": {"g": {"params": [)" + params +
                               R"(], "impl": {"launches": [{"entry": "extern:)" + entry + R"("}]}}},
  "programs": {"p": {"calls": [{"op": "g", "args": [)" +
                               args + R"(]}]}}
})")),
        vars(m) {
    ResolveContext ctx;
    ctx.vars = &vars;
    // Every buffer at its own 64 KiB-aligned base; its byte size set by `bytes`.
    ctx.pointer = [this](const core::CallArg& a) {
      auto it = bytes.find(a.name);
      const std::uint64_t have = it == bytes.end() ? 4096 : it->second;
      return Pointer{base(a.name) + a.offset, have - a.offset};
    };
    ctx.scratch = [](std::string_view) { return Pointer{}; };
    ctx.rank = [](std::string_view) -> std::uint64_t { return 0; };
    ctx.encode_tensormap = [](const cuda::TensormapSpec&) { return std::array<std::byte, 128>{}; };
    const core::Op& op = m.ops.at("g");
    values = resolve_launch_args(op, op.impl.launches[0], m.programs.at("p").calls[0], ctx);
    x = core::find_extern(entry);
  }
  std::uint64_t base(const std::string& name) const {
    static const std::map<std::string, std::uint64_t> order = {{"a8", 1},  {"w8", 2},  {"a16", 3}, {"w16", 4},
                                                               {"c16", 5}, {"c32", 6}, {"sa", 7},  {"sw", 8}};
    return order.at(name) << 16;
  }
  std::vector<std::uint64_t> at(std::uint64_t m_value, std::uint64_t k_value) const {
    std::vector<std::uint64_t> v(vars.size());
    v[*vars.index("m")] = m_value;
    v[*vars.index("k")] = k_value;
    return v;
  }
  static inline std::map<std::string, std::uint64_t> bytes;
};

const std::string kFp8Params =
    R"("in buffer<fp8e4m3>", "in buffer<fp8e4m3>", "out buffer<bf16>", "in buffer<f32>", "in buffer<f32>", "i32", "i32", "i32")";
const std::string kFp8F32Params =
    R"("in buffer<fp8e4m3>", "in buffer<fp8e4m3>", "out buffer<f32>", "in buffer<f32>", "in buffer<f32>", "i32", "i32", "i32", "i32")";
const std::string kBf16F32Params = R"("in buffer<bf16>", "in buffer<bf16>", "out buffer<f32>", "i32", "i32", "i32")";

std::string fp8_args(const std::string& k, const std::string& c = "c16") {
  return R"({"buf": "a8"}, {"buf": "w8"}, {"buf": ")" + c +
         R"("}, {"buf": "sa"}, {"buf": "sw"}, {"var": "m"}, {"i32": 32}, )" + k;
}

class RuntimeGemmArgs : public ::testing::Test {
 protected:
  void SetUp() override { Launch::bytes.clear(); }
};

TEST_F(RuntimeGemmArgs, CatalogueRowsTheRuntimeRuns) {
  for (std::string_view name :
       {"cublaslt_bf16_tn", "cublaslt_bf16_tn_acc", "cublas_bf16_tn_f32", "cublaslt_fp8_tn", "cublaslt_fp8_tn_f32"})
    EXPECT_TRUE(row(name).in_runtime) << name;
  std::size_t collectives = 0;
  for (const ExternSpec& x : core::externs())
    if (x.family == ExternSpec::Family::Collective) {
      EXPECT_TRUE(x.in_runtime) << x.name;  // through NCCL (session 31)
      EXPECT_EQ(x.library, ExternSpec::Library::Nccl) << x.name;
      ++collectives;
    }
  EXPECT_EQ(collectives, 16u);
  EXPECT_EQ(row("cublas_bf16_tn_f32").library, ExternSpec::Library::Cublas);
  EXPECT_FALSE(row("cublas_bf16_tn_f32").takes_algo);  // cuBLAS chooses per shape: no `algo`
  EXPECT_EQ(row("cublas_bf16_tn_f32").out, DType::F32);
  for (std::string_view name : {"cublaslt_fp8_tn", "cublaslt_fp8_tn_f32"}) {
    const ExternSpec& x = row(name);
    EXPECT_EQ(x.library, ExternSpec::Library::CublasLt) << name;
    EXPECT_TRUE(x.takes_algo) << name;
    EXPECT_EQ(x.in, DType::FP8E4M3) << name;
    EXPECT_EQ(x.k_multiple, 16u) << name;
    EXPECT_EQ(x.scales, 2u) << name;
  }
  EXPECT_EQ(row("cublaslt_fp8_tn").out, DType::BF16);
  EXPECT_EQ(row("cublaslt_fp8_tn_f32").out, DType::F32);
  EXPECT_EQ(row("cublaslt_bf16_tn").k_multiple, 1u);
  EXPECT_EQ(row("cublas_bf16_tn_f32").k_multiple, 1u);
}

TEST_F(RuntimeGemmArgs, IndexFollowsTheScales) {
  const GemmArgIndex fp8(row("cublaslt_fp8_tn"));
  EXPECT_EQ(fp8.m, 5u);
  EXPECT_EQ(fp8.n, 6u);
  EXPECT_EQ(fp8.k, 7u);
  EXPECT_EQ(fp8.ldc, 8u);
  const GemmArgIndex bf16(row("cublaslt_bf16_tn"));
  EXPECT_EQ(bf16.m, 3u);
  EXPECT_EQ(bf16.k, 5u);
  EXPECT_EQ(bf16.lda, 7u);
}

TEST_F(RuntimeGemmArgs, Fp8ConstantKMustBeAMultipleOf16) {
  Launch bad("cublaslt_fp8_tn", kFp8Params, fp8_args(R"({"i32": 40})"));
  EXPECT_EQ(gemm_args_problem(*bad.x, bad.values), "k = 40 is not a multiple of 16");
  Launch good("cublaslt_fp8_tn", kFp8Params, fp8_args(R"({"i32": 48})"));
  EXPECT_EQ(gemm_args_problem(*good.x, good.values), std::nullopt);
  Launch f32("cublaslt_fp8_tn_f32", kFp8F32Params, fp8_args(R"({"i32": 8}, {"i32": 32})", "c32"));
  EXPECT_EQ(gemm_args_problem(*f32.x, f32.values), "k = 8 is not a multiple of 16");
  // bf16 takes any k
  Launch bf16("cublas_bf16_tn_f32", kBf16F32Params,
              R"({"buf": "a16"}, {"buf": "w16"}, {"buf": "c32"}, {"var": "m"}, {"i32": 32}, {"i32": 40})");
  EXPECT_EQ(gemm_args_problem(*bf16.x, bf16.values), std::nullopt);
  // a var-dependent k passes load and is checked at each run
  Launch var("cublaslt_fp8_tn", kFp8Params, fp8_args(R"({"var": "k"})"));
  EXPECT_EQ(gemm_args_problem(*var.x, var.values), std::nullopt);
  cuda::GemmShape s;
  ASSERT_TRUE(gemm_shape_at(*var.x, var.values, var.at(4, 40).data(), s));
  EXPECT_EQ(gemm_shape_problem(*var.x, s, var.values),
            "GEMM m=4 n=32 k=40: extern:cublaslt_fp8_tn needs k to be a multiple of 16");
  ASSERT_TRUE(gemm_shape_at(*var.x, var.values, var.at(4, 64).data(), s));
  EXPECT_EQ(gemm_shape_problem(*var.x, s, var.values), std::nullopt);
}

// cuBLASLt's checks see no addresses, and cublasLtMatmul refuses (CUBLAS_STATUS_NOT_SUPPORTED) an
// FP8 operand it cannot use at that alignment, so load refuses a call offset that breaks 16 bytes.
TEST_F(RuntimeGemmArgs, Fp8OperandsMustBe16ByteAligned) {
  auto with = [](const std::string& a, const std::string& w, const std::string& c, const std::string& sa,
                 const std::string& sw) {
    return R"({"buf": "a8")" + a + R"(}, {"buf": "w8")" + w + R"(}, {"buf": "c16")" + c + R"(}, {"buf": "sa")" + sa +
           R"(}, {"buf": "sw")" + sw + R"(}, {"var": "m"}, {"i32": 32}, {"i32": 32})";
  };
  const std::string off4 = R"(, "offset": 4)", off8 = R"(, "offset": 8)", off16 = R"(, "offset": 16)",
                    off32 = R"(, "offset": 32)";
  Launch scale4("cublaslt_fp8_tn", kFp8Params, with("", "", "", "", off4));
  EXPECT_EQ(gemm_args_problem(*scale4.x, scale4.values),
            "arg 4 (w_scale) at 0x80004 is not 16-byte aligned: cuBLASLt's FP8 GEMMs need aligned A, W and C, and kern "
            "holds the scales to the same rule (give the call an offset that is a multiple of 16)");
  Launch a_scale8("cublaslt_fp8_tn", kFp8Params, with("", "", "", off8, ""));
  EXPECT_NE(gemm_args_problem(*a_scale8.x, a_scale8.values).value_or("").find("arg 3 (a_scale) at 0x70008"),
            std::string::npos);
  Launch a8("cublaslt_fp8_tn", kFp8Params, with(off8, "", "", "", ""));
  EXPECT_NE(gemm_args_problem(*a8.x, a8.values).value_or("").find("arg 0 (A) at 0x10008 is not 16-byte aligned"),
            std::string::npos);
  Launch w4("cublaslt_fp8_tn", kFp8Params, with("", off4, "", "", ""));
  EXPECT_NE(gemm_args_problem(*w4.x, w4.values).value_or("").find("arg 1 (W)"), std::string::npos);
  Launch c8("cublaslt_fp8_tn", kFp8Params, with("", "", off8, "", ""));
  EXPECT_NE(gemm_args_problem(*c8.x, c8.values).value_or("").find("arg 2 (C)"), std::string::npos);
  Launch aligned("cublaslt_fp8_tn", kFp8Params, with(off32, off16, off32, off16, off32));
  EXPECT_EQ(gemm_args_problem(*aligned.x, aligned.values), std::nullopt);
  // bf16 rows keep their element alignment (cuBLASLt's heuristic and checks handle them)
  Launch bf16("cublas_bf16_tn_f32", kBf16F32Params,
              R"({"buf": "a16", "offset": 2}, {"buf": "w16"}, {"buf": "c32", "offset": 4}, {"var": "m"}, {"i32": 32}, {"i32": 40})");
  EXPECT_EQ(gemm_args_problem(*bf16.x, bf16.values), std::nullopt);
}

// Load chooses (or checks a pinned) algorithm for launches whose n, k and strides are literals.
TEST_F(RuntimeGemmArgs, ShapeLiteralButMIsKnownAtLoad) {
  Launch literal("cublaslt_fp8_tn", kFp8Params, fp8_args(R"({"i32": 32})"));
  EXPECT_TRUE(gemm_shape_is_literal_but_m(*literal.x, literal.values));
  Launch var_k("cublaslt_fp8_tn", kFp8Params, fp8_args(R"({"var": "k"})"));
  EXPECT_FALSE(gemm_shape_is_literal_but_m(*var_k.x, var_k.values));
  Launch var_ldc("cublaslt_fp8_tn_f32", kFp8F32Params, fp8_args(R"({"i32": 32}, {"var": "k"})", "c32"));
  EXPECT_FALSE(gemm_shape_is_literal_but_m(*var_ldc.x, var_ldc.values));
  Launch bf16("cublas_bf16_tn_f32", kBf16F32Params,
              R"({"buf": "a16"}, {"buf": "w16"}, {"buf": "c32"}, {"var": "m"}, {"i32": 24}, {"i32": 40})");
  EXPECT_TRUE(gemm_shape_is_literal_but_m(*bf16.x, bf16.values));
}

TEST_F(RuntimeGemmArgs, ArityAndArgKinds) {
  // 7 args for an extern taking 8 or 9
  Launch few(
      "cublaslt_fp8_tn",
      R"("in buffer<fp8e4m3>", "in buffer<fp8e4m3>", "out buffer<bf16>", "in buffer<f32>", "in buffer<f32>", "i32", "i32")",
      R"({"buf": "a8"}, {"buf": "w8"}, {"buf": "c16"}, {"buf": "sa"}, {"buf": "sw"}, {"var": "m"}, {"i32": 32})");
  EXPECT_EQ(gemm_args_problem(*few.x, few.values), "takes a, w, c, a_scale, w_scale, m, n, k [, ldc], got 7 args");
  // a scale given as an integer
  Launch scale_int(
      "cublaslt_fp8_tn",
      R"("in buffer<fp8e4m3>", "in buffer<fp8e4m3>", "out buffer<bf16>", "i32", "in buffer<f32>", "i32", "i32", "i32")",
      R"({"buf": "a8"}, {"buf": "w8"}, {"buf": "c16"}, {"i32": 1}, {"buf": "sw"}, {"var": "m"}, {"i32": 32}, {"i32": 32})");
  EXPECT_EQ(gemm_args_problem(*scale_int.x, scale_int.values), "arg 3 must be a buffer");
  // a buffer where m goes
  Launch m_buf(
      "cublaslt_fp8_tn",
      R"("in buffer<fp8e4m3>", "in buffer<fp8e4m3>", "out buffer<bf16>", "in buffer<f32>", "in buffer<f32>", "in buffer<f32>", "i32", "i32")",
      R"({"buf": "a8"}, {"buf": "w8"}, {"buf": "c16"}, {"buf": "sa"}, {"buf": "sw"}, {"buf": "sa"}, {"i32": 32}, {"i32": 32})");
  EXPECT_EQ(gemm_args_problem(*m_buf.x, m_buf.values), "arg 5 must be an integer");
  // cuBLAS's row takes no A row stride: 8 args are one too many
  Launch many(
      "cublas_bf16_tn_f32", kBf16F32Params + R"(, "i32", "i32")",
      R"({"buf": "a16"}, {"buf": "w16"}, {"buf": "c32"}, {"var": "m"}, {"i32": 32}, {"i32": 32}, {"i32": 32}, {"i32": 40})");
  EXPECT_EQ(gemm_args_problem(*many.x, many.values), "takes a, w, c, m, n, k [, ldc], got 8 args");
  // an f32 literal where n goes
  Launch n_float("cublas_bf16_tn_f32",
                 R"("in buffer<bf16>", "in buffer<bf16>", "out buffer<f32>", "i32", "f32", "i32")",
                 R"({"buf": "a16"}, {"buf": "w16"}, {"buf": "c32"}, {"var": "m"}, {"f32": 32.0}, {"i32": 32})");
  EXPECT_EQ(gemm_args_problem(*n_float.x, n_float.values), "arg 4 must be an integer");
}

TEST_F(RuntimeGemmArgs, ShapeOperandsAndTypesFromTheRow) {
  Launch f32("cublaslt_fp8_tn_f32", kFp8F32Params, fp8_args(R"({"var": "k"}, {"expr": {"add": ["k", 16]}})", "c32"));
  cuda::GemmShape s;
  s.m_ref = 64;  // set at load: left alone
  ASSERT_TRUE(gemm_shape_at(*f32.x, f32.values, f32.at(3, 32).data(), s));
  EXPECT_EQ(s.in, DType::FP8E4M3);
  EXPECT_EQ(s.out, DType::F32);
  EXPECT_FALSE(s.accumulate);
  EXPECT_EQ(s.m, 3u);
  EXPECT_EQ(s.n, 32u);
  EXPECT_EQ(s.k, 32u);
  EXPECT_EQ(s.ldc, 48u);  // k + 16
  EXPECT_EQ(s.lda, 32u);  // no A row stride arg: k
  EXPECT_EQ(s.m_ref, 64u);
  const cuda::GemmOperands ops = gemm_operands(*f32.x, f32.values);
  EXPECT_EQ(ops.a, f32.base("a8"));
  EXPECT_EQ(ops.w, f32.base("w8"));
  EXPECT_EQ(ops.c, f32.base("c32"));
  EXPECT_EQ(ops.a_scale, f32.base("sa"));
  EXPECT_EQ(ops.w_scale, f32.base("sw"));

  Launch bf16("cublas_bf16_tn_f32", kBf16F32Params,
              R"({"buf": "a16"}, {"buf": "w16"}, {"buf": "c32"}, {"var": "m"}, {"i32": 24}, {"i32": 40})");
  ASSERT_TRUE(gemm_shape_at(*bf16.x, bf16.values, bf16.at(5, 1).data(), s));
  EXPECT_EQ(s.in, DType::BF16);
  EXPECT_EQ(s.out, DType::F32);
  EXPECT_EQ(s.ldc, 24u);  // no ldc arg: n
  EXPECT_EQ(s.lda, 40u);
  const cuda::GemmOperands b = gemm_operands(*bf16.x, bf16.values);
  EXPECT_EQ(b.a_scale, 0u);
  EXPECT_EQ(b.w_scale, 0u);
}

TEST_F(RuntimeGemmArgs, OperandBytesUseTheRowsElementSizes) {
  // fp8 -> f32, m = 4, n = 32, k = 32: A 128 bytes (1 per element), W 1024, C 512 (4 per element)
  Launch::bytes = {{"a8", 128}, {"w8", 1024}, {"c32", 512}, {"sa", 4}, {"sw", 4}};
  Launch l("cublaslt_fp8_tn_f32", kFp8F32Params, fp8_args(R"({"i32": 32}, {"i32": 32})", "c32"));
  cuda::GemmShape s;
  ASSERT_TRUE(gemm_shape_at(*l.x, l.values, l.at(4, 1).data(), s));
  EXPECT_EQ(gemm_shape_problem(*l.x, s, l.values), std::nullopt);
  ASSERT_TRUE(gemm_shape_at(*l.x, l.values, l.at(5, 1).data(), s));
  EXPECT_EQ(gemm_shape_problem(*l.x, s, l.values),
            "GEMM m=5 n=32 k=32: A needs 160 bytes but its buffer has 128 after the offset");

  Launch::bytes = {{"a8", 128}, {"w8", 1024}, {"c32", 511}, {"sa", 4}, {"sw", 4}};
  Launch c_short("cublaslt_fp8_tn_f32", kFp8F32Params, fp8_args(R"({"i32": 32}, {"i32": 32})", "c32"));
  ASSERT_TRUE(gemm_shape_at(*c_short.x, c_short.values, c_short.at(4, 1).data(), s));
  EXPECT_EQ(gemm_shape_problem(*c_short.x, s, c_short.values),
            "GEMM m=4 n=32 k=32: C needs 512 bytes but its buffer has 511 after the offset");

  Launch::bytes = {{"a8", 128}, {"w8", 1024}, {"c32", 512}, {"sa", 4}, {"sw", 2}};
  Launch scale_short("cublaslt_fp8_tn_f32", kFp8F32Params, fp8_args(R"({"i32": 32}, {"i32": 32})", "c32"));
  ASSERT_TRUE(gemm_shape_at(*scale_short.x, scale_short.values, scale_short.at(4, 1).data(), s));
  EXPECT_EQ(gemm_shape_problem(*scale_short.x, s, scale_short.values),
            "GEMM m=4 n=32 k=32: w_scale needs 4 bytes but its buffer has 2 after the offset");

  // bf16 -> f32: A and W 2 bytes per element, C 4
  Launch::bytes = {{"a16", 4 * 40 * 2}, {"w16", 24 * 40 * 2}, {"c32", 4 * 24 * 4 - 1}};
  Launch b("cublas_bf16_tn_f32", kBf16F32Params,
           R"({"buf": "a16"}, {"buf": "w16"}, {"buf": "c32"}, {"var": "m"}, {"i32": 24}, {"i32": 40})");
  ASSERT_TRUE(gemm_shape_at(*b.x, b.values, b.at(4, 1).data(), s));
  EXPECT_EQ(gemm_shape_problem(*b.x, s, b.values),
            "GEMM m=4 n=24 k=40: C needs 384 bytes but its buffer has 383 after the offset");
  ASSERT_TRUE(gemm_shape_at(*b.x, b.values, b.at(3, 1).data(), s));
  EXPECT_EQ(gemm_shape_problem(*b.x, s, b.values), std::nullopt);
}

}  // namespace
}  // namespace kern::runtime
