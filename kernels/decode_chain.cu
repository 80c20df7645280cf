// The decode chain entry kern gen launches (module decode_chain); kernel, contract and design:
// decode_chain.cuh. Diagnostics (test-only): tests/gpu/kernels/test_decode_chain.cu.
#include "decode_chain.cuh"

extern "C" __global__ void __launch_bounds__(kThreads, 1)
    kern_decode_chain_bf16(const bf16* __restrict__ attn, const bf16* __restrict__ o_w, bf16* h,
                           const bf16* __restrict__ post_norm_w, const bf16* __restrict__ gate_up_w, bf16* act,
                           const bf16* __restrict__ down_w, const bf16* __restrict__ next_norm_w,
                           const bf16* __restrict__ next_w, bf16* __restrict__ next_out, uint32_t* sync, int32_t m,
                           int32_t hidden, int32_t q_dim, int32_t inter, int32_t n_next, float eps,
                           int32_t stage_bytes) {
  chain_body<true>(attn, o_w, h, post_norm_w, gate_up_w, act, down_w, next_norm_w, next_w, next_out, sync, m, hidden,
                   q_dim, inter, n_next, eps, stage_bytes);
}
