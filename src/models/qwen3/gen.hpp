// The Qwen3 manifest builder's shared pieces (docs/kernels.md): the geometry derived from the shape and
// the options, the JSON spellings of launch args, launches whose module and params come from the kernel
// catalogue, and the builders of each part of the manifest, one file per op family:
//   gen.cpp            options check, geometry, modules, programs; the public entry points
//   gen_ops.cpp        the op table; embedding, norms, RoPE, SiLU·mul, argmax, sample ops
//   gen_attention.cpp  decode (split-KV) and prefill attention ops
//   gen_gemm.cpp       prefill cuBLASLt GEMMs, decode GEMV / cuBLASLt ops, the fp8 GEMM and quantize ops
//   gen_chain.cpp      the decode chain's plan and ops
//   gen_buffers.cpp    buffers and weight bindings (fp8: sources, e4m3 carries and scales)
//   gen_calls.cpp      the forward pass of both serving programs; the fp8 derive program
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kern/models/qwen3_gen.hpp"

namespace kern::models::qwen3_gen {

using OJ = nlohmann::ordered_json;

// Decode GEMMs: kern's GEMV (kernels/gemv.cu) up to this many sequences, cuBLASLt above. The GEMV
// streams W once per 8 rows of x (one tensor-core mma N), so 8 rows cost what 1 row costs.
constexpr std::uint64_t kGemvMaxRows = 8;

// Decode GEMMs on cuBLASLt run one algorithm at every step size (row invariance). The heuristic's
// choice at m = max_seqs is tiled for that m and slow at small m (4B shape, H200, 2026-12-03: the
// step's GEMMs take 5.0 ms at m = 1 with the m = 256 choice, 2.7 ms with the m = 64 one), so above
// this bound the launch asks for it at this m instead (`algo_m`; docs/perf.md, thirteenth session).
constexpr std::uint64_t kDecodeAlgoM = 128;

// A mixed step carries at most this many chunk groups beside its decode groups (the group var's max
// grows by it).
constexpr std::uint64_t kMixedChunkGroups = 8;

// Shared geometry, derived once from the config and the options.
struct Geo {
  // One rank's shape: with o.tp above 1, heads, kv_heads and intermediate are the checkpoint's / tp
  // (the weights bind the rank's slices of the checkpoint's tensors: linear_weights).
  Qwen3Shape c;
  Qwen3GenOptions o;
  std::uint64_t qkv_width, q_width, max_pages, max_pos, page_elems, page_stride_elems, layer_bytes;
  std::string hd;  // entry suffix: "_hd128"
  // The decode chain's plan: rows 0 = off (decode runs the per-op kernels for every step size).
  std::uint64_t chain_rows = 0, chain_stage_bytes = 0, chain_shared = 0;
  // Decode steps of up to this many sequences use the GEMV, larger ones cuBLASLt: kGemvMaxRows, or
  // with batch_invariant and max_seqs above it 0 (one kernel, cuBLASLt, for every step size).
  std::uint64_t gemv_rows = kGemvMaxRows;
};

// Tensor parallelism: the rank group's name, and whether the manifest has one.
inline constexpr const char* kTpGroup = "tp";
inline bool tensor_parallel(const Geo& g) { return g.o.tp > 1; }
// Both programs laid out as prefill is (GEMMs into `delta`, the residual added by add_rms_norm): fp8
// (no accumulating fp8 GEMM) and tensor parallelism (the partial sums are all-reduced first).
inline bool decode_as_prefill(const Geo& g) { return g.o.fp8 || tensor_parallel(g); }
// Rows up to which a call's all-reduces go through the peer kernel (0: none), and whether larger calls
// exist that go through NCCL.
inline std::uint64_t peer_allreduce_rows(const Geo& g) {
  if (!tensor_parallel(g)) return 0;
  if (g.o.tp_peer_allreduce) return g.o.max_tokens;
  return std::min(g.o.tp_peer_allreduce_rows.value_or(g.o.max_seqs), g.o.max_tokens);
}
inline bool peer_allreduce(const Geo& g) { return peer_allreduce_rows(g) > 0; }
inline bool nccl_allreduce(const Geo& g) { return tensor_parallel(g) && peer_allreduce_rows(g) < g.o.max_tokens; }
// A peer barrier's timeout (kern_peer_barrier): a rank that does not arrive within it is reported.
inline constexpr std::uint64_t kTpBarrierTimeoutNs = 2'000'000'000;

// ---------------------------------------------------------------- launch args and launches

inline OJ p(std::uint64_t i) { return OJ{{"param", i}}; }
inline OJ i32(std::uint64_t v) { return OJ{{"i32", v}}; }
inline OJ i64(std::uint64_t v) { return OJ{{"i64", v}}; }
inline OJ f32(double v) { return OJ{{"f32", v}}; }
inline OJ scratch(const char* name) { return OJ{{"scratch", name}}; }
OJ buf(const std::string& name, std::uint64_t offset = 0);
OJ state(const std::string& name, std::uint64_t offset);
inline OJ var(const char* name) { return OJ{{"var", name}}; }
inline OJ ceil_div(OJ e, std::uint64_t d) { return OJ{{"ceil_div", OJ::array({std::move(e), d})}}; }

// A launch of kernel `entry`: its module (family) and params from the kernel catalogue, `args` one per
// param (Error(Manifest) otherwise), grid, `block` threads.
OJ launch(const std::string& entry, OJ args, OJ grid, std::uint64_t block);
// An op: its params and launches (with the scratch they share, if any).
OJ op(std::vector<std::string> params, OJ launches, OJ scratch_decl = nullptr);
OJ with_shared(OJ l, std::uint64_t bytes);
OJ with_pdl(OJ l, const Geo& g);

// ---------------------------------------------------------------- decode step sizes

// The per-op decode kernels serve steps above the chain's rows (all steps without the chain).
inline bool decode_needs_ops(const Geo& g) { return g.o.max_seqs > g.chain_rows; }
// The decode ops use cuBLASLt launches only when a decode step can have more than gemv_rows rows,
// and GEMV launches only when gemv_rows > 0.
inline bool decode_uses_blas(const Geo& g) { return g.o.max_seqs > g.gemv_rows; }
inline bool decode_uses_gemv(const Geo& g) { return g.gemv_rows > g.chain_rows; }
// The `when` of a decode GEMM launch: the GEMV for seqs <= gemv_rows (above the chain's rows),
// cuBLASLt above (every step when gemv_rows is 0).
OJ when_gemv(const Geo& g);
OJ when_blas(const Geo& g);
// The decode chain's launches, and the per-op decode launches that do not go through when_gemv (the norms).
OJ when_chain(const Geo& g);
OJ when_not_chain(const Geo& g);

// ---------------------------------------------------------------- the parts of the manifest

// kern_rms_norm_bf16 of x (param 0) with weight param 1 into `out`, rows from param `m_param`, one
// block per row of `rows_var` (gen_ops.cpp).
OJ rms_norm_launch(const Geo& g, OJ out, std::uint64_t m_param, const char* rows_var);
// The sampling op's history row length (i32 elements per row of its `history` param; gen_ops.cpp):
// every position of the context.
std::uint64_t sample_history_stride(const Geo& g);
// Every op of the manifest, in manifest order (gen_ops.cpp).
OJ ops(const Geo& g);
OJ attn_decode_op(const Geo& g);   // gen_attention.cpp
OJ attn_prefill_op(const Geo& g);  // gen_attention.cpp
// The prefill GEMMs (gemm_*) and the decode GEMM ops that the plan needs, added to `o` (gen_gemm.cpp).
void add_gemm_ops(const Geo& g, OJ& o);
// Plans the decode chain into g.chain_* (gen_chain.cpp).
void plan_chain(Geo& g);
// The decode chain's ops (with the chain on), added to `o` (gen_chain.cpp).
void add_chain_ops(const Geo& g, OJ& o);
OJ buffers(const Geo& g);                                   // gen_buffers.cpp
std::string layer_name(std::uint64_t l, const char* what);  // "layers.<l>.<what>": a weight buffer, a call label
std::string hf_layer(std::uint64_t l, const char* what);    // "model.layers.<l>.<what>.weight"
// A layer's linear weights, [rows, cols] each, bound to the HF tensors (q/k/v and gate/up concatenated;
// gen_buffers.cpp). With --fp8 each is what the derive program quantizes: weight `name` of layer l is
// the fp8e4m3 carry layer_name(l, name), its scale fp8_scale(l, name) (f32, element 0 of 4) and the
// bf16 source fp8_source(l, name) bound as the bf16 weight would be.
struct LinearWeight {
  const char* name;  // qkv, o_proj, gate_up, down
  std::uint64_t rows, cols;
  OJ bind;  // its `bind` segments (with o.tp above 1, per-rank row or column ranges)
};
std::vector<LinearWeight> linear_weights(const Geo& g, std::uint64_t l);
std::string fp8_scale(std::uint64_t l, const char* w);   // "layers.<l>.<w>_scale"
std::string fp8_source(std::uint64_t l, const char* w);  // "layers.<l>.<w>_bf16"
// The `quantize` derive program's calls: one quantize_e4m3 per fp8 weight (gen_calls.cpp).
OJ quantize_calls(const Geo& g);
// The calls of `prefill` or `decode` (gen_calls.cpp).
OJ forward_calls(const Geo& g, bool prefill);
// With o.mixed: the calls of the serving `prefill` (mixed false) and `mixed` programs, built from the
// decode program's ops over `tokens` rows (gen_calls.cpp).
OJ serving_calls(const Geo& g, bool mixed);
// The var the decode ops' norm and SiLU launches take their grids from: `tokens` with o.mixed (those
// ops then also run over a chunk's rows), else `seqs` (equal to tokens in the decode program).
inline const char* decode_rows_var(const Geo& g) { return g.o.mixed ? "tokens" : "seqs"; }
// A call of op `op_name` (label omitted when empty).
OJ call(const std::string& label, const char* op_name, OJ args);

}  // namespace kern::models::qwen3_gen
