// A GEMM extern launch's resolved arguments against its catalogue row (kern/core/externs.hpp):
// where each one sits, what load refuses, the shape at a var assignment and the per-run checks.
// Pure (no CUDA call): host-tested. docs/runtime.md, "GEMM externs".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "kern/core/externs.hpp"
#include "kern/cuda/blaslt.hpp"
#include "kern/runtime/args.hpp"

namespace kern::runtime {

// Positions, from the row: a, w, c, then the row's `scales` f32 buffers (a_scale, w_scale), then
// m, n, k [, ldc [, a_row_stride]] (ldc and lda may lie past the launch's args: absent).
struct GemmArgIndex {
  explicit GemmArgIndex(const core::ExternSpec& x) : m(3 + x.scales), n(m + 1), k(m + 2), ldc(m + 3), lda(m + 4) {}
  static constexpr std::size_t a = 0, w = 1, c = 2, a_scale = 3, w_scale = 4;
  std::size_t m, n, k, ldc, lda;
};

// The first problem of a launch's resolved args against GEMM row `x`, or nullopt: their count,
// buffers at a, w, c and the scales, integers after them, an fp8 operand (A, W, C or a scale)
// whose address is not a multiple of cuda::BlasLt::kFp8Alignment, a constant k that is not a
// multiple of the row's k_multiple (a var-dependent k is checked per run, by gemm_shape_problem).
std::optional<std::string> gemm_args_problem(const core::ExternSpec& x, std::span<const ArgValue> values);

// Sets s.in / out / accumulate from the row and s.m, n, k, ldc (default n) and lda (the A row
// stride, default k) from the args at `vars`; other fields of `s` are left as they are. False when
// an expression overflows.
bool gemm_shape_at(const core::ExternSpec& x, std::span<const ArgValue> values, const std::uint64_t* vars,
                   cuda::GemmShape& s);

// The first problem of shape `s` on the launch's buffers, or nullopt: ldc >= n, A row stride >= k,
// k a multiple of the row's k_multiple, and (unless m, n or k is 0) A, W, C and each scale (one f32)
// within its buffer after the offset.
std::optional<std::string> gemm_shape_problem(const core::ExternSpec& x, const cuda::GemmShape& s,
                                              std::span<const ArgValue> values);

// Whether n, k and the strides the args give are literals (the shape is then known at load up to m).
bool gemm_shape_is_literal_but_m(const core::ExternSpec& x, std::span<const ArgValue> values);

// The device addresses of the launch's operands (scales 0 for a row without them).
cuda::GemmOperands gemm_operands(const core::ExternSpec& x, std::span<const ArgValue> values);

}  // namespace kern::runtime
