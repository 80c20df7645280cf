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
