// Decode GEMV entries kern gen launches (module gemv); the kernels, their contract and design:
// gemv.cuh. Tuning variants (test-only): tests/gpu/kernels/test_gemv.cu.
#include "gemv.cuh"

extern "C" __global__ void kern_gemv_bf16(const bf16* __restrict__ x, const bf16* __restrict__ w, bf16* __restrict__ y,
                                          int32_t m, int32_t n, int32_t k, int32_t ldx, int32_t prefetch) {
  gemv_pdl<Epilogue::Store, false>(x, nullptr, w, y, m, n, k, ldx, 0.0f, prefetch);
}

extern "C" __global__ void kern_gemv_residual_bf16(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                                   bf16* __restrict__ h, int32_t m, int32_t n, int32_t k, int32_t ldx,
                                                   int32_t prefetch) {
  gemv_pdl<Epilogue::Residual, false>(x, nullptr, w, h, m, n, k, ldx, 0.0f, prefetch);
}

extern "C" __global__ void kern_gemv_gate_up_silu_bf16(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                                       bf16* __restrict__ act, int32_t m, int32_t inter, int32_t k,
                                                       int32_t ldx, int32_t prefetch) {
  gemv_pdl<Epilogue::SiluMul, false>(x, nullptr, w, act, m, inter, k, ldx, 0.0f, prefetch);
}

extern "C" __global__ void kern_gemv_rms_norm_bf16(const bf16* __restrict__ x, const bf16* __restrict__ norm_w,
                                                   const bf16* __restrict__ w, bf16* __restrict__ y, int32_t m,
                                                   int32_t n, int32_t k, int32_t ldx, float eps, int32_t prefetch) {
  gemv_pdl<Epilogue::Store, true>(x, norm_w, w, y, m, n, k, ldx, eps, prefetch);
}

extern "C" __global__ void kern_gemv_rms_norm_gate_up_silu_bf16(const bf16* __restrict__ x,
                                                                const bf16* __restrict__ norm_w,
                                                                const bf16* __restrict__ w, bf16* __restrict__ act,
                                                                int32_t m, int32_t inter, int32_t k, int32_t ldx,
                                                                float eps, int32_t prefetch) {
  gemv_pdl<Epilogue::SiluMul, true>(x, norm_w, w, act, m, inter, k, ldx, eps, prefetch);
}
