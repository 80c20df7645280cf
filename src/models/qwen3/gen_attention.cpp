// The Qwen3 manifest's attention ops: split-KV decode (kernels/attention.cu) and tensor-core chunked
// prefill (kernels/attention_prefill.cu), both over the paged KV state.
#include <algorithm>
#include <cmath>

#include "models/qwen3/gen.hpp"

namespace kern::models::qwen3_gen {
namespace {

constexpr std::uint64_t kDecodeSplits = 64;  // split-KV ranges per decode sequence, at most
constexpr std::uint64_t kDecodePartialThreads = 128;
constexpr std::uint64_t kDecodeItemsPerUnit = 8;  // batch-invariant grid: blocks per (sequence, kv head)
// Tensor-core prefill (attention_prefill.cu): 8 warps of 16 queries (rows x q heads of one kv head),
// key tiles of 64 in two stages of K and V in dynamic shared memory.
constexpr std::uint64_t kPrefillQueries = 128, kPrefillThreads = 256, kPrefillKeys = 64, kPrefillStages = 2;
// Calls of prefill_long_rows rows or more (long whole-prompt prefills; head_dim 128 only) take the
// m32n32s2 layout instead: 4 warps x 32 queries, key tiles of 32 in two stages (Q staged in shared
// memory), 11 % faster at 8192 rows on the H200 but slower at 512-2048 (docs/perf.md). Both are
// row-invariant within themselves; a row computed by a call of each size differs only by rounding.
constexpr std::uint64_t kLongQueries = 128, kLongThreads = 128, kLongKeys = 32;
// The wgmma prefill (head_dim 128, sm_90a; kernels/attention_prefill_wgmma_ws.cuh): 2 consumer
// warpgroups of 64 queries and a producer warpgroup, four stages of a 64-key K and V tile (16 KB each)
// plus 1 KB of alignment slack (prefill_ws::kSharedBytes<4, 64, 2>; the kernel traps with less).
constexpr std::uint64_t kWgmmaQueries = 128, kWgmmaThreads = 384, kWgmmaShared = 4 * 2 * 64 * 128 * 2 + 1024;
// Its long-call form (calls of prefill_long_rows rows or more): 3 consumer warpgroups (192 queries), the
// four stages plus three 16 KB Q tiles (prefill_ws::kSharedBytes<4, 64, 3>). The same bits per row.
constexpr std::uint64_t kWgmma3Queries = 192, kWgmma3Threads = 512,
                        kWgmma3Shared = 4 * 2 * 64 * 128 * 2 + 3 * 64 * 128 * 2 + 1024;

double attn_scale(const Qwen3Shape& c) { return 1.0 / std::sqrt(static_cast<double>(c.head_dim)); }

// One prefill launch of `entry`: blocks of `queries` queries (rows x the q heads of one kv head), from
// the op's param 9 (first_row: 0 in the prefill program, the decode rows' count in a mixed step,
// whose decode rows the decode attention takes).
OJ prefill_launch(const Geo& g, const std::string& entry, std::uint64_t queries, std::uint64_t threads,
                  std::uint64_t shared) {
  const Qwen3Shape& c = g.c;
  const std::uint64_t per_block = std::max<std::uint64_t>(1, queries / (c.heads / c.kv_heads));
  return with_shared(launch(entry,
                            OJ::array({p(0), i32(g.qkv_width), p(1), p(2), i32(g.max_pages), p(3), p(4), p(5), p(6),
                                       p(7), p(8), i32(c.heads), i32(c.kv_heads), i32(g.o.page_size),
                                       i64(g.page_stride_elems), f32(attn_scale(c)), i32(per_block), p(9)}),
                            OJ::array({ceil_div("tokens", per_block), c.kv_heads, 1}), threads),
                     shared);
}

}  // namespace

// The partial kernel picks ranges per sequence from seq_lens (batch-invariant: from each sequence's length
// alone, ranges of at least decode_attn_split_tokens keys, the grid's blocks striding over them) or from
// seq_lens and seqs (up to kDecodeSplits, about decode_attn_target_blocks blocks of work per call, one
// per block), and writes `out` itself for sequences of one range; the reduce merges the others.
OJ attn_decode_op(const Geo& g) {
  const Qwen3Shape& c = g.c;
  const std::uint64_t target_blocks = decode_attn_target(g.o);
  const std::uint64_t split_tokens = g.o.batch_invariant ? decode_attn_split(g.o) : 0;
  // Batch-invariant: kDecodeItemsPerUnit blocks per (sequence, kv head) plus the target, so a step of
  // short contexts has about one item per block (a block's items run one after another, each paying
  // its pipeline's fill and drain) and long contexts stride over a few each.
  // The warp-item partial takes a fixed grid (its warps stride over the items): the target when the
  // option sets one, else kDecodeAttnWarpGrid.
  const std::uint64_t per_unit = split_tokens > 0 ? kDecodeItemsPerUnit : 1;
  const bool warp_items = decode_attn_warp_items(g.o);
  const std::uint64_t warp_grid = g.o.decode_attn_target_blocks != 0 ? g.o.decode_attn_target_blocks : kDecodeAttnWarpGrid;
  const OJ partial_blocks =
      warp_items ? OJ(warp_grid)
                 : OJ{{"add", OJ::array({OJ{{"mul", OJ::array({"seqs", c.kv_heads * per_unit})}}, target_blocks})}};
  // The tensor-core partials (kern_attn_decode_mma_partial_hd*, kern_attn_decode_warp_partial_hd*; same
  // ABI) take dynamic shared memory: 4 warps x stages x K and V tiles of 16 keys x (head_dim + 8) bf16,
  // 3 stages for the block-item one, 2 for the warp-item one (kernels/attention.cu).
  const std::uint64_t mma_shared = 4 * (warp_items ? 2 : 3) * 2 * 16 * (c.head_dim + 8) * 2;
  const std::string km = g.o.decode_attn_key_major ? "_km" : "";
  const std::string partial_entry = !g.o.decode_attn_mma ? "kern_attn_decode_partial" + g.hd
                                    : warp_items        ? "kern_attn_decode_warp" + km + "_partial" + g.hd
                                                        : "kern_attn_decode_mma" + km + "_partial" + g.hd;
  OJ part = launch(partial_entry,
                   OJ::array({p(0), i32(g.qkv_width), p(1), p(2), i32(g.max_pages), p(3), scratch("part_o"),
                              scratch("part_ml"), p(4), p(5), i32(c.heads), i32(c.kv_heads), i32(g.o.page_size),
                              i64(g.page_stride_elems), i32(kDecodeSplits), i32(target_blocks), i32(split_tokens),
                              f32(attn_scale(c))}),
                   OJ::array({partial_blocks, 1, 1}), kDecodePartialThreads);
  if (g.o.decode_attn_mma) part = with_shared(std::move(part), mma_shared);
  OJ reduce = launch("kern_attn_decode_reduce" + g.hd,
                     OJ::array({scratch("part_o"), scratch("part_ml"), p(4), p(3), i32(g.max_pages), p(5), i32(c.heads),
                                i32(c.kv_heads), i32(g.o.page_size), i32(kDecodeSplits), i32(target_blocks), i32(split_tokens)}),
                     OJ::array({"seqs", c.heads, 1}), c.head_dim);
  OJ sc;
  sc["part_o"] = {{"dtype", "f32"}, {"shape", OJ::array({"seqs", c.heads, kDecodeSplits, c.head_dim})}};
  sc["part_ml"] = {{"dtype", "f32"}, {"shape", OJ::array({"seqs", c.heads, kDecodeSplits, 2})}};
  return op({"in buffer<bf16>", "in state", "in buffer<i32>", "in buffer<i32>", "out buffer<bf16>", "i32"},
            OJ::array({with_pdl(std::move(part), g), with_pdl(std::move(reduce), g)}), std::move(sc));
}

OJ attn_prefill_op(const Geo& g) {
  const Qwen3Shape& c = g.c;
  const std::vector<std::string> params = {"in buffer<bf16>", "in state",  "in buffer<i32>", "in buffer<i32>",
                                           "in buffer<i32>",  "in buffer<i64>", "out buffer<bf16>", "i32",
                                           "i32",             "i32"};
  // One launch for every call size, or (head_dim 128, a token bound that reaches prefill_long_rows) the
  // small-call launch below the threshold and the long-call one from it.
  const bool wgmma = c.head_dim == 128 && g.o.prefill_attn_wgmma;
  const std::uint64_t prefill_shared = 2 * kPrefillStages * kPrefillKeys * (c.head_dim + 8) * 2;
  OJ small = wgmma ? prefill_launch(g, "kern_attn_prefill_wgmma_ws_hd128", kWgmmaQueries, kWgmmaThreads, kWgmmaShared)
                   : prefill_launch(g, "kern_attn_prefill_mma_s2" + g.hd, kPrefillQueries, kPrefillThreads,
                                    prefill_shared);
  const std::uint64_t long_rows = g.o.prefill_long_rows;
  if (c.head_dim != 128 || long_rows == 0 || g.o.max_tokens < long_rows)
    return op(params, OJ::array({std::move(small)}));
  const std::uint64_t long_shared = (kLongQueries + 2 * kPrefillStages * kLongKeys) * (c.head_dim + 8) * 2;
  OJ big = wgmma ? prefill_launch(g, "kern_attn_prefill_wgmma_ws3_hd128", kWgmma3Queries, kWgmma3Threads, kWgmma3Shared)
                 : prefill_launch(g, "kern_attn_prefill_mma_m32n32s2" + g.hd, kLongQueries, kLongThreads, long_shared);
  small["when"] = OJ{{"var", "tokens"}, {"max", long_rows - 1}};
  big["when"] = OJ{{"var", "tokens"}, {"min", long_rows}};
  OJ launches = OJ::array({std::move(small), std::move(big)});
  return op(params, std::move(launches));
}

}  // namespace kern::models::qwen3_gen
