// The Qwen3 manifest builder: buffers, ops and programs over kern's kernels (docs/kernels.md).
#include <algorithm>
#include <cmath>
#include <set>

#include "kern/error.hpp"
#include "kern/models/qwen3_gen.hpp"
#include "kern/sha256.hpp"

namespace kern::models {
namespace {

using OJ = nlohmann::ordered_json;

constexpr std::uint64_t kDecodeSplits = 64;   // split-KV ranges per decode sequence, at most
constexpr std::uint64_t kAttnQueries = 16;    // queries (rows x q heads) one attention block holds
constexpr std::uint64_t kArgmaxBlocks = 64;   // stage-1 blocks per argmax row
constexpr std::uint64_t kNormThreads = 256;
constexpr std::uint64_t kI32Max = 0x7fffffff;
// Decode GEMMs: kern's GEMV (kernels/gemv.cu) up to this many sequences, cuBLASLt above. The GEMV
// streams W once per 8 rows of x (one tensor-core mma N), so 8 rows cost what 1 row costs.
constexpr std::uint64_t kGemvMaxRows = 8;
// Threads per GEMV block: 256 (the pipelined GEMV was fastest at 256 or within 2 % of its best on every
// 4B shape timed on the H200).
constexpr std::uint64_t kGemvThreads = 256;
constexpr std::uint64_t kGemvTileRows = 16;  // weight rows per block (gate_up: 8 gate + 8 up rows)
// The decode chain (kernels/decode_chain.cu): steps of up to kChainMaxRows sequences; 288 threads (8
// consumer warps + a producer warp); its dynamic shared memory (at most kChainSharedMax: the 227 KiB
// opt-in less the kernel's 2.4 KB of static shared memory) holds the x rows and, in what they leave, a
// ring of weight stages. More bytes in flight per SM is what the H200 rewards: the ring is as large as
// the rows allow.
constexpr std::uint64_t kChainMaxRows = 4;
constexpr std::uint64_t kChainThreads = 288;
constexpr std::uint64_t kChainMaxStages = 8;   // the kernel uses at most 8
constexpr std::uint64_t kChainSharedMax = 224 * 1024;

OJ p(std::uint64_t i) { return OJ{{"param", i}}; }
OJ i32(std::uint64_t v) { return OJ{{"i32", v}}; }
OJ i64(std::uint64_t v) { return OJ{{"i64", v}}; }
OJ f32(double v) { return OJ{{"f32", v}}; }
OJ scratch(const char* name) { return OJ{{"scratch", name}}; }
OJ buf(const std::string& name, std::uint64_t offset = 0) {
  OJ a{{"buf", name}};
  if (offset != 0) a["offset"] = offset;
  return a;
}
OJ state(const std::string& name, std::uint64_t offset) {
  OJ a{{"state", name}};
  if (offset != 0) a["offset"] = offset;
  return a;
}
OJ var(const char* name) { return OJ{{"var", name}}; }
OJ ceil_div(OJ e, std::uint64_t d) { return OJ{{"ceil_div", OJ::array({std::move(e), d})}}; }

// Shared geometry, derived once from the config and the options.
struct Geo {
  Qwen3Config c;
  Qwen3GenOptions o;
  std::uint64_t qkv_width, q_width, max_pages, max_pos, page_elems, page_stride_elems, layer_bytes;
  std::string hd;  // entry suffix: "_hd128"
  // The decode chain's plan: rows 0 = off (decode runs the per-op kernels for every step size).
  std::uint64_t chain_rows = 0, chain_stage_bytes = 0, chain_shared = 0;
};

// Sizes the decode chain. A stage holds whole weight rows (at most 8) of one phase, so its size decides
// how much of it each phase fills: the stage size from 32 to 64 KiB (a multiple of 128, at least one row
// of the widest k) whose worst phase wastes the least (4B: 40960 bytes, filled exactly by 8 qkv/gate_up
// rows and 5 o_proj rows, 95 % by 2 down rows). Then the most x rows
// (up to 4) that leave at least 2 stages, and all the shared memory up to 8 stages. Off when nothing
// fits or the option says so.
void plan_chain(Geo& g) {
  if (!g.o.decode_chain) return;
  const std::uint64_t ks[] = {g.q_width, g.c.hidden, g.c.intermediate};
  const std::uint64_t kmax = std::max({g.c.hidden, g.q_width, g.c.intermediate});
  std::uint64_t best = 0;
  double best_waste = 2.0;
  const std::uint64_t first = std::max<std::uint64_t>(32768, (2 * kmax + 127) / 128 * 128);
  for (std::uint64_t stage = first; stage <= 65536; stage += 128) {
    double waste = 0.0;
    for (std::uint64_t k : ks) {
      const std::uint64_t rows = std::min<std::uint64_t>(8, stage / (2 * k));
      waste = std::max(waste, static_cast<double>(stage - rows * 2 * k) / static_cast<double>(stage));
    }
    if (waste < best_waste) best = stage, best_waste = waste;
  }
  if (best == 0) best = first;  // rows wider than 32 K elements: one row per stage
  for (std::uint64_t rows = std::min(kChainMaxRows, g.o.max_seqs); rows >= 1; --rows) {
    const std::uint64_t x = rows * 2 * kmax;
    if (x + 2 * best > kChainSharedMax) continue;
    g.chain_rows = rows;
    g.chain_stage_bytes = best;
    g.chain_shared = std::min(kChainSharedMax, x + kChainMaxStages * best);
    return;
  }
}

// The per-op decode kernels serve steps above the chain's rows (all steps without the chain).
bool decode_needs_ops(const Geo& g) { return g.o.max_seqs > g.chain_rows; }

OJ launch(const std::string& module, const std::string& entry, std::vector<std::string> params, OJ args, OJ grid,
          std::uint64_t block) {
  OJ l;
  l["module"] = module;
  l["entry"] = entry;
  l["params"] = std::move(params);
  l["block"] = OJ::array({block, 1, 1});
  l["grid"] = std::move(grid);
  l["args"] = std::move(args);
  return l;
}

OJ op(std::vector<std::string> params, OJ launches, OJ scratch_decl = nullptr) {
  OJ o;
  o["params"] = std::move(params);
  OJ impl;
  if (!scratch_decl.is_null()) impl["scratch"] = std::move(scratch_decl);
  impl["launches"] = std::move(launches);
  o["impl"] = std::move(impl);
  return o;
}

OJ gemm_op(std::uint64_t n, std::uint64_t k) {
  OJ l;
  l["entry"] = "extern:cublaslt_bf16_tn";
  l["params"] = {"in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32", "i32", "i32"};
  l["args"] = OJ::array({p(0), p(1), p(2), p(3), i32(n), i32(k)});
  return op({"in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32"}, OJ::array({l}));
}

// The `when` of a decode GEMM launch: the GEMV for seqs <= kGemvMaxRows (above the chain's rows),
// cuBLASLt above.
OJ when_gemv(const Geo& g) {
  OJ w{{"var", "seqs"}, {"max", kGemvMaxRows}};
  if (g.chain_rows > 0) w["min"] = g.chain_rows + 1;
  return w;
}
OJ when_blas() { return OJ{{"var", "seqs"}, {"min", kGemvMaxRows + 1}}; }
// The decode chain's launches, and the per-op decode launches that do not go through when_gemv (the norms).
OJ when_chain(const Geo& g) { return OJ{{"var", "seqs"}, {"max", g.chain_rows}}; }
OJ when_not_chain(const Geo& g) { return OJ{{"var", "seqs"}, {"min", g.chain_rows + 1}}; }

// The decode ops use cuBLASLt launches only when a decode step can have more than kGemvMaxRows rows.
bool decode_uses_blas(const Geo& g) { return g.o.max_seqs > kGemvMaxRows; }

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

}  // namespace

std::uint64_t decode_attn_target(const Qwen3GenOptions& o) {
  if (o.decode_attn_target_blocks != 0) return o.decode_attn_target_blocks;
  return o.decode_attn_mma ? kDecodeAttnTargetMma : kDecodeAttnTargetF32;
}

namespace {

OJ with_shared(OJ l, std::uint64_t bytes) {
  l["shared_mem"] = bytes;
  return l;
}

OJ with_pdl(OJ l, const Geo& g) {
  if (g.o.pdl) l["pdl"] = true;
  return l;
}

// Params of a GEMV launch: x, [norm_w,] w, out (direction `out_dir`), then i32 m, n, k, ldx, [f32 eps,] i32 prefetch.
OJ gemv_launch(const Geo& g, const char* entry, bool norm, const char* out_dir, std::uint64_t m_param, std::uint64_t n,
               std::uint64_t k, std::uint64_t blocks) {
  std::vector<std::string> params = {"in buffer<bf16>", "in buffer<bf16>", std::string(out_dir) + " buffer<bf16>", "i32",
                                     "i32", "i32", "i32", "i32"};
  OJ args = OJ::array({p(0), p(1), p(2), p(m_param), i32(n), i32(k), i32(k), i32(tile_prefetch(g, k))});
  if (norm) {
    params.insert(params.begin() + 1, "in buffer<bf16>");
    params.insert(params.end() - 1, "f32");
    args = OJ::array({p(0), p(1), p(2), p(3), p(m_param), i32(n), i32(k), i32(k), f32(g.c.rms_norm_eps),
                      i32(tile_prefetch(g, k))});
  }
  OJ l = launch("gemv", entry, std::move(params), std::move(args), OJ::array({gemv_blocks(g, blocks), 1, 1}),
                kGemvThreads);
  if (norm) l["shared_mem"] = norm_gemv_shared(g);
  l["when"] = when_gemv(g);
  return with_pdl(std::move(l), g);
}

OJ blas_launch(const char* ext, const char* out_dir, OJ x, OJ w, OJ out, std::uint64_t m_param, std::uint64_t n,
               std::uint64_t k) {
  OJ l;
  l["entry"] = std::string("extern:") + ext;
  l["params"] = {"in buffer<bf16>", "in buffer<bf16>", std::string(out_dir) + " buffer<bf16>", "i32", "i32", "i32"};
  l["when"] = when_blas();
  l["args"] = OJ::array({std::move(x), std::move(w), std::move(out), p(m_param), i32(n), i32(k)});
  return l;
}

// kern_rms_norm_bf16 of x (param 0) with weight param 1 into `out`, rows from param `m_param`, one
// block per row of `rows_var`.
OJ rms_norm_launch(const Geo& g, OJ out, std::uint64_t m_param, const char* rows_var) {
  return launch("rmsnorm", "kern_rms_norm_bf16",
                {"in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32", "i32", "f32"},
                OJ::array({p(0), p(1), std::move(out), p(m_param), i32(g.c.hidden), f32(g.c.rms_norm_eps)}),
                OJ::array({rows_var, 1, 1}), kNormThreads);
}

// The cuBLASLt path's RMSNorm of x (param 0, weight param 1) into the op's scratch `normed`.
OJ blas_norm_launch(const Geo& g, std::uint64_t m_param) {
  OJ l = rms_norm_launch(g, scratch("normed"), m_param, "seqs");
  l["when"] = when_blas();
  return l;
}

OJ normed_scratch(const Geo& g) {
  OJ sc;
  sc["normed"] = {{"dtype", "bf16"}, {"shape", OJ::array({"seqs", g.c.hidden})}};
  return sc;
}

// Decode h[seqs, n] += x·Wᵀ in place (o_proj, down_proj). Params: x, w, h, seqs.
OJ decode_residual_op(const Geo& g, std::uint64_t n, std::uint64_t k) {
  OJ launches = OJ::array({gemv_launch(g, "kern_gemv_residual_bf16", false, "inout", 3, n, k,
                                       (n + kGemvTileRows - 1) / kGemvTileRows)});
  if (decode_uses_blas(g)) launches.push_back(blas_launch("cublaslt_bf16_tn_acc", "inout", p(0), p(1), p(2), 3, n, k));
  return op({"in buffer<bf16>", "in buffer<bf16>", "inout buffer<bf16>", "i32"}, std::move(launches));
}

// Decode y[seqs, n] = x·Wᵀ (qkv_proj, lm_head on the normed rows). Params: x, w, y, seqs.
OJ decode_gemm_op(const Geo& g, std::uint64_t n, std::uint64_t k) {
  OJ launches = OJ::array({gemv_launch(g, "kern_gemv_bf16", false, "out", 3, n, k, (n + kGemvTileRows - 1) / kGemvTileRows)});
  if (decode_uses_blas(g)) launches.push_back(blas_launch("cublaslt_bf16_tn", "out", p(0), p(1), p(2), 3, n, k));
  return op({"in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32"}, std::move(launches));
}

// Decode y[seqs, n] = RMSNorm(x)·norm_w · Wᵀ (qkv_proj, lm_head). Params: x, norm_w, w, y, seqs.
OJ decode_norm_gemm_op(const Geo& g, std::uint64_t n) {
  const std::uint64_t k = g.c.hidden;
  OJ launches = OJ::array({gemv_launch(g, "kern_gemv_rms_norm_bf16", true, "out", 4, n, k,
                                       (n + kGemvTileRows - 1) / kGemvTileRows)});
  OJ sc = nullptr;
  if (decode_uses_blas(g)) {
    launches.push_back(blas_norm_launch(g, 4));
    launches.push_back(blas_launch("cublaslt_bf16_tn", "out", scratch("normed"), p(2), p(3), 4, n, k));
    sc = normed_scratch(g);
  }
  return op({"in buffer<bf16>", "in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32"}, std::move(launches),
            std::move(sc));
}

// Decode act[seqs, I] = silu(x·W_gateᵀ)·(x·W_upᵀ) over the concatenated [2I, H] gate_up weight;
// with `fused`, x = RMSNorm(x)·norm_w first. Params: x, [norm_w,] w, act, [gate_up (the cuBLASLt
// path's [seqs, 2I] intermediate),] seqs.
OJ decode_gate_up_silu_op(const Geo& g, bool fused) {
  const Qwen3Config& c = g.c;
  const bool blas = decode_uses_blas(g);
  const std::uint64_t base = fused ? 1 : 0;  // params after x shift by one with norm_w
  const std::uint64_t w = base + 1, act = base + 2, gate_up = base + 3, m = base + (blas ? 4 : 3);
  OJ launches = OJ::array({gemv_launch(g, fused ? "kern_gemv_rms_norm_gate_up_silu_bf16" : "kern_gemv_gate_up_silu_bf16",
                                       fused, "out", m, c.intermediate, c.hidden,
                                       (c.intermediate + kGemvTileRows / 2 - 1) / (kGemvTileRows / 2))});
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
    launches.push_back(blas_launch("cublaslt_bf16_tn", "out", std::move(x), p(w), p(gate_up), m, 2 * c.intermediate,
                                   c.hidden));
    OJ silu = launch("activation", "kern_silu_mul_bf16", {"in buffer<bf16>", "out buffer<bf16>", "i32", "i32"},
                     OJ::array({p(gate_up), p(act), p(m), i32(c.intermediate)}),
                     OJ::array({"seqs", (c.intermediate + 2047) / 2048, 1}), 256);
    silu["when"] = when_blas();
    launches.push_back(std::move(silu));
  }
  return op(std::move(params), std::move(launches), std::move(sc));
}

// The decode chain launch (kernels/decode_chain.cu). `ptrs` are the kernel's ten pointer args (attn, o_w,
// h, post_norm_w, gate_up_w, act, down_w, next_norm_w, next_w, next_out) as launch args with their
// launch param types (an absent phase passes i64 0 for its pointers), then the sync buffer and seqs.
OJ chain_launch(const Geo& g, std::vector<std::pair<std::string, OJ>> ptrs, OJ sync, OJ seqs, std::uint64_t n_next) {
  std::vector<std::string> params;
  OJ args = OJ::array();
  for (auto& [type, arg] : ptrs) {
    params.push_back(type);
    args.push_back(std::move(arg));
  }
  params.insert(params.end(), {"inout buffer<u32>", "i32", "i32", "i32", "i32", "i32", "f32", "i32"});
  for (OJ a : {std::move(sync), std::move(seqs), i32(g.c.hidden), i32(g.q_width), i32(g.c.intermediate), i32(n_next),
               f32(g.c.rms_norm_eps), i32(g.chain_stage_bytes)})
    args.push_back(std::move(a));
  OJ l = launch("decode_chain", "kern_decode_chain_bf16", std::move(params), std::move(args),
                OJ::array({g.o.chain_blocks, 1, 1}), kChainThreads);
  l["shared_mem"] = g.chain_shared;
  l["cooperative"] = true;  // its blocks wait for each other: the runtime checks at load that all fit at once
  l["when"] = when_chain(g);
  return with_pdl(std::move(l), g);
}

// Decode, one layer from attention's output to the next GEMV's: h += attn·o_wᵀ; act = silu(gate)·up on
// RMSNorm(h); h += act·downᵀ; next_out = RMSNorm(h)·next_norm_w · next_wᵀ (the next layer's qkv_proj, or
// the final norm and the lm_head). Params: attn, o_w, h, post_norm_w, gate_up_w, act, down_w,
// next_norm_w, next_w, next_out, sync, seqs.
OJ decode_chain_op(const Geo& g, std::uint64_t n_next) {
  const std::vector<std::string> params = {"in buffer<bf16>",  "in buffer<bf16>",  "inout buffer<bf16>",
                                           "in buffer<bf16>",  "in buffer<bf16>",  "out buffer<bf16>",
                                           "in buffer<bf16>",  "in buffer<bf16>",  "in buffer<bf16>",
                                           "out buffer<bf16>", "inout buffer<u32>", "i32"};
  std::vector<std::pair<std::string, OJ>> ptrs;
  for (std::uint64_t i = 0; i < 10; ++i) ptrs.emplace_back(params[i], p(i));
  return op(params, OJ::array({chain_launch(g, std::move(ptrs), p(10), p(11), n_next)}));
}

// Decode, the first layer's input norm and qkv_proj through the chain kernel (its phase D alone).
// Params: h, norm_w, w, out, sync, seqs.
OJ decode_chain_head_op(const Geo& g) {
  const std::vector<std::string> params = {"in buffer<bf16>",  "in buffer<bf16>",   "in buffer<bf16>",
                                           "out buffer<bf16>", "inout buffer<u32>", "i32"};
  std::vector<std::pair<std::string, OJ>> ptrs = {
      {"i64", i64(0)},         {"i64", i64(0)},         {"in buffer<bf16>", p(0)}, {"i64", i64(0)},
      {"i64", i64(0)},         {"i64", i64(0)},         {"i64", i64(0)},           {"in buffer<bf16>", p(1)},
      {"in buffer<bf16>", p(2)}, {"out buffer<bf16>", p(3)}};
  return op(params, OJ::array({chain_launch(g, std::move(ptrs), p(4), p(5), g.qkv_width)}));
}

OJ ops(const Geo& g) {
  const Qwen3Config& c = g.c;
  const double eps = c.rms_norm_eps;
  OJ o;
  o["embedding"] = op({"in buffer<i64>", "in buffer<bf16>", "out buffer<bf16>", "i32"},
                      OJ::array({launch("embedding", "kern_embedding_bf16",
                                        {"in buffer<i64>", "in buffer<bf16>", "out buffer<bf16>", "i32", "i32", "i32"},
                                        OJ::array({p(0), p(1), p(2), p(3), i32(c.hidden), i32(c.vocab)}),
                                        OJ::array({"tokens", 1, 1}), kNormThreads)}));
  o["rms_norm"] = op({"in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32"},
                     OJ::array({with_pdl(rms_norm_launch(g, p(2), 3, "tokens"), g)}));
  o["add_rms_norm"] = op(
      {"inout buffer<bf16>", "in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32"},
      OJ::array({launch("rmsnorm", "kern_fused_add_rms_norm_bf16",
                        {"inout buffer<bf16>", "in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32", "i32",
                         "f32"},
                        OJ::array({p(0), p(1), p(2), p(3), p(4), i32(c.hidden), f32(eps)}), OJ::array({"tokens", 1, 1}),
                        kNormThreads)}));
  o["gather_last"] = op({"in buffer<bf16>", "in buffer<i32>", "out buffer<bf16>", "i32"},
                        OJ::array({launch("embedding", "kern_gather_last_rows_bf16",
                                          {"in buffer<bf16>", "in buffer<i32>", "out buffer<bf16>", "i32", "i32"},
                                          OJ::array({p(0), p(1), p(2), p(3), i32(c.hidden)}),
                                          OJ::array({"seqs", 1, 1}), kNormThreads)}));
  o["rope_table"] = op({"out buffer<f32>"},
                       OJ::array({launch("rope", "kern_rope_table_f32", {"out buffer<f32>", "i32", "i32", "f32"},
                                         OJ::array({p(0), i32(g.max_pos), i32(c.head_dim), f32(c.rope_theta)}),
                                         OJ::array({(g.max_pos * (c.head_dim / 2) + 255) / 256, 1, 1}), 256)}));
  o["qk_norm_rope_cache"] = op(
      {"inout buffer<bf16>", "in buffer<bf16>", "in buffer<bf16>", "in buffer<f32>", "in buffer<i64>", "in buffer<i64>",
       "inout state", "i32"},
      OJ::array({with_pdl(launch("rope", "kern_qk_norm_rope_cache_bf16",
                        {"inout buffer<bf16>", "in buffer<bf16>", "in buffer<bf16>", "in buffer<f32>", "in buffer<i64>",
                         "in buffer<i64>", "inout state", "i32", "i32", "i32", "i32", "i32", "i64", "i32", "f32"},
                        OJ::array({p(0), p(1), p(2), p(3), p(4), p(5), p(6), p(7), i32(c.heads), i32(c.kv_heads),
                                   i32(c.head_dim), i32(g.o.page_size), i64(g.page_stride_elems), i32(g.max_pos),
                                   f32(eps)}),
                        OJ::array({ceil_div("tokens", 16), (c.heads + 2 * c.kv_heads + 3) / 4, 1}), 128), g)}));  // 16 rows per block (kernels/rope.cu)
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  {
    // The partial kernel picks ranges per sequence from seq_lens and seqs (up to kDecodeSplits, about
    // the option's decode_attn_target_blocks blocks of work per call; its grid covers them, blocks past the work exit)
    // and writes `out` itself for sequences of one range; the reduce merges the others.
    const std::uint64_t target_blocks = decode_attn_target(g.o);
    constexpr std::uint64_t kDecodePartialThreads = 128;
    const OJ partial_blocks{{"add", OJ::array({OJ{{"mul", OJ::array({"seqs", c.kv_heads})}}, target_blocks})}};
    // The tensor-core partial (kern_attn_decode_mma_partial_hd*, same ABI and grid) takes dynamic shared
    // memory: 4 warps x 3 stages x K and V tiles of 16 keys x (head_dim + 8) bf16.
    const std::uint64_t mma_shared = 4 * 3 * 2 * 16 * (c.head_dim + 8) * 2;
    const std::string partial_entry =
        std::string(g.o.decode_attn_mma ? "kern_attn_decode_mma_partial" : "kern_attn_decode_partial") + g.hd;
    OJ part = launch("attention", partial_entry,
                     {"in buffer<bf16>", "i32", "in state", "in buffer<i32>", "i32", "in buffer<i32>",
                      "out buffer<f32>", "out buffer<f32>", "out buffer<bf16>", "i32", "i32", "i32", "i32", "i64",
                      "i32", "i32", "f32"},
                     OJ::array({p(0), i32(g.qkv_width), p(1), p(2), i32(g.max_pages), p(3), scratch("part_o"),
                                scratch("part_ml"), p(4), p(5), i32(c.heads), i32(c.kv_heads), i32(g.o.page_size),
                                i64(g.page_stride_elems), i32(kDecodeSplits), i32(target_blocks), f32(scale)}),
                     OJ::array({partial_blocks, 1, 1}), kDecodePartialThreads);
    if (g.o.decode_attn_mma) part = with_shared(std::move(part), mma_shared);
    OJ reduce = launch("attention", "kern_attn_decode_reduce" + g.hd,
                       {"in buffer<f32>", "in buffer<f32>", "out buffer<bf16>", "in buffer<i32>", "i32", "i32", "i32",
                        "i32", "i32", "i32", "i32"},
                       OJ::array({scratch("part_o"), scratch("part_ml"), p(4), p(3), i32(g.max_pages), p(5),
                                  i32(c.heads), i32(c.kv_heads), i32(g.o.page_size), i32(kDecodeSplits),
                                  i32(target_blocks)}),
                       OJ::array({"seqs", c.heads, 1}), c.head_dim);
    part = with_pdl(std::move(part), g);
    reduce = with_pdl(std::move(reduce), g);
    OJ sc;
    sc["part_o"] = {{"dtype", "f32"}, {"shape", OJ::array({"seqs", c.heads, kDecodeSplits, c.head_dim})}};
    sc["part_ml"] = {{"dtype", "f32"}, {"shape", OJ::array({"seqs", c.heads, kDecodeSplits, 2})}};
    o["attn_decode"] = op({"in buffer<bf16>", "in state", "in buffer<i32>", "in buffer<i32>", "out buffer<bf16>", "i32"},
                          OJ::array({std::move(part), std::move(reduce)}), std::move(sc));
  }
  // Tensor-core prefill (attention_prefill.cu): 8 warps of 16 queries (rows x q heads of one kv head),
  // key tiles of 64 in two stages of K and V in dynamic shared memory.
  constexpr std::uint64_t kPrefillQueries = 128, kPrefillThreads = 256, kPrefillKeys = 64, kPrefillStages = 2;
  const std::uint64_t prefill_shared = 2 * kPrefillStages * kPrefillKeys * (c.head_dim + 8) * 2;
  // Calls of prefill_long_rows rows or more (long whole-prompt prefills; head_dim 128 only) take the
  // m32n32s2 layout instead: 4 warps x 32 queries, key tiles of 32 in two stages (Q staged in shared
  // memory), 11 % faster at 8192 rows on the H200 but slower at 512-2048 (docs/perf.md). Both are
  // row-invariant within themselves; a row computed by a call of each size differs only by rounding.
  const OJ prefill_params = OJ::array({"in buffer<bf16>", "i32", "in state", "in buffer<i32>", "i32", "in buffer<i32>",
                                       "in buffer<i32>", "in buffer<i64>", "out buffer<bf16>", "i32", "i32", "i32",
                                       "i32", "i32", "i64", "f32", "i32"});
  auto prefill_launch = [&](const std::string& entry, std::uint64_t queries, std::uint64_t threads,
                            std::uint64_t shared) {
    const std::uint64_t per_block = std::max<std::uint64_t>(1, queries / (c.heads / c.kv_heads));
    return with_shared(launch("attention_prefill", entry, prefill_params,
                              OJ::array({p(0), i32(g.qkv_width), p(1), p(2), i32(g.max_pages), p(3), p(4), p(5), p(6),
                                         p(7), p(8), i32(c.heads), i32(c.kv_heads), i32(g.o.page_size),
                                         i64(g.page_stride_elems), f32(scale), i32(per_block)}),
                              OJ::array({ceil_div("tokens", per_block), c.kv_heads, 1}), threads),
                       shared);
  };
  OJ prefill_launches = OJ::array({prefill_launch("kern_attn_prefill_mma_s2" + g.hd, kPrefillQueries, kPrefillThreads,
                                                  prefill_shared)});
  const std::uint64_t long_rows = g.o.prefill_long_rows;
  if (c.head_dim == 128 && long_rows > 0 && g.o.max_tokens >= long_rows) {
    constexpr std::uint64_t kLongQueries = 128, kLongThreads = 128, kLongKeys = 32;
    const std::uint64_t long_shared = (kLongQueries + 2 * kPrefillStages * kLongKeys) * (c.head_dim + 8) * 2;
    prefill_launches[0]["when"] = OJ{{"var", "tokens"}, {"max", long_rows - 1}};
    OJ big = prefill_launch("kern_attn_prefill_mma_m32n32s2" + g.hd, kLongQueries, kLongThreads, long_shared);
    big["when"] = OJ{{"var", "tokens"}, {"min", long_rows}};
    prefill_launches.push_back(std::move(big));
  }
  o["attn_prefill"] = op({"in buffer<bf16>", "in state", "in buffer<i32>", "in buffer<i32>", "in buffer<i32>",
                          "in buffer<i64>", "out buffer<bf16>", "i32", "i32"},
                         std::move(prefill_launches));
  o["silu_mul"] = op({"in buffer<bf16>", "out buffer<bf16>", "i32"},
                     OJ::array({launch("activation", "kern_silu_mul_bf16",
                                       {"in buffer<bf16>", "out buffer<bf16>", "i32", "i32"},
                                       OJ::array({p(0), p(1), p(2), i32(c.intermediate)}),
                                       OJ::array({"tokens", (c.intermediate + 2047) / 2048, 1}), 256)}));
  {
    OJ part = launch("argmax", "kern_argmax_partial_bf16",
                     {"in buffer<bf16>", "out buffer<f32>", "out buffer<i32>", "i32", "i32", "i32"},
                     OJ::array({p(0), scratch("part_max"), scratch("part_idx"), p(2), i32(c.vocab), i32(kArgmaxBlocks)}),
                     OJ::array({kArgmaxBlocks, "seqs", 1}), 256);
    OJ fin = launch("argmax", "kern_argmax_final", {"in buffer<f32>", "in buffer<i32>", "out buffer<i64>", "i32", "i32"},
                    OJ::array({scratch("part_max"), scratch("part_idx"), p(1), p(2), i32(kArgmaxBlocks)}),
                    OJ::array({"seqs", 1, 1}), 64);
    part = with_pdl(std::move(part), g);
    fin = with_pdl(std::move(fin), g);
    OJ sc;
    sc["part_max"] = {{"dtype", "f32"}, {"shape", OJ::array({"seqs", kArgmaxBlocks})}};
    sc["part_idx"] = {{"dtype", "i32"}, {"shape", OJ::array({"seqs", kArgmaxBlocks})}};
    o["argmax"] = op({"in buffer<bf16>", "out buffer<i64>", "i32"}, OJ::array({std::move(part), std::move(fin)}),
                     std::move(sc));
  }
  if (g.chain_rows > 0) {
    o["decode_chain"] = decode_chain_op(g, g.qkv_width);
    o["decode_chain_last"] = decode_chain_op(g, c.vocab);
    o["decode_chain_head"] = decode_chain_head_op(g);
    if (decode_needs_ops(g)) {
      OJ l = rms_norm_launch(g, p(2), 3, "seqs");
      l["when"] = when_not_chain(g);
      o["decode_rms_norm"] = op({"in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32"},
                                OJ::array({with_pdl(std::move(l), g)}));
    }
  }
  o["gemm_qkv"] = gemm_op(g.qkv_width, c.hidden);
  o["gemm_o"] = gemm_op(c.hidden, g.q_width);
  o["gemm_gate_up"] = gemm_op(2 * c.intermediate, c.hidden);
  o["gemm_down"] = gemm_op(c.hidden, c.intermediate);
  o["gemm_lm_head"] = gemm_op(c.vocab, c.hidden);
  if (!decode_needs_ops(g)) {
    // every decode step goes through the chain
  } else if (g.o.gemv_fused_norm) {
    o["decode_norm_qkv"] = decode_norm_gemm_op(g, g.qkv_width);
    o["decode_norm_gate_up_silu"] = decode_gate_up_silu_op(g, true);
    o["decode_norm_lm_head"] = decode_norm_gemm_op(g, c.vocab);
  } else {
    o["decode_qkv"] = decode_gemm_op(g, g.qkv_width, c.hidden);
    o["decode_gate_up_silu"] = decode_gate_up_silu_op(g, false);
    o["decode_lm_head"] = decode_gemm_op(g, c.vocab, c.hidden);
  }
  if (decode_needs_ops(g)) {
    o["decode_o_residual"] = decode_residual_op(g, c.hidden, g.q_width);
    o["decode_down_residual"] = decode_residual_op(g, c.hidden, c.intermediate);
  }
  return o;
}

std::string layer_name(std::uint64_t l, const char* what) { return "layers." + std::to_string(l) + "." + what; }
std::string hf_layer(std::uint64_t l, const char* what) {
  return "model.layers." + std::to_string(l) + "." + what + ".weight";
}

OJ weight(OJ shape, std::vector<std::string> tensors) {
  OJ b;
  b["dtype"] = "bf16";
  b["shape"] = std::move(shape);
  b["kind"] = "weight";
  OJ bind = OJ::array();
  for (auto& t : tensors) bind.push_back({{"tensor", std::move(t)}});
  b["bind"] = std::move(bind);
  return b;
}

OJ plain(const char* dtype, OJ shape, const char* kind) {
  OJ b;
  b["dtype"] = dtype;
  b["shape"] = std::move(shape);
  b["kind"] = kind;
  return b;
}

OJ buffers(const Geo& g) {
  const Qwen3Config& c = g.c;
  OJ b;
  // Caller inputs.
  b["token_ids"] = plain("i64", OJ::array({"tokens"}), "input");
  b["token_ids"]["fill"] = "token";
  b["token_ids"]["domain"] = {{"index_into", "embed"}};
  b["positions"] = plain("i64", OJ::array({"tokens"}), "input");
  b["positions"]["fill"] = "position";
  b["positions"]["domain"] = {{"index_into", "rope"}};
  b["slot_mapping"] = plain("i64", OJ::array({"tokens"}), "input");
  b["slot_mapping"]["fill"] = "slot";
  b["slot_mapping"]["domain"] = {{"index_into", "kv"}};
  b["block_table"] = plain("i32", OJ::array({"seqs", g.max_pages}), "input");
  b["block_table"]["domain"] = {{"index_into", "kv"}, {"stride", g.o.page_size}};
  b["seq_lens"] = plain("i32", OJ::array({"seqs"}), "input");
  b["seq_lens"]["fill"] = "seq_len";
  b["seq_lens"]["domain"] = {{"min", 1}, {"max", g.max_pages * g.o.page_size}};
  b["cu_seqlens"] = plain("i32", OJ::array({g.o.max_seqs + 1}), "input");
  b["cu_seqlens"]["fill"] = "cu_seqlens";
  b["cu_seqlens"]["domain"] = {{"min", 0}, {"max", "tokens"}, {"monotone", true}};
  // Outputs.
  b["next_token"] = plain("i64", OJ::array({"seqs"}), "output");
  b["next_token"]["fill"] = "tokens";
  b["next_token"]["domain"] = {{"min", 0}, {"max", c.vocab - 1}};
  b["logits"] = plain("bf16", OJ::array({"seqs", c.vocab}), g.o.logits_output ? "output" : "workspace");
  // Activations.
  b["hidden"] = plain("bf16", OJ::array({"tokens", c.hidden}), "workspace");
  b["normed"] = plain("bf16", OJ::array({"tokens", c.hidden}), "workspace");
  b["qkv"] = plain("bf16", OJ::array({"tokens", g.qkv_width}), "workspace");
  b["attn"] = plain("bf16", OJ::array({"tokens", g.q_width}), "workspace");
  b["delta"] = plain("bf16", OJ::array({"tokens", c.hidden}), "workspace");
  b["gate_up"] = plain("bf16", OJ::array({"tokens", 2 * c.intermediate}), "workspace");
  b["act"] = plain("bf16", OJ::array({"tokens", c.intermediate}), "workspace");
  b["last"] = plain("bf16", OJ::array({"seqs", c.hidden}), "workspace");
  // Derived at load.
  b["rope"] = plain("f32", OJ::array({g.max_pos, c.head_dim}), "carry");
  // The decode chain's grid-barrier words: zero at load, left zero by every launch.
  if (g.chain_rows > 0) b["chain_sync"] = plain("u32", OJ::array({2}), "carry");
  // Weights, bound to the HF names.
  b["embed"] = weight(OJ::array({c.vocab, c.hidden}), {"model.embed_tokens.weight"});
  b["lm_head"] =
      weight(OJ::array({c.vocab, c.hidden}), {c.tied ? "model.embed_tokens.weight" : "lm_head.weight"});
  b["final_norm"] = weight(OJ::array({c.hidden}), {"model.norm.weight"});
  for (std::uint64_t l = 0; l < c.layers; ++l) {
    b[layer_name(l, "input_norm")] = weight(OJ::array({c.hidden}), {hf_layer(l, "input_layernorm")});
    b[layer_name(l, "qkv")] =
        weight(OJ::array({g.qkv_width, c.hidden}),
               {hf_layer(l, "self_attn.q_proj"), hf_layer(l, "self_attn.k_proj"), hf_layer(l, "self_attn.v_proj")});
    b[layer_name(l, "q_norm")] = weight(OJ::array({c.head_dim}), {hf_layer(l, "self_attn.q_norm")});
    b[layer_name(l, "k_norm")] = weight(OJ::array({c.head_dim}), {hf_layer(l, "self_attn.k_norm")});
    b[layer_name(l, "o_proj")] = weight(OJ::array({c.hidden, g.q_width}), {hf_layer(l, "self_attn.o_proj")});
    b[layer_name(l, "post_norm")] = weight(OJ::array({c.hidden}), {hf_layer(l, "post_attention_layernorm")});
    b[layer_name(l, "gate_up")] = weight(OJ::array({2 * c.intermediate, c.hidden}),
                                         {hf_layer(l, "mlp.gate_proj"), hf_layer(l, "mlp.up_proj")});
    b[layer_name(l, "down")] = weight(OJ::array({c.hidden, c.intermediate}), {hf_layer(l, "mlp.down_proj")});
  }
  return b;
}

OJ call(const char* label, const char* op_name, OJ args) {
  OJ c;
  if (label != nullptr && *label != '\0') c["label"] = label;
  c["op"] = op_name;
  c["args"] = std::move(args);
  return c;
}
OJ call(const std::string& label, const char* op_name, OJ args) { return call(label.c_str(), op_name, std::move(args)); }

// The forward pass of both serving programs. Prefill: cuBLASLt GEMMs into `delta`, the residual
// added by the next add_rms_norm, logits of each sequence's last row. Decode (one row per
// sequence): GEMV ops (cuBLASLt above kGemvMaxRows sequences) that add o_proj and down_proj into
// `hidden` in place, so every norm is a plain rms_norm (or, with gemv_fused_norm, fused into the
// prologue of the GEMV that reads it: qkv_proj, gate_up with SiLU·mul, the lm_head), gate_up fused
// with SiLU·mul, the lm_head reading the normed rows directly (every decode row is the last row of
// its sequence); kernels chained with programmatic dependent launch (`pdl`).
//
// With the decode chain, steps of up to chain_rows sequences run the first layer's norm and qkv_proj
// (decode_chain_head), then per layer RoPE, attention and one decode_chain call that ends with the
// next layer's qkv_proj (the last layer's: the final norm and the lm_head). The per-op calls stay in
// the program for larger steps; their launches' `when` makes them no-ops for chain-sized steps, and
// the chain's makes it a no-op above.
OJ forward_calls(const Geo& g, bool prefill) {
  const Qwen3Config& c = g.c;
  const bool chain = !prefill && g.chain_rows > 0, per_op = prefill || decode_needs_ops(g);
  const char* decode_norm = chain ? "decode_rms_norm" : "rms_norm";
  OJ calls = OJ::array();
  calls.push_back(call("embed", "embedding", OJ::array({buf("token_ids"), buf("embed"), buf("hidden"), var("tokens")})));
  if (chain)
    calls.push_back(call("layers.0.chain_head", "decode_chain_head",
                         OJ::array({buf("hidden"), buf(layer_name(0, "input_norm")), buf(layer_name(0, "qkv")), buf("qkv"),
                                    buf("chain_sync"), var("seqs")})));
  for (std::uint64_t l = 0; l < c.layers; ++l) {
    const std::string L = "layers." + std::to_string(l);
    if (!per_op) {
      // every decode step goes through the chain
    } else if (prefill) {
      if (l == 0) {
        calls.push_back(call(L + ".input_norm", "rms_norm",
                             OJ::array({buf("hidden"), buf(layer_name(l, "input_norm")), buf("normed"), var("tokens")})));
      } else {
        calls.push_back(call(L + ".input_norm", "add_rms_norm",
                             OJ::array({buf("hidden"), buf("delta"), buf(layer_name(l, "input_norm")), buf("normed"),
                                        var("tokens")})));
      }
      calls.push_back(call(L + ".qkv_proj", "gemm_qkv",
                           OJ::array({buf("normed"), buf(layer_name(l, "qkv")), buf("qkv"), var("tokens")})));
    } else if (g.o.gemv_fused_norm) {
      calls.push_back(call(L + ".norm_qkv_proj", "decode_norm_qkv",
                           OJ::array({buf("hidden"), buf(layer_name(l, "input_norm")), buf(layer_name(l, "qkv")),
                                      buf("qkv"), var("seqs")})));
    } else {
      calls.push_back(call(L + ".input_norm", decode_norm,
                           OJ::array({buf("hidden"), buf(layer_name(l, "input_norm")), buf("normed"), var("tokens")})));
      calls.push_back(call(L + ".qkv_proj", "decode_qkv",
                           OJ::array({buf("normed"), buf(layer_name(l, "qkv")), buf("qkv"), var("seqs")})));
    }
    calls.push_back(call(L + ".qk_norm_rope_cache", "qk_norm_rope_cache",
                         OJ::array({buf("qkv"), buf(layer_name(l, "q_norm")), buf(layer_name(l, "k_norm")), buf("rope"),
                                    buf("positions"), buf("slot_mapping"), state("kv", l * g.layer_bytes),
                                    var("tokens")})));
    if (prefill) {
      calls.push_back(call(L + ".attn", "attn_prefill",
                           OJ::array({buf("qkv"), state("kv", l * g.layer_bytes), buf("block_table"), buf("seq_lens"),
                                      buf("cu_seqlens"), buf("positions"), buf("attn"), var("tokens"), var("seqs")})));
      calls.push_back(call(L + ".o_proj", "gemm_o",
                           OJ::array({buf("attn"), buf(layer_name(l, "o_proj")), buf("delta"), var("tokens")})));
      calls.push_back(call(L + ".post_norm", "add_rms_norm",
                           OJ::array({buf("hidden"), buf("delta"), buf(layer_name(l, "post_norm")), buf("normed"),
                                      var("tokens")})));
      calls.push_back(call(L + ".gate_up_proj", "gemm_gate_up",
                           OJ::array({buf("normed"), buf(layer_name(l, "gate_up")), buf("gate_up"), var("tokens")})));
      calls.push_back(call(L + ".silu_mul", "silu_mul", OJ::array({buf("gate_up"), buf("act"), var("tokens")})));
      calls.push_back(call(L + ".down_proj", "gemm_down",
                           OJ::array({buf("act"), buf(layer_name(l, "down")), buf("delta"), var("tokens")})));
    } else {
      calls.push_back(call(L + ".attn", "attn_decode",
                           OJ::array({buf("qkv"), state("kv", l * g.layer_bytes), buf("block_table"), buf("seq_lens"),
                                      buf("attn"), var("seqs")})));
      if (chain) {
        const bool last = l + 1 == c.layers;
        calls.push_back(call(L + ".chain", last ? "decode_chain_last" : "decode_chain",
                             OJ::array({buf("attn"), buf(layer_name(l, "o_proj")), buf("hidden"),
                                        buf(layer_name(l, "post_norm")), buf(layer_name(l, "gate_up")), buf("act"),
                                        buf(layer_name(l, "down")),
                                        buf(last ? std::string("final_norm") : layer_name(l + 1, "input_norm")),
                                        buf(last ? std::string("lm_head") : layer_name(l + 1, "qkv")),
                                        buf(last ? "logits" : "qkv"), buf("chain_sync"), var("seqs")})));
      }
      if (!per_op) continue;
      calls.push_back(call(L + ".o_proj", "decode_o_residual",
                           OJ::array({buf("attn"), buf(layer_name(l, "o_proj")), buf("hidden"), var("seqs")})));
      OJ gate_up_args;
      if (g.o.gemv_fused_norm) {
        gate_up_args = OJ::array({buf("hidden"), buf(layer_name(l, "post_norm")), buf(layer_name(l, "gate_up")), buf("act")});
      } else {
        calls.push_back(call(L + ".post_norm", decode_norm,
                             OJ::array({buf("hidden"), buf(layer_name(l, "post_norm")), buf("normed"), var("tokens")})));
        gate_up_args = OJ::array({buf("normed"), buf(layer_name(l, "gate_up")), buf("act")});
      }
      if (decode_uses_blas(g)) gate_up_args.push_back(buf("gate_up"));
      gate_up_args.push_back(var("seqs"));
      calls.push_back(call(L + (g.o.gemv_fused_norm ? ".norm_gate_up_silu" : ".gate_up_silu"),
                           g.o.gemv_fused_norm ? "decode_norm_gate_up_silu" : "decode_gate_up_silu", std::move(gate_up_args)));
      calls.push_back(call(L + ".down_proj", "decode_down_residual",
                           OJ::array({buf("act"), buf(layer_name(l, "down")), buf("hidden"), var("seqs")})));
    }
  }
  if (prefill) {
    calls.push_back(call("final_norm", "add_rms_norm",
                         OJ::array({buf("hidden"), buf("delta"), buf("final_norm"), buf("normed"), var("tokens")})));
    calls.push_back(
        call("last_rows", "gather_last", OJ::array({buf("normed"), buf("cu_seqlens"), buf("last"), var("seqs")})));
    calls.push_back(call("lm_head", "gemm_lm_head", OJ::array({buf("last"), buf("lm_head"), buf("logits"), var("seqs")})));
  } else if (!per_op) {
    // the last layer's chain ends with the lm_head
  } else if (g.o.gemv_fused_norm) {
    calls.push_back(call("norm_lm_head", "decode_norm_lm_head",
                         OJ::array({buf("hidden"), buf("final_norm"), buf("lm_head"), buf("logits"), var("seqs")})));
  } else {
    calls.push_back(
        call("final_norm", decode_norm, OJ::array({buf("hidden"), buf("final_norm"), buf("normed"), var("tokens")})));
    calls.push_back(
        call("lm_head", "decode_lm_head", OJ::array({buf("normed"), buf("lm_head"), buf("logits"), var("seqs")})));
  }
  calls.push_back(call("argmax", "argmax", OJ::array({buf("logits"), buf("next_token"), var("seqs")})));
  return calls;
}

void check_options(const Qwen3Config& c, const Qwen3GenOptions& o) {
  if (o.max_tokens == 0 || o.max_tokens > kI32Max) fail(ErrorKind::Api, "--max-tokens must be in [1, {}], got {}", kI32Max, o.max_tokens);
  if (o.max_seqs == 0 || o.max_seqs > 65535) fail(ErrorKind::Api, "--max-seqs must be in [1, 65535], got {}", o.max_seqs);
  if (o.max_seqs > o.max_tokens)
    fail(ErrorKind::Api, "--max-seqs {} exceeds --max-tokens {} (a decode step feeds one row per sequence)", o.max_seqs,
         o.max_tokens);
  if (o.gemv_prefetch_bytes > kI32Max)
    fail(ErrorKind::Api, "--gemv-prefetch must be in [0, {}], got {}", kI32Max, o.gemv_prefetch_bytes);
  if (o.decode_chain && (o.chain_blocks == 0 || o.chain_blocks > 65535))
    fail(ErrorKind::Api, "--chain-blocks must be in [1, 65535], got {}", o.chain_blocks);
  if (o.decode_attn_target_blocks > 1u << 20)
    fail(ErrorKind::Api, "--attn-target-blocks must be in [0, {}] (0: the partial kernel's default), got {}", 1u << 20,
         o.decode_attn_target_blocks);
  if (o.gemv_max_blocks > kI32Max)
    fail(ErrorKind::Api, "--gemv-max-blocks must be in [0, {}], got {}", kI32Max, o.gemv_max_blocks);
  if (o.page_size == 0 || o.page_size > 256 || (o.page_size & (o.page_size - 1)) != 0)
    fail(ErrorKind::Api, "--page-size must be a power of two from 1 to 256, got {}", o.page_size);
  for (const std::string& family : qwen3_kernel_families()) {
    auto it = o.module_sha256.find(family);
    if (it == o.module_sha256.end()) fail(ErrorKind::KernelArtifact, "no sha256 for kernel module '{}'", family);
    if (!is_sha256_hex(it->second)) fail(ErrorKind::KernelArtifact, "module '{}': '{}' is not a sha256", family, it->second);
  }
  const std::uint64_t max_pages = (c.max_positions + o.page_size - 1) / o.page_size;
  if (max_pages * o.page_size > kI32Max) fail(ErrorKind::Api, "max_position_embeddings {} too large", c.max_positions);
}

}  // namespace

const std::vector<std::string>& qwen3_kernel_families() {
  static const std::vector<std::string> families = {"activation",        "argmax", "attention", "attention_prefill",
                                                    "decode_chain",      "embedding", "gemv", "rmsnorm", "rope"};
  return families;
}

std::map<std::string, std::string> hash_kernel_fatbins(const std::filesystem::path& dir) {
  std::map<std::string, std::string> out;
  for (const std::string& family : qwen3_kernel_families()) {
    const std::filesystem::path f = dir / (family + ".fatbin");
    std::error_code ec;
    if (!std::filesystem::is_regular_file(f, ec))
      fail(ErrorKind::KernelArtifact, "kernel module {} not found (build the kern_kernels target, or pass --kernels-dir)",
           f.string());
    out[family] = sha256_file_hex(f.string());
  }
  return out;
}

std::vector<std::string> qwen3_bound_tensors(const Qwen3Config& c) {
  std::vector<std::string> names = {"model.embed_tokens.weight"};
  if (!c.tied) names.push_back("lm_head.weight");
  names.push_back("model.norm.weight");
  for (std::uint64_t l = 0; l < c.layers; ++l)
    for (const char* w : {"input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                          "self_attn.q_norm", "self_attn.k_norm", "self_attn.o_proj", "post_attention_layernorm",
                          "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"})
      names.push_back(hf_layer(l, w));
  return names;
}

nlohmann::ordered_json generate_qwen3_manifest(const Qwen3Config& c, const Qwen3GenOptions& o) {
  check_options(c, o);
  Geo g{c, o, 0, 0, 0, 0, 0, 0, 0, "_hd" + std::to_string(c.head_dim)};
  g.q_width = c.heads * c.head_dim;
  g.qkv_width = (c.heads + 2 * c.kv_heads) * c.head_dim;
  g.max_pages = (c.max_positions + o.page_size - 1) / o.page_size;
  g.max_pos = g.max_pages * o.page_size;  // the RoPE table covers every position a block table reaches
  g.page_elems = o.page_size * c.kv_heads * c.head_dim;  // one K (or V) block of one layer
  g.page_stride_elems = c.layers * 2 * g.page_elems;
  g.layer_bytes = 2 * g.page_elems * 2;
  plan_chain(g);

  OJ m;
  m["schema_version"] = 5;
  m["model"] = o.model.empty() ? std::string("qwen3") : o.model;
  m["vars"] = {{"tokens", {{"max", o.max_tokens}}}, {"seqs", {{"max", o.max_seqs}}}};
  m["states"] = {{"kv", {{"bytes_per_token", c.layers * 2 * c.kv_heads * c.head_dim * 2}}}};
  m["buffers"] = buffers(g);
  OJ op_list = ops(g);
  // Every module a launch uses, and only those (the verifier rejects an unused module: with
  // max_seqs within the decode chain's rows, no GEMV kernel is launched).
  std::set<std::string> used;
  for (const auto& [name, decl] : op_list.items())
    for (const auto& l : decl["impl"]["launches"])
      if (l.contains("module")) used.insert(l["module"].get<std::string>());
  OJ modules;
  for (const std::string& family : qwen3_kernel_families())
    if (used.count(family)) modules[family] = {{"source", family + ".fatbin"}, {"sha256", o.module_sha256.at(family)}};
  m["modules"] = std::move(modules);
  m["ops"] = std::move(op_list);
  OJ programs;
  programs["decode"] = {{"batch", {{"groups", o.max_seqs}, {"rows", 1}}}, {"graph", true}, {"calls", forward_calls(g, false)}};
  programs["load"] = {{"once", true}, {"calls", OJ::array({call("rope_table", "rope_table", OJ::array({buf("rope")}))})}};
  programs["prefill"] = {{"batch", {{"groups", 1}, {"rows", "tokens"}}}, {"calls", forward_calls(g, true)}};
  m["programs"] = std::move(programs);
  return m;
}

}  // namespace kern::models
