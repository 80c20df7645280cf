// Which inputs index which state: the page tables and `slot` fills of each paged
// (bytes_per_token) state and the line tables of each per-seq (bytes_per_seq) state. This is the
// one definition the serving protocol (core::Protocol) and the pool's layout (pool::layout_of)
// both read, so they cannot disagree on which buffer addresses which state's pages or slots.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kern/core/manifest.hpp"
#include "kern/core/verify.hpp"

namespace kern::core {

// An input whose domain index_into a paged (bytes_per_token) state: entries are page indices
// when stride = page size, else token-slot indices.
struct PageTable {
  std::string buffer, state;
  DType dtype = DType::I32;
  std::uint64_t stride = 1;  // tokens per entry (the page size)
  std::uint64_t width = 1;   // entries per sequence (innermost extent at var max; 1 for a 1-D table)
  std::string axis;          // var of the outermost dim ("" when constant)
};

// An input whose domain index_into a bytes_per_seq state: entries are line indices,
// slot × (bytes_per_seq / stride) + line.
struct LineTable {
  std::string buffer, state;
  DType dtype = DType::I32;
  std::uint64_t stride = 1;          // bytes per line
  std::uint64_t lines_per_slot = 1;  // bytes_per_seq / stride (0 when the stride is 0)
  std::vector<Dim> shape;            // [lines] | [lines, seqs] | [lines, seqs, w]
};

// A `slot` fill whose domain index_into a state: entries are token slots of that state (for a
// paged state, page × unit + offset). It is not a table (the pool's page unit ignores it), but
// it names the state every row's writes land in.
struct SlotFill {
  std::string buffer, state;
  DType dtype = DType::I64;
  std::uint64_t stride = 1;  // the domain's stride
};

struct StateTables {
  // Each list in buffer-name order (the manifest's map order), so every reader sees one order.
  std::vector<PageTable> page_tables;
  std::vector<LineTable> line_tables;
  std::vector<SlotFill> slot_fills;
  // Tables of an impossible shape ("P.table_shape"), in buffer-name order. The tables are listed
  // above all the same, so a caller that reports findings (the protocol) sees every one of them.
  std::vector<Violation> violations;
};

// Scans the manifest's input buffers. Only non-fill inputs are tables; fills other than `slot`
// and inputs that index a buffer, a fixed state or a missing state are not listed. Never throws.
StateTables state_tables(const Manifest& m);

}  // namespace kern::core
