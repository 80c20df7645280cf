// The pool's view of a model: which states are pooled and which tables index them.
// A plain description; pool::layout_of (kern/pool/manifest_layout.hpp) builds one from a manifest.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kern::pool {

struct PoolLayout {
  struct PagedState {  // bytes_per_token > 0: scales with token capacity (KV cache)
    std::string name;
    std::uint64_t bytes_per_token = 0;
  };
  struct SeqState {  // bytes_per_seq > 0: one slot per live sequence (recurrent state)
    std::string name;
    std::uint64_t bytes_per_seq = 0;
  };
  struct PageTable {  // an input whose domain index_into a paged state
    std::string name;
    std::string state;
    std::uint64_t stride = 0;  // tokens per entry
    std::uint64_t width = 0;   // entries per row
  };
  struct LineTable {  // an input whose domain index_into a per-seq state
    std::string name;
    std::string state;
    std::uint64_t stride = 0;     // bytes per line
    std::uint64_t rows = 0;       // the lines dimension
    std::uint64_t seq_width = 1;  // w of a wide table [lines, seqs, w], 1 otherwise
  };

  std::vector<PagedState> paged;
  std::vector<SeqState> per_seq;
  std::vector<PageTable> page_tables;
  std::vector<LineTable> line_tables;

  // Throws kern::Error(ErrorKind::Manifest) naming the first table or state that disagrees.
  void validate() const;

  // Page unit and the pages one row of every page table can reference, by the rule of
  // kern/core/pages.hpp. Without page tables (a paged state addressed only by token slots, as in
  // the toy manifests) the unit is 1 and rows have no limit (nullopt): a pool then caps a row at
  // the pages it has (Pool::row_pages() = pages_max()).
  std::uint64_t unit() const;
  std::optional<std::uint64_t> row_pages() const;
  std::uint64_t bytes_per_token() const;  // sum over paged states
  std::uint64_t bytes_per_seq() const;    // sum over per-seq states
  // Lines one slot holds in the line table's state: bytes_per_seq / stride.
  std::uint64_t lines_per_slot(const LineTable& table) const;
};

// What the caller wants alive: tokens of KV (rounded down to the page unit) and sequences.
struct Capacity {
  std::optional<std::uint64_t> tokens;  // absent: the runtime measures free memory instead
  std::uint64_t seqs = 1;               // sequences alive at once (not the manifest's bound)
};

inline constexpr std::uint64_t kChunkGranule = 2ull << 20;  // driver VMM granularity
inline constexpr std::uint64_t kChunkCap = 64ull << 20;

// Chunk size rule: a multiple of `granule`, at most half the smallest pooled object, at most
// `cap`; when the smallest object is under two granules, `cap` (objects then span chunks anyway).
std::uint64_t chunk_bytes_for(const PoolLayout& layout, std::uint64_t granule = kChunkGranule,
                              std::uint64_t cap = kChunkCap);

// Chunks needed to hold `tokens` (rounded down to the unit) and `slots` slots, rounded up per
// state arena (one whole-chunk arena per state; rounding the sum once would leave every state's
// last object a chunk short).
std::uint64_t chunks_for(const PoolLayout& layout, std::uint64_t chunk_bytes, std::uint64_t tokens,
                         std::uint64_t slots);

}  // namespace kern::pool
