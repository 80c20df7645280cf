#pragma once

#include "attention_decode_mma.cuh"

using namespace kern_dev;

namespace {

// ---------------------------------------------------------------------------------------------
// Split-KV decode on tensor cores, one warp per item (kern_attn_decode_warp_partial_hd*): the work
// split, ABI, partial outputs and direct writes of the two partial kernels above (the reduce is
// shared), but the unit of work is a warp, not a block:
//  * every warp of the grid strides over the (range, sequence, kv head) items in range-major order
//    (global warp w takes items w, w + W, ... with W the grid's warps), so the four warps of a block
//    take adjacent kv heads of one range, which read neighbouring bytes of the same pages;
//  * a warp computes its item's range alone, tile after tile in key order, and writes the range's
//    (max, sum, output) rows straight from its registers: no shared-memory merge, no block barrier;
//  * its cp.async ring (S stages of 16-key K and V tiles, as decode_mma) runs across item
//    boundaries: the first tiles of its next item are in flight while it finishes the current one,
//    so short ranges (kern gen's batch-invariant split at many sequences: 64 sequences of 1k keys
//    give 4,096 items of 256 keys) stream without a fill and drain per item.
// A range's bits depend on its keys and its q rows only (fixed tile order inside one warp), so the
// result is the same whichever warp computes it and whatever the grid size: with split_tokens > 0
// it is batch-invariant, as decode_mma's. Dynamic shared memory: decode_mma::smem_bytes<HD, S>().
namespace decode_warp {

constexpr int kWarps = decode_mma::kWarps;
constexpr int kThreads = kWarps * 32;
constexpr int kKeys = decode_mma::kKeys;

// One item of the warp's stream: (sequence s, kv head kvh, range split) and its key range.
struct Item {
  int v;  // item index (range-major: split * seqs * kv_heads + s * kv_heads + kvh); -1: none left
  int s, kvh, split;
  int begin, end, tiles;
  bool direct;  // the sequence has one range (or none): the warp writes `out`
};

// Sequences whose used-range counts a block keeps in shared memory (u16 each: used <= kMaxSplits);
// a call with more (or fewer than kUsedTableFrom) sequences walks with seq_lens loads.
constexpr int kUsedTable = 512;
constexpr int kUsedTableFrom = 33;  // fewer sequences: one seq_lens load per lane covers them (used_bound)

// The first item at index v or later (stepping by stride) that exists: a range below the sequence's
// used ranges, or range 0 of an empty sequence (it writes zeros). used_tab (or null): each sequence's
// max(used, 1), so that a visit to a range the sequence does not have costs a shared-memory load, not
// a seq_lens load and split_of's divisions; (split, unit) advance by the stride without a division
// per visit (stride = d_split · units + d_unit).
__device__ __forceinline__ Item next_item(const decode::Plan& p, const int32_t* __restrict__ seq_lens,
                                          const uint16_t* used_tab, int v, int stride, int items) {
  Item none{};
  none.v = -1;
  none.tiles = 0;
  if (v >= items) return none;
  const int units = p.seqs * p.kv_heads;
  const int d_split = stride / units, d_unit = stride - d_split * units;
  int split = v / units, unit = v - split * units;
  for (; v < items; v += stride) {
    const int s = unit / p.kv_heads;
    if (used_tab == nullptr || split < used_tab[s]) {
      const decode::Split sp = decode::split_of(p, seq_lens[s]);
      if (split < max(sp.used, 1)) {
        Item it;
        it.v = v;
        it.s = s;
        it.kvh = unit - s * p.kv_heads;
        it.split = split;
        it.begin = split * sp.chunk;
        it.end = min(sp.len, it.begin + sp.chunk);
        it.tiles = it.end > it.begin ? (it.end - it.begin + kKeys - 1) / kKeys : 0;
        it.direct = sp.used <= 1;
        return it;
      }
    }
    split += d_split;
    unit += d_unit;
    if (unit >= units) {
      unit -= units;
      ++split;
    }
  }
  return none;
}

// KM: the key-major products (decode_mma::tile_step_km; G <= 8; kern gen --decode-attn-key-major,
// not the default until measured): the items, ring and copies unchanged, half the mma per tile.
template <int HD, int S, bool KM = false>
__device__ void partial(const bf16* __restrict__ qkv, int32_t q_stride, const bf16* __restrict__ cache,
                        const int32_t* __restrict__ block_table, int32_t max_pages,
                        const int32_t* __restrict__ seq_lens, float* __restrict__ part_o, float* __restrict__ part_ml,
                        bf16* __restrict__ out, int32_t seqs, int32_t heads, int32_t kv_heads, int32_t page_size,
                        int64_t page_stride, int32_t splits_max, int32_t target_blocks, int32_t split_tokens,
                        float scale) {
  constexpr int TE = decode_mma::tile_elems<HD>();
  constexpr int KS = HD / 16;  // k-steps of Q·Kᵀ
  constexpr int ND = HD / 8;   // n-blocks of the output
  static_assert(KS % 2 == 0, "k-steps are taken in pairs");
  extern __shared__ __align__(128) unsigned char decode_warp_smem[];
  uint32_t dyn;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
  if (dyn < static_cast<uint32_t>(decode_mma::smem_bytes<HD, S>())) __trap();
  if (seqs < 1 || kv_heads < 1 || page_size < 1) return;
  const int group = heads / kv_heads;
  if (group < 1 || group * kv_heads != heads || group > (KM ? 8 : 16)) return;  // rejected by kern gen
  const decode::Plan plan =
      decode::plan_of(seqs, kv_heads, max_pages, page_size, target_blocks, splits_max, split_tokens);
  const long long units = static_cast<long long>(seqs) * kv_heads;
  const long long all_items = units * (plan.split_tokens > 0 ? plan.splits_max : plan.nsplit);
  if (all_items > (1LL << 30)) __trap();  // 32-bit item indices (kern gen's shapes are far below)
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int stride = static_cast<int>(gridDim.x) * kWarps;
  const int first = static_cast<int>(blockIdx.x) * kWarps + warp;
  // Everything below reads the previous kernels' q and K/V or writes scratch the previous call's
  // reduce may still read: wait for them first.
  wait_for_previous_grid();
  allow_next_grid();
  // Items past the ranges some sequence uses are never work: the walks below stop at the most any
  // sequence uses (decode::used_bound). With kUsedTableFrom .. kUsedTable sequences every block first
  // keeps each one's count in shared memory (the bound is then their maximum), so that with lengths
  // far apart (one long sequence among short ones: the bound is the long one's) the walks' visits to
  // the short ones' missing ranges cost a shared-memory load each (H100, one 32k sequence among 63 of
  // 1k: 174.5 -> 169.9 us). Below kUsedTableFrom the table's fill and block barrier cost more than
  // the few visits it saves (one sequence of 1k: 12.2 -> 12.8 us; docs/perf.md, session 37).
  // all_items fits 32 bits (checked above), so the item count does too.
  __shared__ uint16_t used_smem[kUsedTable];
  const uint16_t* used_tab = nullptr;
  int bound;
  if (seqs >= kUsedTableFrom && seqs <= kUsedTable) {
    for (int s = static_cast<int>(threadIdx.x); s < seqs; s += static_cast<int>(blockDim.x))
      used_smem[s] = static_cast<uint16_t>(max(decode::split_of(plan, seq_lens[s]).used, 1));
    __syncthreads();
    int m = 1;
    for (int s = lane; s < seqs; s += 32) m = max(m, static_cast<int>(used_smem[s]));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
    bound = m;
    used_tab = used_smem;
  } else {
    bound = decode::used_bound(plan, seq_lens);
  }
  const int items = static_cast<int>(min(all_items, units * bound));
  if (first >= items) return;

  bf16* ring = reinterpret_cast<bf16*>(decode_warp_smem) + static_cast<size_t>(warp) * S * 2 * TE;

  // The issue cursor: the next tile to copy (tile `tile` of item `iss`), and the count copied so far
  // (tile k of the warp's stream goes to stage k % S).
  Item iss = next_item(plan, seq_lens, used_tab, first, stride, items);
  while (iss.v >= 0 && iss.tiles == 0) iss = next_item(plan, seq_lens, used_tab, iss.v + stride, stride, items);
  int iss_tile = 0, issued = 0;
  const decode_mma::TileCopy<HD> copy(cache, page_stride, page_size, kv_heads, lane);
  const uint32_t ring_u32 = smem_u32(ring);
  // The cursor tile's block-table entry, read one issue ahead where a tile lies in one page, so
  // that a tile's copies do not wait on its page's lookup (a dependent load in the issue path:
  // 6 % of the kernel's stall samples at 64 x 1k; docs/perf.md, session 36).
  auto cursor_page = [&]() -> int32_t {
    if (iss.v < 0 || !copy.one_page) return 0;
    int p, row;
    slot_page_row(iss.begin + iss_tile * kKeys, page_size, copy.page_shift, p, row);
    return block_table[static_cast<int64_t>(iss.s) * max_pages + p];
  };
  int32_t iss_page = cursor_page();
  auto issue_next = [&]() {
    if (iss.v >= 0) {
      const int t0 = iss.begin + iss_tile * kKeys;
      const uint32_t stage = ring_u32 + static_cast<uint32_t>((issued % S) * 2 * TE * 2);
      if (copy.one_page) {
        copy.issue_on_page(stage, iss_page, t0, iss.end, iss.kvh);
      } else {
        copy.issue(stage, block_table + static_cast<int64_t>(iss.s) * max_pages, t0, iss.end, iss.kvh);
      }
      ++issued;
      if (++iss_tile >= iss.tiles) {
        iss_tile = 0;
        do iss = next_item(plan, seq_lens, used_tab, iss.v + stride, stride, items);
        while (iss.v >= 0 && iss.tiles == 0);
      }
      iss_page = cursor_page();
    }
    cp_async_commit();  // one group per call, empty past the stream's end
  };

  const uint32_t k_base = decode_mma::k_lane_base<HD>(ring, lane), v_base = decode_mma::v_lane_base<HD>(ring, lane);
  const float scale_log2 = scale * kLog2e;

#pragma unroll
  for (int i = 0; i < S - 1; ++i) issue_next();
  int computed = 0;  // tiles of the stream computed so far
  // Item it's tiles in key order: each issues the stream's tile computed + S - 1 (into the stage tile
  // computed - 1 used), waits for this lane's pieces of tile `computed` and then every lane's, and calls
  // step(key t0, the tile's stage offset in bytes).
  auto run_tiles = [&](const Item& it, auto&& step) {
    for (int i = 0; i < it.tiles; ++i, ++computed) {
      issue_next();
      cp_async_wait<S - 1>();
      __syncwarp();
      step(it.begin + i * kKeys, static_cast<uint32_t>((computed % S) * 2 * TE * 2));
      __syncwarp();  // every lane is done with this stage before it is refilled
    }
  };
  // KM: one item with the key-major products, its rows written as the m16 path writes them.
  auto compute_km = [&](const Item& it) {
    if constexpr (KM) {
      const uint32_t km_k = ring_u32 + decode_mma::km_k_lane<HD>(lane), km_v = ring_u32 + decode_mma::km_v_lane<HD>(lane);
      uint32_t qb[KS][2];
      decode_mma::load_group_qt<HD>(qb, qkv, q_stride, it.s, it.kvh, group, g, t);
      float o[KS][4];
      float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
      for (int mt = 0; mt < KS; ++mt) o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.0f;
      run_tiles(it, [&](int t0, uint32_t st) {
        decode_mma::tile_step_km<HD>(qb, km_k + st, km_v + st, t0, it.end, g, scale_log2, o, m, l);
      });
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        l[c] += __shfl_xor_sync(0xffffffffu, l[c], 4);
        l[c] += __shfl_xor_sync(0xffffffffu, l[c], 8);
        l[c] += __shfl_xor_sync(0xffffffffu, l[c], 16);
        const int qh = 2 * t + c;
        if (qh >= group) continue;
        const int64_t hh = static_cast<int64_t>(it.s) * heads + it.kvh * group + qh;
        const float den = l[c];
        if (it.direct) {
          bf16* dst = out + hh * HD + g;
#pragma unroll
          for (int mt = 0; mt < KS; ++mt) {
            dst[mt * 16] = to_bf(den > 0.0f ? o[mt][c] / den : 0.0f);
            dst[mt * 16 + 8] = to_bf(den > 0.0f ? o[mt][2 + c] / den : 0.0f);
          }
        } else {
          const int64_t e_split = hh * splits_max + it.split;
          float* dst = part_o + e_split * HD + g;
#pragma unroll
          for (int mt = 0; mt < KS; ++mt) {
            dst[mt * 16] = o[mt][c] / den;
            dst[mt * 16 + 8] = o[mt][2 + c] / den;
          }
          if (g == 0) {
            part_ml[e_split * 2] = m[c];
            part_ml[e_split * 2 + 1] = den;
          }
        }
      }
    }
  };
  for (Item it = next_item(plan, seq_lens, used_tab, first, stride, items); it.v >= 0;
       it = next_item(plan, seq_lens, used_tab, it.v + stride, stride, items)) {
    if constexpr (KM) {
      compute_km(it);
      continue;
    }
    uint32_t qf[KS][4];
    decode_mma::load_group_q<HD>(qf, qkv, q_stride, it.s, it.kvh, group, g, t);
    float o[ND][4];
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int nd = 0; nd < ND; ++nd) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.0f;

    run_tiles(it, [&](int t0, uint32_t st) {
      decode_mma::tile_step<HD>(qf, k_base + st, v_base + st, t0, it.end, t, scale_log2, o, m, l);
    });

    // The item's rows (sums over the quad), from registers: out when the sequence has one range,
    // else its range of part_o / part_ml (as decode_mma writes them: o normalised, m in log2 units).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
      const int row = g + 8 * h;
      if (row >= group) continue;
      const int64_t hh = static_cast<int64_t>(it.s) * heads + it.kvh * group + row;
      const float den = l[h];
      if (it.direct) {
        bf16* dst = out + hh * HD + 2 * t;
#pragma unroll
        for (int nd = 0; nd < ND; ++nd) {
          const float a = den > 0.0f ? o[nd][2 * h] / den : 0.0f;
          const float b = den > 0.0f ? o[nd][2 * h + 1] / den : 0.0f;
          *reinterpret_cast<uint32_t*>(dst + nd * 8) = pack_bf16x2(a, b);
        }
      } else {
        const int64_t e_split = hh * splits_max + it.split;
        float* dst = part_o + e_split * HD + 2 * t;
#pragma unroll
        for (int nd = 0; nd < ND; ++nd)
          *reinterpret_cast<float2*>(dst + nd * 8) = make_float2(o[nd][2 * h] / den, o[nd][2 * h + 1] / den);
        if (t == 0) {
          part_ml[e_split * 2] = m[h];
          part_ml[e_split * 2 + 1] = den;
        }
      }
    }
  }
  cp_async_wait<0>();
}

}  // namespace decode_warp

}  // namespace

// Warp-item tensor-core decode partials (decode_warp above): the ABI, block and shared memory of
// kern_attn_decode_mma_partial_hd*; any grid (the warps stride over the items: kern gen launches a
// fixed number, about two blocks per SM).
// S stages per warp, MIN_BLOCKS blocks per SM asked of the register allocator.
#define KERN_ATTN_DECODE_WARP_ENTRY(NAME, HD, S, MIN_BLOCKS) \
  KERN_ATTN_DECODE_PARTIAL_ENTRY(NAME, decode_warp::kThreads, MIN_BLOCKS, (decode_warp::partial<HD, S>))
// The same with the key-major products (partial's KM; G <= 8).
#define KERN_ATTN_DECODE_WARP_KM_ENTRY(NAME, HD, S, MIN_BLOCKS) \
  KERN_ATTN_DECODE_PARTIAL_ENTRY(NAME, decode_warp::kThreads, MIN_BLOCKS, (decode_warp::partial<HD, S, true>))
