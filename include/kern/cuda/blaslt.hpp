// cuBLASLt through dlopen (libcublasLt.so.13, falling back to .so / .so.12): the GEMM
// behind the `extern:cublaslt_bf16_tn[_acc]` launches.
//
// Row-major C[m,n] = A[m,k] · W[n,k]ᵀ (bf16 in, f32 compute, bf16 out), mapped onto
// cuBLASLt's column-major form as Cᵀ[n,m] = op_T(W)·Aᵀ with transa = T. One handle and one
// 32 MiB workspace per object; the algorithm heuristic is queried once per shape and cached,
// so a launch does no host synchronisation and can be captured into a graph.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "kern/cuda/cuda.hpp"

namespace kern::cuda {

struct GemmShape {
  std::uint64_t m = 0, n = 0, k = 0;
  std::uint64_t lda = 0;  // A row stride in elements (>= k)
  std::uint64_t ldc = 0;  // C row stride in elements (>= n)
  bool accumulate = false;  // beta = 1
  auto key() const { return std::tuple(m, n, k, lda, ldc, accumulate); }
};

class BlasLt {
 public:
  static constexpr std::size_t kWorkspaceBytes = 32u << 20;
  BlasLt();  // Error(Driver) when libcublasLt cannot be loaded
  ~BlasLt();
  BlasLt(const BlasLt&) = delete;
  BlasLt& operator=(const BlasLt&) = delete;

  // Enqueues the GEMM on `s`. m, n or k = 0 is a no-op. Error(Blas) naming the call.
  void gemm_bf16_tn(const GemmShape& shape, DevicePtr a, DevicePtr w, DevicePtr c, const Stream& s);
  // Queries and caches the algorithm for `shape` now (off the launch path, outside capture).
  void prepare(const GemmShape& shape);
  std::size_t cached_plans() const;

 private:
  struct Plan;
  const Plan& plan(const GemmShape& shape);
  void* handle_ = nullptr;
  DeviceMemory workspace_;
  std::map<std::tuple<std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t, bool>,
           std::unique_ptr<Plan>>
      plans_;
};

}  // namespace kern::cuda
