// The decode chain: one persistent kernel for the stretch of a Qwen3 decode layer between
// attention and the next layer's RoPE, for m ≤ 4 rows (sequences):
//
//   A  h    = bf16(h + attn · o_wᵀ)                                    (o_proj + residual)
//   B  xn   = bf16(post_norm_w · bf16(h · rstd(h)))                      (RMSNorm, rounding of kern_rms_norm_bf16)
//      act  = bf16(bf16(silu(bf16(xn · W_gateᵀ))) · bf16(xn · W_upᵀ))   (gate_up + SiLU·mul; gate_up_w = [gate; up])
//   C  h    = bf16(h + act · down_wᵀ)                                  (down_proj + residual)
//   D  xn   = bf16(next_norm_w · bf16(h · rstd(h)))
//      next = bf16(xn · next_wᵀ)                                       (next layer's qkv_proj, or the lm_head)
//
// kern_decode_chain_bf16(attn, o_w, h, post_norm_w, gate_up_w, act, down_w, next_norm_w, next_w, next_out, sync,
//                        m, hidden, q_dim, inter, n_next, eps, stage_bytes)
//   A phase whose weight pointer (o_w, gate_up_w, down_w, next_w) is null is skipped: the first layer's launch is D
//   alone (input_norm + qkv_proj), the last layer's D is the final norm and the lm_head.
//   Shapes: attn [m, q_dim], o_w [hidden, q_dim], h [m, hidden], gate_up_w [2·inter, hidden], act [m, inter],
//   down_w [hidden, inter], next_w [n_next, hidden], next_out [m, n_next]; all dense, bf16, 16-byte aligned.
//   sync: two u32 words of barrier state, zero before the first launch (kern zeroes non-weight buffers at
//   load); every launch leaves word 0 at zero, so graph replays and later launches start clean.
//   Block: exactly 288 threads. Grid: any size whose blocks are all resident at once (one block per SM, the
//   manifest marks the launch `cooperative` and the runtime checks the fit at load); a block that waits for
//   the others more than 4 s traps rather than hang.
//   Dynamic shared memory: S stages of stage_bytes, then m · kmax bf16 of x (kmax: the largest k of the
//   present phases); S = (bytes − m · kmax · 2) / stage_bytes must be ≥ 2 (at most 8 are used).
//   Preconditions (a violation traps): 1 ≤ m ≤ 4, hidden / q_dim / inter multiples of 8, stage_bytes a
//   multiple of 16 holding at least one weight row of every present phase (k · 2 bytes).
//
// How: each phase's output columns are split evenly over the grid (block b owns columns
// [n·b/G, n·(b+1)/G)), so a block's weights for a phase are one contiguous run of rows (two for
// gate_up: the gate rows and the matching up rows). Warp 8 is the producer: one lane walks the
// block's whole schedule (every phase) and streams its rows into a ring of shared-memory stages with
// bulk async copies (cp.async.bulk in 4 KiB pieces over the warp's lanes, mbarrier completion, L2
// evict-first). It never waits for
// activations, only for free stages, so the weights of phase i + 1 are already arriving while the
// grid waits at the barrier that ends phase i, and DRAM does not idle across phase boundaries.
// Warps 0–7 consume: a stage holds R = min(8, stage_bytes / (2k)) whole rows; f = 8 / R warps share a
// row (each a fixed k range), lanes stride over 16-byte chunks, f32 sums, then a warp reduction and
// the f pieces added in order. x (the phase's input rows) is in shared memory: copied from global
// (A: attn, C: act) or normalised by every block from h (B, D; each block reads all of h, 5 KB per
// row, once per phase). Between phases the consumers of all blocks meet at a grid barrier (a counter
// and a generation word in `sync`). No atomics on data: every result is bitwise repeatable for a
// given grid and stage size. Activations written inside the kernel are read with ld.global.cg (L2),
// never through the non-coherent L1.
//
// Programmatic dependent launch: the launch may carry `pdl`. Before griddepcontrol.wait only the
// producer runs (weights only). The next kernel is let launch after the last grid barrier, when all
// of this grid's blocks are resident, so a waiting dependent can never take an SM one of ours needs.
//
// sm_90 only (bulk async copies, mbarrier transaction counts); elsewhere the kernel traps.
//
// Status (H200, PerfGpu.DecodeChain4B, docs/perf.md): correct, but not faster than the six per-op
// kernels it replaces: 76–84 µs per 4B layer (0.56–0.62 of copy bandwidth) against 75–77 µs for the
// per-op kernels launched back to back, so kern gen leaves it off unless asked (--decode-chain). The
// weight stream alone (kern_decode_chain_bf16_stream_only) already takes 70 µs (0.68 of copy); the
// consumers add the rest (Nsight Compute: 0.24 instructions per cycle per scheduler, 2.2 warps per
// scheduler, a third of stalls at the per-stage barrier). Measured and not better: one bulk copy per
// stage or 16 KiB pieces (same), cp.async from the producer warp (+5 %), tensor-core consumers
// splitting k (+12 %) or taking whole stages per warp (+20 %), 16 consumer warps (+15 %).
#pragma once

#include "mbarrier.cuh"
#include "rms.cuh"

using namespace kern_dev;

namespace {

constexpr int kConsumerWarps = 8;
constexpr int kConsumerThreads = kConsumerWarps * 32;
constexpr int kThreads = kConsumerThreads + 32;  // + the producer warp

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

constexpr int kMaxRows = 4;  // rows of x (m)
constexpr int kMaxStages = 8;
constexpr int kMaxStageRows = 8;  // weight rows per stage
constexpr unsigned long long kBarrierTimeoutNs = 4000000000ull;

enum class Kind { Residual, SiluMul, Store };

struct Phase {
  const bf16* w = nullptr;  // weight rows [segments · n, k]
  const bf16* x = nullptr;  // input rows [m, k] (copied), or h (normalised with norm_w)
  const bf16* norm_w = nullptr;
  bf16* out = nullptr;  // [m, n]
  int n = 0, k = 0;
  Kind kind = Kind::Store;
  int segments = 1;  // 2 for gate_up: stages alternate gate rows and the matching up rows

  __device__ int stage_rows(int stage_bytes) const { return min(kMaxStageRows, stage_bytes / (2 * k)); }
};

// The block's share of a phase: output columns [c0, c1), R rows per stage, T stages.
struct Share {
  int c0, c1, rows_per_stage, stages;
  __device__ Share(const Phase& p, int stage_bytes) {
    const int64_t b = blockIdx.x, g = gridDim.x;
    c0 = static_cast<int>(p.n * b / g);
    c1 = static_cast<int>(p.n * (b + 1) / g);
    rows_per_stage = p.stage_rows(stage_bytes);
    stages = (c1 - c0 + rows_per_stage - 1) / rows_per_stage * p.segments;
  }
  // Stage t: its first output column, its row count and the offset of its first weight row.
  __device__ void stage(const Phase& p, int t, int& col0, int& rows, int64_t& first_row) const {
    const int chunk = t / p.segments, seg = t % p.segments;
    col0 = c0 + chunk * rows_per_stage;
    rows = min(rows_per_stage, c1 - col0);
    first_row = static_cast<int64_t>(seg) * p.n + col0;
  }
};

// bytes (a multiple of 16) from global src to shared dst, completing on `bar`; kept in L2 as evict-first.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::
          "r"(smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(smem_u32(bar)), "l"(policy)
      : "memory");
}

__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}

// The consumer warps' own barrier (the producer warp never joins it).
__device__ __forceinline__ void consumer_sync() { asm volatile("bar.sync 1, %0;" ::"n"(kConsumerThreads) : "memory"); }

__device__ __forceinline__ uint32_t load_acquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Every consumer of every block arrives; none leaves before all have. sync[0] counts arrivals and is
// reset by the last one, which then bumps the generation sync[1] that the others wait on.
__device__ void grid_barrier(uint32_t* sync) {
  consumer_sync();
  if (threadIdx.x == 0) {
    const uint32_t gen = load_acquire(sync + 1);
    __threadfence();
    if (atomicAdd(sync, 1u) == gridDim.x - 1) {
      atomicExch(sync, 0u);
      __threadfence();
      atomicAdd(sync + 1, 1u);
    } else {
      const unsigned long long start = global_ns();
      while (load_acquire(sync + 1) == gen) {
        __nanosleep(20);
        if (global_ns() - start > kBarrierTimeoutNs) __trap();  // a block of the grid never became resident
      }
    }
    __threadfence();
  }
  consumer_sync();
}

// x rows [m, k] from global (written by an earlier kernel or phase) into shared memory.
__device__ void copy_rows(const bf16* src, int m, int k, uint4* xs) {
  const uint4* s = reinterpret_cast<const uint4*>(src);
  for (int i = threadIdx.x; i < m * (k >> 3); i += kConsumerThreads) xs[i] = __ldcg(s + i);
}

// xs = bf16(norm_w · bf16(h · rstd)) for the m rows of h (the rounding of kern_rms_norm_bf16).
__device__ void normalise_rows(const bf16* h, const bf16* norm_w, int m, int k, float eps, uint4* xs, float* rstd) {
  const int cpr = k >> 3, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  copy_rows(h, m, k, xs);
  consumer_sync();
  if (warp < m) {
    float acc = 0.0f;
    for (int c = lane; c < cpr; c += 32) {
      float f[8];
      unpack_bf16x8(xs[warp * cpr + c], f);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc += f[j] * f[j];
    }
    acc = warp_sum(acc);
    if (lane == 0) rstd[warp] = rms_rstd(acc, k, eps);
  }
  consumer_sync();
  const uint4* wv = reinterpret_cast<const uint4*>(norm_w);
  for (int i = threadIdx.x; i < m * cpr; i += kConsumerThreads) {
    const int r = i / cpr, c = i - r * cpr;
    float f[8], w[8];
    unpack_bf16x8(xs[i], f);
    unpack_bf16x8(wv[c], w);
    const float s = rstd[r];
    Bf16x8 o;
#pragma unroll
    for (int j = 0; j < 8; ++j) o.v[j] = rms_apply(f[j], s, w[j]);
    xs[i] = *reinterpret_cast<const uint4*>(&o);
  }
}

template <int M>
__device__ __forceinline__ void dot_range(const uint4* __restrict__ wrow, const uint4* __restrict__ xs, int cpr,
                                          int c_begin, int c_end, float (&acc)[kMaxRows]) {
  const int lane = threadIdx.x & 31;
#pragma unroll 4
  for (int c = c_begin + lane; c < c_end; c += 32) {
    float wf[8];
    unpack_bf16x8(wrow[c], wf);
#pragma unroll
    for (int i = 0; i < M; ++i) {
      float xf[8];
      unpack_bf16x8(xs[i * cpr + c], xf);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i] = fmaf(wf[j], xf[j], acc[i]);
    }
  }
}

struct Ring {
  uint4* base;
  int stage_bytes, stages;
  uint64_t* full;
  uint64_t* empty;
  __device__ uint4* slot(uint32_t it) const { return base + static_cast<size_t>(it % stages) * (stage_bytes >> 4); }
};

// The producer warp: for every stage of the block's schedule, wait until the consumers have freed its
// slot, then copy its rows with bulk async copies of kCopyPiece bytes spread over the warp's lanes (one
// copy per stage, or 16 KiB pieces, measured the same: docs/perf.md).
constexpr uint32_t kCopyPiece = 4096;

__device__ void produce(const Phase* phases, int count, const Ring& ring) {
  const uint32_t lane = threadIdx.x & 31;
  const uint64_t policy = evict_first_policy();
  uint32_t it = 0;
  for (int p = 0; p < count; ++p) {
    const Phase& ph = phases[p];
    const Share share(ph, ring.stage_bytes);
    for (int t = 0; t < share.stages; ++t, ++it) {
      int col0, rows;
      int64_t first_row;
      share.stage(ph, t, col0, rows, first_row);
      const uint32_t s = it % ring.stages, use = it / ring.stages;
      if (use > 0) mbar_wait(&ring.empty[s], (use - 1) & 1);
      const uint32_t bytes = static_cast<uint32_t>(rows) * static_cast<uint32_t>(ph.k) * 2u;
      const char* src = reinterpret_cast<const char*>(ph.w + first_row * ph.k);
      char* dst = reinterpret_cast<char*>(ring.slot(it));
      if (lane == 0) mbar_arrive_expect_tx(&ring.full[s], bytes);
      __syncwarp();
      for (uint32_t off = lane * kCopyPiece; off < bytes; off += 32 * kCopyPiece)
        bulk_load(dst + off, src + off, min(kCopyPiece, bytes - off), &ring.full[s], policy);
    }
  }
}

// The consumers' small shared state (one copy for every instantiation of consume).
struct Scratch {
  float red[2][kMaxStageRows][kConsumerWarps][kMaxRows];  // per-warp sums of a stage, double-buffered
  float hold[kMaxStageRows][kMaxRows];                    // gate_up: the gate sums of the current rows
  float rstd[kMaxRows];
};

// A stage whose sums are in shared memory and whose outputs are still to be written: the epilogue runs
// one stage late, while the other warps already compute the next stage, so neither it nor the residual's
// L2 round trip sits between two stages' barriers.
struct Pending {
  bool valid = false;
  bool gate = false;  // gate_up: a gate stage (its sums wait in `hold` for the up stage)
  int col0 = 0, rows = 0, buf = 0;
  float residual = 0.0f;
};

template <int M>
__device__ __forceinline__ void finish_stage(const Phase& ph, const Pending& pd, int f, Scratch& sc) {
  if (!pd.valid || static_cast<int>(threadIdx.x) >= pd.rows * M) return;
  const int r = threadIdx.x / M, i = threadIdx.x % M;
  float sum = 0.0f;
  for (int q = 0; q < f; ++q) sum += sc.red[pd.buf][r][q][i];
  bf16* o = ph.out + static_cast<int64_t>(i) * ph.n + pd.col0 + r;
  if (ph.kind == Kind::Residual) {
    *o = to_bf(pd.residual + sum);
  } else if (ph.kind == Kind::Store) {
    *o = to_bf(sum);
  } else if (pd.gate) {
    sc.hold[r][i] = round_bf(sum);  // read back by this same thread at the up stage
  } else {
    const float gate = sc.hold[r][i];
    const float a = round_bf(gate / (1.0f + __expf(-gate)));
    *o = to_bf(a * round_bf(sum));
  }
}

template <int M, bool kCompute>
__device__ void consume(const Phase* phases, int count, const Ring& ring, uint4* xs, uint32_t* sync, float eps,
                        Scratch& sc) {
  auto& red = sc.red;
  float* rstd = sc.rstd;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint32_t it = 0;
  for (int p = 0; p < count; ++p) {
    const Phase& ph = phases[p];
    if (p == 0)
      wait_for_previous_grid();
    else
      grid_barrier(sync);
    if (p == count - 1) allow_next_grid();  // every block of the grid is resident by now (or there is no barrier)
    if (ph.norm_w != nullptr)
      normalise_rows(ph.x, ph.norm_w, M, ph.k, eps, xs, rstd);
    else
      copy_rows(ph.x, M, ph.k, xs);
    consumer_sync();
    const Share share(ph, ring.stage_bytes);
    const int cpr = ph.k >> 3;
    const int f = kConsumerWarps / share.rows_per_stage;  // warps per row
    const int row = warp / f, piece = warp % f;
    const int c_begin = cpr * piece / f, c_end = cpr * (piece + 1) / f;
    Pending pending;
    for (int t = 0; t < share.stages; ++t, ++it) {
      int col0, rows;
      int64_t first_row;
      share.stage(ph, t, col0, rows, first_row);
      const uint32_t s = it % ring.stages, use = it / ring.stages;
      // The residual this stage's epilogue needs, fetched a stage ahead of its use.
      float residual = 0.0f;
      if (ph.kind == Kind::Residual && static_cast<int>(threadIdx.x) < rows * M)
        residual = to_f(__ldcg(ph.out + static_cast<int64_t>(threadIdx.x % M) * ph.n + col0 + threadIdx.x / M));
      mbar_wait(&ring.full[s], use & 1);
      float acc[kMaxRows] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (kCompute && row < rows) dot_range<M>(ring.slot(it) + row * cpr, xs, cpr, c_begin, c_end, acc);
      __syncwarp();
      if (lane == 0) mbar_arrive(&ring.empty[s]);  // this warp is done with the stage's weights
      if (row < rows) {
#pragma unroll
        for (int i = 0; i < M; ++i) {
          const float v = warp_sum(acc[i]);
          if (lane == 0) red[it & 1][row][piece][i] = v;
        }
      }
      finish_stage<M>(ph, pending, f, sc);  // the previous stage (its sums are in the other buffer)
      consumer_sync();
      pending.valid = true;
      pending.gate = ph.kind == Kind::SiluMul && t % 2 == 0;
      pending.col0 = col0;
      pending.rows = rows;
      pending.buf = static_cast<int>(it & 1);
      pending.residual = residual;
    }
    finish_stage<M>(ph, pending, f, sc);  // the phase's last stage; the next grid barrier orders its writes
  }
}

#endif  // sm_90

template <bool kCompute>
__device__ __forceinline__ void chain_body(const bf16* __restrict__ attn, const bf16* __restrict__ o_w, bf16* h,
                                           const bf16* __restrict__ post_norm_w, const bf16* __restrict__ gate_up_w,
                                           bf16* act, const bf16* __restrict__ down_w,
                                           const bf16* __restrict__ next_norm_w, const bf16* __restrict__ next_w,
                                           bf16* __restrict__ next_out, uint32_t* sync, int32_t m, int32_t hidden,
                                           int32_t q_dim, int32_t inter, int32_t n_next, float eps,
                                           int32_t stage_bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __shared__ __align__(8) uint64_t full[kMaxStages], empty[kMaxStages];
  __shared__ Scratch scratch;
  extern __shared__ __align__(128) uint4 chain_smem[];

  if (blockDim.x != kThreads || m < 1 || m > kMaxRows || stage_bytes <= 0 || (stage_bytes & 15) != 0) __trap();
  int count = 0;
  Phase list[4];
  if (o_w != nullptr) {
    Phase& p = list[count++];
    p.w = o_w, p.x = attn, p.out = h, p.n = hidden, p.k = q_dim, p.kind = Kind::Residual;
  }
  if (gate_up_w != nullptr) {
    Phase& p = list[count++];
    p.w = gate_up_w, p.x = h, p.norm_w = post_norm_w, p.out = act, p.n = inter, p.k = hidden, p.kind = Kind::SiluMul;
    p.segments = 2;
  }
  if (down_w != nullptr) {
    Phase& p = list[count++];
    p.w = down_w, p.x = act, p.out = h, p.n = hidden, p.k = inter, p.kind = Kind::Residual;
  }
  if (next_w != nullptr) {
    Phase& p = list[count++];
    p.w = next_w, p.x = h, p.norm_w = next_norm_w, p.out = next_out, p.n = n_next, p.k = hidden, p.kind = Kind::Store;
  }
  int kmax = 0;
  for (int i = 0; i < count; ++i) {
    if (list[i].k <= 0 || (list[i].k & 7) != 0 || list[i].n < 0 || 2 * list[i].k > stage_bytes) __trap();
    kmax = max(kmax, list[i].k);
  }
  uint32_t dyn;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
  const uint32_t x_bytes = static_cast<uint32_t>(m) * static_cast<uint32_t>(kmax) * 2u;
  if (dyn < x_bytes) __trap();
  const int stages = min(kMaxStages, static_cast<int>((dyn - x_bytes) / static_cast<uint32_t>(stage_bytes)));
  if (stages < 2) __trap();

  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], kConsumerWarps);
    }
    mbar_init_fence();
  }
  __syncthreads();

  const Ring ring{chain_smem, stage_bytes, stages, full, empty};
  uint4* xs = chain_smem + static_cast<size_t>(stages) * (stage_bytes >> 4);
  if (threadIdx.x >= kConsumerThreads) {
    produce(list, count, ring);
    return;
  }
  switch (m) {
    case 1: consume<1, kCompute>(list, count, ring, xs, sync, eps, scratch); break;
    case 2: consume<2, kCompute>(list, count, ring, xs, sync, eps, scratch); break;
    case 3: consume<3, kCompute>(list, count, ring, xs, sync, eps, scratch); break;
    default: consume<4, kCompute>(list, count, ring, xs, sync, eps, scratch); break;
  }
#else
  __trap();
#endif
}

}  // namespace
