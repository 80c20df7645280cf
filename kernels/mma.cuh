// Tensor-core and async-copy helpers shared by the attention kernels (sm_80+: cp.async, ldmatrix,
// mma.sync m16n8k16 bf16 with f32 accumulation). Fragment layouts are those of the PTX ISA for
// mma.m16n8k16: lane = 4·g + t holds rows g and g + 8, columns 2t and 2t + 1 of each 8-column block.
#pragma once

#include "common.cuh"

namespace kern_dev {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared; when !valid nothing is read and the destination is zero-filled.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr)
               : "memory");
}

// c += a·b for one m16n8k16 tile (a: 4 regs of bf16x2, row-major; b: 2 regs, col-major).
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The 8x8 b16 matrix a warp holds (lane l: row l / 4, columns 2(l % 4), +1), transposed.
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t a) {
  uint32_t d;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(d) : "r"(a));
  return d;
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ __forceinline__ uint32_t load_u32(const bf16* p) { return *reinterpret_cast<const uint32_t*>(p); }

// The A fragments (row-major m16 x 16·N, bf16) of this lane (t = lane & 3) for k-steps 0 .. N−1, from
// the lane's two rows: pa (row g) and pb (row g + 8), either null for a zero row.
template <int N>
__device__ __forceinline__ void load_a_fragments(uint32_t (&f)[N][4], const bf16* pa, const bf16* pb, int t) {
#pragma unroll
  for (int ks = 0; ks < N; ++ks) {
    const int d = ks * 16 + 2 * t;
    f[ks][0] = pa != nullptr ? load_u32(pa + d) : 0u;
    f[ks][1] = pb != nullptr ? load_u32(pb + d) : 0u;
    f[ks][2] = pa != nullptr ? load_u32(pa + d + 8) : 0u;
    f[ks][3] = pb != nullptr ? load_u32(pb + d + 8) : 0u;
  }
}

}  // namespace kern_dev
