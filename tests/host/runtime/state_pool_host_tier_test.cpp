// The state pool's host tier (src/runtime/state_pool.hpp) over a simulated device: park copies a
// checkpoint to the host block on the transfer lane, wake copies it into a fresh lease that is
// only handed out once the copies have landed (a Waking until then), a parked checkpoint is held
// until its copies land, a re-park copies only new pages, park_now / wake_now use the compute
// lane, and the prefix index's evict() parks through park_if_room and drops when the host is full.
#include <gtest/gtest.h>

#include <variant>

#include "granted.hpp"
#include "kern/pool/prefix.hpp"
#include "runtime/state_pool.hpp"
#include "sim_device.hpp"

namespace kern::runtime {
namespace {

using pool::Capacity;
using pool::Checkpoint;
using pool::Lease;
using pool::Parked;
using pool::Pool;
using pool::PoolConfig;
using pool::PoolLayout;
using testing::granted;
using testing::SimDevice;

// Two paged states (pages of 4 tokens × 16 and × 8 bytes: host pages are 2-D targets) and one
// per-seq state of 48 bytes.
PoolLayout two_kv_and_conv() {
  PoolLayout l;
  l.paged = {{"k", 16}, {"v", 8}};
  l.per_seq = {{"conv", 48}};
  l.page_tables = {{"block_table", "k", 4, 32}};
  return l;
}

std::vector<std::byte> pattern(std::uint64_t n, std::uint64_t seed) {
  std::vector<std::byte> b(n);
  for (std::uint64_t i = 0; i < n; ++i) b[i] = static_cast<std::byte>((seed * 131 + i * 7 + 1) & 0xff);
  return b;
}

struct Tier {
  explicit Tier(std::uint64_t tokens = 64, std::uint64_t seqs = 3) {
    const PoolLayout l = two_kv_and_conv();
    auto [p, plan] = Pool::create(l, PoolConfig::from_capacity(l, 256, Capacity{tokens, seqs}));
    device = std::make_unique<SimDevice>(p, state_geometry(p, nullptr), plan);
    state = std::make_unique<StatePool>(std::move(p), *device);
  }
  std::uint64_t bpt(std::uint32_t arena) const { return arena == 0 ? 16 : 8; }
  std::uint64_t offset(const Lease& l, std::uint32_t arena, std::uint64_t pos) const {
    return l.page_ids()[pos / 4] * state->geometry().arenas[arena].object_bytes + (pos % 4) * bpt(arena);
  }
  std::uint64_t slot_bytes() const { return state->geometry().arenas[2].object_bytes; }
  // Writes `seed`'s pattern at positions [from, to) of both paged states and into the slot.
  void write(Lease& l, std::uint64_t from, std::uint64_t to, std::uint64_t seed) {
    for (std::uint64_t pos = from; pos < to; ++pos) {
      l.slot(pos);
      for (std::uint32_t a = 0; a < 2; ++a) device->write(a, offset(l, a, pos), pattern(bpt(a), seed * 1000 + pos));
    }
    if (l.seq_slot()) device->write(2, *l.seq_slot() * slot_bytes(), pattern(slot_bytes(), seed));
  }
  void expect(const Lease& l, std::uint64_t from, std::uint64_t to, std::uint64_t seed, bool slot = true) {
    for (std::uint64_t pos = from; pos < to; ++pos) {
      for (std::uint32_t a = 0; a < 2; ++a) {
        EXPECT_EQ(device->read(a, offset(l, a, pos), bpt(a)), pattern(bpt(a), seed * 1000 + pos))
            << "state " << a << " position " << pos;
      }
    }
    if (slot && l.seq_slot()) {
      EXPECT_EQ(device->read(2, *l.seq_slot() * slot_bytes(), slot_bytes()), pattern(slot_bytes(), seed)) << "slot";
    }
  }
  std::unique_ptr<SimDevice> device;
  std::unique_ptr<StatePool> state;
};

Parked park_all(Tier& t, Checkpoint cp) {
  auto r = t.state->room(std::move(cp));
  EXPECT_TRUE(std::holds_alternative<pool::Room>(r)) << "no host room";
  return t.state->park(std::get<pool::Room>(std::move(r)));
}

Lease awake_now(Tier& t, Waking w) {
  auto a = t.state->awake(std::move(w));
  EXPECT_TRUE(std::holds_alternative<Lease>(a)) << "the copies had landed";
  return std::get<Lease>(std::move(a));
}

TEST(StatePoolHostTier, ParkZeroAndWakeIntoAFreshLeaseKeepsEveryByte) {
  Tier t;
  t.state->reserve_host(8, 2);
  Lease a = granted(t.state->lease(16));
  t.write(a, 0, 10, 5);  // two whole pages and a half
  const std::vector<pool::PageId> pages(a.page_ids().begin(), a.page_ids().end());
  const pool::SlotId slot = *a.seq_slot();
  Checkpoint cp = t.state->retire(std::move(a), 10);
  Parked parked = park_all(t, cp);
  EXPECT_GT(t.device->transfers_run(), 0u);
  EXPECT_EQ(t.device->transfer_waits(), 1u) << "the transfer lane waited for the compute lane once";
  t.state->wait_transfers();
  // Drop the device copy and zero its bytes.
  cp = Checkpoint();
  for (const pool::PageId p : pages)
    for (std::uint32_t arena = 0; arena < 2; ++arena) {
      const std::uint64_t n = t.state->geometry().arenas[arena].object_bytes;
      t.device->write(arena, p * n, std::vector<std::byte>(n));
    }
  t.device->write(2, slot * t.slot_bytes(), std::vector<std::byte>(t.slot_bytes()));
  Lease hold_low = granted(t.state->lease(8));  // so the wake lands on other pages
  Waking w = granted(t.state->wake(parked, 10, 20));
  EXPECT_TRUE(t.state->landed(w));
  Lease b = awake_now(t, std::move(w));
  EXPECT_EQ(b.prefix(), 10u);
  EXPECT_GE(b.capacity(), 20u);
  t.expect(b, 0, 10, 5);
  t.write(b, 10, 14, 6);  // the woken lease writes on from its prefix
  t.expect(b, 10, 14, 6);
  t.state->pool().check_invariants();
  t.state->host()->check_invariants();
}

TEST(StatePoolHostTier, AWakingHoldsItsLeaseUntilTheCopiesLand) {
  Tier t;
  t.state->reserve_host(8, 2);
  Lease a = granted(t.state->lease(8));
  t.write(a, 0, 8, 9);
  Parked parked = park_all(t, t.state->retire(std::move(a), 8));
  t.state->wait_transfers();
  t.device->hold_transfers(true);
  Waking w = granted(t.state->wake(parked, 8, 12));
  EXPECT_FALSE(t.state->landed(w));
  const std::uint64_t used = t.state->pool().used();
  auto still = t.state->awake(std::move(w));
  ASSERT_TRUE(std::holds_alternative<Waking>(still)) << "awake handed out a lease whose copies are in flight";
  w = std::get<Waking>(std::move(still));
  EXPECT_TRUE(w.valid());
  EXPECT_EQ(t.state->pool().used(), used) << "the Waking holds its pages";
  t.device->hold_transfers(false);
  EXPECT_TRUE(t.state->landed(w));
  Lease b = awake_now(t, std::move(w));
  t.expect(b, 0, 8, 9);
}

TEST(StatePoolHostTier, AParkedCheckpointIsHeldUntilItsCopiesLand) {
  Tier t;
  t.state->reserve_host(8, 2);
  Lease a = granted(t.state->lease(8));
  t.write(a, 0, 8, 3);
  const std::uint64_t before = t.state->pool().used();
  t.device->hold_transfers(true);
  Parked parked = park_all(t, t.state->retire(std::move(a), 8));
  EXPECT_EQ(t.state->parks_in_flight(), 1u);
  EXPECT_EQ(t.state->pool().used(), before) << "the checkpoint's pages stay held while they are copied";
  (void)t.state->lease(4);  // any call reaps; the copies have not landed
  EXPECT_EQ(t.state->parks_in_flight(), 1u);
  t.device->hold_transfers(false);
  (void)t.state->lease(4);
  EXPECT_EQ(t.state->parks_in_flight(), 0u);
  EXPECT_LT(t.state->pool().used(), before) << "released once landed";
}

TEST(StatePoolHostTier, ReparkingAWokenChainCopiesOnlyItsNewPages) {
  Tier t(96, 3);
  t.state->reserve_host(16, 3);
  Lease a = granted(t.state->lease(16));
  t.write(a, 0, 8, 1);
  Parked first = park_all(t, granted(t.state->checkpoint(a, 8)));
  t.state->wait_transfers();
  const std::uint64_t pages_after_first = t.state->host()->live_pages();
  EXPECT_EQ(pages_after_first, 2u);
  a = Lease();
  Waking w = granted(t.state->wake(first, 8, 16));
  Lease b = awake_now(t, std::move(w));
  t.write(b, 8, 12, 1);
  const std::uint64_t transfers = t.device->transfers_run();
  Parked second = park_all(t, t.state->retire(std::move(b), 12));
  t.state->wait_transfers();
  EXPECT_EQ(t.state->host()->live_pages(), pages_after_first + 1) << "only page 2 is new on the host";
  // 1 page × 2 states + the slot: three copies, none for the pages woken from `first`.
  EXPECT_EQ(t.device->transfers_run() - transfers, 3u);
  Lease c = awake_now(t, granted(t.state->wake(second, 12, 16)));
  t.expect(c, 0, 12, 1);
}

TEST(StatePoolHostTier, ParkNowAndWakeNowRunOnTheComputeLane) {
  Tier t;
  t.state->reserve_host(8, 2);
  Lease a = granted(t.state->lease(8));
  t.write(a, 0, 7, 4);
  const Checkpoint cp = t.state->retire(std::move(a), 7);
  const std::uint64_t transfers = t.device->transfers_run();
  Parked parked = granted(t.state->park_now(cp));
  Lease b = granted(t.state->wake_now(parked, 7, 8));
  EXPECT_EQ(t.device->transfers_run(), transfers) << "nothing went through the transfer lane";
  t.expect(b, 0, 7, 4);
}

TEST(StatePoolHostTier, RoomGivesTheCheckpointBackWhenTheHostIsFull) {
  Tier t;
  t.state->reserve_host(1, 1);  // one host page
  Lease a = granted(t.state->lease(8));
  t.write(a, 0, 8, 2);
  Checkpoint cp = t.state->retire(std::move(a), 8);
  auto r = t.state->room(cp);
  ASSERT_TRUE(std::holds_alternative<Checkpoint>(r)) << "two pages do not fit one host page";
  EXPECT_EQ(std::get<Checkpoint>(r).tokens(), 8u);
  auto p = t.state->park_if_room(std::move(cp));
  EXPECT_TRUE(std::holds_alternative<Checkpoint>(p));
  EXPECT_EQ(t.state->host()->used(), 0u) << "nothing kept on a refusal";
}

TEST(StatePoolHostTier, HostTierCallsNeedReserveHostAndReserveOnce) {
  Tier t;
  Lease a = granted(t.state->lease(4));
  t.write(a, 0, 4, 1);
  const Checkpoint cp = t.state->retire(std::move(a), 4);
  EXPECT_THROW((void)t.state->room(cp), Error);
  EXPECT_THROW((void)t.state->park_now(cp), Error);
  t.state->reserve_host(4, 1);
  EXPECT_THROW(t.state->reserve_host(4, 1), Error);
}

// The prefix index over the pool: evict() parks the coldest resident entry through park_if_room;
// with the host full it drops the coldest parked entry and parks again; a parked hit wakes.
TEST(StatePoolHostTier, PrefixEvictParksTheColdestAndDropsParkedWhenTheHostIsFull) {
  Tier t(96, 4);
  t.state->reserve_host(4, 2);  // two 2-page stores
  pool::Prefix<Checkpoint, Parked> index(4);
  std::vector<std::vector<pool::Token>> keys;
  for (int s = 0; s < 3; ++s) {
    Lease l = granted(t.state->lease(8));
    t.write(l, 0, 8, 10 + s);
    std::vector<pool::Token> key(8);
    for (int i = 0; i < 8; ++i) key[i] = 100 * s + i + 1;
    index.insert(key, t.state->retire(std::move(l), 8));
    keys.push_back(key);
  }
  auto park = [&](Checkpoint cp) { return t.state->park_if_room(std::move(cp)); };
  auto e0 = index.evict(park);
  ASSERT_TRUE(e0);
  EXPECT_FALSE(e0->dropped);
  EXPECT_EQ(e0->key, keys[0]) << "the coldest first";
  auto e1 = index.evict(park);
  ASSERT_TRUE(e1);
  EXPECT_FALSE(e1->dropped);
  auto e2 = index.evict(park);  // host full: the coldest parked entry (keys[0]) goes
  ASSERT_TRUE(e2);
  EXPECT_FALSE(e2->dropped);
  EXPECT_EQ(e2->parked_dropped, 1u);
  t.state->wait_transfers();
  std::vector<pool::Token> prompt = keys[2];
  prompt.push_back(7);
  auto hit = index.lookup(prompt);
  ASSERT_TRUE(hit);
  ASSERT_EQ(hit->tier(), pool::Tier::Parked);
  EXPECT_EQ(hit->len, 8u);
  Lease woken = awake_now(t, granted(t.state->wake(std::get<1>(hit->found), 8, 12)));
  t.expect(woken, 0, 8, 12);
  prompt = keys[0];
  prompt.push_back(7);
  EXPECT_FALSE(index.lookup(prompt)) << "the dropped entry is gone";
}

}  // namespace
}  // namespace kern::runtime
