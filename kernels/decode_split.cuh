// The split-KV decode work split shared by kern_attn_decode_partial_hd* (CUDA cores),
// kern_attn_decode_mma_partial_hd* (tensor cores) and kern_attn_decode_reduce_hd*: how many ranges
// each sequence's context is cut into, how long they are, and which block computes which range
// (attention.cu, "Split-KV decode").
#pragma once

#include "common.cuh"

namespace {
namespace decode {

constexpr int kSplitAlign = 32;   // range lengths are multiples of this (and at least this)
constexpr int kMaxSplits = 1024;  // hard cap on splits_max (reduce keeps weights in shared memory)

struct Split {
  int nsplit;  // the most ranges a sequence can have in this call (part_o's index uses splits_max)
  int len;     // the sequence's context, clamped to the block table
  int chunk;   // tokens per range
  int used;    // non-empty ranges: ceil(len / chunk)
};

// The call's work split. split_tokens > 0 (batch-invariant): a sequence's ranges depend on its own
// length alone, at least split_tokens (rounded up to 32) keys each and at most splits_max of them,
// and the blocks of the grid stride over the (range, sequence, kv head) items; the bits of a
// sequence's output then never depend on what else shares the call. split_tokens = 0: every
// sequence of the call has the same count, ceil(target_blocks / (seqs * kv_heads)), one item per
// block (fewer, longer ranges when many sequences share the call).
struct Plan {
  int seqs, kv_heads, max_pages, page_size;
  int splits_max;    // clamped to [1, kMaxSplits]
  int nsplit;        // split_tokens = 0: ranges per sequence of this call
  int split_tokens;  // > 0: the length-only split's shortest range
};

__device__ __forceinline__ Plan plan_of(int seqs, int kv_heads, int max_pages, int page_size, int target_blocks,
                                        int splits_max, int split_tokens) {
  Plan p;
  p.seqs = seqs;
  p.kv_heads = kv_heads;
  p.max_pages = max_pages;
  p.page_size = page_size;
  p.splits_max = min(max(splits_max, 1), kMaxSplits);
  p.split_tokens = split_tokens > 0 ? (split_tokens + kSplitAlign - 1) / kSplitAlign * kSplitAlign : 0;
  const long long units = static_cast<long long>(max(seqs, 1)) * max(kv_heads, 1);
  const long long want = (static_cast<long long>(max(target_blocks, 1)) + units - 1) / units;
  p.nsplit = static_cast<int>(max(1LL, min(want, static_cast<long long>(p.splits_max))));
  return p;
}

__device__ __forceinline__ Split split_of(const Plan& p, int seq_len) {
  Split sp;
  sp.nsplit = p.split_tokens > 0 ? p.splits_max : p.nsplit;
  sp.len = static_cast<int>(
      max(0LL, min(static_cast<long long>(seq_len), static_cast<long long>(p.max_pages) * p.page_size)));
  const int per = (sp.len + sp.nsplit - 1) / sp.nsplit;
  sp.chunk = max(max(kSplitAlign, p.split_tokens), (per + kSplitAlign - 1) / kSplitAlign * kSplitAlign);
  sp.used = (sp.len + sp.chunk - 1) / sp.chunk;
  return sp;
}

// The most ranges any sequence of the call uses (at least 1): no item of a later range exists, so
// the item walks stop there instead of visiting every range up to splits_max, each visit a
// dependent seq_lens load (at 64 sequences of 1k keys, 28 of the 32 ranges a warp visited were
// empty, 35 % of the warp kernel's instructions; docs/perf.md, session 36). Every lane of the
// calling warp reads a share of seq_lens and the warp takes the maximum: call it with the whole
// warp; every warp that calls it gets the same value, without a block barrier. It decides nothing
// a sequence's bits depend on: the items past it would all have been skipped.
__device__ __forceinline__ int used_bound(const Plan& p, const int32_t* __restrict__ seq_lens) {
  int m = 1;
#pragma unroll 4
  for (int s = static_cast<int>(threadIdx.x & 31u); s < p.seqs; s += 32) m = max(m, split_of(p, seq_lens[s]).used);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
  return m;
}

// Calls f(s, kvh, split, sp) for every (sequence, kv head, range) item this block computes: one at
// most (split_tokens = 0), or every gridDim.x-th item in range-major order (split_tokens > 0: range 0
// of every unit first, so the real items are dense at the front and evenly spread over the blocks).
// Whether an item exists depends on seq_lens and the block index only, the same for every thread of
// the block, so f may use block barriers; f must leave shared memory free for the next item.
template <class F>
__device__ __forceinline__ void for_each_item(const Plan& p, const int32_t* __restrict__ seq_lens, F&& f) {
  const long long units = static_cast<long long>(p.seqs) * p.kv_heads;
  if (p.split_tokens <= 0) {
    const long long b = blockIdx.x;
    if (b >= units * p.nsplit) return;
    const int split = static_cast<int>(b % p.nsplit);
    const int unit = static_cast<int>(b / p.nsplit);
    const int s = unit / p.kv_heads;
    const Split sp = split_of(p, seq_lens[s]);
    if (split >= max(sp.used, 1)) return;
    f(s, unit % p.kv_heads, split, sp);
    return;
  }
  // 32-bit stepping without a division per item: v = split * units + unit advances by gridDim.x.
  const int n_units = static_cast<int>(units);
  const int d_split = static_cast<int>(gridDim.x / n_units), d_unit = static_cast<int>(gridDim.x % n_units);
  int split = static_cast<int>(blockIdx.x / n_units), unit = static_cast<int>(blockIdx.x % n_units);
  const int splits = min(p.splits_max, used_bound(p, seq_lens));  // the ranges some sequence uses
  while (split < splits) {
    const int s = unit / p.kv_heads;
    const Split sp = split_of(p, seq_lens[s]);
    if (split < max(sp.used, 1)) f(s, unit % p.kv_heads, split, sp);
    split += d_split;
    unit += d_unit;
    if (unit >= n_units) {
      unit -= n_units;
      ++split;
    }
  }
}

}  // namespace decode
}  // namespace
