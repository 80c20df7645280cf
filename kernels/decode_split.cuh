// The split-KV decode work split shared by kern_attn_decode_partial_hd* (CUDA cores),
// kern_attn_decode_mma_partial_hd* (tensor cores) and kern_attn_decode_reduce_hd*: how many ranges
// each sequence's context is cut into and how long they are (attention.cu, "Split-KV decode").
#pragma once

#include "common.cuh"

namespace {
namespace decode {

constexpr int kSplitAlign = 32;   // range lengths are multiples of this (and at least this)
constexpr int kMaxSplits = 1024;  // hard cap on splits_max (reduce keeps weights in shared memory)

struct Split {
  int nsplit;  // ranges per sequence in this call
  int len;     // the sequence's context, clamped to the block table
  int chunk;   // tokens per range
  int used;    // non-empty ranges: ceil(len / chunk)
};

__device__ __forceinline__ int splits_per_seq(int seqs, int kv_heads, int target_blocks, int splits_max) {
  const long long units = static_cast<long long>(max(seqs, 1)) * max(kv_heads, 1);
  const long long want = (static_cast<long long>(max(target_blocks, 1)) + units - 1) / units;
  return static_cast<int>(max(1LL, min(want, static_cast<long long>(min(max(splits_max, 1), kMaxSplits)))));
}

__device__ __forceinline__ Split split_of(int seq_len, int nsplit, int max_pages, int page_size) {
  Split sp;
  sp.nsplit = nsplit;
  sp.len =
      static_cast<int>(max(0LL, min(static_cast<long long>(seq_len), static_cast<long long>(max_pages) * page_size)));
  const int per = (sp.len + nsplit - 1) / nsplit;
  sp.chunk = max(kSplitAlign, (per + kSplitAlign - 1) / kSplitAlign * kSplitAlign);
  sp.used = (sp.len + sp.chunk - 1) / sp.chunk;
  return sp;
}

}  // namespace decode
}  // namespace
