// The state pool's orchestration (src/runtime/state_pool.hpp) over a simulated device
// (sim_device.hpp): fresh slots read zero, checkpoint / lease_from / fork copy the bytes they must
// (a partial page becomes the child's own), a remap runs behind its fence on the worker and is
// collected by a later call (Remapping until then), settle() drains it, denials stay values.
#include "runtime/state_pool.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "granted.hpp"
#include "sim_device.hpp"

namespace kern::runtime {
namespace {

using pool::Capacity;
using pool::DeniedKind;
using pool::Lease;
using pool::Pool;
using pool::PoolConfig;
using pool::PoolLayout;
using testing::granted;
using testing::SimDevice;

// One paged state (pages of 4 tokens × 16 bytes) and one per-seq state of 48 bytes.
PoolLayout kv_and_conv() {
  PoolLayout l;
  l.paged = {{"kv", 16}};
  l.per_seq = {{"conv", 48}};
  l.page_tables = {{"block_table", "kv", 4, 32}};
  return l;
}

std::vector<std::byte> bytes_of(std::uint64_t n, std::uint8_t v) { return std::vector<std::byte>(n, std::byte{v}); }

struct Pooled {
  explicit Pooled(std::uint64_t tokens = 32, std::uint64_t seqs = 2, std::uint64_t chunk = 128) {
    const PoolLayout l = kv_and_conv();
    auto [p, plan] = Pool::create(l, PoolConfig::from_capacity(l, chunk, Capacity{tokens, seqs}));
    const StateGeometry g = state_geometry(p, nullptr);
    device = std::make_unique<SimDevice>(p, g, plan);
    state = std::make_unique<StatePool>(std::move(p), *device);
  }
  std::uint64_t page_bytes() const { return state->geometry().arenas[0].object_bytes; }
  std::uint64_t slot_bytes() const { return state->geometry().arenas[1].object_bytes; }
  // Token position `pos` of `lease` in the kv arena.
  std::uint64_t token_offset(const Lease& lease, std::uint64_t pos) const {
    return lease.page_ids()[pos / 4] * page_bytes() + (pos % 4) * 16;
  }
  void write_tokens(const Lease& lease, std::uint64_t from, std::uint64_t to, std::uint8_t v) {
    for (std::uint64_t pos = from; pos < to; ++pos) device->write(0, token_offset(lease, pos), bytes_of(16, v));
  }
  std::unique_ptr<SimDevice> device;
  std::unique_ptr<StatePool> state;  // after the device: destroyed first
};

TEST(StatePool, FreshSlotsReadZeroEvenAfterAnotherLeaseWroteThem) {
  Pooled t;
  const std::uint64_t s = t.slot_bytes();
  std::uint32_t slot = 0;
  {
    Lease a = granted(t.state->lease(8));
    ASSERT_TRUE(a.seq_slot());
    slot = *a.seq_slot();
    EXPECT_EQ(t.device->read(1, slot * s, s), bytes_of(s, 0));
    t.device->write(1, slot * s, bytes_of(s, 0x7e));
  }
  Lease b = granted(t.state->lease_slot());
  ASSERT_TRUE(b.seq_slot());
  EXPECT_EQ(t.device->read(1, *b.seq_slot() * s, s), bytes_of(s, 0)) << "slot " << *b.seq_slot() << " (was " << slot << ")";
}

TEST(StatePool, LeaseFromAndForkInsideAPageGiveTheChildItsOwnCopy) {
  Pooled t(64, 3);
  Lease parent = granted(t.state->lease(16));
  for (std::uint64_t p = 0; p < 6; ++p) parent.slot(p);
  t.write_tokens(parent, 0, 6, 0x11);
  t.device->write(1, *parent.seq_slot() * t.slot_bytes(), bytes_of(t.slot_bytes(), 0x22));
  const pool::Checkpoint cp = granted(t.state->checkpoint(parent, 6));  // 6 = a page and a half
  Lease child = granted(t.state->lease_from(cp, 16));
  Lease forked = granted(t.state->fork(parent, 6, 16));
  for (Lease* l : {&child, &forked}) {
    ASSERT_NE(l->page_ids()[1], parent.page_ids()[1]) << "the partial page is the child's own";
    for (std::uint64_t pos = 0; pos < 6; ++pos) EXPECT_EQ(t.device->read(0, t.token_offset(*l, pos), 16), bytes_of(16, 0x11));
    EXPECT_EQ(t.device->read(1, *l->seq_slot() * t.slot_bytes(), t.slot_bytes()), bytes_of(t.slot_bytes(), 0x22));
  }
  // parent and children write different tokens at 6 and 7: nobody sees the others'
  for (std::uint64_t p = 6; p < 8; ++p) {
    parent.slot(p);
    child.slot(p);
    forked.slot(p);
  }
  t.write_tokens(parent, 6, 8, 0xaa);
  t.write_tokens(child, 6, 8, 0xbb);
  t.write_tokens(forked, 6, 8, 0xcc);
  EXPECT_EQ(t.device->read(0, t.token_offset(parent, 6), 16), bytes_of(16, 0xaa));
  EXPECT_EQ(t.device->read(0, t.token_offset(child, 6), 16), bytes_of(16, 0xbb));
  EXPECT_EQ(t.device->read(0, t.token_offset(forked, 7), 16), bytes_of(16, 0xcc));
  EXPECT_EQ(t.device->read(0, t.token_offset(child, 5), 16), bytes_of(16, 0x11));
}

TEST(StatePool, SlotsTakeChunksFromPagesThroughRemapsAndKeepTheirBytes) {
  Pooled t(32, 1);  // slots 0..2 at load; more slots must come from the pages' chunks
  const std::uint64_t s = t.slot_bytes(), initial_ops = t.device->vmm_ops_run();
  std::vector<Lease> held;
  std::uint64_t remapping = 0;
  for (int i = 0; i < 200; ++i) {
    pool::Granted<Lease> g = t.state->lease_slot();
    if (g.ok()) {
      Lease l = std::move(g).value();
      ASSERT_TRUE(l.seq_slot());
      EXPECT_EQ(t.device->read(1, *l.seq_slot() * s, s), bytes_of(s, 0)) << "slot " << *l.seq_slot();
      t.device->write(1, *l.seq_slot() * s, bytes_of(s, static_cast<std::uint8_t>(1 + held.size())));
      held.push_back(std::move(l));
      continue;
    }
    if (g.denied().kind != DeniedKind::Remapping) {
      EXPECT_EQ(g.denied().kind, DeniedKind::Busy) << g.denied().describe();
      break;
    }
    ++remapping;
    EXPECT_EQ(t.state->remaps_started(), remapping) << "the denial started the plan at once";
    t.state->settle();
    EXPECT_FALSE(t.state->pool().remapping());
  }
  EXPECT_GE(held.size(), 10u);
  EXPECT_GE(remapping, 3u);
  EXPECT_EQ(t.state->pool().remapped(), remapping);
  EXPECT_GT(t.device->vmm_ops_run(), initial_ops) << "some remaps moved chunks from pages to slots";
  for (std::size_t k = 0; k < held.size(); ++k)
    EXPECT_EQ(t.device->read(1, *held[k].seq_slot() * s, s), bytes_of(s, static_cast<std::uint8_t>(1 + k)))
        << "lease " << k << " slot " << *held[k].seq_slot();
  t.state->pool().check_invariants();
}

TEST(StatePool, AHeldFenceKeepsTheRemapInFlightAndCallsDenied) {
  Pooled t(32, 1);
  std::vector<Lease> held;
  t.device->hold_fences(true);
  pool::Granted<Lease> g = t.state->lease_slot();
  while (g.ok()) {
    held.push_back(std::move(g).value());
    ASSERT_LT(held.size(), 64u);
    g = t.state->lease_slot();
  }
  ASSERT_EQ(g.denied().kind, DeniedKind::Remapping);
  for (int i = 0; i < 3; ++i) {
    pool::Granted<Lease> again = t.state->lease_slot();
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.denied().kind, DeniedKind::Remapping) << "in flight until its fence lands";
    EXPECT_TRUE(t.state->pool().remapping());
  }
  EXPECT_EQ(t.state->pool().remapped(), 0u);
  t.device->hold_fences(false);
  t.state->settle();
  EXPECT_FALSE(t.state->pool().remapping());
  EXPECT_EQ(t.state->pool().remapped(), 1u);
  EXPECT_TRUE(t.state->lease_slot().ok());
}

TEST(StatePool, DenialsAreValues) {
  Pooled t(32, 1);
  pool::Granted<Lease> big = t.state->lease(1u << 20);
  ASSERT_FALSE(big.ok());
  EXPECT_TRUE(big.denied().kind == DeniedKind::ExceedsPool || big.denied().kind == DeniedKind::ExceedsRow)
      << big.denied().describe();
  Lease a = granted(t.state->lease(8));
  EXPECT_FALSE(t.state->extend(a, 16).has_value());
  EXPECT_GE(a.capacity(), 16u);
}

}  // namespace
}  // namespace kern::runtime

namespace kern::runtime {
namespace {

// 10,000 random lease / write / extend / checkpoint / retire / lease_from / fork / drop / settle
// operations per seed over a small pool (remaps happen as slots and pages compete for chunks),
// with every live lease's and checkpoint's bytes checked against a reference model, ending with
// every object returned.
struct Soak {
  struct Live {
    Lease lease;
    std::vector<std::uint8_t> tok;  // the byte each written position holds
    std::uint8_t slot = 0;
  };
  struct Stored {
    pool::Checkpoint cp;
    std::vector<std::uint8_t> tok;
    std::uint8_t slot = 0;
  };
  explicit Soak(std::uint64_t seed) : rng(seed), t(160, 3, 128) {}

  // A denial for want of room drops the oldest checkpoint, else the oldest lease (as a server evicts).
  template <typename G>
  bool granted_or_evict(const G& g) {
    if (g.ok()) return true;
    if (g.denied().kind == DeniedKind::Busy) {
      if (!stored.empty()) {
        stored.erase(stored.begin());
      } else if (!leases.empty()) {
        leases.erase(leases.begin());
      }
    }
    return false;
  }

  std::uint64_t pick(std::uint64_t n) { return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng); }
  std::uint8_t value() { return static_cast<std::uint8_t>(1 + pick(255)); }

  void check_tokens(std::span<const pool::PageId> pages, const std::vector<std::uint8_t>& tok) {
    for (std::uint64_t pos = 0; pos < tok.size(); ++pos) {
      const std::uint64_t off = pages[pos / 4] * t.page_bytes() + (pos % 4) * 16;
      ASSERT_EQ(t.device->read(0, off, 16), bytes_of(16, tok[pos])) << "position " << pos;
    }
  }
  void check_slot(std::optional<pool::SlotId> s, std::uint8_t v) {
    ASSERT_TRUE(s);
    ASSERT_EQ(t.device->read(1, *s * t.slot_bytes(), t.slot_bytes()), bytes_of(t.slot_bytes(), v)) << "slot " << *s;
  }
  void check(const Live& l) {
    check_tokens(l.lease.page_ids(), l.tok);
    check_slot(l.lease.seq_slot(), l.slot);
  }
  void check(const Stored& s) {
    const std::vector<pool::PageId> pages = s.cp.page_ids();
    check_tokens(pages, s.tok);
    check_slot(s.cp.seq_slot(), s.slot);
  }
  // A new lease's slot reads zero; it gets its own pattern.
  void adopt(Lease l, std::vector<std::uint8_t> tok, std::optional<std::uint8_t> slot) {
    Live live{std::move(l), std::move(tok), 0};
    if (slot) {
      live.slot = *slot;
    } else {
      check_slot(live.lease.seq_slot(), 0);
      live.slot = value();
      t.device->write(1, *live.lease.seq_slot() * t.slot_bytes(), bytes_of(t.slot_bytes(), live.slot));
    }
    leases.push_back(std::move(live));
  }

  void step() {
    const std::uint64_t op = pick(10);
    if (op == 0 || leases.empty()) {
      auto g = t.state->lease(1 + pick(24));
      if (granted_or_evict(g)) {
        adopt(std::move(g).value(), {}, std::nullopt);
        ++done[0];
      }
    } else if (op == 1 || op == 2) {  // write a few positions
      Live& l = leases[pick(leases.size())];
      for (std::uint64_t k = pick(6); k > 0 && l.lease.position() < l.lease.capacity(); --k) {
        const std::uint64_t pos = l.lease.position();
        const std::uint64_t token_slot = l.lease.slot(pos);
        const std::uint8_t v = value();
        t.device->write(0, token_slot * 16, bytes_of(16, v));
        l.tok.push_back(v);
        ++done[1];
      }
    } else if (op == 3) {
      Live& l = leases[pick(leases.size())];
      (void)t.state->extend(l.lease, l.lease.capacity() + 1 + pick(8));
    } else if (op == 4) {
      Live& l = leases[pick(leases.size())];
      if (l.tok.empty()) return;
      auto g = t.state->checkpoint(l.lease, l.tok.size());
      if (granted_or_evict(g)) {
        stored.push_back({std::move(g).value(), l.tok, l.slot});
        ++done[2];
      }
    } else if (op == 5) {
      const std::size_t i = pick(leases.size());
      if (leases[i].tok.empty()) return;
      Live l = std::move(leases[i]);
      leases.erase(leases.begin() + static_cast<std::ptrdiff_t>(i));
      const std::uint64_t len = l.tok.size();
      stored.push_back({t.state->retire(std::move(l.lease), len), std::move(l.tok), l.slot});
      ++done[3];
    } else if (op == 6 && !stored.empty()) {
      const Stored s = stored[pick(stored.size())];
      auto g = t.state->lease_from(s.cp, s.cp.tokens() + 1 + pick(8));
      if (granted_or_evict(g)) {
        adopt(std::move(g).value(), s.tok, s.slot);
        ++done[4];
      }
    } else if (op == 7) {
      Live& p = leases[pick(leases.size())];
      if (p.tok.empty()) return;
      std::vector<std::uint8_t> tok = p.tok;
      const std::uint8_t slot = p.slot;
      auto g = t.state->fork(p.lease, p.tok.size(), p.tok.size() + 1 + pick(8));
      if (granted_or_evict(g)) {
        adopt(std::move(g).value(), std::move(tok), slot);
        ++done[5];
      }
    } else if (op == 8) {
      if (pick(2) == 0) {
        leases.erase(leases.begin() + static_cast<std::ptrdiff_t>(pick(leases.size())));
      } else if (!stored.empty()) {
        stored.erase(stored.begin() + static_cast<std::ptrdiff_t>(pick(stored.size())));
      }
    } else {
      t.state->settle();
    }
    while (leases.size() > 5) leases.erase(leases.begin());
    while (stored.size() > 5) stored.erase(stored.begin());
  }

  std::mt19937_64 rng;
  Pooled t;
  std::vector<Live> leases;
  std::vector<Stored> stored;
  std::uint64_t done[6] = {};  // granted: leases, positions written, checkpoints, retires, lease_from, forks
};

class StatePoolSoak : public ::testing::TestWithParam<int> {};

TEST_P(StatePoolSoak, TenThousandOperationsKeepEveryByteAndReturnEveryObject) {
  Soak s(static_cast<std::uint64_t>(GetParam()));
  const pool::Pool& p = s.t.state->pool();
  const std::uint64_t chunks = p.chunks(), free_chunks = p.free_chunks();
  for (int i = 0; i < 10000; ++i) {
    s.step();
    if (::testing::Test::HasFatalFailure()) FAIL() << "at operation " << i;
    if (i % 97 == 0) {
      for (const auto& l : s.leases) s.check(l);
      for (const auto& c : s.stored) s.check(c);
      if (::testing::Test::HasFatalFailure()) FAIL() << "at operation " << i;
      p.check_invariants();
    }
  }
  std::printf("[soak] seed %d: %llu remaps started, %llu landed\n", GetParam(),
              static_cast<unsigned long long>(s.t.state->remaps_started()),
              static_cast<unsigned long long>(p.remapped()));
  std::printf("[soak] granted: %llu leases, %llu positions written, %llu checkpoints, %llu retires, %llu lease_from, %llu forks\n",
              static_cast<unsigned long long>(s.done[0]), static_cast<unsigned long long>(s.done[1]),
              static_cast<unsigned long long>(s.done[2]), static_cast<unsigned long long>(s.done[3]),
              static_cast<unsigned long long>(s.done[4]), static_cast<unsigned long long>(s.done[5]));
  EXPECT_GT(s.t.state->remaps_started(), 0u) << "the soak exercised remaps";
  for (std::uint64_t n : s.done) EXPECT_GT(n, 100u) << "every kind of operation was granted often";
  s.leases.clear();
  s.stored.clear();
  s.t.state->settle();
  EXPECT_EQ(p.used(), 0u);
  EXPECT_EQ(p.slots_used(), 0u);
  EXPECT_EQ(p.live_nodes(), 0u);
  EXPECT_EQ(p.chunks(), chunks);
  EXPECT_EQ(p.free_chunks(), free_chunks);
  p.check_invariants();
}
INSTANTIATE_TEST_SUITE_P(Seeds3, StatePoolSoak, ::testing::Values(1, 2, 3));

}  // namespace
}  // namespace kern::runtime
