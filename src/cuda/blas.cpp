#include "kern/cuda/blas.hpp"

#include <cublas_api.h>
#include <dlfcn.h>

#include <limits>
#include <string>
#include <type_traits>

#include "kern/base/error.hpp"
#include "cuda/driver_api.hpp"
#include "cuda/library_open.hpp"

namespace kern::cuda {
namespace {

// cublas_api.h overloads cublasGemmEx for C++ (an inline wrapper taking a cudaDataType compute
// type), so the table spells its exported signature out. The other names are the _v2 symbols
// cublas_v2.h maps the plain names to.
using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

struct BlasApi {
  decltype(&::cublasCreate_v2) create = nullptr;
  decltype(&::cublasDestroy_v2) destroy = nullptr;
  decltype(&::cublasSetStream_v2) set_stream = nullptr;
  decltype(&::cublasSetWorkspace_v2) set_workspace = nullptr;
  decltype(&::cublasGetStatusName) status_name = nullptr;
  decltype(&::cublasGetStatusString) status_string = nullptr;
  GemmExFn gemm_ex = nullptr;
};

BlasApi load_blas() {
  void* lib = detail::open_first_library({"libcublas.so.13", "libcublas.so", "libcublas.so.12"}, "cuBLAS");
  BlasApi a;
  auto sym = [lib](auto& field, const char* name) {
    field = reinterpret_cast<std::remove_reference_t<decltype(field)>>(dlsym(lib, name));
    if (!field) fail(ErrorKind::Driver, "the loaded cuBLAS lacks {}", name);
  };
  sym(a.create, "cublasCreate_v2");
  sym(a.destroy, "cublasDestroy_v2");
  sym(a.set_stream, "cublasSetStream_v2");
  sym(a.set_workspace, "cublasSetWorkspace_v2");
  sym(a.status_name, "cublasGetStatusName");
  sym(a.status_string, "cublasGetStatusString");
  sym(a.gemm_ex, "cublasGemmEx");
  return a;
}

const BlasApi& blas_api() { return detail::load_once<BlasApi>(load_blas); }

void check_blas(cublasStatus_t r, const char* call) {
  if (r == CUBLAS_STATUS_SUCCESS) return;
  const char* name = blas_api().status_name(r);
  const char* str = blas_api().status_string(r);
  fail(ErrorKind::Blas, "{} failed: {} ({})", call, name ? name : std::to_string(static_cast<int>(r)),
       str ? str : "no description");
}

int gemm_ex_int(std::uint64_t v, const char* what) {
  if (v > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
    fail(ErrorKind::Blas, "cublasGemmEx: {} = {} exceeds its int range", what, v);
  return static_cast<int>(v);
}

}  // namespace

Blas::Blas(const Stream& s) {
  cublasHandle_t h = nullptr;
  check_blas(blas_api().create(&h), "cublasCreate");
  handle_ = h;
  try {
    workspace_ = DeviceMemory::allocate(kWorkspaceBytes, "the cuBLAS workspace");
    bind(s);
  } catch (...) {
    blas_api().destroy(h);
    throw;
  }
}

Blas::~Blas() {
  if (handle_) blas_api().destroy(static_cast<cublasHandle_t>(handle_));
}

void Blas::bind(const Stream& s) {
  const auto h = static_cast<cublasHandle_t>(handle_);
  check_blas(blas_api().set_stream(h, static_cast<cudaStream_t>(s.handle())), "cublasSetStream");
  // After the stream: cublasSetStream puts the handle back on cuBLAS's own workspace pool.
  check_blas(blas_api().set_workspace(h, reinterpret_cast<void*>(workspace_.ptr()), kWorkspaceBytes),
             "cublasSetWorkspace");
  stream_ = s.handle();
}

void Blas::gemm_bf16_tn_f32(const GemmShape& s, DevicePtr a, DevicePtr w, DevicePtr c, const Stream& stream) {
  if (s.in != DType::BF16 || s.out != DType::F32)
    fail(ErrorKind::Api, "cublasGemmEx runs bf16 -> f32 here, not {} -> {}", manifest_name(s.in), manifest_name(s.out));
  if (s.m == 0 || s.n == 0 || s.k == 0) return;
  if (stream.handle() != stream_) bind(stream);
  const float alpha = 1.0f, beta = s.accumulate ? 1.0f : 0.0f;
  // cuBLAS's m, n, k are Cᵀ's rows (our n), its columns (our m) and the inner extent.
  check_blas(blas_api().gemm_ex(static_cast<cublasHandle_t>(handle_), CUBLAS_OP_T, CUBLAS_OP_N, gemm_ex_int(s.n, "n"),
                                gemm_ex_int(s.m, "m"), gemm_ex_int(s.k, "k"), &alpha, reinterpret_cast<const void*>(w),
                                CUDA_R_16BF, gemm_ex_int(s.k, "k"), reinterpret_cast<const void*>(a), CUDA_R_16BF,
                                gemm_ex_int(s.lda, "lda"), &beta, reinterpret_cast<void*>(c), CUDA_R_32F,
                                gemm_ex_int(s.ldc, "ldc"), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
             "cublasGemmEx");
}

}  // namespace kern::cuda
