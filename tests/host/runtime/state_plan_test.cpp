// The pool's decisions turned into memory operations (src/runtime/state_plan.hpp): exact offsets,
// sizes and pitches for small layouts, and the fold of a 2,500-page park of the Qwen3-4B shape.
#include "runtime/state_plan.hpp"

#include <gtest/gtest.h>

#include "kern/pool/host.hpp"
#include "kern/pool/pool.hpp"
#include "granted.hpp"

namespace kern::runtime {
namespace {

using End = CopyOp::End;
using testing::granted;
using pool::Capacity;
using pool::Checkpoint;
using pool::Host;
using pool::HostConfig;
using pool::Lease;
using pool::Pool;
using pool::PoolConfig;
using pool::PoolLayout;

// Two paged states (pages of 4 · 8 and 4 · 24 bytes) and one per-seq state of 48 bytes.
PoolLayout plan_layout() {
  PoolLayout l;
  l.paged = {{"k", 8}, {"v", 24}};
  l.per_seq = {{"conv", 48}};
  l.page_tables = {{"block_table", "k", 4, 32}};
  return l;
}

Checkpoint written(Pool& p, Lease& lease, std::uint64_t len) {
  for (std::uint64_t pos = lease.position(); pos < len; ++pos) lease.slot(pos);
  return std::move(granted(p.checkpoint(lease, len)).first);
}

struct StatePlan : ::testing::Test {
  PoolLayout layout = plan_layout();
  std::pair<Pool, pool::Remap> created = Pool::create(layout, PoolConfig::from_capacity(layout, 256, Capacity{64, 2}));
  Pool& p = created.first;
  Host host{p, HostConfig{128 * 64, 64}};
  StateGeometry g = state_geometry(p, &host);
};

TEST_F(StatePlan, GeometryFollowsThePoolsArenas) {
  ASSERT_EQ(g.arenas.size(), 3u);
  EXPECT_EQ(g.chunk_bytes, 256u);
  EXPECT_EQ(g.arenas[0], (ArenaGeometry{32, true, 0}));   // k: 4 tokens × 8 bytes, first in a host page
  EXPECT_EQ(g.arenas[1], (ArenaGeometry{96, true, 32}));  // v: after k's part
  EXPECT_EQ(g.arenas[2], (ArenaGeometry{48, false, 0}));  // conv: first in a host slot
  EXPECT_EQ(g.host_page_stride, host.page_stride());
  EXPECT_EQ(g.host_page_stride, 128u);  // 32 + 96 bytes, a multiple of the 64-byte grain
}

TEST_F(StatePlan, VmmOpsAreThePlanInBytes) {
  const std::vector<VmmOp> ops = vmm_ops(created.second, g);
  const pool::Remap& plan = created.second;
  ASSERT_EQ(ops.size(), plan.unmaps.size() + plan.maps.size() + plan.access.size());
  ASSERT_FALSE(plan.maps.empty());
  for (std::size_t i = 0; i < plan.maps.size(); ++i)
    EXPECT_EQ(ops[i], (VmmOp{VmmOp::Kind::Map, plan.maps[i].arena, plan.maps[i].pos * 256, 256, plan.maps[i].chunk}));
  for (std::size_t i = 0; i < plan.access.size(); ++i) {
    const pool::Access& a = plan.access[i];
    EXPECT_EQ(ops[plan.maps.size() + i], (VmmOp{VmmOp::Kind::Access, a.arena, a.first * 256, a.count * 256}));
  }
  pool::Remap synthetic;
  synthetic.unmaps = {{1, 3}};
  synthetic.maps = {{0, 2, 7}};
  synthetic.access = {{0, 2, 2}};
  EXPECT_EQ(vmm_ops(synthetic, g), (std::vector<VmmOp>{{VmmOp::Kind::Unmap, 1, 768, 256},
                                                       {VmmOp::Kind::Map, 0, 512, 256, 7},
                                                       {VmmOp::Kind::Access, 0, 512, 512}}));
}

TEST_F(StatePlan, DeviceCopiesFoldRunsPerArenaThenTheSlot) {
  pool::DeviceCopies c;
  c.pages = {{2, 10}, {3, 11}, {7, 4}};
  c.slot = pool::CopyPair<pool::PageId, pool::PageId>{1, 2};
  const std::vector<CopyOp> ops = device_copy_ops(c, g);
  auto d2d = [](std::uint32_t a, std::uint64_t src, std::uint64_t dst, std::uint64_t w) {
    CopyOp op{End::Device, End::Device, a, a, src, dst};
    op.width = w;
    return op;
  };
  EXPECT_EQ(ops, (std::vector<CopyOp>{d2d(0, 2 * 32, 10 * 32, 2 * 32), d2d(0, 7 * 32, 4 * 32, 32),
                                      d2d(1, 2 * 96, 10 * 96, 2 * 96), d2d(1, 7 * 96, 4 * 96, 96),
                                      d2d(2, 48, 96, 48)}));
}

TEST_F(StatePlan, ParkAndWakeAreTwoDimensionalPerPagedArena) {
  Lease a = granted(p.lease(24));
  const Checkpoint cp = written(p, a, 10);  // pages 0..2 (the last one partial), the slot
  auto [parked, pc] = granted(host.park(cp));
  ASSERT_FALSE(pc.pages.empty());
  const std::vector<CopyOp> ops = park_ops(pc, g);
  const auto runs = pc.runs(1, g.host_page_stride);
  ASSERT_EQ(ops.size(), 2 * runs.size() + 1);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const CopyOp& k = ops[i];
    EXPECT_EQ(k.src_end, End::Device);
    EXPECT_EQ(k.dst_end, End::Host);
    EXPECT_EQ(k.src, runs[i].src * 32);
    EXPECT_EQ(k.dst, runs[i].dst);
    if (runs[i].count > 1) {
      EXPECT_EQ(k.width, 32u);
      EXPECT_EQ(k.height, runs[i].count);
      EXPECT_EQ(k.src_pitch, 32u);
      EXPECT_EQ(k.dst_pitch, 128u);
    } else {
      EXPECT_EQ(k.width, 32u);
      EXPECT_EQ(k.height, 1u);
    }
    const CopyOp& v = ops[runs.size() + i];
    EXPECT_EQ(v.src_arena, 1u);
    EXPECT_EQ(v.src, runs[i].src * 96);
    EXPECT_EQ(v.dst, runs[i].dst + 32) << "v's part of each host page follows k's";
  }
  ASSERT_TRUE(pc.slot);
  CopyOp slot{End::Device, End::Host, 2, 2, std::uint64_t{pc.slot->src} * 48, pc.slot->dst};
  slot.width = 48;
  EXPECT_EQ(ops.back(), slot);
  // wake mirrors park
  auto [woken, wc] = granted(host.wake(parked, p, 10));
  const std::vector<CopyOp> back = wake_ops(wc, g);
  ASSERT_EQ(back.size(), 2 * wc.runs(g.host_page_stride, 1).size() + 1);
  for (const CopyOp& op : back) {
    EXPECT_EQ(op.src_end, End::Host);
    EXPECT_EQ(op.dst_end, End::Device);
    if (op.height > 1) {
      EXPECT_EQ(op.src_pitch, 128u);
    }
  }
}

TEST_F(StatePlan, ZeroOpsCoverOnlyTheObjects) {
  EXPECT_EQ(zero_ops({4, 5, 6, 9}, {3}, g),
            (std::vector<ZeroOp>{{0, 4 * 32, 3 * 32}, {0, 9 * 32, 32}, {1, 4 * 96, 3 * 96}, {1, 9 * 96, 96}, {2, 3 * 48, 48}}));
  EXPECT_TRUE(zero_ops({}, {}, g).empty());
}

TEST(StatePlanQwen3, A2500PageParkOfThe4BShapeIsOneCopy) {
  PoolLayout l;
  l.paged = {{"kv", 144 * 1024}};  // Qwen3-4B: 36 layers × 8 KV heads × 128 × 2 (K, V) × 2 bytes
  l.page_tables = {{"block_table", "kv", 16, 2560}};
  const std::uint64_t chunk = pool::chunk_bytes_for(l);
  auto [p, plan] = Pool::create(l, PoolConfig::from_capacity(l, chunk, Capacity{40000, 1}));
  Host host(p, HostConfig{2500ull * 16 * 144 * 1024, 64 << 10});
  const StateGeometry g = state_geometry(p, &host);
  ASSERT_EQ(g.arenas.size(), 1u);
  EXPECT_EQ(g.arenas[0].object_bytes, 16u * 144 * 1024);  // 2.25 MiB pages
  EXPECT_EQ(g.host_page_stride, g.arenas[0].object_bytes) << "2.25 MiB is 36 grains of 64 KiB";
  Lease a = granted(p.lease(40000));
  const Checkpoint cp = written(p, a, 40000);
  auto [parked, pc] = granted(host.park(cp));
  ASSERT_EQ(pc.pages.size(), 2500u);
  const std::vector<CopyOp> ops = park_ops(pc, g);
  ASSERT_EQ(ops.size(), pc.runs(1, g.host_page_stride).size());
  std::uint64_t bytes = 0;
  for (const CopyOp& op : ops) {
    EXPECT_EQ(op.height, 1u) << "host pages laid like the arena's: 1-D";
    bytes += op.width * op.height;
  }
  EXPECT_EQ(bytes, 2500ull * 16 * 144 * 1024);
  EXPECT_EQ(ops.size(), 1u) << "a fresh pool's pages 0..2499 park into host pages laid end to end";
}

}  // namespace
}  // namespace kern::runtime
