// The peer barrier (issue 20; docs/kernels.md, "Peer barrier"): every member of a topology group
// announces a generation in every member's flags and waits, with a timeout, until every member has
// announced it in its own. One block of at least `ranks` threads (ranks <= 1024); thread t writes
// this rank's slot of rank t's flags, then waits for rank t's slot of this rank's flags.
//
// flags: each rank's exported u32 buffer of `ranks` words, word s = the last generation rank s
// announced there; `peers[t]` is rank t's buffer as this rank maps it (peers[rank] its own).
// gen: this rank's generation (a carry, 0 at load), advanced by one per call, timed out or not.
// error: 0, or 1 + the lowest rank whose announcement did not arrive within timeout_ns (then the
// group is out of step: the caller treats it as fatal). Stores are release and loads acquire at
// system scope: what a member wrote before its barrier is visible to every member after theirs.
// No multimem / multicast: plain stores and loads through the peer's mapping.
#include <cuda_bf16.h>
#include <stdint.h>

namespace {

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

}  // namespace

extern "C" __global__ void kern_peer_barrier(const unsigned long long* peers, int rank, int ranks, unsigned* gen,
                                             int* error, long long timeout_ns) {
  __shared__ unsigned g;
  __shared__ int first_late;
  const int t = threadIdx.x;
  if (t == 0) {
    g = gen[0] + 1u;
    first_late = 0x7fffffff;
  }
  __syncthreads();
  if (t < ranks) {
    unsigned* slot = reinterpret_cast<unsigned*>(peers[t]) + rank;
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(slot), "r"(g) : "memory");
    const unsigned* mine = reinterpret_cast<const unsigned*>(peers[rank]) + t;
    const uint64_t start = global_ns();
    for (;;) {
      unsigned v;
      asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(mine) : "memory");
      if (static_cast<int>(v - g) >= 0) break;  // generations compared modulo 2^32
      if (static_cast<long long>(global_ns() - start) > timeout_ns) {
        atomicMin(&first_late, t);
        break;
      }
      __nanosleep(100);
    }
  }
  __syncthreads();
  if (t == 0) {
    gen[0] = g;
    error[0] = first_late == 0x7fffffff ? 0 : first_late + 1;
  }
}

// The one-shot all-reduce over peer buffers (tensor-parallel decode and prefill on one host; docs/kernels.md,
// "Peer all-reduce"): out[i] = the sum over ranks t = 0, 1, … of rank t's parts[i], in rank order and in f32,
// rounded once to bf16, so every rank computes the same bits. `peers[t]` is rank t's exported bf16 parts
// buffer as this rank maps it. The caller brackets it with peer barriers: one after every rank wrote its
// parts, one before any rank writes them again. Loads bypass L1 (ld.global.cv): the parts were written
// by other streams (or GPUs) since this kernel's last launch. count: elements, a multiple of 8.
extern "C" __global__ void kern_allreduce_peer_bf16(const unsigned long long* peers, int ranks, __nv_bfloat16* out,
                                                    long long count) {
  const long long vecs = count / 8;
  for (long long v = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; v < vecs;
       v += static_cast<long long>(gridDim.x) * blockDim.x) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int t = 0; t < ranks; ++t) {
      const uint4 raw = __ldcv(reinterpret_cast<const uint4*>(peers[t]) + v);
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
      for (int j = 0; j < 4; ++j) {
        const float2 f = __bfloat1622float2(h[j]);
        acc[2 * j] += f.x;
        acc[2 * j + 1] += f.y;
      }
    }
    uint4 packed;
    __nv_bfloat162* o = reinterpret_cast<__nv_bfloat162*>(&packed);
    for (int j = 0; j < 4; ++j) o[j] = __floats2bfloat162_rn(acc[2 * j], acc[2 * j + 1]);
    reinterpret_cast<uint4*>(out)[v] = packed;
  }
}
