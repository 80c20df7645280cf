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
//
// With --fp8 the decode program is laid out as prefill is (GEMMs into `delta`, add_rms_norm), on the
// decode GEMM ops (fp8, cuBLASLt at every step size) and attn_decode; the lm_head stays bf16. The
// `quantize` derive program makes the layers' e4m3 weights and scales from their bf16 sources at load.
// With --tp both programs are laid out so too, each o_proj and down_proj followed by an all-reduce of
// `delta` over the tp group (the ranks' partial sums) before the add_rms_norm that adds it.
#include "models/qwen3/gen.hpp"

namespace kern::models::qwen3_gen {
namespace {

OJ kv(const Geo& g, std::uint64_t l) { return state("kv", l * g.layer_bytes); }

// RoPE of layer l's q and k, written with v into its KV block.
OJ rope_cache_call(const Geo& g, std::uint64_t l) {
  return call(layer_name(l, "qk_norm_rope_cache"), "qk_norm_rope_cache",
              OJ::array({buf("qkv"), buf(layer_name(l, "q_norm")), buf(layer_name(l, "k_norm")), buf("rope"),
                         buf("positions"), buf("slot_mapping"), kv(g, l), var("tokens")}));
}

// A GEMM call of layer l's weight `w` over `m` rows (--fp8: the weight's scale after it).
OJ gemm_call(const Geo& g, std::uint64_t l, const char* label, const char* op_name, const char* x, const char* w,
             const char* y, const char* m) {
  OJ args = OJ::array({buf(x), buf(layer_name(l, w))});
  if (g.o.fp8) args.push_back(buf(fp8_scale(l, w)));
  args.push_back(buf(y));
  args.push_back(var(m));
  return call(layer_name(l, label), op_name, std::move(args));
}

// Tensor parallelism: where o_proj and down_proj write (a rank's partial sum): `delta`, all-reduced in
// place by NCCL, or with the peer all-reduce the exported `tp_parts`, summed over the ranks into `delta`
// (by the peer kernel up to its rows, by NCCL out of place above).
const char* partial_out(const Geo& g) { return peer_allreduce(g) ? "tp_parts" : "delta"; }

// The all-reduce of layer l's partial sum after `what` (o_proj: slot 0, down_proj: slot 1) into `delta`
// (rows of the `tokens` var).
void add_allreduce(const Geo& g, std::uint64_t l, const char* what, std::uint64_t slot, OJ& calls) {
  if (!tensor_parallel(g)) return;
  const OJ count{{"expr", {{"mul", OJ::array({"tokens", g.c.hidden})}}}};
  const std::string label = std::string(what) + "_allreduce";
  if (!peer_allreduce(g)) {
    calls.push_back(call(layer_name(l, label.c_str()), "allreduce", OJ::array({buf("delta"), count})));
    return;
  }
  auto barrier = [&](const char* which, std::uint64_t word) {
    calls.push_back(call(layer_name(l, (std::string(what) + "_barrier_" + which).c_str()), "peer_barrier",
                         OJ::array({buf("tp_flag_peers"), buf("tp_barrier_gen"),
                                    buf("tp_barrier_errors", 4 * (4 * l + 2 * slot + word))})));
  };
  barrier("in", 0);  // every rank's parts written
  calls.push_back(call(layer_name(l, label.c_str()), "allreduce_peer", OJ::array({buf("tp_part_peers"), buf("delta"), count})));
  barrier("out", 1);  // every rank done reading them
  if (nccl_allreduce(g))  // calls above the peer rows (the calls before are no-ops for them, and this one below)
    calls.push_back(call(layer_name(l, (label + "_nccl").c_str()), "allreduce_nccl",
                         OJ::array({buf("tp_parts"), buf("delta"), count})));
}

// A layer with its GEMMs into `delta` and the residual added by the next add_rms_norm: the prefill
// program's, and with --fp8 also the decode program's (`prefill` false: attn_decode and the decode GEMM
// ops over `seqs` rows; the fp8 GEMM has no accumulating form).
void prefill_layer(const Geo& g, std::uint64_t l, OJ& calls, bool prefill = true) {
  const char* m = prefill ? "tokens" : "seqs";
  if (l == 0) {
    calls.push_back(call(layer_name(l, "input_norm"), "rms_norm",
                         OJ::array({buf("hidden"), buf(layer_name(l, "input_norm")), buf("normed"), var("tokens")})));
  } else {
    calls.push_back(
        call(layer_name(l, "input_norm"), "add_rms_norm",
             OJ::array({buf("hidden"), buf("delta"), buf(layer_name(l, "input_norm")), buf("normed"), var("tokens")})));
  }
  calls.push_back(gemm_call(g, l, "qkv_proj", prefill ? "gemm_qkv" : "decode_qkv", "normed", "qkv", "qkv", m));
  calls.push_back(rope_cache_call(g, l));
  if (prefill) {
    calls.push_back(call(layer_name(l, "attn"), "attn_prefill",
                         OJ::array({buf("qkv"), kv(g, l), buf("block_table"), buf("seq_lens"), buf("cu_seqlens"),
                                    buf("positions"), buf("attn"), var("tokens"), var("seqs"), OJ{{"i32", 0}}})));
  } else {
    calls.push_back(
        call(layer_name(l, "attn"), "attn_decode",
             OJ::array({buf("qkv"), kv(g, l), buf("block_table"), buf("seq_lens"), buf("attn"), var("seqs")})));
  }
  calls.push_back(gemm_call(g, l, "o_proj", prefill ? "gemm_o" : "decode_o", "attn", "o_proj", partial_out(g), m));
  add_allreduce(g, l, "o", 0, calls);
  calls.push_back(
      call(layer_name(l, "post_norm"), "add_rms_norm",
           OJ::array({buf("hidden"), buf("delta"), buf(layer_name(l, "post_norm")), buf("normed"), var("tokens")})));
  calls.push_back(
      gemm_call(g, l, "gate_up_proj", prefill ? "gemm_gate_up" : "decode_gate_up", "normed", "gate_up", "gate_up", m));
  calls.push_back(call(layer_name(l, "silu_mul"), "silu_mul", OJ::array({buf("gate_up"), buf("act"), var("tokens")})));
  calls.push_back(gemm_call(g, l, "down_proj", prefill ? "gemm_down" : "decode_down", "act", "down", partial_out(g), m));
  add_allreduce(g, l, "down", 1, calls);
}

// The plain decode norm op: rms_norm, or with the chain decode_rms_norm (launched only above its rows).
const char* decode_norm(const Geo& g) { return g.chain_rows > 0 ? "decode_rms_norm" : "rms_norm"; }

// The per-op decode path's input norm and qkv_proj of layer l, over `m` rows (seqs in the decode
// program, tokens in the serving prefill and mixed programs).
void decode_qkv(const Geo& g, std::uint64_t l, OJ& calls, const char* m = "seqs") {
  if (g.o.gemv_fused_norm) {
    calls.push_back(call(
        layer_name(l, "norm_qkv_proj"), "decode_norm_qkv",
        OJ::array({buf("hidden"), buf(layer_name(l, "input_norm")), buf(layer_name(l, "qkv")), buf("qkv"), var(m)})));
    return;
  }
  calls.push_back(call(layer_name(l, "input_norm"), decode_norm(g),
                       OJ::array({buf("hidden"), buf(layer_name(l, "input_norm")), buf("normed"), var("tokens")})));
  calls.push_back(call(layer_name(l, "qkv_proj"), "decode_qkv",
                       OJ::array({buf("normed"), buf(layer_name(l, "qkv")), buf("qkv"), var(m)})));
}

// Layer l's decode chain call: o_proj through the next layer's qkv_proj (the last layer's: the lm_head).
OJ decode_chain_call(const Geo& g, std::uint64_t l) {
  const bool last = l + 1 == g.c.layers;
  return call(layer_name(l, "chain"), last ? "decode_chain_last" : "decode_chain",
              OJ::array({buf("attn"), buf(layer_name(l, "o_proj")), buf("hidden"), buf(layer_name(l, "post_norm")),
                         buf(layer_name(l, "gate_up")), buf("act"), buf(layer_name(l, "down")),
                         buf(last ? std::string("final_norm") : layer_name(l + 1, "input_norm")),
                         buf(last ? std::string("lm_head") : layer_name(l + 1, "qkv")), buf(last ? "logits" : "qkv"),
                         buf("chain_sync"), var("seqs")}));
}

// The per-op decode path from attention's output: o_proj, the MLP, down_proj (residuals into hidden),
// over `m` rows (as decode_qkv).
void decode_o_mlp(const Geo& g, std::uint64_t l, OJ& calls, const char* m = "seqs") {
  const bool fused = g.o.gemv_fused_norm;
  calls.push_back(call(layer_name(l, "o_proj"), "decode_o_residual",
                       OJ::array({buf("attn"), buf(layer_name(l, "o_proj")), buf("hidden"), var(m)})));
  OJ gate_up_args;
  if (fused) {
    gate_up_args =
        OJ::array({buf("hidden"), buf(layer_name(l, "post_norm")), buf(layer_name(l, "gate_up")), buf("act")});
  } else {
    calls.push_back(call(layer_name(l, "post_norm"), decode_norm(g),
                         OJ::array({buf("hidden"), buf(layer_name(l, "post_norm")), buf("normed"), var("tokens")})));
    gate_up_args = OJ::array({buf("normed"), buf(layer_name(l, "gate_up")), buf("act")});
  }
  if (decode_uses_blas(g)) gate_up_args.push_back(buf("gate_up"));
  gate_up_args.push_back(var(m));
  calls.push_back(call(layer_name(l, fused ? "norm_gate_up_silu" : "gate_up_silu"),
                       fused ? "decode_norm_gate_up_silu" : "decode_gate_up_silu", std::move(gate_up_args)));
  calls.push_back(call(layer_name(l, "down_proj"), "decode_down_residual",
                       OJ::array({buf("act"), buf(layer_name(l, "down")), buf("hidden"), var(m)})));
}

void decode_layer(const Geo& g, std::uint64_t l, OJ& calls) {
  if (decode_as_prefill(g)) {
    prefill_layer(g, l, calls, false);
    return;
  }
  const bool per_op = decode_needs_ops(g);
  if (per_op) decode_qkv(g, l, calls);
  calls.push_back(rope_cache_call(g, l));
  calls.push_back(
      call(layer_name(l, "attn"), "attn_decode",
           OJ::array({buf("qkv"), kv(g, l), buf("block_table"), buf("seq_lens"), buf("attn"), var("seqs")})));
  if (g.chain_rows > 0) calls.push_back(decode_chain_call(g, l));
  if (per_op) decode_o_mlp(g, l, calls);
}

// After the last layer: the final norm and the lm_head (prefill: of each sequence's last row; the
// decode path over the first `m` rows).
void head_calls(const Geo& g, bool prefill, OJ& calls, const char* m = "seqs") {
  if (prefill) {
    calls.push_back(call("final_norm", "add_rms_norm",
                         OJ::array({buf("hidden"), buf("delta"), buf("final_norm"), buf("normed"), var("tokens")})));
    calls.push_back(
        call("last_rows", "gather_last", OJ::array({buf("normed"), buf("cu_seqlens"), buf("last"), var("seqs")})));
    calls.push_back(
        call("lm_head", "gemm_lm_head", OJ::array({buf("last"), buf("lm_head"), buf("logits"), var("seqs")})));
  } else if (!decode_needs_ops(g)) {
    // the last layer's chain ends with the lm_head
  } else if (decode_as_prefill(g)) {  // the last down_proj is in delta
    calls.push_back(call("final_norm", "add_rms_norm",
                         OJ::array({buf("hidden"), buf("delta"), buf("final_norm"), buf("normed"), var("tokens")})));
    calls.push_back(
        call("lm_head", "decode_lm_head", OJ::array({buf("normed"), buf("lm_head"), buf("logits"), var(m)})));
  } else if (g.o.gemv_fused_norm) {
    calls.push_back(call("norm_lm_head", "decode_norm_lm_head",
                         OJ::array({buf("hidden"), buf("final_norm"), buf("lm_head"), buf("logits"), var(m)})));
  } else {
    calls.push_back(call("final_norm", decode_norm(g),
                         OJ::array({buf("hidden"), buf("final_norm"), buf("normed"), var("tokens")})));
    calls.push_back(
        call("lm_head", "decode_lm_head", OJ::array({buf("normed"), buf("lm_head"), buf("logits"), var(m)})));
  }
}

// The token of each of the first `m` rows of the logits: the sampling op, or argmax without it.
OJ token_call(const Geo& g, const char* m) {
  if (!g.o.sampling) return call("argmax", "argmax", OJ::array({buf("logits"), buf("next_token"), var(m)}));
  return call("sample", "sample",
              OJ::array({buf("logits"), buf("sampling"), buf("sampling_keys"), buf("history"), buf("next_token"),
                         buf("logprobs"), buf("logprob_ids"), var(m), buf("sample_arrivals")}));
}

}  // namespace

OJ call(const std::string& label, const char* op_name, OJ args) {
  OJ c;
  if (!label.empty()) c["label"] = label;
  c["op"] = op_name;
  c["args"] = std::move(args);
  return c;
}

OJ quantize_calls(const Geo& g) {
  OJ calls = OJ::array();
  for (std::uint64_t l = 0; l < g.c.layers; ++l)
    for (const LinearWeight& w : linear_weights(g, l))
      calls.push_back(call(layer_name(l, w.name), "quantize_e4m3",
                           OJ::array({buf(fp8_source(l, w.name)), buf(fp8_scale(l, w.name)), buf(layer_name(l, w.name)),
                                      i32(w.rows), i32(w.cols)})));
  return calls;
}

OJ serving_calls(const Geo& g, bool mixed) {
  OJ calls = OJ::array();
  calls.push_back(
      call("embed", "embedding", OJ::array({buf("token_ids"), buf("embed"), buf("hidden"), var("tokens")})));
  for (std::uint64_t l = 0; l < g.c.layers; ++l) {
    decode_qkv(g, l, calls, "tokens");
    calls.push_back(rope_cache_call(g, l));
    // The chunks' rows (after the decode rows in a mixed step), then the decode rows.
    calls.push_back(
        call(layer_name(l, mixed ? "attn_chunks" : "attn"), "attn_prefill",
             OJ::array({buf("qkv"), kv(g, l), buf("block_table"), buf("seq_lens"), buf("cu_seqlens"), buf("positions"),
                        buf("attn"), var("tokens"), var("seqs"), mixed ? var("dseqs") : OJ{{"i32", 0}}})));
    if (mixed)
      calls.push_back(
          call(layer_name(l, "attn"), "attn_decode",
               OJ::array({buf("qkv"), kv(g, l), buf("block_table"), buf("seq_lens"), buf("attn"), var("dseqs")})));
    decode_o_mlp(g, l, calls, "tokens");
  }
  if (!mixed) return calls;  // a chunk's K/V only: kern serve's first decode row samples
  head_calls(g, false, calls, "dseqs");
  calls.push_back(token_call(g, "dseqs"));
  return calls;
}

OJ forward_calls(const Geo& g, bool prefill) {
  OJ calls = OJ::array();
  calls.push_back(
      call("embed", "embedding", OJ::array({buf("token_ids"), buf("embed"), buf("hidden"), var("tokens")})));
  if (!prefill && g.chain_rows > 0)
    calls.push_back(call("layers.0.chain_head", "decode_chain_head",
                         OJ::array({buf("hidden"), buf(layer_name(0, "input_norm")), buf(layer_name(0, "qkv")),
                                    buf("qkv"), buf("chain_sync"), var("seqs")})));
  for (std::uint64_t l = 0; l < g.c.layers; ++l) {
    if (prefill) {
      prefill_layer(g, l, calls);
    } else {
      decode_layer(g, l, calls);
    }
  }
  if (prefill && !g.o.prefill_logits) return calls;  // a chunk's K/V only (kern serve)
  head_calls(g, prefill, calls);
  calls.push_back(token_call(g, "seqs"));
  return calls;
}

}  // namespace kern::models::qwen3_gen
