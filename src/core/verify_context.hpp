// Internal to the verifier: the shared state every rule family works on (the manifest, the
// violations collected so far, var assignments at both bounds) and small helpers.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kern/core/manifest.hpp"
#include "kern/core/verify.hpp"

namespace kern::core::verifier {

// Path building shorthands (wire form: a.b[3].c).
std::string key(std::string_view parent, std::string_view k);
std::string idx(std::string_view parent, std::size_t i);

enum class At : std::uint8_t { Min, Max };

// How an op's launches touch one interface param (union over launches).
struct Access {
  bool read = false;
  bool write = false;
};

// A tensormap descriptor encoded over an interface param: its footprint must fit the bytes
// the call passes (checked per call).
struct TensormapUse {
  std::uint32_t param = 0;
  std::uint64_t footprint = 0;  // bytes from the param's base (+ call offset); spanning dim excluded
  bool wrap = false;
  std::string path;  // the tensormap field's path
};

// What the op rules learn about one op, used by the call and program rules.
struct OpFacts {
  std::vector<Access> params;  // per interface param
  bool has_extern = false;
  bool collective = false;  // contains an nccl extern
  std::vector<TensormapUse> tensormaps;
};

class Context {
 public:
  explicit Context(const Manifest& m);

  const Manifest& m;
  std::vector<Violation> violations;
  std::map<std::string, OpFacts> ops;  // filled by check_ops

  void add(std::string path, std::string rule, std::string message);

  bool has_var(std::string_view name) const { return m.vars.count(std::string(name)) != 0; }
  bool has_group(std::string_view g) const { return m.topology.count(std::string(g)) != 0; }
  // A var's value at a bound: 1 at Min, max at Max (a var declared with max 0 counts as 1 so
  // one broken var does not cascade into every expression that reads it).
  std::uint64_t var_at(std::string_view name, At b) const;
  const VarLookup& lookup(At b) const { return b == At::Min ? at_min_ : at_max_; }

  // Reports every undeclared var the expression reads (rule id `rule`); true when all are declared.
  bool check_expr_vars(const Expr& e, const std::string& path, const std::string& rule);
  // Evaluates at a bound; on an evaluation error reports it (rule id `rule`) and returns nullopt.
  // Unknown vars must have been reported by check_expr_vars: they yield nullopt silently.
  std::optional<std::uint64_t> eval_at(const Expr& e, At b, const std::string& path, const std::string& rule);

  // Byte size of a shape at var max; nullopt when a dim is undeclared or the size overflows.
  std::optional<std::uint64_t> shape_bytes_at_max(DType dt, const std::vector<Dim>& shape) const;
  // Same for a buffer, memoized (calls ask for the same buffers thousands of times).
  std::optional<std::uint64_t> buffer_bytes_at_max(const Buffer& b) const {
    auto it = bytes_cache_.find(&b);
    if (it != bytes_cache_.end()) return it->second;
    auto v = shape_bytes_at_max(b.dtype, b.shape);
    bytes_cache_.emplace(&b, v);
    return v;
  }

 private:
  VarLookup at_min_, at_max_;
  mutable std::map<const Buffer*, std::optional<std::uint64_t>> bytes_cache_;  // lookup only, never iterated
};

// The rule families, each in its own file, run in this order by check().
void check_header(Context& c);    // R1, R2, R11 (topology, cut)
void check_states(Context& c);    // R3
void check_buffers(Context& c);   // R4, R11 (peers)
void check_modules(Context& c);   // R5
void check_ops(Context& c);       // R6, R7, R12, when, extern catalogue
void check_calls(Context& c);     // R8, R11 (rank args, peers into externs), R12 (tensormap footprint)
void check_programs(Context& c);  // R9
void check_usage(Context& c);     // R10

// Every dim of `shape` (at `path`) is a declared var or a non-zero extent; each that is not is
// reported under `rule`. True when all are.
bool check_dims(Context& c, const std::vector<Dim>& shape, const std::string& path, const std::string& rule);

// The params a launch is declared with (its own, or the op's).
const std::vector<ParamType>& launch_params(const Op& op, const Launch& l);

// Element size in bits of a TMA dtype in the shared-memory box (global: core::tma_global_bits).
std::uint64_t tma_box_bits(TmaDType t);

// Largest value a scalar param type can hold (i32 2^31-1, u8 255, f32 2^24 exact integers, i64 2^63-1).
std::uint64_t scalar_max(ParamType::Kind k);
std::string_view scalar_name(ParamType::Kind k);
std::string_view literal_name(Literal::Kind k);
std::optional<ParamType::Kind> literal_param_kind(Literal::Kind k);

}  // namespace kern::core::verifier
