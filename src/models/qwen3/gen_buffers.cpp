// The Qwen3 manifest's buffers: caller inputs, outputs, activations, the RoPE table, the decode chain's
// barrier words, and the weights bound to the Hugging Face tensor names (--fp8: the layers' linear
// weights as bf16 sources and the e4m3 carries and scales the derive program makes of them).
#include "models/qwen3/gen.hpp"

namespace kern::models::qwen3_gen {
namespace {

// Whole tensors laid end to end.
OJ whole(std::vector<std::string> tensors) {
  OJ bind = OJ::array();
  for (auto& t : tensors) bind.push_back({{"tensor", std::move(t)}});
  return bind;
}

OJ weight(OJ shape, OJ bind) {
  OJ b;
  b["dtype"] = "bf16";
  b["shape"] = std::move(shape);
  b["kind"] = "weight";
  b["bind"] = std::move(bind);
  return b;
}

// A weight bound to one whole tensor.
OJ weight_of(OJ shape, std::string tensor) { return weight(std::move(shape), whole({std::move(tensor)})); }

// With tensor parallelism: rank r's `width` rows (or columns) [r · width, (r + 1) · width) of `tensor`;
// without, the whole tensor.
OJ rank_slice(const Geo& g, std::string tensor, const char* axis, std::uint64_t width) {
  if (!tensor_parallel(g)) return OJ{{"tensor", std::move(tensor)}};
  OJ ranges = OJ::array();
  for (std::uint64_t r = 0; r < g.o.tp; ++r) ranges.push_back(OJ::array({r * width, (r + 1) * width}));
  return OJ{{"tensor", std::move(tensor)}, {axis, {{"group", kTpGroup}, {"ranges", std::move(ranges)}}}};
}

OJ plain(const char* dtype, OJ shape, const char* kind) {
  OJ b;
  b["dtype"] = dtype;
  b["shape"] = std::move(shape);
  b["kind"] = kind;
  return b;
}

// A layer's linear weight `w` ([rows, cols], bound to `tensors`): a bf16 weight, or with --fp8 the bf16
// source, the fp8e4m3 carry and its scale the derive program writes (f32, one value in 16 bytes:
// cuBLASLt's fp8 GEMMs take 16-byte-aligned operands and kern holds the scales to the same rule; every
// buffer is an allocation of its own).
void linear(const Geo& g, OJ& b, std::uint64_t l, const LinearWeight& w) {
  OJ bf16 = weight(OJ::array({w.rows, w.cols}), w.bind);
  if (!g.o.fp8) {
    b[layer_name(l, w.name)] = std::move(bf16);
    return;
  }
  bf16["kind"] = "source";
  b[fp8_source(l, w.name)] = std::move(bf16);
  b[layer_name(l, w.name)] = plain("fp8e4m3", OJ::array({w.rows, w.cols}), "carry");
  b[fp8_scale(l, w.name)] = plain("f32", OJ::array({4}), "carry");
}

// The weights, bound to the HF names (q/k/v and gate/up concatenated; a tied lm_head binds the embedding).
void weight_buffers(const Geo& g, OJ& b) {
  const Qwen3Shape& c = g.c;
  b["embed"] = weight_of(OJ::array({c.vocab, c.hidden}), "model.embed_tokens.weight");
  b["lm_head"] = weight_of(OJ::array({c.vocab, c.hidden}), c.tied ? "model.embed_tokens.weight" : "lm_head.weight");
  b["final_norm"] = weight_of(OJ::array({c.hidden}), "model.norm.weight");
  for (std::uint64_t l = 0; l < c.layers; ++l) {
    const std::vector<LinearWeight> lw = linear_weights(g, l);  // qkv, o_proj, gate_up, down
    b[layer_name(l, "input_norm")] = weight_of(OJ::array({c.hidden}), hf_layer(l, "input_layernorm"));
    linear(g, b, l, lw[0]);
    b[layer_name(l, "q_norm")] = weight_of(OJ::array({c.head_dim}), hf_layer(l, "self_attn.q_norm"));
    b[layer_name(l, "k_norm")] = weight_of(OJ::array({c.head_dim}), hf_layer(l, "self_attn.k_norm"));
    linear(g, b, l, lw[1]);
    b[layer_name(l, "post_norm")] = weight_of(OJ::array({c.hidden}), hf_layer(l, "post_attention_layernorm"));
    linear(g, b, l, lw[2]);
    linear(g, b, l, lw[3]);
  }
}

}  // namespace

std::vector<LinearWeight> linear_weights(const Geo& g, std::uint64_t l) {
  const Qwen3Shape& c = g.c;  // one rank's heads and intermediate columns
  const std::uint64_t q = c.heads * c.head_dim, kv = c.kv_heads * c.head_dim;
  auto rows = [&](const char* w, std::uint64_t width) { return rank_slice(g, hf_layer(l, w), "rows", width); };
  auto cols = [&](const char* w, std::uint64_t width) { return rank_slice(g, hf_layer(l, w), "cols", width); };
  return {{"qkv", g.qkv_width, c.hidden,
           OJ::array({rows("self_attn.q_proj", q), rows("self_attn.k_proj", kv), rows("self_attn.v_proj", kv)})},
          {"o_proj", c.hidden, g.q_width, OJ::array({cols("self_attn.o_proj", q)})},
          {"gate_up", 2 * c.intermediate, c.hidden,
           OJ::array({rows("mlp.gate_proj", c.intermediate), rows("mlp.up_proj", c.intermediate)})},
          {"down", c.hidden, c.intermediate, OJ::array({cols("mlp.down_proj", c.intermediate)})}};
}
std::string fp8_scale(std::uint64_t l, const char* w) { return layer_name(l, w) + "_scale"; }
std::string fp8_source(std::uint64_t l, const char* w) { return layer_name(l, w) + "_bf16"; }

OJ buffers(const Geo& g) {
  const Qwen3Shape& c = g.c;
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
  b["cu_seqlens"] = plain("i32", OJ::array({g.o.max_seqs + (g.o.mixed ? kMixedChunkGroups : 0) + 1}), "input");
  b["cu_seqlens"]["fill"] = "cu_seqlens";
  b["cu_seqlens"]["domain"] = {{"min", 0}, {"max", "tokens"}, {"monotone", true}};
  // Outputs.
  b["next_token"] = plain("i64", OJ::array({"seqs"}), "output");
  b["next_token"]["fill"] = "tokens";
  b["next_token"]["domain"] = {{"min", 0}, {"max", c.vocab - 1}};
  b["logits"] = plain("bf16", OJ::array({"seqs", c.vocab}), g.o.logits_output ? "output" : "workspace");
  if (g.o.sampling) {  // the sampling fills (docs/manifest.md "Sampling")
    b["sampling"] = plain("f32", OJ::array({"seqs", 8}), "input");
    b["sampling"]["fill"] = "sampling";
    b["sampling_keys"] = plain("i64", OJ::array({"seqs", 8}), "input");
    b["sampling_keys"]["fill"] = "sampling_keys";
    b["history"] = plain("i32", OJ::array({"seqs", sample_history_stride(g)}), "input");
    b["history"]["fill"] = "history";
    b["logprobs"] = plain("f32", OJ::array({"seqs", 21}), "output");
    b["logprobs"]["fill"] = "logprobs";
    b["logprob_ids"] = plain("i32", OJ::array({"seqs", 20}), "output");
    b["logprob_ids"]["fill"] = "logprob_ids";
  }
  // Activations.
  b["hidden"] = plain("bf16", OJ::array({"tokens", c.hidden}), "workspace");
  b["normed"] = plain("bf16", OJ::array({"tokens", c.hidden}), "workspace");
  b["qkv"] = plain("bf16", OJ::array({"tokens", g.qkv_width}), "workspace");
  b["attn"] = plain("bf16", OJ::array({"tokens", g.q_width}), "workspace");
  if (!g.o.mixed) b["delta"] = plain("bf16", OJ::array({"tokens", c.hidden}), "workspace");
  b["gate_up"] = plain("bf16", OJ::array({"tokens", 2 * c.intermediate}), "workspace");
  b["act"] = plain("bf16", OJ::array({"tokens", c.intermediate}), "workspace");
  if (g.o.prefill_logits) b["last"] = plain("bf16", OJ::array({"seqs", c.hidden}), "workspace");
  // Derived at load.
  b["rope"] = plain("f32", OJ::array({g.max_pos, c.head_dim}), "carry");
  // The decode chain's grid-barrier words: zero at load, left zero by every launch.
  if (g.chain_rows > 0) b["chain_sync"] = plain("u32", OJ::array({2}), "carry");
  // The sampling race kernel's arrival counts per row: the same rule.
  if (g.o.sampling) b["sample_arrivals"] = plain("i32", OJ::array({"seqs"}), "carry");
  if (peer_allreduce(g)) {  // the one-shot all-reduce's exported parts and barrier flags, and their peers
    auto exported = [&](const char* name, const char* dtype, OJ shape) {
      b[name] = plain(dtype, std::move(shape), "workspace");
      b[name]["export"] = true;
    };
    auto peer_of = [&](const char* name, const char* of) {
      b[name] = {{"dtype", "u64"}, {"shape", OJ::array({g.o.tp})}, {"kind", "peer"}, {"of", of}, {"group", kTpGroup}};
    };
    exported("tp_parts", "bf16", OJ::array({"tokens", c.hidden}));
    peer_of("tp_part_peers", "tp_parts");
    exported("tp_flags", "u32", OJ::array({g.o.tp}));
    peer_of("tp_flag_peers", "tp_flags");
    b["tp_barrier_gen"] = plain("u32", OJ::array({1}), "carry");
    // One word per barrier (two per all-reduce): the protocol's `error` fill, so every driver fails the
    // call that had one time out.
    b["tp_barrier_errors"] = plain("i32", OJ::array({4 * c.layers}), "output");
    b["tp_barrier_errors"]["fill"] = "error";
  }
  weight_buffers(g, b);
  return b;
}

}  // namespace kern::models::qwen3_gen
