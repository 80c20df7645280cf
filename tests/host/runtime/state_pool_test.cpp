// The state pool's orchestration (src/runtime/state_pool.hpp) over a simulated device
// (sim_device.hpp): fresh slots read zero, checkpoint / lease_from / fork copy the bytes they must
// (a partial page becomes the child's own), a remap runs behind its fence on the worker and is
// collected by a later call (Remapping until then), settle() drains it, denials stay values.
#include "runtime/state_pool.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <variant>

#include "granted.hpp"
#include "pool_soak.hpp"
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


// The soak's backend over the simulated device: kv positions hold their value in each of their
// four words, a slot in each of its twelve.
struct SimBackend {
  SimBackend() : t(160, 3, 128) { t.state->reserve_host(12, 2); }

  pool::Granted<Lease> lease(std::uint64_t n) { return t.state->lease(n); }
  pool::Granted<Lease> lease_slot() { return t.state->lease_slot(); }
  std::optional<pool::Denied> extend(Lease& l, std::uint64_t n) { return t.state->extend(l, n); }
  pool::Granted<pool::Checkpoint> checkpoint(Lease& l, std::uint64_t len) { return t.state->checkpoint(l, len); }
  pool::Checkpoint retire(Lease&& l, std::uint64_t len) { return t.state->retire(std::move(l), len); }
  pool::Granted<Lease> lease_from(const pool::Checkpoint& cp, std::uint64_t n) { return t.state->lease_from(cp, n); }
  pool::Granted<Lease> fork(Lease& parent, std::uint64_t len, std::uint64_t n) { return t.state->fork(parent, len, n); }
  void settle() { t.state->settle(); }
  const Pool& pool() const { return t.state->pool(); }
  const pool::Host* host() const { return t.state->host(); }
  std::variant<pool::Room, pool::Checkpoint> room(pool::Checkpoint cp) { return t.state->room(std::move(cp)); }
  pool::Parked park(pool::Room&& r) { return t.state->park(std::move(r)); }
  pool::Granted<Waking> wake(const pool::Parked& p, std::uint64_t len, std::uint64_t n) { return t.state->wake(p, len, n); }
  std::variant<Lease, Waking> awake(Waking&& w) { return t.state->awake(std::move(w)); }
  pool::Granted<pool::Parked> park_now(const pool::Checkpoint& cp) { return t.state->park_now(cp); }
  pool::Granted<Lease> wake_now(const pool::Parked& p, std::uint64_t len, std::uint64_t n) { return t.state->wake_now(p, len, n); }

  static std::vector<std::byte> words(std::uint64_t bytes, std::uint32_t v) {
    std::vector<std::byte> out(bytes);
    for (std::uint64_t i = 0; i < bytes; i += 4) std::memcpy(out.data() + i, &v, 4);
    return out;
  }
  std::uint64_t offset(std::span<const pool::PageId> pages, std::uint64_t pos) const {
    return pages[pos / 4] * t.page_bytes() + (pos % 4) * 16;
  }
  void stamp(std::span<const pool::PageId> pages, std::uint64_t first, std::span<const std::uint32_t> values) {
    for (std::size_t i = 0; i < values.size(); ++i) t.device->write(0, offset(pages, first + i), words(16, values[i]));
  }
  std::string check(std::span<const pool::PageId> pages, std::span<const std::uint32_t> values) {
    for (std::size_t pos = 0; pos < values.size(); ++pos)
      if (t.device->read(0, offset(pages, pos), 16) != words(16, values[pos]))
        return "position " + std::to_string(pos) + " does not hold " + std::to_string(values[pos]);
    return "";
  }
  void stamp_slot(pool::SlotId s, std::uint32_t v) { t.device->write(1, s * t.slot_bytes(), words(t.slot_bytes(), v)); }
  std::string check_slot(pool::SlotId s, std::uint32_t v) {
    if (t.device->read(1, s * t.slot_bytes(), t.slot_bytes()) == words(t.slot_bytes(), v)) return "";
    return "does not hold " + std::to_string(v);
  }
  Pooled t;
};

// 10,000 random operations per seed over a small pool (remaps happen as slots and pages compete
// for chunks; the host tier holds 12 pages and 2 slots, so HostFull happens), every live lease's
// and checkpoint's bytes checked against the soak's model, ending with every object returned.
class StatePoolSoak : public ::testing::TestWithParam<int> {};

TEST_P(StatePoolSoak, TenThousandOperationsKeepEveryByteAndReturnEveryObject) {
  SimBackend backend;
  pooltest::PoolSoak<SimBackend> s(backend, static_cast<std::uint64_t>(GetParam()));
  const pool::Pool& p = backend.pool();
  const std::uint64_t chunks = p.chunks(), free_chunks = p.free_chunks();
  for (int i = 0; i < 10000; ++i) {
    s.step();
    if (::testing::Test::HasFatalFailure()) FAIL() << "at operation " << i;
    if (i % 97 == 0 || i == 9999) {
      s.check_all();
      if (::testing::Test::HasFatalFailure()) FAIL() << "at operation " << i;
      p.check_invariants();
      backend.host()->check_invariants();
    }
  }
  std::printf("[soak] seed %d: %llu remaps started, %llu landed\n", GetParam(),
              static_cast<unsigned long long>(backend.t.state->remaps_started()),
              static_cast<unsigned long long>(p.remapped()));
  s.print();
  EXPECT_GT(backend.t.state->remaps_started(), 0u) << "the soak exercised remaps";
  for (std::uint64_t n : s.done) EXPECT_GT(n, 100u) << "every kind of operation was granted often";
  for (int i = 0; i < 5; ++i) EXPECT_GT(s.parks[i], 50u) << "every host-tier operation was granted often (" << i << ")";
  EXPECT_GT(s.denied[static_cast<int>(DeniedKind::HostFull)], 0u) << "the host tier filled";
  s.clear();
  backend.settle();
  EXPECT_EQ(p.used(), 0u);
  EXPECT_EQ(p.slots_used(), 0u);
  EXPECT_EQ(p.live_nodes(), 0u);
  EXPECT_EQ(p.chunks(), chunks);
  EXPECT_EQ(p.free_chunks(), free_chunks);
  EXPECT_EQ(backend.host()->used(), 0u);
  EXPECT_EQ(backend.t.state->parks_in_flight(), 0u);
  p.check_invariants();
  backend.host()->check_invariants();
}
INSTANTIATE_TEST_SUITE_P(Seeds3, StatePoolSoak, ::testing::Values(1, 2, 3));

}  // namespace
}  // namespace kern::runtime
