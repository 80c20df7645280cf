// Paged KV-cache addressing (layout in docs/kernels.md, "KV-cache layout"): token slot s lives in
// page s / page_size, row s % page_size; a page holds, per layer, a K block then a V block, each
// [page_size][kv_heads][head_dim] bf16, so V = K + v_block_elems(...) elements.
#pragma once

#include "common.cuh"

namespace kern_dev {

// log2(page_size) when it is a power of two (kern gen allows no other), else -1.
__device__ __forceinline__ int page_shift_of(int page_size) {
  return page_size > 0 && (page_size & (page_size - 1)) == 0 ? __ffs(page_size) - 1 : -1;
}

// Elements from a token's K row to its V row (one K block of a page).
__device__ __forceinline__ int64_t v_block_elems(int page_size, int kv_heads, int head_dim) {
  return static_cast<int64_t>(page_size) * kv_heads * head_dim;
}

// Page index and row in page of slot s: shifts when page_shift >= 0, else division.
template <typename I>
__device__ __forceinline__ void slot_page_row(I s, int page_size, int page_shift, I& page, I& row) {
  if (page_shift >= 0) {
    page = s >> page_shift;
    row = s & (page_size - 1);
  } else {
    page = s / page_size;
    row = s % page_size;
  }
}

// One sequence's view of a layer of the cache through its block-table row.
struct PagedKv {
  const bf16* cache;     // layer base
  const int32_t* pages;  // block-table row of this sequence
  int32_t page_size;
  int32_t kv_heads;
  int64_t page_stride;  // elements between consecutive pages
  int32_t page_shift;   // page_shift_of(page_size), or -1 to always divide
};

// Page (through the block table) and row of key j.
__device__ __forceinline__ void page_of(const PagedKv& kv, int j, int64_t& page, int64_t& row) {
  int p, r;
  slot_page_row(j, kv.page_size, kv.page_shift, p, r);
  page = kv.pages[p];
  row = r;
}

// Element offset of (page, row, kv head kvh) from the layer base, K block.
template <int HD>
__device__ __forceinline__ int64_t kv_offset(const PagedKv& kv, int64_t page, int64_t row, int kvh) {
  return page * kv.page_stride + (row * kv.kv_heads + kvh) * HD;
}

}  // namespace kern_dev
