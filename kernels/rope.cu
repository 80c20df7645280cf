// RoPE table construction and the fused per-head q/k RMSNorm + NeoX RoPE + paged KV write.
//
// RoPE table: f32 [max_pos, head_dim]; row p = [cos(p*f_0) .. cos(p*f_{h-1}) | sin(p*f_0) .. sin(p*f_{h-1})]
// with h = head_dim/2, f_i = 1 / theta^(2i/head_dim). As in HF transformers, the frequency and
// the angle p*f_i are f32 values; cos/sin of that f32 angle are evaluated in f64 and stored as f32.
//
// Paged KV layout (one paged state, bytes_per_token = layers*2*kv_heads*head_dim*2): a page of
// page_size token slots holds, for each layer l, a K block then a V block, each
// [page_size, kv_heads, head_dim] bf16. The kernels take the state pointer already offset to
// layer l (l * 2*page_size*kv_heads*head_dim*2 bytes) and the page stride in elements
// (layers*2*page_size*kv_heads*head_dim). Token slot s lives in page s / page_size, row s % page_size.
#include "common.cuh"

using namespace kern_dev;

// grid: (ceil_div(max_pos * head_dim/2, 256), 1, 1), block (256, 1, 1).
extern "C" __global__ void kern_rope_table_f32(float* __restrict__ table, int32_t max_pos, int32_t head_dim, float theta) {
  const int half = head_dim / 2;
  const int64_t n = static_cast<int64_t>(max_pos) * half;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int p = static_cast<int>(e / half), i = static_cast<int>(e % half);
    const float expo = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    const float inv_freq = static_cast<float>(1.0 / pow(static_cast<double>(theta), static_cast<double>(expo)));
    const float angle = __fmul_rn(static_cast<float>(p), inv_freq);
    float* row = table + static_cast<int64_t>(p) * head_dim;
    row[i] = static_cast<float>(cos(static_cast<double>(angle)));
    row[half + i] = static_cast<float>(sin(static_cast<double>(angle)));
  }
}

namespace {
constexpr int kHeadsPerBlock = 4;  // one warp per head

// One warp, one head (q or k: normalise, rotate, write back and, for k, to the cache; v: copy to the
// cache) of rows [r0, r1). P: pairs per lane (half = head_dim / 2 <= 32 P). The rows go in groups of
// kRowGroup (4 up to head_dim 128, then 8 / P) whose loads are all issued before any of them is used, so a
// block of several rows pays about one latency chain per group instead of one per row.
template <int P>
__device__ __forceinline__ void qk_rows(bf16* __restrict__ qkv, const bf16* __restrict__ q_norm,
                                        const bf16* __restrict__ k_norm, const float* __restrict__ rope,
                                        const int64_t* __restrict__ positions, const int64_t* __restrict__ slots,
                                        bf16* __restrict__ cache, int r0, int r1, int head, int heads, int kv_heads,
                                        int head_dim, int page_size, int64_t page_stride, int max_pos, float eps) {
  constexpr int kRowGroup = P <= 2 ? 4 : 8 / P;  // at most 8 pairs x rows per lane (bounds registers)
  const int lane = threadIdx.x & 31;
  const int total_heads = heads + 2 * kv_heads;
  const int half = head_dim / 2;
  const bool is_v = head >= heads + kv_heads;
  const int kvh = head < heads ? 0 : (head < heads + kv_heads ? head - heads : head - heads - kv_heads);
  const int64_t v_block = is_v ? static_cast<int64_t>(page_size) * kv_heads * head_dim : 0;
  const bf16* w = head < heads ? q_norm : k_norm;
  float w1[P], w2[P];
#pragma unroll
  for (int j = 0; j < P; ++j) {
    const int i = lane + 32 * j;
    w1[j] = !is_v && i < half ? to_f(w[i]) : 0.0f;
    w2[j] = !is_v && i < half ? to_f(w[i + half]) : 0.0f;
  }
  for (int g0 = r0; g0 < r1; g0 += kRowGroup) {
    // Before waiting for the previous kernel (pdl, first group only): only what no kernel of the
    // program writes, i.e. the caller's positions and slots, the RoPE table and the norm weights.
    bf16* dst[kRowGroup];
    float cv[kRowGroup][P], sv[kRowGroup][P];
#pragma unroll
    for (int q = 0; q < kRowGroup; ++q) {
      const int r = g0 + q;
      dst[q] = nullptr;
      if (r < r1 && head >= heads) {
        const int64_t slot = slots[r];
        if (slot >= 0)
          dst[q] = cache + (slot / page_size) * page_stride +
                   (static_cast<int64_t>(slot % page_size) * kv_heads + kvh) * head_dim + v_block;
      }
      int64_t p = r < r1 && !is_v ? positions[r] : 0;
      p = p < 0 ? 0 : (p >= max_pos ? max_pos - 1 : p);
      const float* cs = rope + p * head_dim;
#pragma unroll
      for (int j = 0; j < P; ++j) {
        const int i = lane + 32 * j;
        const bool in = r < r1 && !is_v && i < half;
        cv[q][j] = in ? cs[i] : 0.0f;
        sv[q][j] = in ? cs[half + i] : 0.0f;
      }
    }
    if (g0 == r0) {
      wait_for_previous_grid();
      allow_next_grid();
    }
    float a[kRowGroup][P], b[kRowGroup][P];
#pragma unroll
    for (int q = 0; q < kRowGroup; ++q) {
      const bf16* x = qkv + static_cast<int64_t>(g0 + q) * total_heads * head_dim + static_cast<int64_t>(head) * head_dim;
#pragma unroll
      for (int j = 0; j < P; ++j) {
        const int i = lane + 32 * j;
        const bool in = g0 + q < r1 && i < half;
        a[q][j] = in ? to_f(x[i]) : 0.0f;
        b[q][j] = in ? to_f(x[i + half]) : 0.0f;
      }
    }
#pragma unroll
    for (int q = 0; q < kRowGroup; ++q) {
      if (g0 + q >= r1) break;
      bf16* x = qkv + static_cast<int64_t>(g0 + q) * total_heads * head_dim + static_cast<int64_t>(head) * head_dim;
      if (is_v) {  // v head: copy only
        if (dst[q] != nullptr)
#pragma unroll
          for (int j = 0; j < P; ++j) {
            const int i = lane + 32 * j;
            if (i < half) {
              dst[q][i] = to_bf(a[q][j]);
              dst[q][i + half] = to_bf(b[q][j]);
            }
          }
        continue;
      }
      float ss = 0.0f;
#pragma unroll
      for (int j = 0; j < P; ++j) ss += a[q][j] * a[q][j] + b[q][j] * b[q][j];
      ss = warp_sum(ss);
      const float rstd = rsqrtf(ss / static_cast<float>(head_dim) + eps);
#pragma unroll
      for (int j = 0; j < P; ++j) {
        const int i = lane + 32 * j;
        if (i < half) {
          const float n1 = round_bf(w1[j] * round_bf(a[q][j] * rstd));
          const float n2 = round_bf(w2[j] * round_bf(b[q][j] * rstd));
          const float c = cv[q][j], sn = sv[q][j];
          const bf16 o1 = to_bf(n1 * c - n2 * sn);
          const bf16 o2 = to_bf(n2 * c + n1 * sn);
          x[i] = o1;
          x[i + half] = o2;
          if (dst[q] != nullptr) {
            dst[q][i] = o1;
            dst[q][i + half] = o2;
          }
        }
      }
    }
  }
}
}  // namespace

// qkv: [rows, (heads + 2*kv_heads) * head_dim] bf16, q heads then k heads then v heads (in place).
// For each row r: every q and k head is RMS-normalised with q_norm / k_norm ([head_dim]) then
// rotated (NeoX halves) at position positions[r]; k and v heads are written to the paged cache at
// slot slots[r] (a negative slot skips the cache write). Positions are clamped to [0, max_pos).
// grid: (any x >= 1, ceil_div(heads + 2*kv_heads, 4), 1), block (128, 1, 1): block x takes rows
// [x·R, (x+1)·R) with R = ceil_div(rows, gridDim.x) (grid x = rows: one row per block, as decode uses;
// kern gen's prefill uses ceil_div(rows, 4)); the result does not depend on the grid. head_dim even,
// <= 512.
extern "C" __global__ void kern_qk_norm_rope_cache_bf16(bf16* __restrict__ qkv, const bf16* __restrict__ q_norm,
                                                        const bf16* __restrict__ k_norm, const float* __restrict__ rope,
                                                        const int64_t* __restrict__ positions,
                                                        const int64_t* __restrict__ slots, bf16* __restrict__ cache,
                                                        int32_t rows, int32_t heads, int32_t kv_heads, int32_t head_dim,
                                                        int32_t page_size, int64_t page_stride, int32_t max_pos,
                                                        float eps) {
  const int head = blockIdx.y * kHeadsPerBlock + (threadIdx.x >> 5);
  const int per_block = (rows + static_cast<int>(gridDim.x) - 1) / static_cast<int>(gridDim.x);
  const int r0 = static_cast<int>(blockIdx.x) * per_block, r1 = min(rows, r0 + per_block);
  if (r0 >= rows || head >= heads + 2 * kv_heads) return;  // an exited warp or block counts as waited and triggered
  if (head_dim <= 64)
    qk_rows<1>(qkv, q_norm, k_norm, rope, positions, slots, cache, r0, r1, head, heads, kv_heads, head_dim, page_size,
               page_stride, max_pos, eps);
  else if (head_dim <= 128)
    qk_rows<2>(qkv, q_norm, k_norm, rope, positions, slots, cache, r0, r1, head, heads, kv_heads, head_dim, page_size,
               page_stride, max_pos, eps);
  else if (head_dim <= 256)
    qk_rows<4>(qkv, q_norm, k_norm, rope, positions, slots, cache, r0, r1, head, heads, kv_heads, head_dim, page_size,
               page_stride, max_pos, eps);
  else
    qk_rows<8>(qkv, q_norm, k_norm, rope, positions, slots, cache, r0, r1, head, heads, kv_heads, head_dim, page_size,
               page_stride, max_pos, eps);
}
