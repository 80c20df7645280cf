// The kernel catalogue (include/kern/models/kernel_catalogue.hpp): one table per family of kernels/*.cu,
// each entry's parameters in the kernel's order. Shapes in the comments are in elements (H q heads, KV kv
// heads, hd head_dim); what each entry computes and how it is launched is in docs/kernels.md.
#include "kern/models/kernel_catalogue.hpp"

#include "kern/base/error.hpp"

namespace kern::models {
namespace {

using P = KernelParam;

// ---------------------------------------------------------------- activation (kernels/activation.cu)
constexpr P kSiluMul[] = {
    {"gate_up", "in buffer<bf16>"},  // [rows, 2·inter], gate columns first
    {"out", "out buffer<bf16>"},     // [rows, inter]
    {"rows", "i32"},
    {"inter", "i32"},
};
constexpr KernelEntry kActivation[] = {{"kern_silu_mul_bf16", kSiluMul}};

// ---------------------------------------------------------------- argmax (kernels/argmax.cu)
constexpr P kArgmaxPartial[] = {
    {"logits", "in buffer<bf16>"},    // [rows, vocab]
    {"part_max", "out buffer<f32>"},  // [rows, nblocks]
    {"part_idx", "out buffer<i32>"},  // [rows, nblocks]
    {"rows", "i32"},
    {"vocab", "i32"},
    {"nblocks", "i32"},
};
constexpr P kArgmaxFinal[] = {
    {"part_max", "in buffer<f32>"},
    {"part_idx", "in buffer<i32>"},
    {"out", "out buffer<i64>"},  // [rows]
    {"rows", "i32"},
    {"nblocks", "i32"},
};
constexpr KernelEntry kArgmax[] = {{"kern_argmax_partial_bf16", kArgmaxPartial}, {"kern_argmax_final", kArgmaxFinal}};

// ---------------------------------------------------------------- attention (kernels/attention.cu)
// The split-KV decode partial: the CUDA-core and the tensor-core kernels share it.
constexpr P kDecodePartial[] = {
    {"qkv", "in buffer<bf16>"},
    {"q_stride", "i32"},                // elements per qkv row
    {"cache", "in state"},              // the layer's base in the paged KV state
    {"block_table", "in buffer<i32>"},  // [seqs, max_pages]
    {"max_pages", "i32"},
    {"seq_lens", "in buffer<i32>"},  // [seqs]
    {"part_o", "out buffer<f32>"},   // [seqs, H, splits_max, hd]
    {"part_ml", "out buffer<f32>"},  // [seqs, H, splits_max, 2]
    {"out", "out buffer<bf16>"},     // [seqs, H·hd]
    {"seqs", "i32"},
    {"heads", "i32"},
    {"kv_heads", "i32"},
    {"page_size", "i32"},
    {"page_stride", "i64"},  // elements from one page to the next
    {"splits_max", "i32"},   // at most 1024
    {"target_blocks", "i32"},
    {"split_tokens", "i32"},  // > 0: ranges from each sequence's length alone (batch-invariant)
    {"scale", "f32"},
};
constexpr P kDecodeReduce[] = {
    {"part_o", "in buffer<f32>"},
    {"part_ml", "in buffer<f32>"},
    {"out", "out buffer<bf16>"},  // [seqs, H·hd]
    {"seq_lens", "in buffer<i32>"},
    {"max_pages", "i32"},
    {"seqs", "i32"},
    {"heads", "i32"},
    {"kv_heads", "i32"},
    {"page_size", "i32"},
    {"splits_max", "i32"},     // the partial kernel's value
    {"target_blocks", "i32"},  // the partial kernel's value
    {"split_tokens", "i32"},   // the partial kernel's value
};
constexpr KernelEntry kAttention[] = {
    {"kern_attn_decode_partial_hd64", kDecodePartial},     {"kern_attn_decode_reduce_hd64", kDecodeReduce},
    {"kern_attn_decode_partial_hd128", kDecodePartial},    {"kern_attn_decode_reduce_hd128", kDecodeReduce},
    {"kern_attn_decode_mma_partial_hd64", kDecodePartial}, {"kern_attn_decode_mma_partial_hd128", kDecodePartial},
    {"kern_attn_decode_warp_partial_hd64", kDecodePartial}, {"kern_attn_decode_warp_partial_hd128", kDecodePartial},
    {"kern_attn_decode_mma_km_partial_hd64", kDecodePartial},  {"kern_attn_decode_mma_km_partial_hd128", kDecodePartial},
    {"kern_attn_decode_warp_km_partial_hd64", kDecodePartial}, {"kern_attn_decode_warp_km_partial_hd128", kDecodePartial},
};

// ---------------------------------------------------------------- attention_prefill (kernels/attention_prefill.cu)
constexpr P kPrefill[] = {
    {"qkv", "in buffer<bf16>"},
    {"q_stride", "i32"},
    {"cache", "in state"},
    {"block_table", "in buffer<i32>"},
    {"max_pages", "i32"},
    {"seq_lens", "in buffer<i32>"},
    {"cu_seqlens", "in buffer<i32>"},  // [seqs+1]
    {"positions", "in buffer<i64>"},   // [rows]
    {"out", "out buffer<bf16>"},       // [rows, H·hd]
    {"rows", "i32"},
    {"seqs", "i32"},
    {"heads", "i32"},
    {"kv_heads", "i32"},
    {"page_size", "i32"},
    {"page_stride", "i64"},
    {"scale", "f32"},
    {"rows_per_block", "i32"},
    {"first_row", "i32"},  // rows below it are left alone (a mixed step's decode rows)
};
constexpr KernelEntry kAttentionPrefill[] = {
    {"kern_attn_prefill_mma_s2_hd64", kPrefill},
    {"kern_attn_prefill_mma_s2_hd128", kPrefill},
    {"kern_attn_prefill_mma_m32n32s2_hd128", kPrefill},
    {"kern_attn_prefill_wgmma_ws_hd128", kPrefill},   // sm_90a (kernels/attention_prefill_wgmma_ws.cuh)
    {"kern_attn_prefill_wgmma_ws3_hd128", kPrefill},  // sm_90a, long calls
};

// ---------------------------------------------------------------- decode_chain (kernels/decode_chain.cu)
// The ten pointers first (a null weight pointer skips its phase), then the barrier words and the sizes.
constexpr P kDecodeChain[] = {
    {"attn", "in buffer<bf16>"},         // [m, q_dim]
    {"o_w", "in buffer<bf16>"},          // [hidden, q_dim]
    {"h", "inout buffer<bf16>"},         // [m, hidden]
    {"post_norm_w", "in buffer<bf16>"},  // [hidden]
    {"gate_up_w", "in buffer<bf16>"},    // [2·inter, hidden]
    {"act", "out buffer<bf16>"},         // [m, inter]
    {"down_w", "in buffer<bf16>"},       // [hidden, inter]
    {"next_norm_w", "in buffer<bf16>"},  // [hidden]
    {"next_w", "in buffer<bf16>"},       // [n_next, hidden]
    {"next_out", "out buffer<bf16>"},    // [m, n_next]
    {"sync", "inout buffer<u32>"},       // [2], zero before and after
    {"m", "i32"},
    {"hidden", "i32"},
    {"q_dim", "i32"},
    {"inter", "i32"},
    {"n_next", "i32"},
    {"eps", "f32"},
    {"stage_bytes", "i32"},
};
constexpr KernelEntry kDecodeChainFamily[] = {{"kern_decode_chain_bf16", kDecodeChain}};

// ---------------------------------------------------------------- embedding (kernels/embedding.cu)
constexpr P kEmbedding[] = {
    {"ids", "in buffer<i64>"},     // [rows]
    {"table", "in buffer<bf16>"},  // [vocab, hidden]
    {"out", "out buffer<bf16>"},   // [rows, hidden]
    {"rows", "i32"},
    {"hidden", "i32"},
    {"vocab", "i32"},
};
constexpr P kGatherLastRows[] = {
    {"x", "in buffer<bf16>"},          // [*, hidden]
    {"cu_seqlens", "in buffer<i32>"},  // [seqs+1]
    {"out", "out buffer<bf16>"},       // [seqs, hidden]
    {"seqs", "i32"},
    {"hidden", "i32"},
};
constexpr KernelEntry kEmbeddingFamily[] = {{"kern_embedding_bf16", kEmbedding},
                                            {"kern_gather_last_rows_bf16", kGatherLastRows}};

// ---------------------------------------------------------------- gemv (kernels/gemv.cu)
// x [m, ldx], W [n, k] (gate_up: [2·inter, k], gate rows then up rows), the output [m, n] (gate_up: [m, inter]).
constexpr P kGemv[] = {
    {"x", "in buffer<bf16>"},
    {"w", "in buffer<bf16>"},
    {"y", "out buffer<bf16>"},
    {"m", "i32"},
    {"n", "i32"},
    {"k", "i32"},
    {"ldx", "i32"},
    {"prefetch", "i32"},
};
constexpr P kGemvResidual[] = {
    {"x", "in buffer<bf16>"},
    {"w", "in buffer<bf16>"},
    {"h", "inout buffer<bf16>"},
    {"m", "i32"},
    {"n", "i32"},
    {"k", "i32"},
    {"ldx", "i32"},
    {"prefetch", "i32"},
};
constexpr P kGemvGateUpSilu[] = {
    {"x", "in buffer<bf16>"},
    {"w", "in buffer<bf16>"},
    {"act", "out buffer<bf16>"},
    {"m", "i32"},
    {"inter", "i32"},
    {"k", "i32"},
    {"ldx", "i32"},
    {"prefetch", "i32"},
};
constexpr P kGemvRmsNorm[] = {
    {"x", "in buffer<bf16>"},
    {"norm_w", "in buffer<bf16>"},
    {"w", "in buffer<bf16>"},
    {"y", "out buffer<bf16>"},
    {"m", "i32"},
    {"n", "i32"},
    {"k", "i32"},
    {"ldx", "i32"},
    {"eps", "f32"},
    {"prefetch", "i32"},
};
constexpr P kGemvRmsNormGateUpSilu[] = {
    {"x", "in buffer<bf16>"},
    {"norm_w", "in buffer<bf16>"},
    {"w", "in buffer<bf16>"},
    {"act", "out buffer<bf16>"},
    {"m", "i32"},
    {"inter", "i32"},
    {"k", "i32"},
    {"ldx", "i32"},
    {"eps", "f32"},
    {"prefetch", "i32"},
};
constexpr KernelEntry kGemvFamily[] = {
    {"kern_gemv_bf16", kGemv},
    {"kern_gemv_residual_bf16", kGemvResidual},
    {"kern_gemv_gate_up_silu_bf16", kGemvGateUpSilu},
    {"kern_gemv_rms_norm_bf16", kGemvRmsNorm},
    {"kern_gemv_rms_norm_gate_up_silu_bf16", kGemvRmsNormGateUpSilu},
};

// ---------------------------------------------------------------- quant (kernels/quant.cu)
// Per-tensor e4m3 quantization of a bf16 tensor (the fp8 GEMMs' operands, kern gen --fp8).
constexpr P kAbsmaxPartial[] = {
    {"x", "in buffer<bf16>"},         // [rows, cols]
    {"partials", "out buffer<f32>"},  // [grid]: the largest |x| of each CTA's slice
    {"rows", "i32"},
    {"cols", "i32"},
};
constexpr P kQuantE4m3[] = {
    {"x", "in buffer<bf16>"},          // [rows, cols]
    {"partials", "in buffer<f32>"},    // [parts], from kern_absmax_partial_bf16 over the same x
    {"scale", "out buffer<f32>"},      // [1]: absmax / 448 (1 for an all-zero x)
    {"q", "out buffer<fp8e4m3>"},      // [rows, cols]: e4m3(x / scale), saturated
    {"rows", "i32"},
    {"cols", "i32"},
    {"parts", "i32"},
};
constexpr KernelEntry kQuantFamily[] = {{"kern_absmax_partial_bf16", kAbsmaxPartial},
                                        {"kern_quant_e4m3_bf16", kQuantE4m3}};

// ---------------------------------------------------------------- peer (kernels/peer.cu)
constexpr P kPeerBarrier[] = {
    {"peers", "in buffer<u64>"},    // [ranks]: every member's flags (a peer buffer of an exported u32[ranks])
    {"rank", "i32"},                // this rank's index in the group
    {"ranks", "i32"},               // the group's size; the block has at least this many threads
    {"gen", "inout buffer<u32>"},   // [1] carry: this rank's generation, 0 at load
    {"error", "out buffer<i32>"},   // [1]: 0, or 1 + the lowest rank that did not arrive in time
    {"timeout_ns", "i64"},
};
constexpr P kAllreducePeer[] = {
    {"peers", "in buffer<u64>"},    // [ranks]: every member's parts (a peer buffer of an exported bf16 buffer)
    {"ranks", "i32"},               // the group's size
    {"out", "out buffer<bf16>"},    // [count]: the sum over ranks, in rank order, in f32, rounded once
    {"count", "i64"},               // elements, a multiple of 8
};
constexpr KernelEntry kPeerFamily[] = {{"kern_allreduce_peer_bf16", kAllreducePeer},
                                       {"kern_peer_barrier", kPeerBarrier}};

// ---------------------------------------------------------------- rmsnorm (kernels/rmsnorm.cu)
constexpr P kRmsNorm[] = {
    {"x", "in buffer<bf16>"},   // [rows, hidden]
    {"w", "in buffer<bf16>"},   // [hidden]
    {"y", "out buffer<bf16>"},  // [rows, hidden]
    {"rows", "i32"},           {"hidden", "i32"}, {"eps", "f32"},
};
constexpr P kFusedAddRmsNorm[] = {
    {"residual", "inout buffer<bf16>"},  // [rows, hidden]
    {"delta", "in buffer<bf16>"},        // [rows, hidden]
    {"w", "in buffer<bf16>"},            // [hidden]
    {"y", "out buffer<bf16>"},           // [rows, hidden]
    {"rows", "i32"},
    {"hidden", "i32"},
    {"eps", "f32"},
};
constexpr KernelEntry kRmsNormFamily[] = {{"kern_rms_norm_bf16", kRmsNorm},
                                          {"kern_fused_add_rms_norm_bf16", kFusedAddRmsNorm}};

// ---------------------------------------------------------------- rope (kernels/rope.cu)
constexpr P kRopeTable[] = {
    {"table", "out buffer<f32>"},  // [max_pos, head_dim]
    {"max_pos", "i32"},
    {"head_dim", "i32"},
    {"theta", "f32"},
};
constexpr P kQkNormRopeCache[] = {
    {"qkv", "inout buffer<bf16>"},    // [rows, (H+2·KV)·hd]
    {"q_norm", "in buffer<bf16>"},    // [hd]
    {"k_norm", "in buffer<bf16>"},    // [hd]
    {"rope", "in buffer<f32>"},       // [max_pos, hd]
    {"positions", "in buffer<i64>"},  // [rows]
    {"slots", "in buffer<i64>"},      // [rows]; a negative slot writes nothing
    {"cache", "inout state"},         // the layer's base in the paged KV state
    {"rows", "i32"},
    {"heads", "i32"},
    {"kv_heads", "i32"},
    {"head_dim", "i32"},
    {"page_size", "i32"},
    {"page_stride", "i64"},
    {"max_pos", "i32"},
    {"eps", "f32"},
};
constexpr P kRopeTableYarn[] = {
    {"table", "out buffer<f32>"},  // [max_pos, head_dim]
    {"max_pos", "i32"},           {"head_dim", "i32"},         {"theta", "f32"}, {"factor", "f32"},
    {"ramp_low", "f32"},  // the correction range (host-computed, as transformers does)
    {"ramp_high", "f32"},         {"attention_factor", "f32"},  // multiplies every cos / sin
};
constexpr KernelEntry kRopeFamily[] = {{"kern_rope_table_f32", kRopeTable},
                                       {"kern_rope_table_yarn_f32", kRopeTableYarn},
                                       {"kern_qk_norm_rope_cache_bf16", kQkNormRopeCache}};

// ---------------------------------------------------------------- sample (kernels/sample.cu)
constexpr P kSample[] = {
    {"logits", "in buffer<bf16>"},    // [rows, vocab]
    {"fparams", "in buffer<f32>"},    // [rows, 8]: temperature, top_p, min_p, repetition, presence, frequency, 0, 0
    {"iparams", "in buffer<i64>"},    // [rows, 8]: top_k, seed, counter, history_len, n_logprobs, forced + 1, n_bias, 0
    {"history", "in buffer<i32>"},    // [rows, history_stride]
    {"tokens", "out buffer<i64>"},    // [rows]
    {"logprobs", "out buffer<f32>"},  // [rows, 21]: chosen, then the top n_logprobs
    {"top_ids", "out buffer<i32>"},   // [rows, 20]
    {"route", "in buffer<i32>"},      // [rows]: 1 where the race kernel took the row
    {"rows", "i32"},
    {"vocab", "i32"},
    {"history_stride", "i32"},
};
constexpr P kSampleRace[] = {
    {"logits", "in buffer<bf16>"},
    {"fparams", "in buffer<f32>"},
    {"iparams", "in buffer<i64>"},
    {"history", "in buffer<i32>"},
    {"tokens", "out buffer<i64>"},
    {"logprobs", "out buffer<f32>"},     // [rows, 21], as the cluster kernel's (rows it takes)
    {"top_ids", "out buffer<i32>"},      // [rows, 20], as the cluster kernel's (rows it takes)
    {"parts", "out buffer<f32>"},        // [rows, race_chunks(vocab), kRaceWords]: written, then read by the row's last CTA
    {"arrivals", "inout buffer<i32>"},   // [rows]: zero at load, left zero by every launch
    {"route", "out buffer<i32>"},        // [rows]: 1 done; 2 (race) the rank kernel's; 0 the cluster kernel's
    {"rows", "i32"},
    {"vocab", "i32"},
    {"history_stride", "i32"},
};
// The rank kernel takes the race kernel's parameters (it reads the partials and route the race left).
constexpr KernelEntry kSampleFamily[] = {
    {"kern_sample_race_bf16", kSampleRace}, {"kern_sample_rank_bf16", kSampleRace}, {"kern_sample_bf16", kSample}};

constexpr KernelFamily kFamilies[] = {
    {"activation", kActivation},
    {"argmax", kArgmax},
    {"attention", kAttention},
    {"attention_prefill", kAttentionPrefill},
    {"decode_chain", kDecodeChainFamily},
    {"embedding", kEmbeddingFamily},
    {"gemv", kGemvFamily},
    {"peer", kPeerFamily},
    {"quant", kQuantFamily},
    {"rmsnorm", kRmsNormFamily},
    {"rope", kRopeFamily},
    {"sample", kSampleFamily},
};

}  // namespace

std::span<const KernelFamily> kernel_catalogue() { return kFamilies; }

CataloguedKernel catalogued_kernel(std::string_view entry) {
  for (const KernelFamily& f : kFamilies)
    for (const KernelEntry& e : f.entries)
      if (e.name == entry) return {&f, &e};
  fail(ErrorKind::Api, "no kernel `{}` in the kernel catalogue (src/models/kernel_catalogue.cpp)", entry);
}

std::vector<std::string> kernel_param_types(const KernelEntry& entry) {
  std::vector<std::string> out;
  for (const KernelParam& p : entry.params) out.emplace_back(p.type);
  return out;
}

}  // namespace kern::models
