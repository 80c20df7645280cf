// The extern catalogue: every `extern:<name>` a launch may name, with its argument shape. The
// verifier checks launches against it (R6.extern) and the runtime resolves extern launches from
// it; neither spells an extern name of its own. Rows and arguments: docs/manifest.md (Extern
// launch).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "kern/base/dtype.hpp"

namespace kern::core {

struct ExternSpec {
  enum class Family : std::uint8_t {
    Gemm,        // row-major C[m,n] = A[m,k]·W[n,k]ᵀ: a, w, c, [scales], m, n, k [, ldc [, a_row_stride]]
    Collective,  // NCCL: send, recv, count, rank (the last arg is {"rank": <group>})
  };
  enum class Library : std::uint8_t {
    CublasLt,  // cublasLtMatmul (row-invariant algorithm choice, `algo` pinning)
    Cublas,    // cublasGemmEx (cuBLAS's own choice per shape)
    Nccl,
  };
  std::string name;  // without the "extern:" prefix
  Family family = Family::Gemm;
  Library library = Library::CublasLt;
  DType in = DType::BF16;        // Gemm: a and w; Collective: send and recv
  DType out = DType::BF16;       // Gemm: c
  bool accumulate = false;       // Gemm: c is inout (beta = 1)
  std::size_t scales = 0;        // Gemm: 'in buffer<f32>' scale args after c (fp8: a_scale, w_scale)
  std::uint64_t k_multiple = 1;  // Gemm: k must be a multiple of this (fp8: 16), checked at load and per run
  std::size_t min_args = 0, max_args = 0;
  bool takes_algo = false;      // a pinned cuBLASLt `algo` is allowed on the launch
  bool in_runtime = false;      // the kern runtime runs it; the others verify but fail at load
  std::string_view collective;  // Collective: allreduce | allgather | reducescatter | alltoall
  std::string_view signature;   // the args, for messages: "a, w, c, m, n, k [, ldc [, a_row_stride]]"
};

// Every extern, gemms first, in a fixed order.
const std::vector<ExternSpec>& externs();
// The catalogue row named `name` (without "extern:"); nullptr for an unknown extern.
const ExternSpec* find_extern(std::string_view name);

}  // namespace kern::core
