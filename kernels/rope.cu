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
#include "paged_kv.cuh"
#include "rms.cuh"

using namespace kern_dev;

namespace {
// Fills the table: element (p, i) of [max_pos, head_dim/2] from inv_freq(i) (an f32) and, when
// kScaled, cos/sin multiplied by `scale`. Grid-stride over the elements.
template <bool kScaled, typename InvFreq>
__device__ __forceinline__ void fill_rope_table(float* __restrict__ table, int32_t max_pos, int32_t head_dim,
                                                InvFreq inv_freq_of, float scale) {
  const int half = head_dim / 2;
  const int64_t n = static_cast<int64_t>(max_pos) * half;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int p = static_cast<int>(e / half), i = static_cast<int>(e % half);
    const float angle = __fmul_rn(static_cast<float>(p), inv_freq_of(i));
    float* row = table + static_cast<int64_t>(p) * head_dim;
    const float c = static_cast<float>(cos(static_cast<double>(angle)));
    const float s = static_cast<float>(sin(static_cast<double>(angle)));
    row[i] = kScaled ? __fmul_rn(c, scale) : c;
    row[half + i] = kScaled ? __fmul_rn(s, scale) : s;
  }
}

// theta^(2i/head_dim) with the exponent an f32, as transformers computes it.
__device__ __forceinline__ double rope_base_power(float theta, int i, int32_t head_dim) {
  const float expo = static_cast<float>(2 * i) / static_cast<float>(head_dim);
  return pow(static_cast<double>(theta), static_cast<double>(expo));
}
}  // namespace

// grid: (ceil_div(max_pos * head_dim/2, 256), 1, 1), block (256, 1, 1).
extern "C" __global__ void kern_rope_table_f32(float* __restrict__ table, int32_t max_pos, int32_t head_dim,
                                               float theta) {
  fill_rope_table<false>(
      table, max_pos, head_dim,
      [=](int i) { return static_cast<float>(1.0 / rope_base_power(theta, i, head_dim)); }, 1.0f);
}

// YaRN (transformers' `rope_type: yarn`): f_i = interp_i * (1 - e_i) + extrap_i * e_i with
// extrap_i = 1 / theta^(2i/head_dim), interp_i = 1 / (factor * theta^(2i/head_dim)) and
// e_i = 1 - clamp((i - ramp_low) / (ramp_high - ramp_low), 0, 1); every cos/sin is multiplied by
// attention_factor. ramp_low/ramp_high (the correction range, already floored/ceiled and
// clamped as transformers does) and attention_factor are computed on the host (double, as
// Python does); the per-dimension values are f32 operations in transformers' order, without
// contraction into FMAs.
// grid: (ceil_div(max_pos * head_dim/2, 256), 1, 1), block (256, 1, 1).
extern "C" __global__ void kern_rope_table_yarn_f32(float* __restrict__ table, int32_t max_pos, int32_t head_dim,
                                                    float theta, float factor, float ramp_low, float ramp_high,
                                                    float attention_factor) {
  fill_rope_table<true>(
      table, max_pos, head_dim,
      [=](int i) {
        const float pos_freq = static_cast<float>(rope_base_power(theta, i, head_dim));
        const float extrap = __fdiv_rn(1.0f, pos_freq);
        const float interp = __fdiv_rn(1.0f, __fmul_rn(factor, pos_freq));
        const float linear = __fdiv_rn(__fsub_rn(static_cast<float>(i), ramp_low), __fsub_rn(ramp_high, ramp_low));
        const float extrap_factor = __fsub_rn(1.0f, fminf(fmaxf(linear, 0.0f), 1.0f));
        return __fadd_rn(__fmul_rn(interp, __fsub_rn(1.0f, extrap_factor)), __fmul_rn(extrap, extrap_factor));
      },
      attention_factor);
}

namespace {
constexpr int kHeadsPerBlock = 4;      // one warp per head
constexpr int kChunkRows = 16;         // rows staged in shared memory at once (fewer past head_dim 128)
constexpr int kStageElems = 16 * 128;  // bf16 per head of a chunk, and f32 of its RoPE rows

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
}  // namespace

// qkv: [rows, (heads + 2*kv_heads) * head_dim] bf16, q heads then k heads then v heads (in place).
// For each row r: every q and k head is RMS-normalised with q_norm / k_norm ([head_dim]) then
// rotated (NeoX halves) at position positions[r]; k and v heads are written to the paged cache at
// slot slots[r] (a negative slot skips the cache write). Positions are clamped to [0, max_pos).
// grid: (any x >= 1, ceil_div(heads + 2*kv_heads, 4), 1), block (128, 1, 1): block x takes rows
// [x·R, (x+1)·R) with R = ceil_div(rows, gridDim.x) (grid x = rows: one row per block, as decode uses;
// kern gen's prefill uses ceil_div(rows, 16)); the result does not depend on the grid. head_dim a
// multiple of 8, <= 512.
//
// How: the block's rows go in chunks of up to 16 (2048 / head_dim past 128). For a chunk, the block
// copies its 4 heads of every row (one contiguous run per row) and the rows' RoPE table rows into
// shared memory with cp.async, all in flight together, then each warp normalises, rotates and writes
// its head of every row from there (lane i takes pairs i, i + 32, ... as one warp per head always did).
extern "C" __global__ void kern_qk_norm_rope_cache_bf16(bf16* __restrict__ qkv, const bf16* __restrict__ q_norm,
                                                        const bf16* __restrict__ k_norm, const float* __restrict__ rope,
                                                        const int64_t* __restrict__ positions,
                                                        const int64_t* __restrict__ slots, bf16* __restrict__ cache,
                                                        int32_t rows, int32_t heads, int32_t kv_heads, int32_t head_dim,
                                                        int32_t page_size, int64_t page_stride, int32_t max_pos,
                                                        float eps) {
  __shared__ __align__(16) bf16 xs[kHeadsPerBlock * kStageElems];
  __shared__ __align__(16) float cs[kStageElems];
  __shared__ int64_t slot_s[kChunkRows];
  __shared__ int32_t pos_s[kChunkRows];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int total_heads = heads + 2 * kv_heads;
  const int h0 = blockIdx.y * kHeadsPerBlock;
  const int nh = min(kHeadsPerBlock, total_heads - h0);
  const int per_block = (rows + static_cast<int>(gridDim.x) - 1) / static_cast<int>(gridDim.x);
  const int r0 = static_cast<int>(blockIdx.x) * per_block, r1 = min(rows, r0 + per_block);
  if (head_dim < 8 || head_dim > 512 || (head_dim & 7) != 0) __trap();  // unsupported (kern gen allows 64 and 128)
  if (r0 >= rows || nh <= 0) return;  // an exited block counts as waited and triggered
  const int half = head_dim / 2;
  const int chunk_rows = min(kChunkRows, kStageElems / head_dim);
  const int head = h0 + warp;
  const bool live = warp < nh;
  const bool is_v = head >= heads + kv_heads;
  const int kvh = head < heads ? 0 : (head < heads + kv_heads ? head - heads : head - heads - kv_heads);
  const int64_t v_block = is_v ? v_block_elems(page_size, kv_heads, head_dim) : 0;
  const bf16* w = head < heads ? q_norm : k_norm;
  const int run = nh * head_dim / 8;  // 16-byte pieces of one row's heads
  const int rope_run = head_dim / 4;  // 16-byte pieces of one RoPE row
  const int page_shift = page_shift_of(page_size);

  for (int c0 = r0; c0 < r1; c0 += chunk_rows) {
    const int n = min(chunk_rows, r1 - c0);
    __syncthreads();  // the previous chunk's readers are done with the stage
    // Before waiting for the previous kernel (pdl, first chunk only): only what no kernel of the
    // program writes, i.e. the caller's positions and slots and the RoPE table. qkv comes after.
    if (static_cast<int>(threadIdx.x) < n) {
      int64_t p = positions[c0 + threadIdx.x];
      pos_s[threadIdx.x] = static_cast<int32_t>(p < 0 ? 0 : (p >= max_pos ? max_pos - 1 : p));
      slot_s[threadIdx.x] = slots[c0 + threadIdx.x];
    }
    __syncthreads();
    for (int e = threadIdx.x; e < n * rope_run; e += blockDim.x) {
      const int q = e / rope_run, piece = e - q * rope_run;
      cp_async16(cs + q * head_dim + piece * 4, rope + static_cast<int64_t>(pos_s[q]) * head_dim + piece * 4);
    }
    if (c0 == r0) {
      wait_for_previous_grid();
      allow_next_grid();
    }
    for (int e = threadIdx.x; e < n * run; e += blockDim.x) {
      const int q = e / run, piece = e - q * run;
      cp_async16(xs + q * kHeadsPerBlock * head_dim + piece * 8,
                 qkv + (static_cast<int64_t>(c0 + q) * total_heads + h0) * head_dim + piece * 8);
    }
    cp_async_wait_all();
    __syncthreads();
    if (!live) continue;
    for (int q = 0; q < n; ++q) {
      const bf16* x = xs + (q * kHeadsPerBlock + warp) * head_dim;
      bf16* out = qkv + (static_cast<int64_t>(c0 + q) * total_heads + head) * head_dim;
      bf16* dst = nullptr;
      const int64_t slot = slot_s[q];
      if (head >= heads && slot >= 0) {
        int64_t page, row;
        slot_page_row(slot, page_size, page_shift, page, row);
        dst = cache + page * page_stride + (row * kv_heads + kvh) * head_dim + v_block;
      }
      if (is_v) {  // v head: copy only
        if (dst != nullptr)
          for (int i = lane; i < half; i += 32) {
            dst[i] = x[i];
            dst[i + half] = x[i + half];
          }
        continue;
      }
      float ss = 0.0f;
      for (int i = lane; i < half; i += 32) {
        const float a = to_f(x[i]), b = to_f(x[i + half]);
        ss += a * a + b * b;
      }
      ss = warp_sum(ss);
      const float rstd = rms_rstd(ss, head_dim, eps);
      const float* c = cs + q * head_dim;
      for (int i = lane; i < half; i += 32) {
        const float n1 = round_bf(to_f(w[i]) * round_bf(to_f(x[i]) * rstd));
        const float n2 = round_bf(to_f(w[i + half]) * round_bf(to_f(x[i + half]) * rstd));
        const float cv = c[i], sv = c[half + i];
        const bf16 o1 = to_bf(n1 * cv - n2 * sv);
        const bf16 o2 = to_bf(n2 * cv + n1 * sv);
        out[i] = o1;
        out[i + half] = o2;
        if (dst != nullptr) {
          dst[i] = o1;
          dst[i + half] = o2;
        }
      }
    }
  }
}
