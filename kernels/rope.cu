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
constexpr int kMaxPairsPerLane = 8;  // head_dim <= 512
constexpr int kHeadsPerBlock = 4;    // one warp per head
}  // namespace

// qkv: [rows, (heads + 2*kv_heads) * head_dim] bf16, q heads then k heads then v heads (in place).
// For each row r: every q and k head is RMS-normalised with q_norm / k_norm ([head_dim]) then
// rotated (NeoX halves) at position positions[r]; k and v heads are written to the paged cache at
// slot slots[r] (a negative slot skips the cache write). Positions are clamped to [0, max_pos).
// grid: (rows, ceil_div(heads + 2*kv_heads, 4), 1), block (128, 1, 1). head_dim even, <= 512.
extern "C" __global__ void kern_qk_norm_rope_cache_bf16(bf16* __restrict__ qkv, const bf16* __restrict__ q_norm,
                                                        const bf16* __restrict__ k_norm, const float* __restrict__ rope,
                                                        const int64_t* __restrict__ positions,
                                                        const int64_t* __restrict__ slots, bf16* __restrict__ cache,
                                                        int32_t rows, int32_t heads, int32_t kv_heads, int32_t head_dim,
                                                        int32_t page_size, int64_t page_stride, int32_t max_pos,
                                                        float eps) {
  const int r = blockIdx.x;
  const int lane = threadIdx.x & 31;
  const int head = blockIdx.y * kHeadsPerBlock + (threadIdx.x >> 5);
  const int total_heads = heads + 2 * kv_heads;
  if (r >= rows || head >= total_heads) return;  // an exited warp or block counts as waited and triggered
  const int half = head_dim / 2;
  bf16* x = qkv + static_cast<int64_t>(r) * total_heads * head_dim + static_cast<int64_t>(head) * head_dim;

  // Before waiting for the previous kernel (pdl): only what no kernel of the program writes, i.e.
  // the caller's positions and slots, the RoPE table and the norm weights. qkv comes after.
  const int64_t slot = slots[r];
  bf16* k_dst = nullptr;
  if (head >= heads && slot >= 0) {
    const int kvh = head < heads + kv_heads ? head - heads : head - heads - kv_heads;
    k_dst = cache + (slot / page_size) * page_stride +
            (static_cast<int64_t>(slot % page_size) * kv_heads + kvh) * head_dim;
    if (head >= heads + kv_heads) k_dst += static_cast<int64_t>(page_size) * kv_heads * head_dim;  // V block
  }

  if (head >= heads + kv_heads) {  // v head: copy only
    wait_for_previous_grid();
    allow_next_grid();
    if (k_dst != nullptr)
      for (int i = lane; i < head_dim; i += 32) k_dst[i] = x[i];
    return;
  }

  const bf16* w = head < heads ? q_norm : k_norm;
  int64_t p = positions[r];
  p = p < 0 ? 0 : (p >= max_pos ? max_pos - 1 : p);
  const float* cs = rope + p * head_dim;
  float w1[kMaxPairsPerLane], w2[kMaxPairsPerLane], cv[kMaxPairsPerLane], sv[kMaxPairsPerLane];
#pragma unroll
  for (int j = 0; j < kMaxPairsPerLane; ++j) {
    const int i = lane + 32 * j;
    const bool in = i < half;
    w1[j] = in ? to_f(w[i]) : 0.0f;
    w2[j] = in ? to_f(w[i + half]) : 0.0f;
    cv[j] = in ? cs[i] : 0.0f;
    sv[j] = in ? cs[half + i] : 0.0f;
  }
  wait_for_previous_grid();
  allow_next_grid();

  float a[kMaxPairsPerLane], b[kMaxPairsPerLane];
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < kMaxPairsPerLane; ++j) {
    const int i = lane + 32 * j;
    a[j] = 0.0f;
    b[j] = 0.0f;
    if (i < half) {
      a[j] = to_f(x[i]);
      b[j] = to_f(x[i + half]);
      ss += a[j] * a[j] + b[j] * b[j];
    }
  }
  ss = warp_sum(ss);
  const float rstd = rsqrtf(ss / static_cast<float>(head_dim) + eps);
#pragma unroll
  for (int j = 0; j < kMaxPairsPerLane; ++j) {
    const int i = lane + 32 * j;
    if (i < half) {
      const float n1 = round_bf(w1[j] * round_bf(a[j] * rstd));
      const float n2 = round_bf(w2[j] * round_bf(b[j] * rstd));
      const float c = cv[j], s = sv[j];
      const bf16 o1 = to_bf(n1 * c - n2 * s);
      const bf16 o2 = to_bf(n2 * c + n1 * s);
      x[i] = o1;
      x[i + half] = o2;
      if (k_dst != nullptr) {
        k_dst[i] = o1;
        k_dst[i + half] = o2;
      }
    }
  }
}
