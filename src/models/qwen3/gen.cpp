// The Qwen3 manifest builder's entry points: the options check, the geometry, the modules and the
// programs; and the launch helpers every op family shares (models/qwen3/gen.hpp).
#include <set>
#include <utility>

#include "kern/base/error.hpp"
#include "kern/base/sha256.hpp"
#include "kern/models/kernel_catalogue.hpp"
#include "models/qwen3/gen.hpp"

namespace kern::models {

namespace qwen3_gen {

OJ buf(const std::string& name, std::uint64_t offset) {
  OJ a{{"buf", name}};
  if (offset != 0) a["offset"] = offset;
  return a;
}

OJ state(const std::string& name, std::uint64_t offset) {
  OJ a{{"state", name}};
  if (offset != 0) a["offset"] = offset;
  return a;
}

OJ launch(const std::string& entry, OJ args, OJ grid, std::uint64_t block) {
  const CataloguedKernel k = catalogued_kernel(entry);
  if (args.size() != k.entry->params.size())
    fail(ErrorKind::Manifest, "kern gen: {} args for {}, whose catalogue lists {} params", args.size(), entry,
         k.entry->params.size());
  OJ l;
  l["module"] = std::string(k.family->name);
  l["entry"] = entry;
  l["params"] = kernel_param_types(*k.entry);
  l["block"] = OJ::array({block, 1, 1});
  l["grid"] = std::move(grid);
  l["args"] = std::move(args);
  return l;
}

OJ op(std::vector<std::string> params, OJ launches, OJ scratch_decl) {
  OJ o;
  o["params"] = std::move(params);
  OJ impl;
  if (!scratch_decl.is_null()) impl["scratch"] = std::move(scratch_decl);
  impl["launches"] = std::move(launches);
  o["impl"] = std::move(impl);
  return o;
}

OJ with_shared(OJ l, std::uint64_t bytes) {
  l["shared_mem"] = bytes;
  return l;
}

OJ with_pdl(OJ l, const Geo& g) {
  if (g.o.pdl) l["pdl"] = true;
  return l;
}

OJ when_gemv(const Geo& g) {
  OJ w{{"var", "seqs"}, {"max", g.gemv_rows}};
  if (g.chain_rows > 0) w["min"] = g.chain_rows + 1;
  return w;
}
OJ when_blas(const Geo& g) {
  if (g.gemv_rows == 0) return nullptr;
  return OJ{{"var", "seqs"}, {"min", g.gemv_rows + 1}};
}
OJ when_chain(const Geo& g) { return OJ{{"var", "seqs"}, {"max", g.chain_rows}}; }
OJ when_not_chain(const Geo& g) { return OJ{{"var", "seqs"}, {"min", g.chain_rows + 1}}; }

std::string layer_name(std::uint64_t l, const char* what) { return "layers." + std::to_string(l) + "." + what; }
std::string hf_layer(std::uint64_t l, const char* what) {
  return "model.layers." + std::to_string(l) + "." + what + ".weight";
}

namespace {

constexpr std::uint64_t kI32Max = 0x7fffffff;
constexpr std::uint64_t kMaxTp = 8;  // ranks of one host

// --fp8: the options it excludes, and cuBLASLt's fp8 rule that k is a multiple of 16 for every layer GEMM.
void check_fp8(const Qwen3Shape& c, const Qwen3GenOptions& o) {
  if (o.decode_chain)
    fail(ErrorKind::Api,
         "--fp8 cannot be combined with --decode-chain: the decode chain's kernel is bf16 only (with --fp8 every "
         "decode step runs its GEMMs on cuBLASLt's fp8 kernels)");
  if (o.gemv_fused_norm)
    fail(ErrorKind::Api,
         "--fp8 cannot be combined with --gemv-fused-norm: the fused norms live in the bf16 GEMV, which an fp8 "
         "manifest does not use");
  if (o.mixed)
    fail(ErrorKind::Api,
         "--fp8 cannot be combined with --mixed: mixed steps promise that a row's bits do not depend on the program "
         "that ran it, and an fp8 GEMM's activation scale is the absmax of every row of its call");
  const std::pair<const char*, std::uint64_t> ks[] = {{"hidden_size", c.hidden},
                                                      {"num_attention_heads x head_dim", c.heads * c.head_dim},
                                                      {"intermediate_size", c.intermediate}};
  for (const auto& [what, k] : ks)
    if (k % 16 != 0)
      fail(ErrorKind::Api,
           "--fp8: cuBLASLt's fp8 GEMMs need k (each layer GEMM's reduction width) to be a multiple of 16, and this "
           "shape's {} is {}",
           what, k);
}

// --tp: what it splits must divide by it, and the options whose kernels hold whole layers are refused.
void check_tp(const Qwen3Shape& c, const Qwen3GenOptions& o) {
  if (o.tp > kMaxTp) fail(ErrorKind::Api, "--tp must be in [1, {}], got {}", kMaxTp, o.tp);
  const std::pair<const char*, std::uint64_t> split[] = {
      {"num_attention_heads", c.heads}, {"num_key_value_heads", c.kv_heads}, {"intermediate_size", c.intermediate}};
  for (const auto& [what, n] : split)
    if (n % o.tp != 0)
      fail(ErrorKind::Api, "--tp {}: each rank holds {} / {}, and this shape's {} is {}", o.tp, what, o.tp, what, n);
  const std::pair<bool, const char*> excluded[] = {
      {o.decode_chain, "--decode-chain (its kernel runs whole layers)"},
      {o.fp8, "--fp8"},
      {o.gemv_fused_norm, "--gemv-fused-norm"},
      {o.mixed, "--mixed"}};
  for (const auto& [on, what] : excluded)
    if (on) fail(ErrorKind::Api, "--tp {} cannot be combined with {}", o.tp, what);
  if (o.tp_peer_allreduce && o.tp_peer_allreduce_rows)
    fail(ErrorKind::Api, "--tp-peer-allreduce (every call size) and --tp-peer-allreduce-rows exclude each other");
}

void check_options(const Qwen3Shape& c, const Qwen3GenOptions& o) {
  if (o.tp == 0) fail(ErrorKind::Api, "--tp must be in [1, {}], got 0", kMaxTp);
  if (o.max_tokens == 0 || o.max_tokens > kI32Max)
    fail(ErrorKind::Api, "--max-tokens must be in [1, {}], got {}", kI32Max, o.max_tokens);
  if (o.max_seqs == 0 || o.max_seqs > 65535)
    fail(ErrorKind::Api, "--max-seqs must be in [1, 65535], got {}", o.max_seqs);
  if (o.max_seqs > o.max_tokens)
    fail(ErrorKind::Api, "--max-seqs {} exceeds --max-tokens {} (a decode step feeds one row per sequence)", o.max_seqs,
         o.max_tokens);
  if (o.gemv_prefetch_bytes > kI32Max)
    fail(ErrorKind::Api, "--gemv-prefetch must be in [0, {}], got {}", kI32Max, o.gemv_prefetch_bytes);
  if (o.decode_chain && (o.chain_blocks == 0 || o.chain_blocks > 65535))
    fail(ErrorKind::Api, "--chain-blocks must be in [1, 65535], got {}", o.chain_blocks);
  if (o.batch_invariant && o.decode_attn_split_tokens != 0 &&
      (o.decode_attn_split_tokens < 32 || o.decode_attn_split_tokens > 1u << 20))
    fail(ErrorKind::Api, "--attn-split-tokens must be 0 (the kernel's default) or in [32, {}], got {}", 1u << 20,
         o.decode_attn_split_tokens);
  if (o.decode_attn_key_major && (!o.decode_attn_mma || c.kv_heads == 0 || c.heads / c.kv_heads > 8))
    fail(ErrorKind::Api,
         "--decode-attn-key-major takes tensor-core decode attention and GQA groups of at most 8 q heads per kv "
         "head ({} / {} here)",
         c.heads, c.kv_heads);
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
    if (!is_sha256_hex(it->second))
      fail(ErrorKind::KernelArtifact, "module '{}': '{}' is not a sha256", family, it->second);
  }
  if (o.mixed) {
    if (!o.batch_invariant || o.max_seqs <= kGemvMaxRows || o.decode_chain || o.gemv_fused_norm)
      fail(ErrorKind::Api,
           "mixed steps need batch invariance with more than {} sequences (cuBLASLt for every decode step), no "
           "decode chain and no fused GEMV norms",
           kGemvMaxRows);
    if (o.prefill_logits) fail(ErrorKind::Api, "mixed steps are kern serve's: build them without prefill logits");
    if (o.max_tokens <= o.max_seqs)
      fail(ErrorKind::Api, "mixed steps need --max-tokens {} above --max-seqs {} (room for a chunk beside the decode rows)",
           o.max_tokens, o.max_seqs);
  }
  if (o.prefill_chunks < 1 || o.prefill_chunks > o.max_seqs)
    fail(ErrorKind::Api, "--prefill-chunks {} outside [1, --max-seqs {}]", o.prefill_chunks, o.max_seqs);
  if (o.prefill_chunks > 1 && o.prefill_logits)
    fail(ErrorKind::Api, "packed prefill calls (--prefill-chunks {}) are kern serve's: build them without prefill logits",
         o.prefill_chunks);
  if (o.fp8) check_fp8(c, o);
  if (o.tp > 1) check_tp(c, o);
  if (o.tp == 1 && (o.tp_peer_allreduce || o.tp_peer_allreduce_rows))
    fail(ErrorKind::Api, "--tp-peer-allreduce and --tp-peer-allreduce-rows need --tp above 1");
  const std::uint64_t max_pages = (c.max_positions + o.page_size - 1) / o.page_size;
  if (max_pages * o.page_size > kI32Max) fail(ErrorKind::Api, "max_position_embeddings {} too large", c.max_positions);
}

// One rank's shape under o.tp (check_options has made sure tp divides what it splits).
Qwen3Shape rank_shape(Qwen3Shape c, const Qwen3GenOptions& o) {
  c.heads /= o.tp;
  c.kv_heads /= o.tp;
  c.intermediate /= o.tp;
  return c;
}

Geo geometry(const Qwen3Shape& full, const Qwen3GenOptions& o) {
  const Qwen3Shape c = rank_shape(full, o);
  Geo g{c, o, 0, 0, 0, 0, 0, 0, 0, "_hd" + std::to_string(c.head_dim)};
  g.q_width = c.heads * c.head_dim;
  g.qkv_width = (c.heads + 2 * c.kv_heads) * c.head_dim;
  g.max_pages = (c.max_positions + o.page_size - 1) / o.page_size;
  g.max_pos = g.max_pages * o.page_size;                 // the RoPE table covers every position a block table reaches
  g.page_elems = o.page_size * c.kv_heads * c.head_dim;  // one K (or V) block of one layer
  g.page_stride_elems = c.layers * 2 * g.page_elems;
  g.layer_bytes = 2 * g.page_elems * 2;
  plan_chain(g);
  // Batch invariance: one decode arithmetic for every step size. Above kGemvMaxRows sequences that is
  // cuBLASLt (one algorithm per launch, chosen at the seqs bound: row-invariant, docs/runtime.md); the
  // chain serves only if it covers every step size.
  if (o.batch_invariant) {
    if (o.max_seqs > kGemvMaxRows) g.gemv_rows = 0;
    if (g.chain_rows < o.max_seqs) g.chain_rows = g.chain_stage_bytes = g.chain_shared = 0;
  }
  // fp8: the GEMV is bf16 only; cuBLASLt serves every decode step (the lm_head's too).
  if (o.fp8) g.gemv_rows = 0;
  return g;
}

// Every module a launch of `op_list` uses, and only those (the verifier rejects an unused module: with
// max_seqs within the decode chain's rows, no GEMV kernel is launched).
OJ used_modules(const OJ& op_list, const Qwen3GenOptions& o) {
  std::set<std::string> used;
  for (const auto& [name, decl] : op_list.items())
    for (const auto& l : decl["impl"]["launches"])
      if (l.contains("module")) used.insert(l["module"].get<std::string>());
  OJ modules;
  for (const std::string& family : qwen3_kernel_families())
    if (used.count(family)) modules[family] = {{"source", family + ".fatbin"}, {"sha256", o.module_sha256.at(family)}};
  return modules;
}

}  // namespace
}  // namespace qwen3_gen

using namespace qwen3_gen;

std::uint64_t decode_attn_target(const Qwen3GenOptions& o) {
  if (o.decode_attn_target_blocks != 0) return o.decode_attn_target_blocks;
  return o.decode_attn_mma ? kDecodeAttnTargetMma : kDecodeAttnTargetF32;
}

bool decode_attn_warp_items(const Qwen3GenOptions& o) {
  if (!o.decode_attn_mma) return false;
  switch (o.decode_attn_items) {
    case Qwen3GenOptions::DecodeAttnItems::Block: return false;
    case Qwen3GenOptions::DecodeAttnItems::Warp: return true;
    case Qwen3GenOptions::DecodeAttnItems::Auto: break;
  }
  // Without batch invariance a big step's split has one long range per (sequence, kv head), which one
  // warp would stream alone: the block-item partial's four warps share it.
  return o.batch_invariant && o.max_seqs >= kDecodeAttnWarpMinSeqs;
}

const std::map<std::string, Qwen3GenOptions::DecodeAttnItems>& decode_attn_items_names() {
  static const std::map<std::string, Qwen3GenOptions::DecodeAttnItems> names = {
      {"auto", Qwen3GenOptions::DecodeAttnItems::Auto},
      {"block", Qwen3GenOptions::DecodeAttnItems::Block},
      {"warp", Qwen3GenOptions::DecodeAttnItems::Warp}};
  return names;
}

std::uint64_t decode_attn_split(const Qwen3GenOptions& o) {
  if (o.decode_attn_split_tokens != 0) return o.decode_attn_split_tokens;
  return decode_attn_warp_items(o) ? kDecodeAttnSplitWarp : kDecodeAttnSplitBlock;
}

const std::vector<std::string>& qwen3_kernel_families() {
  static const std::vector<std::string> families = [] {
    std::vector<std::string> out;
    for (const KernelFamily& f : kernel_catalogue()) out.emplace_back(f.name);
    return out;
  }();
  return families;
}

std::map<std::string, std::string> hash_kernel_fatbins(const std::filesystem::path& dir) {
  std::map<std::string, std::string> out;
  for (const std::string& family : qwen3_kernel_families()) {
    const std::filesystem::path f = dir / (family + ".fatbin");
    std::error_code ec;
    if (!std::filesystem::is_regular_file(f, ec))
      fail(ErrorKind::KernelArtifact,
           "kernel module {} not found (build the kern_kernels target, or pass --kernels-dir)", f.string());
    out[family] = sha256_file_hex(f.string());
  }
  return out;
}

std::vector<std::string> qwen3_bound_tensors(const Qwen3Shape& c) {
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

nlohmann::ordered_json generate_qwen3_manifest(const Qwen3Shape& c, const Qwen3GenOptions& o) {
  check_options(c, o);
  const Geo g = geometry(c, o);
  OJ m;
  m["schema_version"] = 5;
  m["model"] = o.model.empty() ? std::string("qwen3") : o.model;
  m["vars"] = {{"tokens", {{"max", o.max_tokens}}}, {"seqs", {{"max", o.max_seqs + (o.mixed ? kMixedChunkGroups : 0)}}}};
  if (o.mixed) m["vars"]["dseqs"] = {{"max", o.max_seqs}};
  if (tensor_parallel(g)) m["topology"] = {{"groups", {{kTpGroup, o.tp}}}};
  m["states"] = {{"kv", {{"bytes_per_token", g.c.layers * 2 * g.c.kv_heads * g.c.head_dim * 2}}}};
  m["buffers"] = buffers(g);
  OJ op_list = ops(g);
  m["modules"] = used_modules(op_list, o);
  m["ops"] = std::move(op_list);
  OJ programs;
  programs["decode"] = {
      {"batch", {{"groups", o.max_seqs}, {"rows", 1}}}, {"graph", true}, {"calls", forward_calls(g, false)}};
  programs["load"] = {{"once", true},
                      {"calls", OJ::array({call("rope_table", "rope_table", OJ::array({buf("rope")}))})}};
  OJ prefill_batch = {{"groups", o.prefill_chunks}, {"rows", "tokens"}};
  if (o.prefill_chunks > 1) prefill_batch["packed"] = true;
  programs["prefill"] = {{"batch", std::move(prefill_batch)},
                         {"calls", o.mixed ? serving_calls(g, false) : forward_calls(g, true)}};
  if (o.fp8) programs["quantize"] = {{"derive", true}, {"calls", quantize_calls(g)}};
  if (o.mixed)
    programs["mixed"] = {
        {"batch", {{"groups", o.max_seqs + kMixedChunkGroups}, {"rows", "tokens"}, {"decode", "dseqs"}}},
        {"calls", serving_calls(g, true)}};
  m["programs"] = std::move(programs);
  return m;
}

}  // namespace kern::models
