#include "runtime/gemm_args.hpp"

#include <fmt/format.h>

#include <utility>

namespace kern::runtime {
namespace {

std::uint64_t value_at(const ArgValue& v, const std::uint64_t* vars, bool& ok) {
  const std::optional<std::uint64_t> r = int_value_at(v, vars);
  ok = ok && r.has_value();
  return r.value_or(0);
}

}  // namespace

std::optional<std::string> gemm_args_problem(const core::ExternSpec& x, std::span<const ArgValue> values) {
  if (x.family != core::ExternSpec::Family::Gemm) return fmt::format("extern:{} is not a GEMM", x.name);
  if (values.size() < x.min_args || values.size() > x.max_args)
    return fmt::format("takes {}, got {} args", x.signature, values.size());
  const GemmArgIndex at(x);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const bool buffer = i < at.m;
    if (buffer && !values[i].pointer) return fmt::format("arg {} must be a buffer", i);
    if (!buffer && (values[i].pointer || values[i].is_float)) return fmt::format("arg {} must be an integer", i);
  }
  // FP8: cuBLASLt's checks see no addresses and its FP8 kernels need 16-byte-aligned operands
  // (BlasLt::kFp8Alignment): a call offset that breaks that would otherwise be refused by
  // cublasLtMatmul at the first run, so it is refused here.
  if (x.in == DType::FP8E4M3) {
    const std::pair<std::size_t, const char*> operands[] = {
        {GemmArgIndex::a, "A"}, {GemmArgIndex::w, "W"}, {GemmArgIndex::c, "C"}, {GemmArgIndex::a_scale, "a_scale"},
        {GemmArgIndex::w_scale, "w_scale"}};
    for (const auto& [i, what] : operands) {
      if (i >= 3 + x.scales) continue;
      const std::uint64_t address = values[i].pointer->address;
      if (address % cuda::BlasLt::kFp8Alignment != 0)
        return fmt::format("arg {} ({}) at {:#x} is not {}-byte aligned: cuBLASLt's FP8 GEMMs need aligned A, W and "
                           "C, and kern holds the scales to the same rule (give the call an offset that is a multiple "
                           "of {})",
                           i, what, address, cuda::BlasLt::kFp8Alignment, cuda::BlasLt::kFp8Alignment);
    }
  }
  const ArgValue& k = values[at.k];
  if (x.k_multiple > 1 && k.patches.empty()) {
    const std::uint64_t kv = load_le(k.bytes.data(), k.bytes.size());
    if (kv % x.k_multiple != 0) return fmt::format("k = {} is not a multiple of {}", kv, x.k_multiple);
  }
  return std::nullopt;
}

bool gemm_shape_at(const core::ExternSpec& x, std::span<const ArgValue> values, const std::uint64_t* vars,
                   cuda::GemmShape& s) {
  const GemmArgIndex at(x);
  bool ok = true;
  s.in = x.in;
  s.out = x.out;
  s.accumulate = x.accumulate;
  s.m = value_at(values[at.m], vars, ok);
  s.n = value_at(values[at.n], vars, ok);
  s.k = value_at(values[at.k], vars, ok);
  s.ldc = values.size() > at.ldc ? value_at(values[at.ldc], vars, ok) : s.n;
  s.lda = values.size() > at.lda ? value_at(values[at.lda], vars, ok) : s.k;
  return ok;
}

std::optional<std::string> gemm_shape_problem(const core::ExternSpec& x, const cuda::GemmShape& s,
                                              std::span<const ArgValue> values) {
  const std::uint64_t m = s.m, n = s.n, k = s.k;
  if (s.ldc < n || s.lda < k)
    return fmt::format("GEMM m={} n={} k={}: ldc {} must be >= n and A row stride {} >= k", m, n, k, s.ldc, s.lda);
  if (k % x.k_multiple != 0)
    return fmt::format("GEMM m={} n={} k={}: extern:{} needs k to be a multiple of {}", m, n, k, x.name, x.k_multiple);
  if (m == 0 || n == 0 || k == 0) return std::nullopt;
  std::optional<std::string> problem;
  auto need = [&](std::uint64_t rows, std::uint64_t stride, std::uint64_t cols, std::uint64_t elem, const ArgValue& v,
                  const char* what) {
    if (problem) return;
    const unsigned __int128 bytes = (static_cast<unsigned __int128>(rows - 1) * stride + cols) * elem;
    if (bytes > v.pointer->bytes)
      problem = fmt::format("GEMM m={} n={} k={}: {} needs {} bytes but its buffer has {} after the offset", m, n, k,
                            what, static_cast<std::uint64_t>(bytes), v.pointer->bytes);
  };
  const GemmArgIndex at(x);
  const std::uint64_t in = dtype_size(x.in), out = dtype_size(x.out);
  need(m, s.lda, k, in, values[at.a], "A");
  need(n, k, k, in, values[at.w], "W");
  need(m, s.ldc, n, out, values[at.c], "C");
  if (x.scales >= 2) {
    need(1, 1, 1, 4, values[at.a_scale], "a_scale");
    need(1, 1, 1, 4, values[at.w_scale], "w_scale");
  }
  return problem;
}

bool gemm_shape_is_literal_but_m(const core::ExternSpec& x, std::span<const ArgValue> values) {
  const GemmArgIndex at(x);
  for (std::size_t i : {at.n, at.k, at.ldc, at.lda})
    if (i < values.size() && !values[i].patches.empty()) return false;
  return true;
}

cuda::GemmOperands gemm_operands(const core::ExternSpec& x, std::span<const ArgValue> values) {
  const GemmArgIndex at(x);
  cuda::GemmOperands ops;
  ops.a = values[at.a].pointer->address;
  ops.w = values[at.w].pointer->address;
  ops.c = values[at.c].pointer->address;
  if (x.scales >= 2) {
    ops.a_scale = values[at.a_scale].pointer->address;
    ops.w_scale = values[at.w_scale].pointer->address;
  }
  return ops;
}

}  // namespace kern::runtime
