// The Qwen3 manifest's GEMM ops: the prefill GEMMs (cuBLASLt) and the decode GEMMs, each carrying kern's
// GEMV (kernels/gemv.cu) for steps up to gemv_rows sequences and cuBLASLt above (batch-invariant
// manifests serving more than kGemvMaxRows sequences: cuBLASLt for every step, one algorithm). With
// --fp8 the layers' GEMMs quantize their bf16 input per tensor (kernels/quant.cu) and run
// extern:cublaslt_fp8_tn at every step size, and the `quantize_e4m3` op is the derive program's.
#include <algorithm>

#include "models/qwen3/gen.hpp"

namespace kern::models::qwen3_gen {
namespace {

// Threads per GEMV block: 256 (the pipelined GEMV was fastest at 256 or within 2 % of its best on every
// 4B shape timed on the H200).
constexpr std::uint64_t kGemvThreads = 256;
constexpr std::uint64_t kGemvTileRows = 16;  // weight rows per block (gate_up: 8 gate + 8 up rows)

// ---------------------------------------------------------------- fp8 (--fp8)

// The quant kernels' threads per block, and their grid: one block per kQuantBlockElems elements of the
// largest tensor a launch sees, at most kQuantMaxBlocks (the kernels stride over any grid; the partial
// maxima are as many as the blocks).
constexpr std::uint64_t kQuantThreads = 256;
constexpr std::uint64_t kQuantMaxBlocks = 256;
constexpr std::uint64_t kQuantBlockElems = 8192;  // 4 strides of 256 threads x 8 elements

std::uint64_t quant_blocks(std::uint64_t max_elements) {
  return std::clamp<std::uint64_t>((max_elements + kQuantBlockElems - 1) / kQuantBlockElems, 1, kQuantMaxBlocks);
}

// The per-tensor quantization of x (op param `x`, rows × cols) into the e4m3 `q` and the f32 `scale`,
// through the partial maxima in the op's scratch `quant_parts` ([blocks] f32): kern_absmax_partial_bf16,
// then kern_quant_e4m3_bf16 (docs/kernels.md).
void add_quant_launches(const Geo& g, OJ& launches, OJ scale, OJ q, OJ rows, OJ cols, std::uint64_t blocks, bool pdl) {
  OJ parts = launch("kern_absmax_partial_bf16", OJ::array({p(0), scratch("quant_parts"), rows, cols}),
                    OJ::array({blocks, 1, 1}), kQuantThreads);
  OJ quant = launch("kern_quant_e4m3_bf16",
                    OJ::array({p(0), scratch("quant_parts"), std::move(scale), std::move(q), rows, cols, i32(blocks)}),
                    OJ::array({blocks, 1, 1}), kQuantThreads);
  launches.push_back(pdl ? with_pdl(std::move(parts), g) : std::move(parts));
  launches.push_back(pdl ? with_pdl(std::move(quant), g) : std::move(quant));
}

// The derive program's op: x (a bf16 source, rows × cols) -> scale (f32, element 0) and q (fp8e4m3).
// Params: x, scale, q, rows, cols (the rows and cols are the call's literals).
OJ quantize_op(const Geo& g) {
  OJ launches = OJ::array();
  add_quant_launches(g, launches, p(1), p(2), p(3), p(4), kQuantMaxBlocks, false);
  OJ sc;
  sc["quant_parts"] = {{"dtype", "f32"}, {"shape", OJ::array({kQuantMaxBlocks})}};
  return op({"in buffer<bf16>", "out buffer<f32>", "out buffer<fp8e4m3>", "i32", "i32"}, std::move(launches),
            std::move(sc));
}

// An fp8 GEMM op: y[m, n] = x·Wᵀ with x (bf16) quantized per tensor in the op's scratch, W the e4m3
// weight and its scale (the derive program's). `rows` is the var bounding m: tokens (prefill) or seqs
// (decode, with the decode launches' algorithm pinning). Params: x, w, w_scale, y, m.
OJ fp8_gemm_op(const Geo& g, std::uint64_t n, std::uint64_t k, bool decode) {
  const char* rows = decode ? "seqs" : "tokens";
  const std::uint64_t max_rows = decode ? g.o.max_seqs : g.o.max_tokens;
  const std::uint64_t blocks = quant_blocks(max_rows * k);
  OJ launches = OJ::array();
  add_quant_launches(g, launches, scratch("x_scale"), scratch("x_e4m3"), p(4), i32(k), blocks, true);
  OJ l;
  l["entry"] = "extern:cublaslt_fp8_tn";
  l["params"] = {"in buffer<fp8e4m3>", "in buffer<fp8e4m3>", "out buffer<bf16>", "in buffer<f32>", "in buffer<f32>",
                 "i32", "i32", "i32"};
  l["args"] = OJ::array({scratch("x_e4m3"), p(1), p(3), scratch("x_scale"), p(2), p(4), i32(n), i32(k)});
  // Decode: one algorithm for every step size (row-invariant, as the bf16 decode GEMMs), asked for at
  // kDecodeAlgoM above it (the bf16 path's tuned candidates were measured for bf16: not used here).
  if (decode && g.o.max_seqs > kDecodeAlgoM) l["algo_m"] = kDecodeAlgoM;
  launches.push_back(std::move(l));
  OJ sc;
  sc["quant_parts"] = {{"dtype", "f32"}, {"shape", OJ::array({blocks})}};
  // The scale is one f32, declared 16 bytes: cuBLASLt's fp8 GEMMs take 16-byte-aligned operands and
  // kern holds the scales to the same rule (each scratch is an allocation of its own).
  sc["x_scale"] = {{"dtype", "f32"}, {"shape", OJ::array({4})}};
  sc["x_e4m3"] = {{"dtype", "fp8e4m3"}, {"shape", OJ::array({rows, k})}};
  return op({"in buffer<bf16>", "in buffer<fp8e4m3>", "in buffer<f32>", "out buffer<bf16>", "i32"}, std::move(launches),
            std::move(sc));
}

// ---------------------------------------------------------------- bf16

OJ gemm_op(std::uint64_t n, std::uint64_t k) {
  OJ l;
  l["entry"] = "extern:cublaslt_bf16_tn";
  l["params"] = {"in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32", "i32", "i32"};
  l["args"] = OJ::array({p(0), p(1), p(2), p(3), i32(n), i32(k)});
  return op({"in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32"}, OJ::array({l}));
}

// Bytes of a GEMV tile's weights one block asks the L2 to prefetch before waiting for the previous
// kernel: the whole tile, at most the option's cap.
std::uint64_t tile_prefetch(const Geo& g, std::uint64_t k) {
  return std::min<std::uint64_t>(g.o.gemv_prefetch_bytes, kGemvTileRows * k * 2);
}

// Dynamic shared memory of the RMSNorm-fused GEMVs: the normalised rows of one pass over W
// (min(max_seqs, 8) rows of hidden + 8 bf16; kernels/gemv.cu).
std::uint64_t norm_gemv_shared(const Geo& g) {
  return std::min<std::uint64_t>(g.o.max_seqs, kGemvMaxRows) * (g.c.hidden + 8) * 2;
}

// Blocks of a GEMV launch over `tiles` tiles: one per tile, or at most the option's cap (the
// kernel strides tiles over its grid).
std::uint64_t gemv_blocks(const Geo& g, std::uint64_t tiles) {
  return g.o.gemv_max_blocks == 0 ? tiles : std::min(tiles, g.o.gemv_max_blocks);
}

// A GEMV launch of `entry` over `tiles` tiles. Args: x, [norm_w,] w, out (op params 0.., in order), then
// m (op param `m_param`), n, k, ldx = k, [eps,] prefetch.
OJ gemv_launch(const Geo& g, const char* entry, bool norm, std::uint64_t m_param, std::uint64_t n, std::uint64_t k,
               std::uint64_t tiles) {
  OJ args = OJ::array({p(0), p(1), p(2), p(m_param), i32(n), i32(k), i32(k), i32(tile_prefetch(g, k))});
  if (norm)
    args = OJ::array(
        {p(0), p(1), p(2), p(3), p(m_param), i32(n), i32(k), i32(k), f32(g.c.rms_norm_eps), i32(tile_prefetch(g, k))});
  OJ l = launch(entry, std::move(args), OJ::array({gemv_blocks(g, tiles), 1, 1}), kGemvThreads);
  if (norm) l["shared_mem"] = norm_gemv_shared(g);
  l["when"] = when_gemv(g);
  return with_pdl(std::move(l), g);
}

// Sets a decode launch's `when` (none: every step size).
void set_when(OJ& l, OJ when) {
  if (!when.is_null()) l["when"] = std::move(when);
}

// Tuned decode GEMM choices for manifests above kDecodeAlgoM sequences, by weight shape: which of
// cuBLASLt's heuristic answers (at m_ref, counting those that also run at m = 1) the launch runs at
// every m. Measured for the Qwen3-4B shapes on the H200 with CUDA 13's cuBLASLt
// (PerfGpuGemm.DecodeCandidatesAcrossBatchSizes, docs/measurements/s21-2026-12-03/round2/gemm-cand.log):
// each the answer with the least time summed at m = 1, 64 and 256; together the step's GEMMs take
// 2,737 / 2,781 / 4,132 us at m = 1 / 64 / 256 against 3,060 / 2,831 / 4,134 with every shape's first
// answer at m_ref 128 (docs/perf.md, fifteenth session). Another GPU or library may offer other
// answers: any answer is row-invariant (the runtime checks that it runs at m = 1 and m_ref), only its
// speed differs; one it does not offer falls back to the first.
struct DecodeGemmChoice {
  std::uint64_t n, k, m_ref;
  std::uint32_t candidate;
};
constexpr DecodeGemmChoice kDecodeGemmChoices[] = {
    {6144, 2560, 128, 2},    // qkv_proj
    {2560, 4096, 256, 1},    // o_proj
    {19456, 2560, 128, 0},   // gate_up_proj
    {2560, 9728, 128, 0},    // down_proj
    {151936, 2560, 128, 5},  // lm_head
};

OJ blas_launch(const Geo& g, const char* ext, const char* out_dir, OJ x, OJ w, OJ out, std::uint64_t m_param,
               std::uint64_t n, std::uint64_t k) {
  OJ l;
  l["entry"] = std::string("extern:") + ext;
  l["params"] = {"in buffer<bf16>", "in buffer<bf16>", std::string(out_dir) + " buffer<bf16>", "i32", "i32", "i32"};
  set_when(l, when_blas(g));
  l["args"] = OJ::array({std::move(x), std::move(w), std::move(out), p(m_param), i32(n), i32(k)});
  if (g.o.max_seqs > kDecodeAlgoM) {
    l["algo_m"] = kDecodeAlgoM;
    for (const DecodeGemmChoice& c : kDecodeGemmChoices)
      if (c.n == n && c.k == k) {
        l["algo_m"] = c.m_ref;
        if (c.candidate != 0) l["algo_candidate"] = c.candidate;
      }
  } else if (g.o.mixed) {
    l["algo_m"] = g.o.max_seqs;  // the decode program's choice: the ops also run over a mixed step's rows
  }
  if (g.o.gemm_per_m) l["algo_per_m"] = true;
  return l;
}

// The cuBLASLt path's RMSNorm of x (param 0, weight param 1) into the op's scratch `normed`.
OJ blas_norm_launch(const Geo& g, std::uint64_t m_param) {
  OJ l = rms_norm_launch(g, scratch("normed"), m_param, decode_rows_var(g));
  set_when(l, when_blas(g));
  return l;
}

OJ normed_scratch(const Geo& g) {
  OJ sc;
  sc["normed"] = {{"dtype", "bf16"}, {"shape", OJ::array({decode_rows_var(g), g.c.hidden})}};
  return sc;
}

std::uint64_t tiles_of(std::uint64_t rows, std::uint64_t per_tile) { return (rows + per_tile - 1) / per_tile; }

// Decode h[seqs, n] += x·Wᵀ in place (o_proj, down_proj). Params: x, w, h, seqs.
OJ decode_residual_op(const Geo& g, std::uint64_t n, std::uint64_t k) {
  OJ launches = OJ::array();
  if (decode_uses_gemv(g))
    launches.push_back(gemv_launch(g, "kern_gemv_residual_bf16", false, 3, n, k, tiles_of(n, kGemvTileRows)));
  if (decode_uses_blas(g)) launches.push_back(blas_launch(g, "cublaslt_bf16_tn_acc", "inout", p(0), p(1), p(2), 3, n, k));
  return op({"in buffer<bf16>", "in buffer<bf16>", "inout buffer<bf16>", "i32"}, std::move(launches));
}

// Decode y[seqs, n] = x·Wᵀ (qkv_proj, lm_head on the normed rows). Params: x, w, y, seqs.
OJ decode_gemm_op(const Geo& g, std::uint64_t n, std::uint64_t k) {
  OJ launches = OJ::array();
  if (decode_uses_gemv(g)) launches.push_back(gemv_launch(g, "kern_gemv_bf16", false, 3, n, k, tiles_of(n, kGemvTileRows)));
  if (decode_uses_blas(g)) launches.push_back(blas_launch(g, "cublaslt_bf16_tn", "out", p(0), p(1), p(2), 3, n, k));
  return op({"in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32"}, std::move(launches));
}

// Decode y[seqs, n] = RMSNorm(x)·norm_w · Wᵀ (qkv_proj, lm_head). Params: x, norm_w, w, y, seqs.
OJ decode_norm_gemm_op(const Geo& g, std::uint64_t n) {
  const std::uint64_t k = g.c.hidden;
  OJ launches = OJ::array();
  if (decode_uses_gemv(g))
    launches.push_back(gemv_launch(g, "kern_gemv_rms_norm_bf16", true, 4, n, k, tiles_of(n, kGemvTileRows)));
  OJ sc = nullptr;
  if (decode_uses_blas(g)) {
    launches.push_back(blas_norm_launch(g, 4));
    launches.push_back(blas_launch(g, "cublaslt_bf16_tn", "out", scratch("normed"), p(2), p(3), 4, n, k));
    sc = normed_scratch(g);
  }
  return op({"in buffer<bf16>", "in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32"}, std::move(launches),
            std::move(sc));
}

// Decode act[seqs, I] = silu(x·W_gateᵀ)·(x·W_upᵀ) over the concatenated [2I, H] gate_up weight;
// with `fused`, x = RMSNorm(x)·norm_w first. Params: x, [norm_w,] w, act, [gate_up (the cuBLASLt
// path's [seqs, 2I] intermediate),] seqs.
OJ decode_gate_up_silu_op(const Geo& g, bool fused) {
  const Qwen3Shape& c = g.c;
  const bool blas = decode_uses_blas(g);
  const std::uint64_t base = fused ? 1 : 0;  // params after x shift by one with norm_w
  const std::uint64_t w = base + 1, act = base + 2, gate_up = base + 3, m = base + (blas ? 4 : 3);
  const char* entry = fused ? "kern_gemv_rms_norm_gate_up_silu_bf16" : "kern_gemv_gate_up_silu_bf16";
  OJ launches = OJ::array();
  if (decode_uses_gemv(g))
    launches.push_back(
        gemv_launch(g, entry, fused, m, c.intermediate, c.hidden, tiles_of(c.intermediate, kGemvTileRows / 2)));
  std::vector<std::string> params = {"in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32"};
  if (fused) params.insert(params.begin() + 1, "in buffer<bf16>");
  OJ sc = nullptr;
  if (blas) {
    params.insert(params.begin() + static_cast<std::ptrdiff_t>(gate_up), "out buffer<bf16>");
    OJ x = p(0);
    if (fused) {
      launches.push_back(blas_norm_launch(g, m));
      x = scratch("normed");
      sc = normed_scratch(g);
    }
    launches.push_back(
        blas_launch(g, "cublaslt_bf16_tn", "out", std::move(x), p(w), p(gate_up), m, 2 * c.intermediate, c.hidden));
    OJ silu = launch("kern_silu_mul_bf16", OJ::array({p(gate_up), p(act), p(m), i32(c.intermediate)}),
                     OJ::array({decode_rows_var(g), (c.intermediate + 2047) / 2048, 1}), 256);
    set_when(silu, when_blas(g));
    launches.push_back(std::move(silu));
  }
  return op(std::move(params), std::move(launches), std::move(sc));
}

}  // namespace

void add_gemm_ops(const Geo& g, OJ& o) {
  const Qwen3Shape& c = g.c;
  if (g.o.fp8) {  // no mixed steps, no chain, no GEMV (check_options, geometry)
    o["gemm_qkv"] = fp8_gemm_op(g, g.qkv_width, c.hidden, false);
    o["gemm_o"] = fp8_gemm_op(g, c.hidden, g.q_width, false);
    o["gemm_gate_up"] = fp8_gemm_op(g, 2 * c.intermediate, c.hidden, false);
    o["gemm_down"] = fp8_gemm_op(g, c.hidden, c.intermediate, false);
    if (g.o.prefill_logits) o["gemm_lm_head"] = gemm_op(c.vocab, c.hidden);
    o["decode_qkv"] = fp8_gemm_op(g, g.qkv_width, c.hidden, true);
    o["decode_o"] = fp8_gemm_op(g, c.hidden, g.q_width, true);
    o["decode_gate_up"] = fp8_gemm_op(g, 2 * c.intermediate, c.hidden, true);
    o["decode_down"] = fp8_gemm_op(g, c.hidden, c.intermediate, true);
    o["decode_lm_head"] = decode_gemm_op(g, c.vocab, c.hidden);  // bf16, cuBLASLt for every step
    o["quantize_e4m3"] = quantize_op(g);
    return;
  }
  if (!g.o.mixed) {  // with mixed steps the prefill program runs the decode ops
    o["gemm_qkv"] = gemm_op(g.qkv_width, c.hidden);
    o["gemm_o"] = gemm_op(c.hidden, g.q_width);
    o["gemm_gate_up"] = gemm_op(2 * c.intermediate, c.hidden);
    o["gemm_down"] = gemm_op(c.hidden, c.intermediate);
  }
  if (g.o.prefill_logits) o["gemm_lm_head"] = gemm_op(c.vocab, c.hidden);
  if (tensor_parallel(g)) {  // decode laid out as prefill (decode_as_prefill): no accumulating form, no fused norms
    o["decode_qkv"] = decode_gemm_op(g, g.qkv_width, c.hidden);
    o["decode_o"] = decode_gemm_op(g, c.hidden, g.q_width);
    o["decode_gate_up"] = decode_gemm_op(g, 2 * c.intermediate, c.hidden);
    o["decode_down"] = decode_gemm_op(g, c.hidden, c.intermediate);
    o["decode_lm_head"] = decode_gemm_op(g, c.vocab, c.hidden);
    return;
  }
  if (!decode_needs_ops(g)) return;  // every decode step goes through the chain
  if (g.o.gemv_fused_norm) {
    o["decode_norm_qkv"] = decode_norm_gemm_op(g, g.qkv_width);
    o["decode_norm_gate_up_silu"] = decode_gate_up_silu_op(g, true);
    o["decode_norm_lm_head"] = decode_norm_gemm_op(g, c.vocab);
  } else {
    o["decode_qkv"] = decode_gemm_op(g, g.qkv_width, c.hidden);
    o["decode_gate_up_silu"] = decode_gate_up_silu_op(g, false);
    o["decode_lm_head"] = decode_gemm_op(g, c.vocab, c.hidden);
  }
  o["decode_o_residual"] = decode_residual_op(g, c.hidden, g.q_width);
  o["decode_down_residual"] = decode_residual_op(g, c.hidden, c.intermediate);
}

}  // namespace kern::models::qwen3_gen
