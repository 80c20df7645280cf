#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "kern/base/error.hpp"
#include "kern/pool/pool.hpp"
#include "layouts.hpp"

namespace kern::pool {
namespace {

using namespace kern::pool::testing;  // layouts.hpp: the layouts, make_pool, take

// A lease of `tokens` with its first `len` positions written.
Lease written_lease(Pool& pool, std::uint64_t tokens, std::uint64_t len) {
  Lease a = take(pool.lease(tokens));
  for (std::uint64_t p = 0; p < len; ++p) a.slot(p);
  return a;
}

TEST(Pool, InitialPlanMapsEveryChunkAndCountsAsLanded) {
  const PoolLayout l = stateful();
  auto [pool, plan] = Pool::create(l, PoolConfig::from_capacity(l, 40, Capacity{32, 2}));
  EXPECT_EQ(plan.id, 0u);
  EXPECT_TRUE(plan.unmaps.empty());
  EXPECT_EQ(plan.maps.size(), pool.chunks());  // 13 + 5 + 10: the per-state budget exactly
  EXPECT_EQ(pool.chunks(), 28u);
  EXPECT_EQ(pool.free_chunks(), 0u);
  std::set<std::uint32_t> chunks;
  for (const auto& m : plan.maps) chunks.insert(m.chunk);
  EXPECT_EQ(chunks.size(), pool.chunks());
  EXPECT_EQ(plan.made_pages.size(), 8u);
  EXPECT_EQ(plan.made_slots, (std::vector<SlotId>{0, 1, 2, 3}));
  EXPECT_EQ(pool.total(), 8u);
  EXPECT_EQ(pool.slots(), 4u);
  EXPECT_EQ(pool.slots_used(), 0u);
  EXPECT_EQ(pool.pages_max(), 14u);
  EXPECT_EQ(pool.slots_max(), 7u);
  EXPECT_FALSE(pool.remapping());
  EXPECT_EQ(pool.slot_status(0), ObjectStatus::Held);  // the null slot
  // Access covers every mapped position.
  std::uint64_t access = 0;
  for (const auto& a : plan.access) access += a.count;
  EXPECT_EQ(access, plan.maps.size());
  pool.check_invariants();
}

TEST(Pool, BudgetThatCannotHoldFirstSlotsIsAnError) {
  PoolConfig cfg{40, 3, 5, std::nullopt};
  EXPECT_THROW(Pool::create(stateful(), cfg), Error);
}

TEST(Pool, LeaseDropReturnsPagesAndSlot) {
  Pool pool = make_pool(stateful(), 32, 2);
  {
    Lease a = take(pool.lease(10));
    EXPECT_EQ(a.page_ids().size(), 3u);
    EXPECT_EQ(std::vector<PageId>(a.page_ids().begin(), a.page_ids().end()), (std::vector<PageId>{0, 1, 2}));
    EXPECT_EQ(a.seq_slot(), SlotId{1});
    EXPECT_EQ(pool.used(), 3u);
    EXPECT_EQ(pool.slots_used(), 1u);
    Lease b = std::move(a);
    EXPECT_FALSE(a.valid());
    EXPECT_EQ(pool.used(), 3u);
  }
  EXPECT_EQ(pool.used(), 0u);
  EXPECT_EQ(pool.slots_used(), 0u);
  pool.check_invariants();
}

TEST(Pool, DeniesExceedsRowExceedsPoolBusy) {
  Pool pool = make_pool(pure_kv(), 64, 1);
  EXPECT_EQ(pool.pages_max(), 16u);
  EXPECT_EQ(pool.max_seq_tokens(), 64u);  // the row (128 tokens) is capped by the pool's pages
  auto row = pool.lease(65);
  ASSERT_FALSE(row.ok());
  EXPECT_EQ(row.denied().kind, DeniedKind::ExceedsRow);
  EXPECT_EQ(row.denied().limit, 64u);
  {
    // 14 pages fit the arena (pages_max) and the row, but never together with a slot.
    Pool st = make_pool(stateful(), 32, 2);
    EXPECT_EQ(st.max_seq_tokens(), 56u);
    auto big = st.lease(56);
    ASSERT_FALSE(big.ok());
    EXPECT_EQ(big.denied().kind, DeniedKind::ExceedsPool);
    EXPECT_FALSE(st.remapping());
  }
  Lease all = take(pool.lease(64));
  auto busy = pool.lease(4);
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.denied().kind, DeniedKind::Busy);
  EXPECT_FALSE(pool.remapping());
  EXPECT_THROW(busy.value(), Error);
  EXPECT_NE(busy.denied().describe().find("evict"), std::string::npos);
}

TEST(Pool, RemapPagesFromFreeSlotsNotVisibleUntilCompleted) {
  Pool pool = make_pool(stateful(), 32, 2);
  Lease a = take(pool.lease(32));  // all 8 pages, slot 1; slots 2 and 3 stay free
  auto d = pool.lease(4);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.denied().kind, DeniedKind::Remapping);
  // Asking again while it is planned, or in flight, is still Remapping and plans nothing new.
  EXPECT_EQ(pool.lease(4).denied().kind, DeniedKind::Remapping);
  auto plan = pool.take_pending();
  ASSERT_TRUE(plan);
  EXPECT_FALSE(pool.take_pending());
  EXPECT_EQ(plan->unmade_slots, (std::vector<SlotId>{3}));  // highest free slot, slot 2 kept for the request
  EXPECT_EQ(plan->made_pages, (std::vector<PageId>{8}));    // lowest absent page
  // conv slot 3 frees position 4 (3 is shared with slot 2); ssm frees 8 and 9 (7 is shared).
  EXPECT_EQ(plan->unmaps, (std::vector<Unmap>{{1, 4}, {2, 8}, {2, 9}}));
  ASSERT_EQ(plan->maps.size(), 2u);  // page 8 needs kv positions 13 and 14 (12 is page 7's too)
  EXPECT_EQ(plan->maps[0].arena, 0u);
  EXPECT_EQ(plan->maps[0].pos, 13u);
  EXPECT_EQ(plan->maps[1].pos, 14u);
  EXPECT_EQ(pool.page_status(8), ObjectStatus::Arriving);
  EXPECT_EQ(pool.slot_status(3), ObjectStatus::Leaving);
  EXPECT_EQ(pool.lease(4).denied().kind, DeniedKind::Remapping);
  pool.check_invariants();
  pool.complete(*plan);
  EXPECT_EQ(pool.remapped(), 1u);
  EXPECT_EQ(pool.slot_status(3), ObjectStatus::Absent);
  Lease b = take(pool.lease(4));
  EXPECT_EQ(b.page_ids()[0], 8u);
  EXPECT_EQ(b.seq_slot(), SlotId{2});
  EXPECT_THROW(pool.complete(*plan), Error);  // not in flight any more
  pool.check_invariants();
}

TEST(Pool, RemapSlotFromFreePages) {
  Pool pool = make_pool(stateful(), 32, 2);
  Lease s1 = take(pool.lease_slot()), s2 = take(pool.lease_slot()), s3 = take(pool.lease_slot());
  EXPECT_EQ(pool.slots_used(), 3u);
  auto d = pool.lease_slot();
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.denied().kind, DeniedKind::Remapping);
  auto plan = pool.take_pending();
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->unmade_pages, (std::vector<PageId>{7, 6}));  // highest free pages first
  EXPECT_EQ(plan->made_slots, (std::vector<SlotId>{4}));
  // Unmaps precede maps: the chunks freed are the ones mapped.
  std::set<std::uint32_t> mapped;
  for (const auto& m : plan->maps) mapped.insert(m.chunk);
  EXPECT_EQ(mapped.size(), 3u);
  EXPECT_EQ(pool.free_chunks(), 0u);
  EXPECT_EQ(pool.lease_slot().denied().kind, DeniedKind::Remapping);
  pool.complete(*plan);
  Lease s4 = take(pool.lease_slot());
  EXPECT_EQ(s4.seq_slot(), SlotId{4});
  EXPECT_EQ(pool.total(), 6u);
  pool.check_invariants();
  // A lease needing a page and a slot takes the slot from free pages beyond the one it needs.
  EXPECT_EQ(pool.lease(4).denied().kind, DeniedKind::Remapping);
  auto second = pool.take_pending();
  ASSERT_TRUE(second);
  // Page 5 frees two kv positions, page 4 one (its first is shared with page 3), page 3 three:
  // the new slot needs five.
  EXPECT_EQ(second->unmade_pages, (std::vector<PageId>{5, 4, 3}));
  EXPECT_EQ(second->made_slots, (std::vector<SlotId>{5}));
  pool.complete(*second);
  Lease both = take(pool.lease(4));
  EXPECT_EQ(both.page_ids()[0], 0u);
  EXPECT_EQ(pool.total(), 3u);
  pool.check_invariants();
}

TEST(Pool, BusyWhenEverythingIsHeld) {
  Pool pool = make_pool(stateful(), 32, 2);
  Lease a = take(pool.lease(16)), b = take(pool.lease(16)), c = take(pool.lease_slot());
  EXPECT_EQ(pool.used(), 8u);
  EXPECT_EQ(pool.slots_used(), 3u);
  EXPECT_EQ(pool.lease(4).denied().kind, DeniedKind::Busy);
  EXPECT_EQ(pool.lease_slot().denied().kind, DeniedKind::Busy);
  EXPECT_FALSE(pool.remapping());
}

TEST(Pool, CheckpointEveryPageSharesOneChain) {
  Pool pool = make_pool(pure_kv(), 64, 1);
  Lease a = take(pool.lease(16));
  std::vector<Checkpoint> cps;
  for (std::uint64_t len = 4; len <= 16; len += 4) {
    for (std::uint64_t p = len - 4; p < len; ++p) a.slot(p);
    auto [cp, copies] = take(pool.checkpoint(a, len));
    EXPECT_TRUE(copies.empty());  // whole pages only: zero copy
    cps.push_back(std::move(cp));
  }
  EXPECT_EQ(pool.live_nodes(), 4u);
  EXPECT_EQ(pool.used(), 4u);
  EXPECT_EQ(a.shared(), 4u);
  const auto ids = cps.back().page_ids();
  EXPECT_EQ(ids, std::vector<PageId>(a.page_ids().begin(), a.page_ids().end()));
  for (std::size_t i = 0; i < cps.size(); ++i)
    EXPECT_EQ(cps[i].page_ids(), std::vector<PageId>(ids.begin(), ids.begin() + i + 1));
  // Sealed pages refuse writes, even from the lease that sealed them.
  EXPECT_THROW(a.slot(15), Error);
  a = Lease();
  EXPECT_EQ(pool.used(), 4u);  // the checkpoints hold the chain
  cps.pop_back();
  EXPECT_EQ(pool.used(), 3u);
  cps.clear();
  EXPECT_EQ(pool.used(), 0u);
  EXPECT_EQ(pool.live_nodes(), 0u);
  pool.check_invariants();
}

TEST(Pool, PartialPageCheckpointCopiesAndLeaseKeepsWriting) {
  Pool pool = make_pool(pure_kv(), 64, 1);
  Lease a = written_lease(pool, 12, 6);
  auto [cp, copies] = take(pool.checkpoint(a, 6));
  ASSERT_EQ(copies.pages.size(), 1u);
  EXPECT_EQ(copies.pages[0].src, a.page_ids()[1]);  // the page 6 ends inside
  const PageId copy = copies.pages[0].dst;
  EXPECT_EQ(cp.page_ids(), (std::vector<PageId>{a.page_ids()[0], copy}));
  EXPECT_EQ(a.shared(), 1u);
  EXPECT_EQ(a.slot(6), a.page_ids()[1] * 4ull + 2);  // still its own page
  EXPECT_EQ(pool.used(), 4u);

  // Restore mid-page: whole page shared, partial page copied into the new lease.
  auto [b, rc] = take(pool.restore(cp, 6, 10));
  ASSERT_EQ(rc.pages.size(), 1u);
  EXPECT_EQ(rc.pages[0].src, copy);
  EXPECT_EQ(b.page_ids()[0], a.page_ids()[0]);
  EXPECT_EQ(b.page_ids()[1], rc.pages[0].dst);
  EXPECT_EQ(b.prefix(), 6u);
  EXPECT_THROW(b.slot(5), Error);  // below its prefix
  EXPECT_EQ(b.slot(6), b.page_ids()[1] * 4ull + 2);

  // A checkpoint at a length inside an already sealed page shares it without a copy.
  for (std::uint64_t p = 6; p < 12; ++p) a.slot(p);
  auto [full, fc] = take(pool.checkpoint(a, 12));
  EXPECT_TRUE(fc.empty());
  auto [inner, ic] = take(pool.checkpoint(a, 7));
  EXPECT_TRUE(ic.empty());
  EXPECT_EQ(inner.page_ids(), (std::vector<PageId>{a.page_ids()[0], a.page_ids()[1]}));
  pool.check_invariants();
}

TEST(Pool, ForkSharesWholePagesAndCopiesThePartialOne) {
  Pool pool = make_pool(pure_kv(), 64, 1);
  Lease parent = take(pool.lease(16));
  for (std::uint64_t p = 0; p < 10; ++p) parent.slot(p);
  auto [child, copies] = take(pool.fork(parent, 10, 20));
  EXPECT_EQ(parent.shared(), 2u);
  EXPECT_EQ(child.shared(), 2u);
  EXPECT_EQ(child.page_ids()[0], parent.page_ids()[0]);
  EXPECT_EQ(child.page_ids()[1], parent.page_ids()[1]);
  ASSERT_EQ(copies.pages.size(), 1u);
  EXPECT_EQ(copies.pages[0], (CopyPair<PageId, PageId>{parent.page_ids()[2], child.page_ids()[2]}));
  EXPECT_EQ(child.page_ids().size(), 5u);
  EXPECT_EQ(parent.slot(10), parent.page_ids()[2] * 4ull + 2);  // parent keeps writing its page
  EXPECT_EQ(child.slot(10), child.page_ids()[2] * 4ull + 2);
  parent = Lease();
  EXPECT_EQ(pool.used(), 5u);
  pool.check_invariants();
}

TEST(Pool, StatefulRestoreOnlyAtExactLength) {
  Pool pool = make_pool(stateful(), 32, 2);
  Lease a = written_lease(pool, 16, 9);
  EXPECT_THROW(pool.checkpoint(a, 8), Error);  // the state is at position 9
  auto [cp, copies] = take(pool.checkpoint(a, 9));
  ASSERT_TRUE(copies.slot);
  EXPECT_EQ(copies.slot->src, *a.seq_slot());
  EXPECT_EQ(copies.slot->dst, *cp.seq_slot());
  EXPECT_TRUE(cp.has_slot());
  EXPECT_THROW(pool.restore(cp, 8, 12), Error);
  EXPECT_THROW(pool.restore(cp, 4, 12), Error);
  EXPECT_THROW(pool.restore(cp, 9, 9), Error);  // nothing left to write
  auto [b, rc] = take(pool.restore(cp, 9, 12));
  ASSERT_TRUE(rc.slot);
  EXPECT_EQ(rc.slot->src, *cp.seq_slot());
  EXPECT_EQ(rc.slot->dst, *b.seq_slot());
  EXPECT_EQ(rc.pages.size(), 1u);  // page 2 partial
  EXPECT_THROW(pool.fork(a, 8, 12), Error);

  // Slotless (pure-KV) checkpoints restore at any whole page below their length too.
  Pool kv = make_pool(pure_kv(), 64, 1);
  Lease k = take(kv.lease(16));
  for (std::uint64_t p = 0; p < 11; ++p) k.slot(p);
  auto [kcp, kc] = take(kv.checkpoint(k, 11));
  auto [r8, r8c] = take(kv.restore(kcp, 8, 12));
  EXPECT_TRUE(r8c.empty());
  EXPECT_EQ(r8.prefix(), 8u);
  EXPECT_EQ(r8.shared(), 2u);
  EXPECT_THROW(kv.restore(kcp, 6, 12), Error);  // not a whole page
}

TEST(Pool, RetireSealsInPlaceAndHandsTheSlotOver) {
  Pool pool = make_pool(stateful(), 32, 2);
  Lease a = written_lease(pool, 20, 6);
  const SlotId slot = *a.seq_slot();
  const std::vector<PageId> pages(a.page_ids().begin(), a.page_ids().end());
  Checkpoint cp = pool.retire(std::move(a), 6);
  EXPECT_FALSE(a.valid());
  EXPECT_EQ(cp.seq_slot(), slot);
  EXPECT_EQ(cp.page_ids(), (std::vector<PageId>{pages[0], pages[1]}));  // partial page sealed in place
  EXPECT_EQ(pool.used(), 2u);                                           // pages 2..4 returned
  EXPECT_EQ(pool.slots_used(), 1u);
  Checkpoint again = cp;  // another holder
  cp = Checkpoint();
  EXPECT_EQ(pool.slots_used(), 1u);
  again = Checkpoint();
  EXPECT_EQ(pool.slots_used(), 0u);
  EXPECT_EQ(pool.used(), 0u);
  pool.check_invariants();
}

TEST(Pool, SlotOnlyLease) {
  Pool pool = make_pool(stateful(), 32, 2);
  Lease s = take(pool.lease_slot());
  EXPECT_FALSE(s.paged());
  EXPECT_THROW(s.slot(0), Error);
  EXPECT_EQ(s.seq_line("conv_lines", 2), *s.seq_slot() * 3ull + 2);
  auto [cp, copies] = take(pool.checkpoint(s, 100));
  EXPECT_TRUE(copies.pages.empty());
  ASSERT_TRUE(copies.slot);
  EXPECT_EQ(cp.pages(), 0u);
  EXPECT_EQ(cp.tokens(), 100u);
  auto [r, rc] = take(pool.restore(cp, 100, 0));
  EXPECT_FALSE(r.paged());
  EXPECT_TRUE(rc.slot);
  EXPECT_EQ(pool.used(), 0u);
  EXPECT_EQ(pool.slots_used(), 3u);
}

TEST(Pool, RowsAndLines) {
  Pool pool = make_pool(pure_kv(), 64, 1);
  Lease a = take(pool.lease(12));  // pages 0, 1, 2
  Lease b = take(pool.lease(8));   // pages 3, 4
  std::vector<std::int64_t> row(32, -1);
  EXPECT_EQ(b.extend_row("block_table", row), 2u);  // stride 4 = unit: one entry per page
  EXPECT_EQ(row[0], 3);
  EXPECT_EQ(row[1], 4);
  EXPECT_EQ(row[31], 3);  // padding: the first entry
  std::vector<std::int64_t> draft(64, -1);
  EXPECT_EQ(b.extend_row("draft_table", draft), 4u);  // stride 2: two entries per page
  EXPECT_EQ(draft, (std::vector<std::int64_t>{6, 7, 8, 9, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6,
                                              6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6,
                                              6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6}));
  ASSERT_FALSE(pool.extend(b, 13));
  EXPECT_EQ(b.extend_row("draft_table", draft, 4), 8u);
  EXPECT_EQ(draft[4], 10);
  EXPECT_EQ(draft[7], 13);
  EXPECT_THROW(b.extend_row("nope", row), Error);
  std::vector<std::int64_t> small(1);
  EXPECT_THROW(b.extend_row("block_table", small), Error);

  Pool st = make_pool(stateful(), 32, 2);
  Lease s = take(st.lease(4));
  s = Lease();
  Lease t = take(st.lease(4));  // slot 1 again
  EXPECT_EQ(t.seq_line("conv_lines", 0), 3u);
  EXPECT_EQ(t.seq_line("conv_lines", 2), 5u);
  EXPECT_EQ(t.seq_lines("ssm_lines"), (std::vector<std::uint64_t>{1, 1, 1, 1}));  // one line per slot
  EXPECT_EQ(t.seq_width("ssm_lines"), 2u);
  EXPECT_EQ(t.seq_width("conv_lines"), 1u);
  EXPECT_THROW(t.seq_line("conv_lines", 3), Error);
  EXPECT_THROW(t.seq_line("block_table", 0), Error);
}

TEST(Pool, ExtendGrowsAndDenies) {
  Pool pool = make_pool(pure_kv(), 64, 1);
  Lease a = take(pool.lease(1));
  for (std::uint64_t t = 2; t <= 64; ++t) ASSERT_FALSE(pool.extend(a, t));
  EXPECT_EQ(a.page_ids().size(), 16u);
  auto d = pool.extend(a, 65);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->kind, DeniedKind::ExceedsRow);  // the pool caps the row at its 16 pages
}

TEST(Pool, HandlesMayOutliveThePool) {
  Lease lease;
  Checkpoint cp;
  {
    Pool pool = make_pool(stateful(), 32, 2);
    lease = take(pool.lease(8));
    for (std::uint64_t p = 0; p < 5; ++p) lease.slot(p);
    cp = std::move(take(pool.checkpoint(lease, 5)).first);
  }
  EXPECT_EQ(cp.page_ids().size(), 2u);
  lease = Lease();
  EXPECT_EQ(cp.tokens(), 5u);
  cp = Checkpoint();
}

TEST(Pool, LongChainUnwindsIteratively) {
  PoolLayout l;
  l.paged = {{"kv", 8}};
  l.page_tables = {{"t", "kv", 1, 70000}};
  auto [pool, plan] = Pool::create(l, PoolConfig::from_capacity(l, 64, Capacity{70000, 1}));
  Lease a = take(pool.lease(65536));
  std::vector<std::int64_t> row(70000);
  Checkpoint cp = pool.retire(std::move(a), 65536);
  EXPECT_EQ(pool.live_nodes(), 65536u);
  {
    auto [b, copies] = take(pool.restore(cp, 65536, 65600));
    EXPECT_EQ(b.shared(), 65536u);
  }
  cp = Checkpoint();  // 65536 nodes released in a loop
  EXPECT_EQ(pool.live_nodes(), 0u);
  EXPECT_EQ(pool.used(), 0u);
}

TEST(Pool, WrongPoolAndEmptyHandlesAreApiErrors) {
  Pool p1 = make_pool(pure_kv(), 64, 1), p2 = make_pool(pure_kv(), 64, 1);
  Lease a = take(p1.lease(4));
  try {
    (void)p2.checkpoint(a, 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Api);
  }
  Lease empty;
  EXPECT_THROW(p1.extend(empty, 4), Error);
  EXPECT_THROW(p1.lease_slot(), Error);  // no per-seq state
  EXPECT_THROW(p1.lease(0), Error);
}

}  // namespace
}  // namespace kern::pool
