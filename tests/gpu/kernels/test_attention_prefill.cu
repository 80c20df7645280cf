// Test-only kernels of module test_attention_prefill (built by tests/gpu/kernels/CMakeLists.txt into
// <build>/kernels/test_attention_prefill.fatbin; the harness finds an entry there when the production
// fatbin "attention_prefill" lacks it): instantiations of the production template
// kernels/attention_prefill_mma.cuh that kern gen does not launch.
#include "attention_prefill_mma.cuh"

// The one-stage layout (static shared memory only: K and V tiles, 2 * 64 * (HD + 8) * 2 bytes), the
// production entry before s2, kept as the reference of the tuning variants.
KERN_ATTN_PREFILL_MMA_ENTRY(kern_attn_prefill_mma_hd64, 64, 8, 1, 64, 1, 1)
KERN_ATTN_PREFILL_MMA_ENTRY(kern_attn_prefill_mma_hd128, 128, 8, 1, 64, 1, 1)
// Tuning variants, run by the GPU tests only (rows_per_block = queries per block / G; dynamic
// shared memory ((MT > 1 ? queries : 0) + 2 * stages * BN) * (HD + 8) * 2 bytes unless static):
//  * w4: 4 warps x 16 queries, three blocks per SM;
//  * m32: 4 warps x 32 queries (each K/V fragment read from shared memory feeds two m16 tiles; Q
//    staged in shared memory), 69632 bytes at hd 128, two blocks per SM;
//  * m32n32: m32 with key tiles of 32 (fewer registers; 52224 bytes);
//  * s2n32: the s2 production layout with key tiles of 32 (34816 bytes);
//  * m32n32s2: m32n32 with two stages (69632 bytes, two blocks per SM).
KERN_ATTN_PREFILL_MMA_ENTRY(kern_attn_prefill_mma_w4_hd128, 128, 4, 1, 64, 1, 3)
KERN_ATTN_PREFILL_MMA_ENTRY(kern_attn_prefill_mma_m32_hd128, 128, 4, 2, 64, 1, 2)
KERN_ATTN_PREFILL_MMA_ENTRY(kern_attn_prefill_mma_m32n32_hd128, 128, 4, 2, 32, 1, 2)
KERN_ATTN_PREFILL_MMA_ENTRY(kern_attn_prefill_mma_s2n32_hd128, 128, 8, 1, 32, 2, 1)
//  * w4s2: 4 warps x 16 queries with two K/V stages of 64 keys (69632 bytes, up to three blocks per SM).
KERN_ATTN_PREFILL_MMA_ENTRY(kern_attn_prefill_mma_w4s2_hd128, 128, 4, 1, 64, 2, 3)
// The two-warpgroup wgmma kernel (kernels/attention_prefill_wgmma.cuh, sm_90a; kern gen's default of
// session 28): 256 threads, key tiles of 64 in two K/V stages loaded by the math warps, a block barrier
// per tile (prefill_wg::kSharedBytes: 66,560 bytes). The bitwise anchor of wsold below.
#include "attention_prefill_wgmma.cuh"  // after the mma template, as in attention_prefill.cu
KERN_ATTN_PREFILL_WGMMA_ENTRY(kern_attn_prefill_wgmma_hd128, 2, 1)
// The warp-specialised kernel (kernels/attention_prefill_wgmma_ws.cuh; the production entry,
// kern_attn_prefill_wgmma_ws_hd128, is in attention_prefill.cu):
//  * wsold: four stages of 64 keys with the two-warpgroup kernel's softmax (softmax_tile): that
//    kernel's bits;
//  * ws128: the production kernel with tiles of 128 keys, three stages (197,632 bytes): as fast at
//    8,192 rows, 1-4 % slower at 512-2,048 on the H100 (docs/perf.md, session 29).
#include "attention_prefill_wgmma_ws.cuh"
KERN_ATTN_PREFILL_WGMMA_WS_ENTRY(kern_attn_prefill_wgmma_wsold_hd128, 4, 64, false, 2)
KERN_ATTN_PREFILL_WGMMA_WS_ENTRY(kern_attn_prefill_wgmma_ws128_hd128, 3, 128, true, 2)
