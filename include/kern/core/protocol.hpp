// The serving protocol: a second pass over a Verified manifest that derives the serving axes
// from `fill` roles and projects everything a driver needs (which program runs a step of a
// given shape, where each per-row/per-sequence input goes, page and line tables, the var table
// for a call). Drivers use only this projection, never buffer/program/var names of their own.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kern/core/state_tables.hpp"  // PageTable, LineTable
#include "kern/core/verify.hpp"

namespace kern::core {

// The sampling roles' widths (kern's extension of the protocol; docs/manifest.md "Sampling"):
// `sampling` f32 [groups, 8] = temperature, top_p, min_p, repetition, presence and frequency
// penalties, 0, 0; `sampling_keys` i64 [groups, 8] = top_k, seed, counter, history length,
// logprobs wanted, forced + 1, logit-bias entries, 0; `logprobs` f32 [groups, 1 + 20]; `logprob_ids`
// i32 [groups, 20]. A row's logit-bias entries are (id, f32 bits) pairs in the last 2 n slots of its
// `history` row, at most kMaxLogitBias (kernels/sample_common.cuh: kMaxBias).
inline constexpr std::uint64_t kSamplingWidth = 8;
inline constexpr std::uint64_t kMaxLogprobs = 20;
inline constexpr std::uint64_t kMaxLogitBias = 255;

// The buffer that plays one fill role.
struct FillSlot {
  Fill role = Fill::Token;
  std::string buffer;
  DType dtype = DType::I32;
  std::string axis;          // var of the outermost dim ("" when it is a constant)
  std::uint64_t extent = 0;  // outermost dim when constant (e.g. cu_seqlens: groups+1), else its var max
  std::uint64_t width = 1;   // elements per outermost index (product of the inner dims)
};

// A batch program seen as a step shape.
struct Forward {
  std::string program;       // opaque handle for the runtime; drivers never spell it
  std::uint64_t groups = 1;  // upper bound on sequences per call
  std::uint64_t rows = 1;    // exact rows per group (rows_var empty), or the var's max
  std::string rows_var;      // non-empty: rows = this var's value, one group (a prefill chunk)
  std::string span;          // span var ("" = none)
  bool graph = false;
  bool emits_tokens = false;           // writes the `tokens` fill
  std::uint64_t tokens_per_group = 0;  // tokens row width when it emits ([seqs] -> 1, [seqs, r] -> r)
  std::string count;                   // `count` fill buffer it writes ("" = take 1 token per group)
  std::vector<std::string> writes;     // every buffer its calls write (out / inout params), name order
  // A mixed step (batch.decode): the var counting its leading one-row decode groups; the groups after
  // them are prefill chunks, and `rows` bounds every row of the call (decode rows first).
  std::string decode_var;
  std::uint64_t decode_groups = 0;  // the decode var's max
  // A packed prefill program (batch.packed): up to `groups` chunks of their own lengths in one call,
  // `rows` bounding every row of the call (rows_var is then the row axis var).
  bool packed = false;
};

class Protocol {
 public:
  // Axes (var names; empty when absent).
  const std::string& row_var() const { return row_var_; }
  const std::string& group_var() const { return group_var_; }
  const std::string& tray_var() const { return tray_var_; }
  const std::string& span_var() const { return span_var_; }
  const std::string& context_var() const { return context_var_; }

  const FillSlot* fill(Fill role) const;  // nullptr when no buffer plays the role
  const std::vector<FillSlot>& fills() const { return fills_; }
  const std::vector<PageTable>& page_tables() const { return page_tables_; }
  const std::vector<LineTable>& line_tables() const { return line_tables_; }
  const std::vector<Forward>& forwards() const { return forwards_; }  // every batch program, name order

  // The program for a step of `groups` sequences × `rows` rows each: among the non-span
  // programs whose shape covers it, the one with the tightest groups bound (exact rows preferred
  // over var rows on a tie). nullopt when none covers it.
  std::optional<Forward> forward(std::uint64_t groups, std::uint64_t rows) const;
  // The program accepting (1, var rows): a prefill chunk, or with `packed` up to `groups` of them in
  // one call. nullopt when there is none.
  std::optional<Forward> chunk() const;
  // The var table for one call of chunk program `f` over `chunks` chunks of `rows` rows in all (more
  // than one chunk only when f is packed); refuses a call outside the program's bounds.
  std::map<std::string, std::uint64_t> chunk_vars(const Forward& f, std::uint64_t chunks, std::uint64_t rows,
                                                  std::uint64_t longest_context) const;
  // The mixed program (decode rows and prefill chunks in one forward), if any.
  std::optional<Forward> mixed() const;
  // The var table for one call of mixed program `f`: `decode` one-row groups then `chunks` chunk groups,
  // `rows` rows in all (decode + chunk rows); group var = decode + chunks, row var = rows, decode var
  // = decode, context var = longest_context, every other var at its max. Error(Api) outside bounds
  // (decode and chunks at least 1 each, rows above decode + chunks - 1 ...).
  std::map<std::string, std::uint64_t> mixed_vars(const Forward& f, std::uint64_t decode, std::uint64_t chunks,
                                                  std::uint64_t rows, std::uint64_t longest_context) const;
  // The span program covering `groups` (tightest bound), if any.
  std::optional<Forward> spanned(std::uint64_t groups) const;
  const std::vector<std::string>& once_programs() const { return once_; }
  const std::vector<std::string>& derive_programs() const { return derive_; }  // in run order

  // The var table for one call of `f`: row var = groups × rows (+ span − 1 for a span call), group var = groups,
  // context var = longest_context (the longest sequence including this call's rows), span var = span (span programs
  // only), and every other var at its max. Error(Api) when a value is outside its var's bounds or the shape does not
  // fit `f`.
  std::map<std::string, std::uint64_t> vars(const Forward& f, std::uint64_t groups, std::uint64_t rows,
                                            std::uint64_t longest_context, std::uint64_t span = 0) const;

  const Verified& verified() const { return v_; }

 private:
  explicit Protocol(Verified v) : v_(std::move(v)) {}
  friend Protocol check_protocol(const Verified& v);
  friend std::vector<Violation> protocol_violations(const Verified& v);
  friend struct ProtocolBuilder;
  Verified v_;
  std::string row_var_, group_var_, tray_var_, span_var_, context_var_;
  std::vector<FillSlot> fills_;
  std::vector<PageTable> page_tables_;
  std::vector<LineTable> line_tables_;
  std::vector<Forward> forwards_;
  std::vector<std::string> once_, derive_;
  std::string mixed_;  // the mixed program's name ("" = none)
};

// Every protocol finding (rule ids "P.*", see docs/manifest.md), deterministic order.
std::vector<Violation> protocol_violations(const Verified& v);
// Throws Error(ManifestVerify, "<n> protocol violations", one line per finding).
Protocol check_protocol(const Verified& v);

}  // namespace kern::core
