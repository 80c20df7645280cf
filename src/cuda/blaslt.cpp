#include "kern/cuda/blaslt.hpp"

#include <cublasLt.h>
#include <dlfcn.h>

#include <mutex>
#include <string>

#include "kern/error.hpp"
#include "kern/log.hpp"

namespace kern::cuda {
namespace {

#define KERN_BLASLT_FUNCTIONS(X)           \
  X(cublasLtCreate)                        \
  X(cublasLtDestroy)                       \
  X(cublasLtGetStatusName)                 \
  X(cublasLtGetStatusString)               \
  X(cublasLtMatmulDescCreate)              \
  X(cublasLtMatmulDescDestroy)             \
  X(cublasLtMatmulDescSetAttribute)        \
  X(cublasLtMatrixLayoutCreate)            \
  X(cublasLtMatrixLayoutDestroy)           \
  X(cublasLtMatmulPreferenceCreate)        \
  X(cublasLtMatmulPreferenceDestroy)       \
  X(cublasLtMatmulPreferenceSetAttribute)  \
  X(cublasLtMatmulAlgoGetHeuristic)        \
  X(cublasLtMatmul)

struct LtApi {
#define KERN_LT_FIELD(name) decltype(&::name) name = nullptr;
  KERN_BLASLT_FUNCTIONS(KERN_LT_FIELD)
#undef KERN_LT_FIELD
};

LtApi load_lt() {
  const char* names[] = {"libcublasLt.so.13", "libcublasLt.so", "libcublasLt.so.12"};
  void* lib = nullptr;
  std::string tried;
  for (const char* n : names) {
    lib = dlopen(n, RTLD_NOW | RTLD_LOCAL);
    if (lib) break;
    const char* why = dlerror();
    tried += fmt::format("{}{} ({})", tried.empty() ? "" : "; ", n, why ? why : "?");
  }
  if (!lib) fail(ErrorKind::Driver, "cuBLASLt could not be loaded: tried {}", tried);
  LtApi a;
#define KERN_LT_LOAD(name)                                                 \
  a.name = reinterpret_cast<decltype(a.name)>(dlsym(lib, #name));          \
  if (!a.name) fail(ErrorKind::Driver, "the loaded cuBLASLt lacks {}", #name);
  KERN_BLASLT_FUNCTIONS(KERN_LT_LOAD)
#undef KERN_LT_LOAD
  return a;
}

const LtApi& lt() {
  static std::mutex mu;
  static LtApi* loaded = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (!loaded) loaded = new LtApi(load_lt());
  return *loaded;
}

void check(cublasStatus_t r, const char* call) {
  if (r == CUBLAS_STATUS_SUCCESS) return;
  const char* name = lt().cublasLtGetStatusName(r);
  const char* str = lt().cublasLtGetStatusString(r);
  fail(ErrorKind::Blas, "{} failed: {} ({})", call, name ? name : std::to_string(static_cast<int>(r)),
       str ? str : "no description");
}

#define KERN_LT(fn, ...) check(lt().fn(__VA_ARGS__), #fn)

}  // namespace

struct BlasLt::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t w = nullptr, a = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (c) lt().cublasLtMatrixLayoutDestroy(c);
    if (a) lt().cublasLtMatrixLayoutDestroy(a);
    if (w) lt().cublasLtMatrixLayoutDestroy(w);
    if (desc) lt().cublasLtMatmulDescDestroy(desc);
  }
};

BlasLt::BlasLt() {
  cublasLtHandle_t h = nullptr;
  KERN_LT(cublasLtCreate, &h);
  handle_ = h;
  workspace_ = DeviceMemory::allocate(kWorkspaceBytes, "the cuBLASLt workspace");
}

BlasLt::~BlasLt() {
  plans_.clear();
  if (handle_) lt().cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

void BlasLt::prepare(const GemmShape& s) {
  if (s.m && s.n && s.k) (void)plan(s);
}

std::size_t BlasLt::cached_plans() const { return plans_.size(); }

const BlasLt::Plan& BlasLt::plan(const GemmShape& s) {
  auto it = plans_.find(s.key());
  if (it != plans_.end()) return *it->second;
  auto p = std::make_unique<Plan>();
  KERN_LT(cublasLtMatmulDescCreate, &p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  KERN_LT(cublasLtMatmulDescSetAttribute, p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  KERN_LT(cublasLtMatmulDescSetAttribute, p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  // Column-major view: W is k×n (ld k) used transposed, A is k×m (ld lda), C is n×m (ld ldc).
  KERN_LT(cublasLtMatrixLayoutCreate, &p->w, CUDA_R_16BF, s.k, s.n, static_cast<int64_t>(s.k));
  KERN_LT(cublasLtMatrixLayoutCreate, &p->a, CUDA_R_16BF, s.k, s.m, static_cast<int64_t>(s.lda));
  KERN_LT(cublasLtMatrixLayoutCreate, &p->c, CUDA_R_16BF, s.n, s.m, static_cast<int64_t>(s.ldc));
  cublasLtMatmulPreference_t pref = nullptr;
  KERN_LT(cublasLtMatmulPreferenceCreate, &pref);
  std::uint64_t ws = kWorkspaceBytes;
  cublasStatus_t r = lt().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                                 sizeof ws);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (r == CUBLAS_STATUS_SUCCESS)
    r = lt().cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(handle_), p->desc, p->w, p->a, p->c, p->c,
                                            pref, 1, &result, &found);
  lt().cublasLtMatmulPreferenceDestroy(pref);
  check(r, "cublasLtMatmulAlgoGetHeuristic");
  if (found < 1)
    fail(ErrorKind::Blas, "cublasLtMatmulAlgoGetHeuristic found no algorithm for bf16 m={} n={} k={} lda={} ldc={}",
         s.m, s.n, s.k, s.lda, s.ldc);
  p->algo = result.algo;
  return *plans_.emplace(s.key(), std::move(p)).first->second;
}

void BlasLt::gemm_bf16_tn(const GemmShape& s, DevicePtr a, DevicePtr w, DevicePtr c, const Stream& stream) {
  if (s.m == 0 || s.n == 0 || s.k == 0) return;
  const Plan& p = plan(s);
  const float alpha = 1.0f, beta = s.accumulate ? 1.0f : 0.0f;
  KERN_LT(cublasLtMatmul, static_cast<cublasLtHandle_t>(handle_), p.desc, &alpha, reinterpret_cast<const void*>(w),
          p.w, reinterpret_cast<const void*>(a), p.a, &beta, reinterpret_cast<const void*>(c), p.c,
          reinterpret_cast<void*>(c), p.c, &p.algo, reinterpret_cast<void*>(workspace_.ptr()), kWorkspaceBytes,
          static_cast<cudaStream_t>(stream.handle()));
}

}  // namespace kern::cuda
