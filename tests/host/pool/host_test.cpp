#include <gtest/gtest.h>

#include "kern/base/error.hpp"
#include "kern/pool/host.hpp"
#include "kern/pool/pool.hpp"
#include "kern/pool/prefix.hpp"
#include "layouts.hpp"

namespace kern::pool {
namespace {

using namespace kern::pool::testing;  // layouts.hpp: the layouts, make_pool, take

Checkpoint written_checkpoint(Pool& pool, Lease& lease, std::uint64_t len) {
  for (std::uint64_t p = lease.position(); p < len; ++p) lease.slot(p);
  return std::move(take(pool.checkpoint(lease, len)).first);
}

// A parked store of `len` written tokens from a lease of `tokens` that is gone again (the device
// keeps nothing of it).
Parked parked_store(Pool& pool, Host& host, std::uint64_t tokens, std::uint64_t len) {
  Lease a = take(pool.lease(tokens));
  Checkpoint cp = written_checkpoint(pool, a, len);
  return std::move(take(host.park(cp)).first);
}

// A stateful pool (32 tokens, 2 seqs) and a host of 40 pages of 64 bytes over it.
struct StatefulHost : ::testing::Test {
  Pool pool = make_pool(stateful(), 32, 2);
  Host host{pool, HostConfig{64 * 40, 64}};
};

TEST_F(StatefulHost, GeometryIsOnePageOfEveryStateBackToBack) {
  EXPECT_EQ(host.page_bytes(), 4u * 16);
  EXPECT_EQ(host.page_stride(), 64u);
  EXPECT_EQ(host.slot_bytes(), 48u + 96);
  EXPECT_EQ(host.slot_stride(), 192u);
  EXPECT_EQ(host.capacity(), 64u * 40);
}

TEST_F(StatefulHost, ParksPagesLowSlotsHighAndReParksOnlyNewPages) {
  Lease a = take(pool.lease(24));
  Checkpoint c8 = written_checkpoint(pool, a, 8);
  auto [p8, copies] = take(host.park(c8));
  ASSERT_EQ(copies.pages.size(), 2u);
  EXPECT_EQ(copies.pages[0], (CopyPair<std::uint64_t, HostOffset>{a.page_ids()[0], 0}));
  EXPECT_EQ(copies.pages[1], (CopyPair<std::uint64_t, HostOffset>{a.page_ids()[1], 64}));
  ASSERT_TRUE(copies.slot);
  EXPECT_EQ(copies.slot->src, *c8.seq_slot());
  EXPECT_EQ(copies.slot->dst, 64u * 40 - 192);  // slots from the high end
  const auto runs = copies.runs(1, host.page_stride());
  ASSERT_EQ(runs.size(), 1u);  // pages 0 and 1 are consecutive on both sides
  EXPECT_EQ(runs[0].count, 2u);
  EXPECT_EQ(p8.offsets(), (std::vector<HostOffset>{0, 64}));
  EXPECT_EQ(host.used(), 2 * 64u + 192);

  // The same sequence later: only the new pages move; the slot always does.
  Checkpoint c14 = written_checkpoint(pool, a, 14);
  auto [p14, more] = take(host.park(c14));
  ASSERT_EQ(more.pages.size(), 2u);
  EXPECT_EQ(more.pages[0].src, a.page_ids()[2]);
  EXPECT_EQ(more.pages[1].src, c14.page_ids()[3]);  // the checkpoint's copy of the partial page
  EXPECT_EQ(p14.offsets()[0], 0u);
  EXPECT_EQ(p14.offsets()[1], 64u);
  EXPECT_EQ(host.live_pages(), 4u);
  EXPECT_EQ(host.live_slots(), 2u);
  host.check_invariants();

  // Dropping the shorter one keeps the shared host pages for the longer one.
  p8 = Parked();
  EXPECT_EQ(host.live_pages(), 4u);
  EXPECT_EQ(host.live_slots(), 1u);
  p14 = Parked();
  EXPECT_EQ(host.used(), 0u);
  host.check_invariants();
}

TEST(Host, WakeCopiesIntoFreshPagesThatRememberTheirTwins) {
  Pool pool = make_pool(pure_kv(), 64, 1);
  Host host(pool, HostConfig{64 * 64, 64});  // host page: 4 * 32 B = 128 B = 2 grains
  Lease a = take(pool.lease(16));
  Checkpoint cp = written_checkpoint(pool, a, 10);
  auto [parked, pc] = take(host.park(cp));
  EXPECT_EQ(pc.pages.size(), 3u);
  EXPECT_FALSE(pc.slot);
  a = Lease();
  cp = Checkpoint();
  EXPECT_EQ(pool.used(), 0u);

  auto [woken, wc] = take(host.wake(parked, pool, 10));
  ASSERT_EQ(wc.pages.size(), 3u);
  EXPECT_EQ(wc.pages[0].src, parked.offsets()[0]);
  EXPECT_EQ(wc.pages[2].dst, woken.page_ids()[2]);
  EXPECT_EQ(woken.tokens(), 10u);
  EXPECT_EQ(pool.used(), 3u);
  // Parking the woken checkpoint again copies nothing: every page has a live twin.
  auto [again, ac] = take(host.park(woken));
  EXPECT_TRUE(ac.empty());
  EXPECT_EQ(again.offsets(), parked.offsets());
  // A shorter wake of a slotless store: whole pages only.
  auto [half, hc] = take(host.wake(parked, pool, 8));
  EXPECT_EQ(hc.pages.size(), 2u);
  EXPECT_EQ(half.tokens(), 8u);
  EXPECT_THROW(host.wake(parked, pool, 7), Error);
  EXPECT_THROW(host.wake(parked, pool, 11), Error);
  // Restoring the woken checkpoint works like any other.
  auto [b, bc] = take(pool.restore(woken, 10, 12));
  EXPECT_EQ(bc.pages.size(), 1u);
  host.check_invariants();
  pool.check_invariants();
}

TEST_F(StatefulHost, StatefulWakeOnlyAtFullLength) {
  Lease a = take(pool.lease(12));
  Checkpoint cp = written_checkpoint(pool, a, 9);
  auto [parked, pc] = take(host.park(cp));
  EXPECT_THROW(host.wake(parked, pool, 8), Error);
  auto [woken, wc] = take(host.wake(parked, pool, 9));
  ASSERT_TRUE(wc.slot);
  EXPECT_EQ(wc.slot->src, *parked.slot_offset());
  EXPECT_EQ(wc.slot->dst, *woken.seq_slot());
  EXPECT_TRUE(woken.has_slot());
}

using WakePairs = std::vector<CopyPair<HostOffset, std::uint64_t>>;

TEST(Host, RestoreWakesStraightIntoALease) {
  Pool pool = make_pool(pure_kv(), 64, 1);
  Host host(pool, HostConfig{64 * 64, 64});  // host page: 4 * 32 B = 128 B = 2 grains
  Parked parked = parked_store(pool, host, 16, 10);
  ASSERT_EQ(pool.used(), 0u);
  ASSERT_EQ(parked.offsets(), (std::vector<HostOffset>{0, 128, 256}));

  // Inside a page: whole pages 0 and 1 become the lease's sealed chain, the page holding tokens
  // 8 and 9 is its own; one copy per page, nothing else held.
  auto [lease, copies] = take(host.restore(parked, pool, 10, 16));
  EXPECT_EQ(copies.pages, (WakePairs{{0, 0}, {128, 1}, {256, 2}}));
  EXPECT_FALSE(copies.slot);
  EXPECT_EQ(std::vector<PageId>(lease.page_ids().begin(), lease.page_ids().end()), (std::vector<PageId>{0, 1, 2, 3}));
  EXPECT_EQ(lease.shared(), 2u);
  EXPECT_EQ(lease.prefix(), 10u);
  EXPECT_EQ(lease.position(), 10u);
  EXPECT_EQ(lease.capacity(), 16u);
  EXPECT_EQ(pool.used(), 4u);
  EXPECT_EQ(pool.live_nodes(), 2u);
  EXPECT_THROW(lease.slot(9), Error);  // below the prefix
  EXPECT_EQ(lease.slot(10), 2u * 4 + 2);
  pool.check_invariants();
  host.check_invariants();

  // Re-parking the lease: pages 0 and 1 have live twins; page 2 was written past 10, so it moves
  // again, with the checkpoint's copy of the partial page 3.
  for (std::uint64_t p = 11; p < 14; ++p) lease.slot(p);
  Checkpoint c14 = std::move(take(pool.checkpoint(lease, 14)).first);
  auto [p14, pc14] = take(host.park(c14));
  ASSERT_EQ(pc14.pages.size(), 2u);
  EXPECT_EQ(pc14.pages[0], (CopyPair<std::uint64_t, HostOffset>{2, 384}));
  EXPECT_EQ(pc14.pages[1], (CopyPair<std::uint64_t, HostOffset>{c14.page_ids()[3], 512}));
  EXPECT_EQ(p14.offsets(), (std::vector<HostOffset>{0, 128, 384, 512}));
  // A checkpoint at the whole pages it woke with is all twins: parking it copies nothing.
  Checkpoint c8 = std::move(take(pool.checkpoint(lease, 8)).first);
  auto [p8, pc8] = take(host.park(c8));
  EXPECT_TRUE(pc8.empty());
  EXPECT_EQ(p8.offsets(), (std::vector<HostOffset>{0, 128}));

  // At a page boundary: whole pages only, fresh pages after.
  auto [b, bc] = take(host.restore(parked, pool, 8, 12));
  EXPECT_EQ(bc.pages, (WakePairs{{0, 5}, {128, 6}}));
  EXPECT_EQ(std::vector<PageId>(b.page_ids().begin(), b.page_ids().end()), (std::vector<PageId>{5, 6, 7}));
  EXPECT_EQ(b.shared(), 2u);
  EXPECT_EQ(b.prefix(), 8u);
  EXPECT_THROW(host.restore(parked, pool, 7, 12), Error);   // not a whole page below the length
  EXPECT_THROW(host.restore(parked, pool, 11, 16), Error);  // beyond the length
  EXPECT_THROW(host.restore(parked, pool, 10, 10), Error);  // a lease must hold more than it restores
  pool.check_invariants();
  host.check_invariants();
  lease = Lease();
  b = Lease();
  c14 = Checkpoint();
  c8 = Checkpoint();
  EXPECT_EQ(pool.used(), 0u);
  EXPECT_EQ(pool.live_nodes(), 0u);
}

TEST_F(StatefulHost, RestoreCopiesTheSlotOnceStraightIntoTheLease) {
  Parked parked = parked_store(pool, host, 12, 9);
  const HostOffset slot_at = 64 * 40 - 192;
  ASSERT_EQ(parked.slot_offset(), slot_at);
  ASSERT_EQ(pool.slots_used(), 0u);

  auto [lease, copies] = take(host.restore(parked, pool, 9, 16));
  EXPECT_EQ(copies.pages, (WakePairs{{0, 0}, {64, 1}, {128, 2}}));
  ASSERT_TRUE(copies.slot);
  EXPECT_EQ(*copies.slot, (CopyPair<HostOffset, std::uint64_t>{slot_at, 1}));
  EXPECT_EQ(lease.seq_slot(), std::optional<SlotId>(1));
  EXPECT_EQ(pool.slots_used(), 1u);  // no checkpoint slot in between
  EXPECT_EQ(lease.shared(), 2u);
  EXPECT_EQ(lease.prefix(), 9u);
  EXPECT_EQ(lease.position(), 9u);
  EXPECT_EQ(pool.used(), 4u);
  EXPECT_THROW(host.restore(parked, pool, 8, 16), Error);  // per-seq state: exactly its length

  // wake then Pool::restore moves the slot twice (host -> checkpoint slot -> lease slot).
  {
    auto [woken, wc] = take(host.wake(parked, pool, 9));
    auto [via, rc] = take(pool.restore(woken, 9, 12));
    EXPECT_TRUE(wc.slot && rc.slot);
  }

  // Re-parking at the lease's position: the twinned pages stay, the checkpoint's copy of the
  // partial page and the slot move.
  lease.slot(9);
  lease.slot(10);
  Checkpoint c11 = std::move(take(pool.checkpoint(lease, 11)).first);
  auto [p11, pc11] = take(host.park(c11));
  ASSERT_EQ(pc11.pages.size(), 1u);
  EXPECT_EQ(pc11.pages[0].src, c11.page_ids()[2]);
  EXPECT_TRUE(pc11.slot);
  EXPECT_EQ(p11.offsets(), (std::vector<HostOffset>{0, 64, 192}));
  pool.check_invariants();
  host.check_invariants();
}

TEST_F(StatefulHost, RestoreAtAPageBoundaryAndOfASlotOnlyStore) {
  Parked p8, slot_only;
  {
    Lease a = take(pool.lease(12));
    Checkpoint cp = written_checkpoint(pool, a, 8);
    p8 = std::move(take(host.park(cp)).first);
  }
  {
    Lease s = take(pool.lease_slot());
    Checkpoint scp = std::move(take(pool.checkpoint(s, 5)).first);
    slot_only = std::move(take(host.park(scp)).first);
  }
  auto [lease, copies] = take(host.restore(p8, pool, 8, 12));
  EXPECT_EQ(copies.pages, (WakePairs{{0, 0}, {64, 1}}));
  ASSERT_TRUE(copies.slot);
  EXPECT_EQ(copies.slot->src, *p8.slot_offset());
  EXPECT_EQ(lease.shared(), 2u);
  EXPECT_EQ(lease.page_ids().size(), 3u);
  // A checkpoint at the lease's position right away is all twins but the slot.
  Checkpoint again = std::move(take(pool.checkpoint(lease, 8)).first);
  auto [pa, pac] = take(host.park(again));
  EXPECT_TRUE(pac.pages.empty());
  EXPECT_TRUE(pac.slot);

  auto [sl, sc] = take(host.restore(slot_only, pool, 5, 0));
  EXPECT_FALSE(sl.paged());
  EXPECT_EQ(sl.prefix(), 5u);
  EXPECT_TRUE(sc.pages.empty());
  ASSERT_TRUE(sc.slot);
  EXPECT_EQ(sc.slot->src, *slot_only.slot_offset());
  EXPECT_EQ(sc.slot->dst, *sl.seq_slot());
  EXPECT_THROW(host.restore(slot_only, pool, 4, 0), Error);
  pool.check_invariants();
  host.check_invariants();
}

TEST(Host, RestoreDenialsKeepNothing) {
  Pool pool = make_pool(pure_kv(), 16, 1);  // four pages, and a row of four
  Host host(pool, HostConfig{128 * 8, 64});
  ASSERT_EQ(pool.pages_max(), 4u);
  Parked parked = parked_store(pool, host, 8, 8);
  const std::uint64_t host_used = host.used();
  Lease hog = take(pool.lease(4));  // one page held: three free
  auto expect_unchanged = [&] {
    EXPECT_EQ(pool.used(), 1u);
    EXPECT_EQ(pool.live_nodes(), 0u);
    EXPECT_EQ(host.used(), host_used);
    pool.check_invariants();
    host.check_invariants();
  };
  auto busy = host.restore(parked, pool, 8, 16);
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.denied().kind, DeniedKind::Busy);
  expect_unchanged();
  auto row = host.restore(parked, pool, 8, 17);
  ASSERT_FALSE(row.ok());
  EXPECT_EQ(row.denied(), (Denied{DeniedKind::ExceedsRow, 16}));
  expect_unchanged();
  EXPECT_TRUE(host.restore(parked, pool, 8, 12).ok());  // three pages fit
  hog = Lease();
  EXPECT_TRUE(host.restore(parked, pool, 8, 16).ok());
  EXPECT_EQ(pool.used(), 0u);
}

TEST_F(StatefulHost, RestoreDeniedWhenThePoolCannotHoldPagesAndSlot) {
  Parked parked = parked_store(pool, host, 12, 9);
  // The longest row with a slot beside slot 0 does not fit the budget.
  auto never = host.restore(parked, pool, 9, pool.max_seq_tokens());
  ASSERT_FALSE(never.ok());
  EXPECT_EQ(never.denied().kind, DeniedKind::ExceedsPool);
  // Every slot held (remaps turning free pages into slots landed): the restore waits for one.
  std::vector<Lease> holders;
  for (;;) {
    auto g = pool.lease_slot();
    if (g.ok()) {
      holders.push_back(std::move(g).value());
      continue;
    }
    if (g.denied().kind != DeniedKind::Remapping) break;
    if (auto plan = pool.take_pending()) pool.complete(*plan);
  }
  const std::uint64_t slots_used = pool.slots_used();
  auto busy = host.restore(parked, pool, 9, 12);
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.denied().kind, DeniedKind::Busy);
  EXPECT_EQ(pool.slots_used(), slots_used);
  EXPECT_EQ(pool.used(), 0u);
  EXPECT_EQ(pool.live_nodes(), 0u);
  pool.check_invariants();
  holders.clear();
  auto again = host.restore(parked, pool, 9, 12);
  for (int i = 0; i < 4 && !again.ok() && again.denied().kind == DeniedKind::Remapping; ++i) {
    if (auto plan = pool.take_pending()) pool.complete(*plan);  // slots back into pages
    again = host.restore(parked, pool, 9, 12);
  }
  EXPECT_TRUE(again.ok());
}

TEST(Host, RoomBeforeParkAndHostFull) {
  Pool pool = make_pool(pure_kv(), 64, 1);
  Host host(pool, HostConfig{128 * 3, 64});  // three host pages
  Lease a = take(pool.lease(16));
  Checkpoint c8 = written_checkpoint(pool, a, 8);
  {
    Room room = take(host.room(c8));
    EXPECT_EQ(host.used(), 256u);  // reserved before a byte moves
  }
  EXPECT_EQ(host.used(), 0u);  // dropping the room gives it back
  Room room = take(host.room(c8));
  Checkpoint c16 = written_checkpoint(pool, a, 16);
  auto full = host.room(c16);  // 4 pages: no room, nothing kept
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.denied().kind, DeniedKind::HostFull);
  EXPECT_EQ(host.used(), 256u);
  auto [p8, copies] = host.park(std::move(room));
  EXPECT_EQ(copies.pages.size(), 2u);
  // With the first two pages on the host, the longer checkpoint needs two more: one fits.
  EXPECT_EQ(host.room(c16).denied().kind, DeniedKind::HostFull);
  Checkpoint c12 = std::move(take(pool.checkpoint(a, 12)).first);
  auto [p12, c12copies] = take(host.park(c12));
  EXPECT_EQ(c12copies.pages.size(), 1u);
  EXPECT_EQ(host.used(), 384u);
  host.check_invariants();
}

TEST(Host, FreeRunsCoalesce) {
  Pool pool = make_pool(pure_kv(), 64, 1);
  Host host(pool, HostConfig{128 * 8, 64});
  std::vector<Lease> leases;
  std::vector<Parked> parked;
  for (int i = 0; i < 4; ++i) {
    leases.push_back(take(pool.lease(8)));
    Checkpoint cp = written_checkpoint(pool, leases.back(), 8);
    parked.push_back(std::move(take(host.park(cp)).first));
  }
  EXPECT_EQ(host.used(), 8 * 128u);
  parked[1] = Parked();
  parked[2] = Parked();
  host.check_invariants();  // one coalesced free run of four pages
  leases.push_back(take(pool.lease(16)));
  Checkpoint four = written_checkpoint(pool, leases.back(), 16);
  auto [p4, copies] = take(host.park(four));
  EXPECT_EQ(p4.offsets(), (std::vector<HostOffset>{256, 384, 512, 640}));
  ASSERT_EQ(copies.runs(1, host.page_stride()).size(), 1u);
  host.check_invariants();
}

static_assert(Kept<Checkpoint> && Kept<Parked>);

TEST(Host, PrefixIndexOverRealStores) {
  Pool pool = make_pool(pure_kv(), 64, 1);
  Host host(pool, HostConfig{128 * 2, 64});  // room for two host pages
  Prefix<Checkpoint, Parked> index(pool.unit());
  const std::vector<Token> tokens{5, 6, 7, 8, 9, 10, 11, 12, 13};
  {
    Lease a = take(pool.lease(12));
    Checkpoint cp = written_checkpoint(pool, a, 8);
    index.insert(std::span<const Token>(tokens).first(8), cp);
  }
  EXPECT_EQ(pool.used(), 2u);  // the index holds the checkpoint
  auto park = [&](Checkpoint&& cp) -> std::variant<Parked, Checkpoint> {
    auto p = host.park(cp);
    if (!p.ok()) return std::move(cp);
    return std::move(std::move(p).value().first);
  };
  auto ev = index.evict(park);
  ASSERT_TRUE(ev);
  EXPECT_FALSE(ev->dropped);
  EXPECT_EQ(pool.used(), 0u);  // device pages released once parked
  EXPECT_EQ(host.live_pages(), 2u);
  auto hit = index.lookup(tokens);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->len, 8u);
  ASSERT_EQ(hit->tier(), Tier::Parked);
  auto [woken, copies] = take(host.wake(std::get<1>(hit->found), pool, hit->len));
  EXPECT_EQ(copies.pages.size(), 2u);
  auto [lease, rc] = take(pool.restore(woken, 8, 9));
  EXPECT_EQ(lease.prefix(), 8u);
}

TEST(Host, ParkedOutlivesHostAndPool) {
  Parked parked;
  {
    Pool pool = make_pool(pure_kv(), 64, 1);
    Host host(pool, HostConfig{128 * 8, 64});
    Lease a = take(pool.lease(8));
    Checkpoint cp = written_checkpoint(pool, a, 8);
    parked = std::move(take(host.park(cp)).first);
  }
  EXPECT_EQ(parked.offsets().size(), 2u);
  parked = Parked();
}

}  // namespace
}  // namespace kern::pool
