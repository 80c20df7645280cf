// Chunked-prefill paged attention on tensor cores: the entries kern gen launches (module
// attention_prefill). The kernel template and its design notes: attention_prefill_mma.cuh; the
// one-stage reference and the tuning variants are test-only (tests/gpu/kernels/test_attention_prefill.cu).
#include "attention_prefill_mma.cuh"

// Production entries (kern gen): s2, 8 warps x 16 queries (128 queries) per block, Q fragments in
// registers, key tiles of 64 in two K/V stages (tile j + 1 loads while tile j is computed; two
// barriers per tile), dynamic shared memory 2 * 2 * 64 * (HD + 8) * 2 bytes (36864 at hd 64, 69632 at
// hd 128); kern gen uses rows_per_block = 128 / G. 9-11 % faster than the one-stage layout on the
// H200 (docs/kernels.md).
KERN_ATTN_PREFILL_MMA_ENTRY(kern_attn_prefill_mma_s2_hd64, 64, 8, 1, 64, 2, 1)
KERN_ATTN_PREFILL_MMA_ENTRY(kern_attn_prefill_mma_s2_hd128, 128, 8, 1, 64, 2, 1)
// Long chunks (kern gen, above its row threshold): m32n32s2, 4 warps x 32 queries (Q staged in shared
// memory, each K/V fragment feeds two m16 tiles), key tiles of 32 in two stages (69632 bytes, two blocks per SM).
KERN_ATTN_PREFILL_MMA_ENTRY(kern_attn_prefill_mma_m32n32s2_hd128, 128, 4, 2, 32, 2, 2)

// sm_90a, head_dim 128 (kern gen's default there): S = Q·Kᵀ and O += P·V on wgmma, warp-specialised
// (kernels/attention_prefill_wgmma_ws.cuh): a producer warpgroup streams 64-key K/V tiles into four
// stages for two consumer warpgroups of 64 queries, the lean softmax; 384 threads,
// prefill_ws::kSharedBytes<4, 64, 2> (132,096) bytes of dynamic shared memory, rows_per_block = 128 / G.
// 1.65-1.7 x the two-warpgroup kernel of session 28 at 8,192 rows on the H100 and the H200
// (docs/perf.md, session 29). The sm_80 build of this entry traps.
#include "attention_prefill_wgmma_ws.cuh"
KERN_ATTN_PREFILL_WGMMA_WS_ENTRY(kern_attn_prefill_wgmma_ws_hd128, 4, 64, true, 2)
// Long calls (kern gen, from --prefill-long-rows rows): three consumer warpgroups (192 queries per
// block, Q in shared memory, 512 threads, prefill_ws::kSharedBytes<4, 64, 3> = 181,248 bytes): each K/V
// tile feeds 1.5 x the queries. +7 % at 8,192 rows, -19 % at 512 (fewer blocks than SMs) on the H100
// (docs/perf.md, session 29). The same arithmetic per query, so the same bits as the entry above
// (AttentionPrefillMmaGpu.VariantsWgmma): which of the two a call takes never changes a row.
KERN_ATTN_PREFILL_WGMMA_WS_ENTRY(kern_attn_prefill_wgmma_ws3_hd128, 4, 64, true, 3)
