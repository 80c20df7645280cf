// The manifest (schema v5) as typed C++ values. Parsing (`parse_manifest`) produces a
// `Manifest`; verification (kern/verify.hpp) turns it into a `Verified`, the only form the
// runtime accepts. All maps are std::map: iteration is in name order, deterministic.
//
// JSON paths in errors follow the wire form: `ops.attn.impl.launches[1].grid[0]`.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kern/base/dtype.hpp"

namespace kern::core {

// Var values a caller passes to a program run: name -> value.
using Vars = std::map<std::string, std::uint64_t, std::less<>>;

inline constexpr std::uint64_t kSchemaVersion = 5;

// ---------------------------------------------------------------- expressions
// Expr := u64 | "<var>" | {"ceil_div": [Expr, u64]} | {"mul": [Expr, u64]} | {"add": [Expr, Expr]}
struct Expr {
  enum class Kind : std::uint8_t { Const, Var, CeilDiv, Mul, Add };
  Kind kind = Kind::Const;
  std::uint64_t value = 0;  // Const: the value; CeilDiv: divisor; Mul: factor
  std::string var;          // Var: the var name
  std::vector<Expr> args;   // CeilDiv / Mul: 1 operand; Add: 2 operands

  static Expr constant(std::uint64_t v);
  static Expr variable(std::string name);
  static Expr ceil_div(Expr a, std::uint64_t d);
  static Expr mul(Expr a, std::uint64_t f);
  static Expr add(Expr a, Expr b);

  // Every var the expression reads, appended in first-seen order.
  void collect_vars(std::vector<std::string>& out) const;
  std::string to_string() const;  // compact readable form: ceil_div(tokens, 4)
};

struct EvalError {
  enum class Kind : std::uint8_t { UnknownVar, Overflow, DivByZero };
  Kind kind;
  std::string detail;  // e.g. the var name or the operation that overflowed
  std::string message() const;
};

// Looks a var up; nullopt = unknown.
using VarLookup = std::function<std::optional<std::uint64_t>(std::string_view)>;
// Checked u64 evaluation: never wraps.
std::variant<std::uint64_t, EvalError> try_eval(const Expr& e, const VarLookup& vars);
// Same, throwing Error(Api) with the EvalError's message prefixed by `where`.
std::uint64_t eval(const Expr& e, const VarLookup& vars, std::string_view where = {});
// The returned lookup refers to `values`, which must outlive it.
VarLookup lookup_in(const std::map<std::string, std::uint64_t>& values);

// ---------------------------------------------------------------- vars, states
struct Var {
  std::uint64_t max = 0;  // lower bound is always 1
};

struct HostState {
  DType dtype = DType::U8;
  std::vector<std::uint64_t> shape;    // outermost may be 0 (open)
  std::vector<std::uint64_t> strides;  // elements, outermost first
};

struct State {
  std::uint64_t bytes_per_token = 0;  // paged
  std::uint64_t bytes_per_seq = 0;    // one slot per live sequence
  std::uint64_t bytes = 0;            // fixed
  std::optional<HostState> host;      // host-provided (v5)
};

// ---------------------------------------------------------------- buffers
// A shape entry: a literal extent or a var name.
struct Dim {
  std::uint64_t value = 0;
  std::string var;  // non-empty: the extent is this var
  bool is_var() const { return !var.empty(); }
};

enum class BufferKind : std::uint8_t { Input, Output, Weight, Source, Workspace, Carry, Peer };
enum class Placement : std::uint8_t { Device, Host };
enum class Fill : std::uint8_t {
  Token,
  Position,
  Valid,
  Slot,
  SeqLen,
  CuSeqlens,
  SpanAt,
  Blocks,
  Sampling,      // kern extension: f32 [groups, 8] per-sequence sampling parameters
  SamplingKeys,  // kern extension: i64 [groups, 8] per-sequence top_k, seed, counter, ...
  History,       // kern extension: i32 [groups, h] tokens generated so far (penalties)
  // outputs
  Tokens,
  Count,
  Error,
  Clock,
  Logprobs,    // kern extension: f32 [groups, 1 + k] chosen token's log-prob, then the top k
  LogprobIds,  // kern extension: i32 [groups, k] ids of the top k
};
// The element type a fill role's buffer has: i32 or i64 for the protocol's own roles, f32 for
// `sampling` and `logprobs`, i64 for `sampling_keys`, i32 for `history` and `logprob_ids`.
bool fill_admits(Fill f, DType dtype);
std::string_view to_string(BufferKind k);
std::string_view to_string(Fill f);
bool is_input_fill(Fill f);
std::string_view to_string(Placement p);
// Wire spelling -> enum; nullopt for an unknown word.
std::optional<BufferKind> buffer_kind_from_string(std::string_view s);
std::optional<Placement> placement_from_string(std::string_view s);
std::optional<Fill> fill_from_string(std::string_view s);

// A domain bound: an integer, a float, or an expression over vars ("tokens").
struct Bound {
  enum class Kind : std::uint8_t { Int, Float, Expr };
  Kind kind = Kind::Int;
  std::int64_t i = 0;
  double f = 0;
  core::Expr expr;
};

struct IndexInto {
  std::string target;  // a buffer or a state
  std::uint64_t stride = 1;
};

struct Domain {
  std::optional<Bound> min, max;
  std::optional<IndexInto> index_into;
  bool monotone = false;
};

// bind segments (v5)
struct TensorRef {    // "name" or {"group": g, "tensors": [name per rank]}
  std::string name;   // single form
  std::string group;  // rank-selected form
  std::vector<std::string> per_rank;
  bool rank_selected() const { return !group.empty(); }
};
struct Range {
  std::uint64_t from = 0, to = 0;  // [from, to)
};
struct RangeRef {  // [a, b] or {"group": g, "ranges": [[a, b] per rank]}
  Range single;
  std::string group;
  std::vector<Range> per_rank;
  bool rank_selected() const { return !group.empty(); }
};
struct Interleave {
  TensorRef with;
  std::uint64_t rows = 0;
};
struct BindSegment {
  TensorRef tensor;
  std::optional<RangeRef> rows, cols;
  std::optional<Interleave> interleave;
};

struct Buffer {
  DType dtype = DType::U8;
  std::vector<Dim> shape;
  BufferKind kind = BufferKind::Workspace;
  Placement placement = Placement::Device;
  std::optional<Fill> fill;
  std::optional<Domain> domain;
  bool exported = false;          // wire: "export"
  std::string of, group;          // peer only
  std::vector<BindSegment> bind;  // weight / source only
};

// ---------------------------------------------------------------- modules, ops
struct Module {
  std::string source;
  std::string sha256;  // 64 hex digits
};

enum class Direction : std::uint8_t { None, In, Out, InOut };

// i32 | i64 | f32 | u8 | bytes<N> | (in|out|inout) state | (in|out|inout) buffer<DTYPE>
struct ParamType {
  enum class Kind : std::uint8_t { I32, I64, F32, U8, Bytes, State, Buffer };
  Kind kind = Kind::I32;
  Direction dir = Direction::None;  // State / Buffer only
  DType dtype = DType::U8;          // Buffer only
  std::uint64_t bytes = 0;          // Bytes only: N
  std::uint64_t abi_size() const;   // pointers 8, i64 8, u8 1, i32/f32 4, bytes<N> N
  bool is_pointer() const { return kind == Kind::State || kind == Kind::Buffer; }
  bool reads() const { return dir == Direction::In || dir == Direction::InOut; }
  bool writes() const { return dir == Direction::Out || dir == Direction::InOut; }
  std::string to_string() const;  // the wire spelling
};
// Parses the wire spelling; nullopt for a malformed string.
std::optional<ParamType> parse_param_type(std::string_view s);

struct Literal {
  enum class Kind : std::uint8_t { I32, I64, F32, U8 };
  Kind kind = Kind::I32;
  std::int64_t i = 0;  // I32 / I64 / U8 (range-checked at parse)
  double f = 0;        // F32
};
std::string_view to_string(Literal::Kind k);  // the wire tag: "i32", "i64", "f32", "u8"
std::optional<Literal::Kind> literal_kind_from_string(std::string_view s);

enum class TmaDType : std::uint8_t { U8, U16, U32, I32, U64, I64, F16, BF16, F32, TF32, U4, U4Packed };
std::string_view to_string(TmaDType t);  // "u4packed"
std::optional<TmaDType> tma_dtype_from_string(std::string_view s);
std::uint64_t tma_global_bits(TmaDType t);  // element size in global memory (u4: 4)

struct Tensormap {
  std::uint32_t param = 0;
  TmaDType dtype = TmaDType::U8;
  std::vector<std::uint64_t> dims;     // innermost first, elements
  std::vector<std::uint64_t> strides;  // bytes, for dims[1..]
  std::vector<std::uint64_t> box;      // elements
  std::uint32_t swizzle = 0;           // 0 | 32 | 64 | 128
  std::uint32_t l2_promotion = 0;      // 0 | 64 | 128 | 256
  bool oob_nan = false;
  bool wrap = false;
};

struct PackField {
  enum class Kind : std::uint8_t { Param, Scratch, Literal, Var, Expr, Rank, Tensormap };
  std::uint64_t at = 0;
  std::optional<std::uint64_t> width;
  Kind kind = Kind::Param;
  std::uint32_t param = 0;  // Param
  std::string name;         // Scratch: scratch name; Var: var name; Rank: group
  core::Literal literal;    // Literal
  core::Expr expr;          // Expr
  core::Tensormap tensormap;
};

struct Pack {
  std::uint64_t size = 0;
  std::vector<PackField> fields;
};

// Launch args (untagged objects on the wire)
struct LaunchArg {
  enum class Kind : std::uint8_t { Param, Scratch, Literal, Rank, Pack };
  Kind kind = Kind::Param;
  std::uint32_t param = 0;  // Param
  std::string name;         // Scratch: scratch name; Rank: group
  core::Literal literal;
  std::shared_ptr<const core::Pack> pack;  // Pack (shared: launches are copied around)
};

struct When {
  std::string var;
  std::optional<std::uint64_t> min, max;  // inclusive
  bool contains(std::uint64_t v) const { return (!min || v >= *min) && (!max || v <= *max); }
};

struct Algo {  // pinned cuBLASLt algorithm
  std::int64_t id = 0, tile = 0, stages = 0, split_k = 0, reduction = 0, swizzle = 0, custom = 0, inner_shape = 0,
               cluster_shape = 0;
};

struct Launch {
  // Kernel launch: module + entry + geometry. Extern launch: entry "extern:<name>", no module.
  std::string module;
  std::string entry;
  bool is_extern() const { return entry.rfind("extern:", 0) == 0; }
  std::string_view extern_name() const { return std::string_view(entry).substr(7); }
  std::optional<std::vector<ParamType>> params;  // default: the op's params
  std::array<std::uint32_t, 3> block{};
  std::array<Expr, 3> grid;
  std::optional<Expr> shared_mem;
  std::optional<std::array<std::uint32_t, 3>> cluster;
  bool pdl = false;
  // kern extension to schema v5: the kernel synchronises its blocks with each other (a grid-wide
  // barrier), so the whole grid must be resident at once; the runtime proves it at load.
  bool cooperative = false;
  std::optional<core::When> when;
  std::optional<std::vector<LaunchArg>> args;  // default: forward op params in order
  std::optional<core::Algo> algo;
  // kern extension to schema v5, on cublaslt_bf16_tn[_acc] only: the m at which the runtime asks
  // cuBLASLt's heuristic for the launch's one algorithm (default: m at the var bounds). A decode
  // GEMM runs at every m from 1 to its bound with that algorithm (row invariance); choosing it at a
  // smaller m keeps small steps fast (docs/runtime.md, "GEMM algorithm choice").
  std::optional<std::uint64_t> algo_m;
  // kern extension, with algo_m's rule: which of the heuristic's answers at that m (that also run at
  // m = 1) the launch takes, 0 = its first; an answer the library does not offer falls back to the
  // first, with a warning (a tuned choice is a hint; docs/runtime.md, "GEMM algorithm choice").
  std::optional<std::uint32_t> algo_candidate;
  // kern extension, on cublaslt_bf16_tn[_acc] only, not with algo: at each m the runtime may run
  // another of the heuristic's answers that computes the same bits as the launch's one algorithm,
  // checked on a probe (docs/runtime.md, "GEMM algorithm choice"); rows stay invariant.
  std::optional<bool> algo_per_m;
};

struct Scratch {
  DType dtype = DType::U8;
  std::vector<Dim> shape;
};

struct Impl {
  std::map<std::string, Scratch> scratch;
  std::vector<Launch> launches;
};

struct Op {
  std::vector<ParamType> params;
  core::Impl impl;
};

// ---------------------------------------------------------------- programs
struct CallArg {
  enum class Kind : std::uint8_t { Buf, State, Var, Expr, Literal, Rank };
  Kind kind = Kind::Buf;
  std::string name;          // Buf / State / Var: the name; Rank: the group
  std::uint64_t offset = 0;  // Buf / State: byte offset
  core::Expr expr;           // Expr
  core::Literal literal;     // Literal
};

struct Call {
  std::string label;  // diagnostic only
  std::string op;
  std::vector<CallArg> args;
};

struct Batch {
  std::uint64_t groups = 1;  // upper bound
  Dim rows;                  // exact const, or a var (then one group; rows = var value)
  std::string span;          // optional var
  std::string context;       // optional var (v5)
  // kern extension (a mixed step): the var counting the call's leading one-row decode groups; the
  // groups after them are chunks, and `rows` (then the row axis var) counts every row of the call.
  std::string decode;
  // kern extension (packed prefill): every group is a prefill chunk of its own length, and `rows`
  // (then the row axis var) counts every row of the call.
  bool packed = false;
};

struct Program {
  std::optional<core::Batch> batch;
  bool once = false;
  bool derive = false;
  bool graph = false;
  std::vector<Call> calls;
};

struct Cut {
  std::string id;
  std::uint64_t stage = 0;
  std::uint64_t stages = 0;
};

struct Manifest {
  // The SHA-256 (64 lowercase hex digits) of the text parse_manifest read; "" for a manifest built
  // in code. Ranks compare it in the multi-GPU handshake (kern/core/handshake.hpp).
  std::string digest;
  std::uint64_t schema_version = 0;
  std::string model;
  std::map<std::string, std::uint64_t> topology;  // topology.groups: name -> size
  std::optional<core::Cut> cut;
  std::map<std::string, Var> vars;
  std::map<std::string, State> states;
  std::map<std::string, Buffer> buffers;
  std::map<std::string, Module> modules;
  std::map<std::string, Op> ops;
  std::map<std::string, Program> programs;
};

// Strict parse of schema-v5 JSON text: unknown fields, duplicate keys, wrong types and
// malformed param types are Error(ManifestParse) naming the JSON path; syntax errors name
// line and column. `constants` are expanded (any numeric position may name one; the list of
// positions is at the top of src/core/constants.cpp). Left to the verifier: the value of
// schema_version (any non-negative integer parses; rule 1) and which launch fields fit which
// launch kind (a launch needs `block` and `grid` unless its entry is "extern:<name>"; R6/R12).
Manifest parse_manifest(std::string_view json_text, std::string_view what = "manifest");
Manifest parse_manifest_file(const std::string& path);

// Element count of a buffer's / scratch's shape at the given var values (product of the extents;
// 1 for an empty shape). Checked: Error(Manifest) on u64 overflow or an unknown var.
std::uint64_t shape_elements(const std::vector<Dim>& shape, const VarLookup& vars, std::string_view where = {});

}  // namespace kern::core
