// The Qwen3 manifest's op table, and its small ops: embedding, RMSNorms, RoPE, SiLU·mul, argmax, sampling.
#include <algorithm>
#include <cmath>
#include <utility>

#include "models/qwen3/gen.hpp"
#include "sample_layout.cuh"

namespace kern::models::qwen3_gen {
namespace {

constexpr std::uint64_t kNormThreads = 256;
constexpr std::uint64_t kArgmaxBlocks = 64;  // stage-1 blocks per argmax row

OJ embedding_op(const Geo& g) {
  return op(
      {"in buffer<i64>", "in buffer<bf16>", "out buffer<bf16>", "i32"},
      OJ::array({launch("kern_embedding_bf16", OJ::array({p(0), p(1), p(2), p(3), i32(g.c.hidden), i32(g.c.vocab)}),
                        OJ::array({"tokens", 1, 1}), kNormThreads)}));
}

OJ rms_norm_op(const Geo& g) {
  return op({"in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32"},
            OJ::array({with_pdl(rms_norm_launch(g, p(2), 3, "tokens"), g)}));
}

OJ add_rms_norm_op(const Geo& g) {
  return op({"inout buffer<bf16>", "in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32"},
            OJ::array({launch("kern_fused_add_rms_norm_bf16",
                              OJ::array({p(0), p(1), p(2), p(3), p(4), i32(g.c.hidden), f32(g.c.rms_norm_eps)}),
                              OJ::array({"tokens", 1, 1}), kNormThreads)}));
}

OJ gather_last_op(const Geo& g) {
  return op({"in buffer<bf16>", "in buffer<i32>", "out buffer<bf16>", "i32"},
            OJ::array({launch("kern_gather_last_rows_bf16", OJ::array({p(0), p(1), p(2), p(3), i32(g.c.hidden)}),
                              OJ::array({"seqs", 1, 1}), kNormThreads)}));
}

// YaRN's correction range as transformers computes it (Python floats: double): the dimensions
// whose wavelength turns beta_fast / beta_slow times over the original window, floored / ceiled
// when `truncate`, clamped to [0, head_dim - 1]; equal ends are pulled 0.001 apart.
std::pair<double, double> yarn_ramp(const Qwen3Shape& c) {
  const Qwen3RopeScaling& y = c.rope_scaling;
  const double dim = static_cast<double>(c.head_dim);
  auto correction_dim = [&](double rotations) {
    return dim * std::log(static_cast<double>(y.original_max_positions) / (rotations * 2 * M_PI)) /
           (2 * std::log(c.rope_theta));
  };
  double low = correction_dim(y.beta_fast), high = correction_dim(y.beta_slow);
  if (y.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  if (low == high) high += 0.001;
  return {low, high};
}

OJ rope_table_op(const Geo& g) {
  const Qwen3Shape& c = g.c;
  const OJ grid = OJ::array({(g.max_pos * (c.head_dim / 2) + 255) / 256, 1, 1});
  if (c.rope_scaling.type == Qwen3RopeScaling::Type::Yarn) {
    const auto [low, high] = yarn_ramp(c);
    return op({"out buffer<f32>"}, OJ::array({launch("kern_rope_table_yarn_f32",
                                                     OJ::array({p(0), i32(g.max_pos), i32(c.head_dim),
                                                                f32(c.rope_theta), f32(c.rope_scaling.factor), f32(low),
                                                                f32(high), f32(c.rope_scaling.attention_factor)}),
                                                     grid, 256)}));
  }
  return op({"out buffer<f32>"},
            OJ::array({launch("kern_rope_table_f32",
                              OJ::array({p(0), i32(g.max_pos), i32(c.head_dim), f32(c.rope_theta)}), grid, 256)}));
}

// 4 heads per block (kernels/rope.cu); the result does not depend on the grid. Steps of up to
// kRopeRowBlocksMax rows (every decode step) take one row per block, so a 64-sequence step launches
// 64 x 12 blocks instead of 4 x 12 (each block walked 16 rows one after another: 15 us a layer at
// 64 rows on the H200, docs/perf.md, fifteenth session); larger steps 16 rows per block.
constexpr std::uint64_t kRopeRowBlocksMax = 256;

OJ qk_norm_rope_cache_op(const Geo& g) {
  const Qwen3Shape& c = g.c;
  const OJ args = OJ::array({p(0), p(1), p(2), p(3), p(4), p(5), p(6), p(7), i32(c.heads), i32(c.kv_heads),
                             i32(c.head_dim), i32(g.o.page_size), i64(g.page_stride_elems), i32(g.max_pos),
                             f32(c.rms_norm_eps)});
  const std::uint64_t head_blocks = (c.heads + 2 * c.kv_heads + 3) / 4;
  OJ per_row = launch("kern_qk_norm_rope_cache_bf16", args, OJ::array({"tokens", head_blocks, 1}), 128);
  per_row["when"] = OJ{{"var", "tokens"}, {"max", kRopeRowBlocksMax}};
  OJ per_16 = launch("kern_qk_norm_rope_cache_bf16", args, OJ::array({ceil_div("tokens", 16), head_blocks, 1}), 128);
  per_16["when"] = OJ{{"var", "tokens"}, {"min", kRopeRowBlocksMax + 1}};
  return op({"inout buffer<bf16>", "in buffer<bf16>", "in buffer<bf16>", "in buffer<f32>", "in buffer<i64>",
             "in buffer<i64>", "inout state", "i32"},
            OJ::array({with_pdl(std::move(per_row), g), with_pdl(std::move(per_16), g)}));
}

OJ silu_mul_op(const Geo& g) {
  const std::uint64_t inter = g.c.intermediate;
  return op({"in buffer<bf16>", "out buffer<bf16>", "i32"},
            OJ::array({launch("kern_silu_mul_bf16", OJ::array({p(0), p(1), p(2), i32(inter)}),
                              OJ::array({"tokens", (inter + 2047) / 2048, 1}), 256)}));
}

// Two stages: kArgmaxBlocks partial maxima per row into scratch, then one block per row.
OJ argmax_op(const Geo& g) {
  OJ part =
      launch("kern_argmax_partial_bf16",
             OJ::array({p(0), scratch("part_max"), scratch("part_idx"), p(2), i32(g.c.vocab), i32(kArgmaxBlocks)}),
             OJ::array({kArgmaxBlocks, "seqs", 1}), 256);
  OJ fin =
      launch("kern_argmax_final", OJ::array({scratch("part_max"), scratch("part_idx"), p(1), p(2), i32(kArgmaxBlocks)}),
             OJ::array({"seqs", 1, 1}), 64);
  OJ sc;
  sc["part_max"] = {{"dtype", "f32"}, {"shape", OJ::array({"seqs", kArgmaxBlocks})}};
  sc["part_idx"] = {{"dtype", "i32"}, {"shape", OJ::array({"seqs", kArgmaxBlocks})}};
  return op({"in buffer<bf16>", "out buffer<i64>", "i32"},
            OJ::array({with_pdl(std::move(part), g), with_pdl(std::move(fin), g)}), std::move(sc));
}

// Sampling + log-probs (kernels/sample.cu): the one-pass race kernel over race_chunks(vocab) CTAs
// per row, the rank kernel (one CTA per row, for the ranking rows the race left with route 2),
// then one 8-CTA cluster per row, returning at once where the race or the rank kernel took the row (route 1),
// each CTA's slice in dynamic shared memory (kernels/sample_layout.cuh; the kernel traps on less).
std::uint64_t sample_shared_bytes(std::uint64_t vocab) {
  return static_cast<std::uint64_t>(kern_sample::shared_bytes(static_cast<std::int64_t>(vocab)));
}

OJ sample_op(const Geo& g) {
  const std::uint64_t vocab = g.c.vocab;
  const auto chunks = static_cast<std::uint64_t>(kern_sample::race_chunks(static_cast<std::int64_t>(vocab)));
  const OJ tail = OJ::array({i32(vocab), i32(sample_history_stride(g))});
  const OJ race_args = OJ::array({p(0), p(1), p(2), p(3), p(4), p(5), p(6), scratch("race_parts"), p(8),
                                  scratch("route"), p(7), tail[0], tail[1]});
  OJ race = launch("kern_sample_race_bf16", race_args, OJ::array({chunks, "seqs", 1}), kern_sample::kRaceThreads);
  OJ rank = launch("kern_sample_rank_bf16", race_args, OJ::array({1, "seqs", 1}), kern_sample::kRaceThreads);
  OJ cluster = launch("kern_sample_bf16",
                      OJ::array({p(0), p(1), p(2), p(3), p(4), p(5), p(6), scratch("route"), p(7), tail[0], tail[1]}),
                      OJ::array({kern_sample::kCluster, "seqs", 1}), kern_sample::kThreads);
  OJ sc;
  sc["race_parts"] = {{"dtype", "f32"}, {"shape", OJ::array({"seqs", chunks, kern_sample::kRaceWords})}};
  sc["route"] = {{"dtype", "i32"}, {"shape", OJ::array({"seqs"})}};
  return op({"in buffer<bf16>", "in buffer<f32>", "in buffer<i64>", "in buffer<i32>", "out buffer<i64>",
             "out buffer<f32>", "out buffer<i32>", "i32", "inout buffer<i32>"},
            OJ::array({with_pdl(std::move(race), g), with_pdl(std::move(rank), g),
                       with_pdl(with_shared(std::move(cluster), sample_shared_bytes(vocab)), g)}),
            std::move(sc));
}

// Tensor parallelism: the in-place sum of a [rows, hidden] bf16 buffer over the tp group (NCCL; the
// runtime's communicator for the group). Params: x, count (elements).
OJ allreduce_op() {
  OJ l;
  l["entry"] = "extern:nccl_allreduce_bf16";
  l["params"] = {"in buffer<bf16>", "out buffer<bf16>", "i32", "i32"};
  l["args"] = OJ::array({p(0), p(0), p(1), OJ{{"rank", kTpGroup}}});
  return op({"inout buffer<bf16>", "i32"}, OJ::array({std::move(l)}));
}

// Calls of up to peer_allreduce_rows rows only, where larger ones go through NCCL.
OJ when_peer(const Geo& g) {
  if (!nccl_allreduce(g)) return nullptr;
  return OJ{{"var", "tokens"}, {"max", peer_allreduce_rows(g)}};
}

// The one-shot all-reduce's pieces (kernels/peer.cu). peer_barrier params: flag peers, gen, error word.
OJ peer_barrier_op(const Geo& g) {
  OJ l = launch("kern_peer_barrier",
                OJ::array({p(0), OJ{{"rank", kTpGroup}}, i32(g.o.tp), p(1), p(2), i64(kTpBarrierTimeoutNs)}),
                OJ::array({1, 1, 1}), 32);
  if (OJ w = when_peer(g); !w.is_null()) l["when"] = std::move(w);
  return op({"in buffer<u64>", "inout buffer<u32>", "out buffer<i32>"}, OJ::array({std::move(l)}));
}
// allreduce_peer params: part peers, out, count (elements).
OJ allreduce_peer_op(const Geo& g) {
  constexpr std::uint64_t kBlocks = 264, kThreads = 256;  // strides over any count
  OJ l = launch("kern_allreduce_peer_bf16", OJ::array({p(0), i32(g.o.tp), p(1), p(2)}), OJ::array({kBlocks, 1, 1}),
                kThreads);
  if (OJ w = when_peer(g); !w.is_null()) l["when"] = std::move(w);
  return op({"in buffer<u64>", "out buffer<bf16>", "i64"}, OJ::array({std::move(l)}));
}
// Beside the peer kernel, for calls above its rows: NCCL's sum of this rank's parts (param 0) into out
// (param 1), out of place. Params: parts, out, count (elements).
OJ allreduce_nccl_op(const Geo& g) {
  OJ l;
  l["entry"] = "extern:nccl_allreduce_bf16";
  l["params"] = {"in buffer<bf16>", "out buffer<bf16>", "i64", "i32"};
  l["args"] = OJ::array({p(0), p(1), p(2), OJ{{"rank", kTpGroup}}});
  l["when"] = {{"var", "tokens"}, {"min", peer_allreduce_rows(g) + 1}};
  return op({"in buffer<bf16>", "out buffer<bf16>", "i64"}, OJ::array({std::move(l)}));
}

}  // namespace

std::uint64_t sample_history_stride(const Geo& g) { return g.c.max_positions; }

OJ rms_norm_launch(const Geo& g, OJ out, std::uint64_t m_param, const char* rows_var) {
  return launch("kern_rms_norm_bf16",
                OJ::array({p(0), p(1), std::move(out), p(m_param), i32(g.c.hidden), f32(g.c.rms_norm_eps)}),
                OJ::array({rows_var, 1, 1}), kNormThreads);
}

OJ ops(const Geo& g) {
  OJ o;
  o["embedding"] = embedding_op(g);
  o["rms_norm"] = rms_norm_op(g);
  if (!g.o.mixed) o["add_rms_norm"] = add_rms_norm_op(g);  // with mixed steps every program is decode-style
  if (g.o.prefill_logits) o["gather_last"] = gather_last_op(g);
  o["rope_table"] = rope_table_op(g);
  o["qk_norm_rope_cache"] = qk_norm_rope_cache_op(g);
  o["attn_decode"] = attn_decode_op(g);
  o["attn_prefill"] = attn_prefill_op(g);
  if (!g.o.mixed) o["silu_mul"] = silu_mul_op(g);
  if (g.o.sampling) {
    o["sample"] = sample_op(g);
  } else {
    o["argmax"] = argmax_op(g);
  }
  if (g.chain_rows > 0) add_chain_ops(g, o);
  if (peer_allreduce(g)) {
    o["peer_barrier"] = peer_barrier_op(g);
    o["allreduce_peer"] = allreduce_peer_op(g);
    if (nccl_allreduce(g)) o["allreduce_nccl"] = allreduce_nccl_op(g);
  } else if (tensor_parallel(g)) {
    o["allreduce"] = allreduce_op();
  }
  add_gemm_ops(g, o);
  return o;
}

}  // namespace kern::models::qwen3_gen
