// The pool layout of a manifest: its paged and per-seq states and the tables that index them,
// read from core::state_tables (the definition the serving protocol reads), so the pool and the
// protocol agree on every table.
#pragma once

#include "kern/core/manifest.hpp"
#include "kern/pool/layout.hpp"

namespace kern::pool {

// Paged states (bytes_per_token) then per-seq states (bytes_per_seq), each in state-name order
// (Pool::arenas() numbers them so); fixed and host states are not pooled. Page tables keep
// stride and width (entries per row at var max); a line table's rows are its shape[0] at var
// max and its seq_width is shape[2] (at var max) for a wide [lines, seqs, w] table, else 1.
// Throws Error(Manifest) with one detail line per finding when a table has an impossible shape
// ("P.table_shape"). The layout is not validated here: a manifest without pooled states gives
// an empty layout, which PoolLayout::validate() (and so Pool::create) refuses.
PoolLayout layout_of(const core::Manifest& m);

}  // namespace kern::pool
