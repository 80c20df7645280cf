// cuBLAS through dlopen (libcublas.so.13, falling back to .so / .so.12): the GEMM behind the
// `extern:cublas_bf16_tn_f32` launches.
//
// Row-major C[m,n] (f32) = A[m,k]·W[n,k]ᵀ (bf16 in, f32 compute) as cublasGemmEx's column-major
// Cᵀ[n,m] = op_T(W)·Aᵀ: transa = T, W as k×n (ld k), A as k×m (ld lda), C as n×m (ld ldc). One
// handle per object with its own 32 MiB workspace, set after the stream (cublasSetStream resets a
// handle's workspace to cuBLAS's pool), so a launch allocates nothing and can be captured into a
// graph. cuBLAS picks its algorithm per shape (CUBLAS_GEMM_DEFAULT): unlike the cuBLASLt externs,
// a row's bits may depend on how many rows share the call.
#pragma once

#include <cstddef>

#include "kern/cuda/blaslt.hpp"
#include "kern/cuda/cuda.hpp"

namespace kern::cuda {

class Blas {
 public:
  static constexpr std::size_t kWorkspaceBytes = 32u << 20;
  // Creates the handle and binds it to `s` and the workspace (off any capture). Error(Driver) when
  // libcublas cannot be loaded.
  explicit Blas(const Stream& s);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  // Enqueues C = A·Wᵀ (+ C when shape.accumulate) on `s` (bound first if it is not the handle's
  // stream). shape.in must be bf16 and shape.out f32 (Error(Api)); m_ref, algo and candidate are
  // not used. m, n or k = 0 is a no-op. Error(Blas) naming the call.
  void gemm_bf16_tn_f32(const GemmShape& shape, DevicePtr a, DevicePtr w, DevicePtr c, const Stream& s);

 private:
  void bind(const Stream& s);
  void* handle_ = nullptr;
  void* stream_ = nullptr;  // the stream the handle and its workspace are bound to
  DeviceMemory workspace_;
};

}  // namespace kern::cuda
