// The decode attention pair of kernels/attention.cu (a partial kernel, kern_attn_decode_partial_hd* or
// the tensor-core kern_attn_decode_mma[_sN]_partial_hd*, + kern_attn_decode_reduce_hd*) as the tests
// launch it: one place that knows their ABI, grid and shared memory.
#pragma once

#include <cstdint>
#include <string>

#include "harness.hpp"

namespace kern_gpu_test {

// Work-split parameters of a decode call (kern gen qwen3 uses these defaults).
struct DecodeSplit {
  int splits_max = 64;       // capacity of part_o / part_ml per (sequence, q head)
  int target_blocks = 1024;  // partial blocks wanted per call (the ranges per sequence with split_tokens 0)
  int split_tokens = 0;      // > 0: ranges from each sequence's length alone (kern gen's batch-invariant 256)
  int items_per_unit = 1;    // grid: seqs * kv_heads * items_per_unit + target_blocks blocks ...
  int grid = 0;              // ... unless > 0: this many (the warp kernel takes any grid)
};

constexpr int kDecodePartialThreads = 128;

// Which partial kernel: "" (f32 CUDA-core, kern_attn_decode_partial_hd*), "mma" (tensor cores, 3
// cp.async stages per warp; kern gen's choice), "mma_s2" / "mma_s4" (2 / 4 stages, tuning points),
// "warp" (tensor cores, one warp per item, 2 stages, 3 blocks per SM: any grid), "warp_s3" (its
// tuning point, hd 128: 3 stages at 2 blocks per SM), "mma_km" / "warp_km" (the two with the
// key-major products, G <= 8).
inline std::string decode_partial_entry(const std::string& kind, int head_dim) {
  return "kern_attn_decode_" + (kind.empty() ? std::string() : kind + "_") + "partial_hd" + std::to_string(head_dim);
}
// Dynamic shared memory of a partial kind: 4 warps x stages x (K and V tiles of 16 keys x (hd + 8) bf16).
inline int decode_partial_smem(const std::string& kind, int head_dim) {
  const bool s2 = kind == "mma_s2" || kind == "warp" || kind == "warp_km";
  const bool s3 = kind == "mma" || kind == "mma_km" || kind == "warp_s3";
  const int stages = s3 ? 3 : s2 ? 2 : kind == "mma_s4" ? 4 : 0;
  return 4 * stages * 2 * 16 * (head_dim + 8) * 2;
}

// Every pointer is a device pointer; cache is the layer base (already offset to the layer).
struct DecodeCall {
  int head_dim = 128;
  const void* qkv = nullptr;
  int32_t q_stride = 0;
  const void* cache = nullptr;
  const int32_t* block_table = nullptr;
  int32_t max_pages = 0;
  const int32_t* seq_lens = nullptr;
  float* part_o = nullptr;   // f32 [seqs, heads, splits_max, head_dim]
  float* part_ml = nullptr;  // f32 [seqs, heads, splits_max, 2]
  void* out = nullptr;       // bf16 [seqs, heads * head_dim]
  int32_t seqs = 0, heads = 0, kv_heads = 0, page_size = 0;
  int64_t page_stride = 0;
  DecodeSplit split;
  float scale = 0.0f;
  std::string kind;  // the partial kernel (decode_partial_entry)

  std::string partial_entry() const { return decode_partial_entry(kind, head_dim); }
  int partial_smem() const { return decode_partial_smem(kind, head_dim); }
  std::string reduce_entry() const { return "kern_attn_decode_reduce_hd" + std::to_string(head_dim); }
  // Grid x of the partial kernel: enough blocks for every (sequence, kv head, range).
  unsigned partial_blocks() const {
    if (split.grid > 0) return static_cast<unsigned>(split.grid);
    return static_cast<unsigned>(seqs * kv_heads * split.items_per_unit + split.target_blocks);
  }
  size_t part_o_elems() const { return static_cast<size_t>(seqs) * heads * split.splits_max * head_dim; }
  size_t part_ml_elems() const { return static_cast<size_t>(seqs) * heads * split.splits_max * 2; }

  // Launches partial then reduce, synchronising after each (Fatbin::launch).
  void run(Fatbin& fb) const {
    fb.set_dynamic_shared(partial_entry(), partial_smem());
    fb.launch(partial_entry(), dim3(partial_blocks()), dim3(kDecodePartialThreads), qkv, q_stride, cache, block_table,
              max_pages, seq_lens, part_o, part_ml, out, seqs, heads, kv_heads, page_size, page_stride,
              split.splits_max, split.target_blocks, split.split_tokens, scale);
    fb.launch(reduce_entry(), dim3(seqs, heads), dim3(head_dim), static_cast<const float*>(part_o),
              static_cast<const float*>(part_ml), out, seq_lens, max_pages, seqs, heads, kv_heads, page_size,
              split.splits_max, split.target_blocks, split.split_tokens);
  }
};

}  // namespace kern_gpu_test
