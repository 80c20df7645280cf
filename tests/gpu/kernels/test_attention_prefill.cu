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
// The wgmma kernel's tuning variant (kernels/attention_prefill_wgmma.cuh, sm_90a; the production entry,
// kern_attn_prefill_wgmma_hd128, is in attention_prefill.cu): S of tile j + 1 and P·V of tile j overlap
// tile j's softmax, four K/V stages (132,096 bytes). As fast as the production entry on the H100
// (docs/perf.md, session 28): its warpgroups still meet at a block barrier every tile.
#include "attention_prefill_wgmma.cuh"  // after the mma template, as in attention_prefill.cu
KERN_ATTN_PREFILL_WGMMA_ENTRY(kern_attn_prefill_wgmma_pipe_hd128, true, 2, 1)
// One warpgroup per block (64 queries, rows_per_block = 64 / G): blocks meet no other warpgroup at their
// barriers, two per SM (two stages) or one (pipelined, four stages). Slower than the production entry
// on the H100 (227 / 139 against 252 TFLOP/s at 8k: each K/V tile is loaded for 64 queries, not 128;
// docs/perf.md, session 28).
KERN_ATTN_PREFILL_WGMMA_ENTRY(kern_attn_prefill_wgmma_w1_hd128, false, 1, 2)
KERN_ATTN_PREFILL_WGMMA_ENTRY(kern_attn_prefill_wgmma_w1p_hd128, true, 1, 1)
// The warp-specialised wgmma kernel (kernels/attention_prefill_wgmma_ws.cuh): a producer warp fills a
// ring of K/V stages for two consumer warpgroups, no block barrier inside a segment; ws: four stages,
// the warpgroups take turns to issue Q·Kᵀ (ping-pong); wsnp: four stages, no turns; ws6: six stages
// with turns; wso: four stages, each warpgroup's products overlapping its own softmax
// (prefill_ws::kSharedBytes: 132,096 / 197,632 bytes).
#include "attention_prefill_wgmma_ws.cuh"
KERN_ATTN_PREFILL_WGMMA_WS_ENTRY(kern_attn_prefill_wgmma_ws_hd128, 4, true, false)
KERN_ATTN_PREFILL_WGMMA_WS_ENTRY(kern_attn_prefill_wgmma_wsnp_hd128, 4, false, false)
KERN_ATTN_PREFILL_WGMMA_WS_ENTRY(kern_attn_prefill_wgmma_ws6_hd128, 6, true, false)
KERN_ATTN_PREFILL_WGMMA_WS_ENTRY(kern_attn_prefill_wgmma_wso_hd128, 4, false, true)
