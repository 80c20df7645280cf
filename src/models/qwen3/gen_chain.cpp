// The Qwen3 manifest's decode chain (kernels/decode_chain.cu, kern gen --decode-chain): its plan (rows,
// stage size, shared memory) and its ops.
#include <algorithm>

#include "kern/models/kernel_catalogue.hpp"
#include "models/qwen3/gen.hpp"

namespace kern::models::qwen3_gen {
namespace {

// The decode chain: steps of up to kChainMaxRows sequences; 288 threads (8 consumer warps + a producer
// warp); its dynamic shared memory (at most kChainSharedMax: the 227 KiB opt-in less the kernel's 2.4 KB
// of static shared memory) holds the x rows and, in what they leave, a ring of weight stages. More bytes
// in flight per SM is what the H200 rewards: the ring is as large as the rows allow.
constexpr std::uint64_t kChainMaxRows = 4;
constexpr std::uint64_t kChainThreads = 288;
constexpr std::uint64_t kChainMaxStages = 8;  // the kernel uses at most 8
constexpr std::uint64_t kChainSharedMax = 224 * 1024;
// The kernel's pointer params come first: attn, o_w, h, post_norm_w, gate_up_w, act, down_w, next_norm_w,
// next_w, next_out.
constexpr std::size_t kChainPointers = 10;

// The stage size from 32 to 64 KiB (a multiple of 128, at least one row of the widest k) whose worst
// phase wastes the least; see plan_chain.
std::uint64_t chain_stage_bytes(const Geo& g, std::uint64_t kmax) {
  const std::uint64_t ks[] = {g.q_width, g.c.hidden, g.c.intermediate};
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
  return best == 0 ? first : best;  // rows wider than 32 K elements: one row per stage
}

// The decode chain launch. `ptrs` are the kernel's ten pointer args as launch args, a null one for each
// pointer of an absent phase (passed as i64 0), then the sync buffer and seqs; the rest is the geometry.
OJ chain_launch(const Geo& g, std::vector<OJ> ptrs, OJ sync, OJ seqs, std::uint64_t n_next) {
  OJ args = OJ::array();
  std::vector<std::size_t> absent;
  for (std::size_t i = 0; i < ptrs.size(); ++i) {
    if (ptrs[i].is_null()) absent.push_back(i);
    args.push_back(ptrs[i].is_null() ? i64(0) : std::move(ptrs[i]));
  }
  for (OJ a : {std::move(sync), std::move(seqs), i32(g.c.hidden), i32(g.q_width), i32(g.c.intermediate), i32(n_next),
               f32(g.c.rms_norm_eps), i32(g.chain_stage_bytes)})
    args.push_back(std::move(a));
  OJ l = launch("kern_decode_chain_bf16", std::move(args), OJ::array({g.o.chain_blocks, 1, 1}), kChainThreads);
  for (std::size_t i : absent) l["params"][i] = "i64";
  l["shared_mem"] = g.chain_shared;
  l["cooperative"] = true;  // its blocks wait for each other: the runtime checks at load that all fit at once
  l["when"] = when_chain(g);
  return with_pdl(std::move(l), g);
}

// Decode, one layer from attention's output to the next GEMV's: h += attn·o_wᵀ; act = silu(gate)·up on
// RMSNorm(h); h += act·downᵀ; next_out = RMSNorm(h)·next_norm_w · next_wᵀ (the next layer's qkv_proj, or
// the final norm and the lm_head). Params: the kernel's own first twelve (attn, o_w, h, post_norm_w,
// gate_up_w, act, down_w, next_norm_w, next_w, next_out, sync, seqs).
OJ decode_chain_op(const Geo& g, std::uint64_t n_next) {
  const std::vector<std::string> kernel_params = kernel_param_types(*catalogued_kernel("kern_decode_chain_bf16").entry);
  const std::vector<std::string> params(kernel_params.begin(), kernel_params.begin() + kChainPointers + 2);
  std::vector<OJ> ptrs;
  for (std::uint64_t i = 0; i < kChainPointers; ++i) ptrs.push_back(p(i));
  return op(params, OJ::array({chain_launch(g, std::move(ptrs), p(10), p(11), n_next)}));
}

// Decode, the first layer's input norm and qkv_proj through the chain kernel (its phase D alone).
// Params: h, norm_w, w, out, sync, seqs.
OJ decode_chain_head_op(const Geo& g) {
  const std::vector<std::string> params = {"in buffer<bf16>",  "in buffer<bf16>",   "in buffer<bf16>",
                                           "out buffer<bf16>", "inout buffer<u32>", "i32"};
  std::vector<OJ> ptrs = {nullptr, nullptr, p(0), nullptr, nullptr, nullptr, nullptr, p(1), p(2), p(3)};
  OJ l = chain_launch(g, std::move(ptrs), p(4), p(5), g.qkv_width);
  // Phase D alone only reads h (the kernel's `inout` pointer): the launch declares it an input.
  const std::string h = l["params"][2];
  l["params"][2] = "in" + h.substr(h.find(' '));
  return op(params, OJ::array({std::move(l)}));
}

}  // namespace

// Sizes the decode chain. A stage holds whole weight rows (at most 8) of one phase, so its size decides
// how much of it each phase fills: the stage size from 32 to 64 KiB (a multiple of 128, at least one row
// of the widest k) whose worst phase wastes the least (4B: 40960 bytes, filled exactly by 8 qkv/gate_up
// rows and 5 o_proj rows, 95 % by 2 down rows). Then the most x rows
// (up to 4) that leave at least 2 stages, and all the shared memory up to 8 stages. Off when nothing
// fits or the option says so.
void plan_chain(Geo& g) {
  if (!g.o.decode_chain) return;
  const std::uint64_t kmax = std::max({g.c.hidden, g.q_width, g.c.intermediate});
  const std::uint64_t stage = chain_stage_bytes(g, kmax);
  for (std::uint64_t rows = std::min(kChainMaxRows, g.o.max_seqs); rows >= 1; --rows) {
    const std::uint64_t x = rows * 2 * kmax;
    if (x + 2 * stage > kChainSharedMax) continue;
    g.chain_rows = rows;
    g.chain_stage_bytes = stage;
    g.chain_shared = std::min(kChainSharedMax, x + kChainMaxStages * stage);
    return;
  }
}

void add_chain_ops(const Geo& g, OJ& o) {
  o["decode_chain"] = decode_chain_op(g, g.qkv_width);
  o["decode_chain_last"] = decode_chain_op(g, g.c.vocab);
  o["decode_chain_head"] = decode_chain_head_op(g);
  if (!decode_needs_ops(g)) return;
  OJ l = rms_norm_launch(g, p(2), 3, "seqs");
  l["when"] = when_not_chain(g);
  o["decode_rms_norm"] =
      op({"in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32"}, OJ::array({with_pdl(std::move(l), g)}));
}

}  // namespace kern::models::qwen3_gen
