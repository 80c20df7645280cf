// `kern gen qwen3`: a schema-v5 manifest for a dense Qwen3 checkpoint, from its config.json.
//
// The manifest wires kern's own kernels (kernels/*.cu: entries and parameter lists from the kernel
// catalogue, kernel_catalogue.hpp; what they compute in docs/kernels.md) and the runtime's cuBLASLt
// GEMM extern into two serving programs: `prefill` (1 group × `tokens` rows, eager) and `decode` (up
// to `seqs` groups × 1 row, CUDA graph), plus a `load` once program that builds the RoPE table. Weights bind the HF
// tensor names directly (q/k/v and gate/up concatenated through `bind`; a tied lm_head binds the embedding again). The
// KV cache is one paged bytes_per_token state; the layout is described in docs/kernels.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kern/base/json.hpp"
#include "kern/models/qwen3_shape.hpp"

namespace kern::models {

// Parses and checks a config.json document: model_type "qwen3", every field present with the
// right type, a shape the kernels serve (head_dim 64 or 128, heads a multiple of kv heads with at
// most 16 q heads per kv head, bf16 weights, no attention bias, no rope scaling, no sliding
// window). Error(WeightArtifact) naming the field and the reason otherwise.
Qwen3Shape parse_qwen3_config(const Json& config, const std::string& what = "config.json");
// Reads <hf_dir>/config.json (Error(Io) when missing) and parses it as above.
Qwen3Shape read_qwen3_config(const std::filesystem::path& hf_dir);

struct Qwen3GenOptions {
  std::uint64_t max_tokens = 2048;  // rows per call (var `tokens`)
  std::uint64_t max_seqs = 64;      // sequences per decode step (var `seqs`)
  std::uint64_t page_size = 16;     // KV tokens per page
  bool logits_output = false;       // expose `logits` ([seqs, vocab] bf16) as an output
  bool pdl = true;                  // decode kernels launched with programmatic dependent launch
  // Tokens come from the `sample` op (kernels/sample.cu, sm_90: greedy rows are argmax; temperature,
  // top-k/p, min-p, penalties, log-probs per sequence) with the sampling fills; off: argmax only,
  // no sampling fills (GPUs before sm_90).
  bool sampling = true;
  // Bytes of its weight tile each decode GEMV block asks the L2 to prefetch before it waits for
  // the previous kernel (capped at the tile; 0: none, the default: 64 KiB measured 6 % slower per
  // decode step on the H200, docs/perf.md).
  std::uint64_t gemv_prefetch_bytes = 0;
  // Fuse each decode RMSNorm into the prologue of the GEMV that reads it (kernels/gemv.cu
  // kern_gemv_rms_norm_*) instead of a separate rms_norm launch. Off: measured slower on the H200
  // (docs/perf.md), every block recomputes the row statistics.
  bool gemv_fused_norm = false;
  // At most this many blocks per decode GEMV launch (0: one per tile); the kernel strides tiles
  // over its grid and overlaps the next tile's first loads with the epilogue.
  std::uint64_t gemv_max_blocks = 0;
  // Decode steps of up to 4 sequences run each layer's o_proj..next qkv_proj stretch as one persistent
  // kernel (kernels/decode_chain.cu, sm_90) instead of six launches; cuBLASLt / the GEMVs serve larger
  // steps. Off: on the H200 it measured no faster than the per-op kernels (docs/perf.md).
  bool decode_chain = false;
  // Blocks of each decode-chain launch: one per SM of the GPU that will run the manifest (all must be
  // resident at once; the runtime checks the fit at load). kern gen and kern bench fill in the device's count.
  std::uint64_t chain_blocks = 132;
  // Blocks of work the split-KV decode attention aims for per call (kernels/attention.cu): ranges per
  // sequence = ceil(this / (seqs · kv_heads)), at most 64, each at least 32 keys. 0: the partial
  // kernel's own default (decode_attn_target below).
  std::uint64_t decode_attn_target_blocks = 0;
  // The split-KV decode attention's partial kernel: tensor cores with a cp.async ring per warp
  // (kern_attn_decode_mma_partial_hd*), or the f32 CUDA-core kernel (false; kern_attn_decode_partial_hd*).
  bool decode_attn_mma = true;
  // With decode_attn_mma, which tensor-core partial: Block (kern_attn_decode_mma_partial_hd*: one block
  // of 4 warps per (sequence, kv head, range)), Warp (kern_attn_decode_warp_partial_hd*: one warp per
  // item, a fixed grid of decode_attn_target(...) blocks whose warps stride over the items, each warp's
  // cp.async ring running across them), or Auto: Warp for batch-invariant manifests of more than 8
  // sequences (faster from 8 sequences up), Block otherwise (faster alone, by ~20 % at 32k keys; and
  // without batch invariance a big step has one long range per item). docs/perf.md, session 20.
  enum class DecodeAttnItems { Auto, Block, Warp };
  DecodeAttnItems decode_attn_items = DecodeAttnItems::Auto;
  // With decode_attn_mma, the chosen partial with key-major products (kern_attn_decode_{mma,warp}_km_partial_hd*:
  // the keys on mma's M, the q heads on its N; half the mma per 16 keys; GQA groups of at most 8).
  // docs/kernels.md, "Key-major products"; not measured yet (docs/perf.md, session 40), so off.
  bool decode_attn_key_major = false;
  // Prefill calls of at least this many rows (head_dim 128) use the long-call attention layout, faster
  // on long prompts (docs/perf.md): on wgmma three consumer warpgroups (the same bits as the smaller
  // calls' kernel), on mma.sync m32n32s2 instead of s2 (rows of one call size are computed bitwise
  // alike however the prompt is chunked; across the threshold they differ by rounding). 0: never.
  std::uint64_t prefill_long_rows = 4096;
  // head_dim 128: the prefill attention on Hopper's warpgroup MMA, warp-specialised
  // (kern_attn_prefill_wgmma_ws_hd128, sm_90a only) for every call, instead of the mma.sync layouts
  // above (false: kern gen --prefill-attn-mma, for other GPUs). docs/perf.md, sessions 28 and 29.
  bool prefill_attn_wgmma = true;  // callers that know the GPU keep it where prefill_attn_wgmma_runs_on says
  // Batch invariance (the default): a sequence's decode arithmetic never depends on how many
  // sequences share the step. The decode GEMMs use one kernel for every step size (the GEMV when
  // max_seqs <= 8, else cuBLASLt with one algorithm per launch; the decode chain only if it covers
  // every step size) and the split-KV attention cuts each context by its length alone
  // (decode_attn_split_tokens). Off: the GEMV below 9 sequences and cuBLASLt above, ranges per
  // sequence from the step's size (decode_attn_target_blocks): faster at small steps, and a sequence's
  // tokens may change with what else is batched (docs/serve.md measures both).
  bool batch_invariant = true;
  // The prefill program ends with the final norm, the lm_head of each sequence's last row and the
  // sampling (or argmax) op: kern run and kern bench take a prompt's first token there. Off (kern
  // serve's in-memory manifest, kern gen --no-prefill-logits): the program ends at the last layer's
  // down_proj, because the server's first decode row feeds the prompt's last token and samples the
  // first generated token itself, so a chunk's logits were computed and never read (an lm_head of
  // 151,936 x 2,560 per chunk call on the 4B shape).
  bool prefill_logits = true;
  // Chunks per prefill call: above 1 the prefill program is packed (batch.packed: up to this many
  // sequences' chunks in one call of at most max_tokens rows, the GEMMs over all of them), kern
  // serve's. Needs prefill_logits off and at most max_seqs.
  std::uint64_t prefill_chunks = 1;
  // A third batch program, `mixed` (kern serve): a step's decode rows and prefill chunks as one
  // forward, so the decode rows' GEMMs ride on the chunks' weight reads (docs/serve.md "Mixed
  // steps"). Every serving program then computes a row with the same ops (the decode program's:
  // cuBLASLt with one algorithm per weight, residuals accumulated into `hidden`), so a row's bits do
  // not depend on which program ran it. Needs batch_invariant with more than 8 sequences (cuBLASLt
  // for every decode step), no decode chain, and prefill_logits off.
  bool mixed = false;
  // The batch-invariant attention split's shortest range, in keys (a multiple of 32): a context of len
  // tokens has ranges of max(this, ceil(len / 64) rounded up to 32) keys. Longer ranges cost less partial
  // traffic and reduce work in big steps, shorter ones spread a small step over more SMs. 0: the
  // partial kernel's own (decode_attn_split below).
  std::uint64_t decode_attn_split_tokens = 0;
  // The decode GEMMs' cuBLASLt launches carry algo_per_m (kern extension): at each step size the
  // runtime may run another heuristic answer that computes the same bits as the launch's one
  // algorithm, found on a probe (docs/runtime.md, "GEMM algorithm choice"); invariance holds.
  bool gemm_per_m = true;  // on by default since session 36 (measured: docs/perf.md)
  // fp8 (e4m3) GEMMs for the layers (kern gen --fp8; docs/kernels.md "Per-tensor e4m3 quantization"):
  // each layer's qkv, o_proj, gate_up and down weight is a bf16 `source` bound from the checkpoint,
  // quantized per tensor at load by the `quantize` derive program into an fp8e4m3 carry and a scale
  // (absmax / 448); before each of those GEMMs the bf16 activation is quantized per tensor (its own
  // absmax, per call) in the graph, then extern:cublaslt_fp8_tn. The embedding, the lm_head and the
  // norms stay bf16. Every decode step uses cuBLASLt (no GEMV), and decode is laid out as prefill is
  // (GEMMs into `delta`, the residual added by the next add_rms_norm: the fp8 GEMM has no accumulating
  // form). A row's activation scale is the absmax of the whole call, so a row's bits depend on the
  // rows it shares a call with (not batch-invariant whatever batch_invariant says, and a prompt's
  // chunking changes them). Needs sm_89 or later (cuBLASLt's fp8 kernels), k (hidden, the q width,
  // intermediate) a multiple of 16, no decode chain, no fused GEMV norms, no mixed steps.
  bool fp8 = false;
  // Tensor-parallel ranks (kern gen --tp; docs/multi-gpu-handles.md "Tensor-parallel Qwen3"): above 1 the
  // manifest is SPMD over topology group `tp`: each rank holds heads / tp query heads, kv_heads / tp KV
  // heads and intermediate / tp MLP columns (its rows of q/k/v_proj and gate/up_proj, its columns of
  // o_proj and down_proj, through `bind`'s per-rank ranges); o_proj and down_proj write partial sums,
  // an all-reduce over the group (below) adds them into `delta`, and the next
  // add_rms_norm adds the residual. Both programs are laid out as prefill is (the decode GEMMs have no
  // accumulating form then). The embedding, norms and lm_head are whole on every rank, so every rank
  // computes the same tokens. Needs tp dividing heads, kv_heads and intermediate; no decode chain,
  // fp8, fused GEMV norms or mixed steps.
  std::uint64_t tp = 1;
  // With tp above 1, the all-reduces of calls of up to tp_peer_allreduce_rows rows (unset: max_seqs, the
  // decode steps) run as a one-shot kernel over peer buffers (kernels/peer.cu kern_allreduce_peer_bf16,
  // between two peer barriers), larger ones through NCCL (out of place), chosen by the launches' `when`
  // on `tokens`; 0: NCCL for every size. o_proj and down_proj then write into the exported `tp_parts`;
  // the peer kernel sums every rank's parts in rank order into `delta`. Each barrier call writes its own
  // word of the `tp_barrier_errors` output (0, or 1 + the first rank that did not arrive within 2 s;
  // calls above the rows skip the barriers and leave their words as the last call that ran them wrote).
  std::optional<std::uint64_t> tp_peer_allreduce_rows;
  // The peer kernel for every call size (no NCCL: every rank may then share one GPU, which NCCL refuses).
  bool tp_peer_allreduce = false;
  std::string model;  // the manifest's `model` label
  // Kernel family ("attention", ...) -> sha256 of its fatbin; every family must be present.
  std::map<std::string, std::string> module_sha256;
};

// The decode attention's work target when the option leaves it at 0, measured best on the H200
// (PerfGpu.DecodeAttentionSplitSweep, docs/perf.md): 256 blocks for the tensor-core partial (about its two
// resident blocks per SM: fewer, longer ranges keep each warp's cp.async ring full), 1024 for the f32 one.
inline constexpr std::uint64_t kDecodeAttnTargetMma = 256;
// The warp-item partial's grid when the option leaves the target at 0: three resident blocks on each of
// the H200's 132 SMs (its 2-stage ring and 168 registers allow three; docs/perf.md, fifteenth session).
// Any grid gives the same results; on a GPU with fewer SMs the extra blocks wait.
inline constexpr std::uint64_t kDecodeAttnWarpGrid = 3 * 132;
inline constexpr std::uint64_t kDecodeAttnTargetF32 = 1024;
// The target a manifest generated with these options uses.
std::uint64_t decode_attn_target(const Qwen3GenOptions& o);
// Whether its decode attention takes the warp-item partial (decode_attn_items, Auto resolved).
bool decode_attn_warp_items(const Qwen3GenOptions& o);
// The batch-invariant split's shortest range when the option leaves it at 0, measured best on the H200
// (PerfGpu.DecodeAttentionLengthOnlySplit; docs/perf.md): 256 keys for the block-item partials, 128 for
// the warp-item one (its items cost less to start, and big steps gain from fewer of them).
inline constexpr std::uint64_t kDecodeAttnSplitBlock = 256;
inline constexpr std::uint64_t kDecodeAttnSplitWarp = 128;
inline constexpr std::uint64_t kDecodeAttnWarpMinSeqs = 9;  // Auto: the warp-item partial from this many
std::uint64_t decode_attn_split(const Qwen3GenOptions& o);
// Whether a GPU of this compute capability runs the wgmma prefill attention (sm_90a: 9.0 only; the
// entry's other builds trap).
inline constexpr bool prefill_attn_wgmma_runs_on(int cc_major, int cc_minor) { return cc_major == 9 && cc_minor == 0; }
// The command-line names of DecodeAttnItems (--decode-attn-items).
const std::map<std::string, Qwen3GenOptions::DecodeAttnItems>& decode_attn_items_names();

// The kernel families a Qwen3 manifest may use: every family of the kernel catalogue, by name (fatbin
// <family>.fatbin in the kernels dir).
const std::vector<std::string>& qwen3_kernel_families();
// sha256 of <dir>/<family>.fatbin for every family; Error(KernelArtifact) when one is missing.
std::map<std::string, std::string> hash_kernel_fatbins(const std::filesystem::path& dir);

// Every checkpoint tensor name the manifest binds, in manifest order, without repeats.
std::vector<std::string> qwen3_bound_tensors(const Qwen3Shape& config);
// Checks a model.safetensors.index.json document names every bound tensor; Error(WeightArtifact)
// listing the missing ones.
void check_qwen3_tensor_index(const Qwen3Shape& config, const Json& index, const std::string& what);

// The manifest (schema v5). Error(Api) for options it cannot honour (zero bounds, seqs above
// tokens, a page size that is not a power of two up to 256, sizes beyond the kernels' i32 args).
nlohmann::ordered_json generate_qwen3_manifest(const Qwen3Shape& config, const Qwen3GenOptions& options);

}  // namespace kern::models
