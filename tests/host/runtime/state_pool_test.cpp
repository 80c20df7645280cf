// The state pool's orchestration (src/runtime/state_pool.hpp) over a simulated device
// (sim_device.hpp): fresh slots read zero, checkpoint / lease_from / fork copy the bytes they must
// (a partial page becomes the child's own), a remap runs behind its fence on the worker and is
// collected by a later call (Remapping until then), settle() drains it, denials stay values.
#include "runtime/state_pool.hpp"

#include <gtest/gtest.h>

#include "sim_device.hpp"

namespace kern::runtime {
namespace {

using pool::Capacity;
using pool::DeniedKind;
using pool::Lease;
using pool::Pool;
using pool::PoolConfig;
using pool::PoolLayout;
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

template <typename T>
T granted(pool::Granted<T>&& g) {
  if (!g.ok()) ADD_FAILURE() << "denied: " << g.denied().describe();
  return std::move(g).value();
}

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
