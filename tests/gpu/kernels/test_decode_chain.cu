// Test-only kernels of module test_decode_chain (built by tests/gpu/kernels/CMakeLists.txt into
// <build>/kernels/test_decode_chain.fatbin; the harness finds an entry there when the production
// fatbin "decode_chain" lacks it): diagnostics timed by PerfGpu.DecodeChain4B / BulkStreamProbe.
#include "decode_chain.cuh"

// Diagnostic variant (PerfGpu.DecodeChain4B; its outputs are meaningless): the same schedule, ring and
// barriers with the dot products skipped, so its time is what the weight stream alone costs.
extern "C" __global__ void __launch_bounds__(kThreads, 1)
    kern_decode_chain_bf16_stream_only(const bf16* __restrict__ attn, const bf16* __restrict__ o_w, bf16* h,
                                       const bf16* __restrict__ post_norm_w, const bf16* __restrict__ gate_up_w,
                                       bf16* act, const bf16* __restrict__ down_w, const bf16* __restrict__ next_norm_w,
                                       const bf16* __restrict__ next_w, bf16* __restrict__ next_out, uint32_t* sync,
                                       int32_t m, int32_t hidden, int32_t q_dim, int32_t inter, int32_t n_next,
                                       float eps, int32_t stage_bytes) {
  chain_body<false>(attn, o_w, h, post_norm_w, gate_up_w, act, down_w, next_norm_w, next_w, next_out, sync, m, hidden,
                    q_dim, inter, n_next, eps, stage_bytes);
}

// Diagnostic (PerfGpu.BulkStreamProbe): the bulk-copy weight stream with nothing else. Block b streams
// bytes [b·bytes_per_block, (b+1)·bytes_per_block) of src (a multiple of 16) through a ring of
// stage_bytes stages (dynamic shared memory / stage_bytes of them, at most 8) in bulk copies of
// `piece` bytes (0: one per stage) issued by warp 1; warp 0 waits for each stage and frees it at once.
// Block: 64 threads. sink[b] gets the stage count (so the work cannot be dropped).
extern "C" __global__ void __launch_bounds__(64)
    kern_bulk_stream_probe(const char* __restrict__ src, int64_t bytes_per_block, int32_t stage_bytes, int32_t piece,
                           uint32_t* sink) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) uint4 probe_ring[];
  __shared__ __align__(8) uint64_t full[kMaxStages], empty[kMaxStages];
  uint32_t dyn;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
  if (blockDim.x != 64 || stage_bytes <= 0 || (stage_bytes & 15) != 0 || (piece & 15) != 0 ||
      (bytes_per_block & 15) != 0)
    __trap();
  const int stages = min(kMaxStages, static_cast<int>(dyn / static_cast<uint32_t>(stage_bytes)));
  if (stages < 1) __trap();
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const char* base = src + blockIdx.x * bytes_per_block;
  const uint32_t n = static_cast<uint32_t>((bytes_per_block + stage_bytes - 1) / stage_bytes);
  const uint32_t lane = threadIdx.x & 31;
  char* ring = reinterpret_cast<char*>(probe_ring);
  if (threadIdx.x >= 32) {
    const uint64_t policy = evict_first_policy();
    for (uint32_t it = 0; it < n; ++it) {
      const uint32_t s = it % stages, use = it / stages;
      if (use > 0) mbar_wait(&empty[s], (use - 1) & 1);
      const int64_t off = static_cast<int64_t>(it) * stage_bytes;
      const int64_t left = bytes_per_block - off;
      const uint32_t bytes = static_cast<uint32_t>(left < stage_bytes ? left : stage_bytes);
      if (lane == 0) mbar_arrive_expect_tx(&full[s], bytes);
      __syncwarp();
      char* dst = ring + static_cast<size_t>(s) * stage_bytes;
      if (piece == 0) {
        if (lane == 0) bulk_load(dst, base + off, bytes, &full[s], policy);
      } else {
        for (uint32_t p = lane * piece; p < bytes; p += 32u * piece)
          bulk_load(dst + p, base + off + p, min(static_cast<uint32_t>(piece), bytes - p), &full[s], policy);
      }
    }
    return;
  }
  for (uint32_t it = 0; it < n; ++it) {
    const uint32_t s = it % stages;
    mbar_wait(&full[s], (it / stages) & 1);
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[s]);
  }
  if (lane == 0) sink[blockIdx.x] = n;
#else
  __trap();
#endif
}
