// The state pool's random soak, written against a backend so that one driver runs over the
// simulated device (tests/host/runtime/state_pool_test.cpp) and over the GPU
// (tests/gpu/runtime/pool_gpu_test.cpp): lease / write / extend / checkpoint / retire /
// lease_from / fork / park / wake / awake / park_now / wake_now / drop / settle. A denial for
// want of room evicts the oldest store, else the oldest lease; HostFull drops the oldest parked
// store. Positions scale by unit / 4 and every written position holds its own value (the backend
// stamps whole token rows from it). Parked stores are checked by waking them: a woken lease must
// hold every byte the store held when it was parked.
//
// A backend provides the pool operations (lease, lease_slot, extend, checkpoint, retire,
// lease_from, fork, settle, pool(); room, park, wake, awake, park_now, wake_now, host()) and the bytes:
//   void stamp(std::span<const pool::PageId> pages, std::uint64_t first, std::span<const std::uint32_t> values);
//   std::string check(std::span<const pool::PageId> pages, std::span<const std::uint32_t> values);  // "" = all equal
//   void stamp_slot(pool::SlotId slot, std::uint32_t value);
//   std::string check_slot(pool::SlotId slot, std::uint32_t value);  // value 0: every byte zero
// `pages` is a page-table row (page ids, root first); position p lives on pages[p / unit].
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
#include <span>
#include <utility>
#include <variant>
#include <string>
#include <vector>

#include "kern/pool/host.hpp"
#include "kern/pool/pool.hpp"

namespace kern::pooltest {

template <typename Backend>
struct PoolSoak {
  struct Live {
    pool::Lease lease;
    std::vector<std::uint32_t> tok;  // the value each written position holds
    std::uint32_t slot = 0;
  };
  struct Stored {
    pool::Checkpoint cp;
    std::vector<std::uint32_t> tok;
    std::uint32_t slot = 0;
  };
  struct OnHost {
    pool::Parked parked;
    std::vector<std::uint32_t> tok;
    std::uint32_t slot = 0;
  };
  template <typename W>
  struct InFlight {
    W waking;
    std::vector<std::uint32_t> tok;
    std::uint32_t slot = 0;
  };
  using Waking = std::remove_cvref_t<decltype(std::declval<Backend&>().wake(std::declval<const pool::Parked&>(), 0, 0).value())>;

  PoolSoak(Backend& backend, std::uint64_t seed) : b(backend), rng(seed), k(backend.pool().unit() < 4 ? 1 : backend.pool().unit() / 4) {}

  template <typename G>
  bool granted_or_evict(const G& g) {
    if (g.ok()) return true;
    ++denied[static_cast<int>(g.denied().kind)];
    if (g.denied().kind == pool::DeniedKind::HostFull) {
      if (!parked.empty()) parked.erase(parked.begin());
    } else if (g.denied().kind == pool::DeniedKind::Busy) {
      if (!stored.empty()) {
        stored.erase(stored.begin());
      } else if (!leases.empty()) {
        leases.erase(leases.begin());
      }
    }
    return false;
  }

  std::uint64_t pick(std::uint64_t n) { return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng); }
  std::uint32_t fresh_value() { return next_value++; }  // never 0, never repeated

  void check_tokens(const std::vector<pool::PageId>& pages, const std::vector<std::uint32_t>& tok, const char* what) {
    if (tok.empty()) return;
    const std::string bad = b.check(pages, tok);
    ASSERT_TRUE(bad.empty()) << what << ": " << bad;
  }
  void check_slot(std::optional<pool::SlotId> s, std::uint32_t v, const char* what) {
    ASSERT_TRUE(s) << what << " has no slot";
    const std::string bad = b.check_slot(*s, v);
    ASSERT_TRUE(bad.empty()) << what << " slot " << *s << ": " << bad;
  }
  void check(const Live& l) {
    check_tokens(std::vector<pool::PageId>(l.lease.page_ids().begin(), l.lease.page_ids().end()), l.tok, "lease");
    check_slot(l.lease.seq_slot(), l.slot, "lease");
  }
  void check(const Stored& s) {
    check_tokens(s.cp.page_ids(), s.tok, "checkpoint");
    check_slot(s.cp.seq_slot(), s.slot, "checkpoint");
  }
  // A new lease's slot reads zero unless it was copied; it then gets its own value.
  void adopt(pool::Lease l, std::vector<std::uint32_t> tok, std::optional<std::uint32_t> slot) {
    Live live{std::move(l), std::move(tok), 0};
    if (slot) {
      live.slot = *slot;
      check_slot(live.lease.seq_slot(), live.slot, "a copied slot");
    } else {
      check_slot(live.lease.seq_slot(), 0, "a fresh slot");
      live.slot = fresh_value();
      b.stamp_slot(*live.lease.seq_slot(), live.slot);
    }
    leases.push_back(std::move(live));
  }

  // Park a stored checkpoint (the store stays or goes, as a prefix cache keeps or evicts it).
  void park_one() {
    const std::size_t i = pick(stored.size());
    Stored s = stored[i];
    if (pick(2) == 0) stored.erase(stored.begin() + static_cast<std::ptrdiff_t>(i));
    if (pick(4) == 0) {
      auto g = b.park_now(s.cp);
      if (granted_or_evict(g)) {
        parked.push_back({std::move(g).value(), std::move(s.tok), s.slot});
        ++parks[1];
      }
      return;
    }
    auto r = b.room(std::move(s.cp));
    if (std::holds_alternative<pool::Checkpoint>(r)) {  // host full: the checkpoint came back
      ++denied[static_cast<int>(pool::DeniedKind::HostFull)];
      if (!parked.empty()) parked.erase(parked.begin());
      return;
    }
    parked.push_back({b.park(std::get<pool::Room>(std::move(r))), std::move(s.tok), s.slot});
    ++parks[0];
  }
  void wake_one() {
    const OnHost h = parked[pick(parked.size())];
    const std::uint64_t len = h.parked.tokens();
    const std::uint64_t tokens = len + 1 + pick(8 * k);
    if (pick(4) == 0) {
      auto g = b.wake_now(h.parked, len, tokens);
      if (granted_or_evict(g)) {
        adopt(std::move(g).value(), h.tok, h.slot);
        check(leases.back());
        ++parks[3];
      }
      return;
    }
    auto g = b.wake(h.parked, len, tokens);
    if (granted_or_evict(g)) {
      waking.push_back({std::move(g).value(), h.tok, h.slot});
      ++parks[2];
    }
  }
  void awake_one() {
    const std::size_t i = pick(waking.size());
    InFlight<Waking> w = std::move(waking[i]);
    waking.erase(waking.begin() + static_cast<std::ptrdiff_t>(i));
    auto r = b.awake(std::move(w.waking));
    if (std::holds_alternative<Waking>(r)) {  // still in flight
      ++parks[5];
      w.waking = std::get<Waking>(std::move(r));
      waking.push_back(std::move(w));
      return;
    }
    adopt(std::get<pool::Lease>(std::move(r)), std::move(w.tok), w.slot);
    check(leases.back());
    ++parks[4];
  }

  void step() {
    std::uint64_t op = pick(13);
    if (op >= 10) {  // the host tier
      if (op == 10 && !stored.empty()) {
        park_one();
      } else if (op == 11 && !parked.empty()) {
        wake_one();
      } else if (!waking.empty()) {
        awake_one();
      }
      trim();
      return;
    }
    if (op == 0 || leases.empty()) {
      auto g = b.lease(1 + pick(24 * k));
      if (granted_or_evict(g)) {
        adopt(std::move(g).value(), {}, std::nullopt);
        ++done[0];
      }
    } else if (op == 1 || op == 2) {  // write the next few positions
      Live& l = leases[pick(leases.size())];
      const std::uint64_t first = l.lease.position();
      std::uint64_t n = std::min<std::uint64_t>(pick(6 * k), l.lease.capacity() - first);
      if (n == 0) return;
      (void)l.lease.slots(first, n);  // checks the positions are this lease's to write, advances it
      std::vector<std::uint32_t> v(n);
      for (auto& x : v) x = fresh_value();
      b.stamp(l.lease.page_ids(), first, v);
      l.tok.insert(l.tok.end(), v.begin(), v.end());
      done[1] += n;
    } else if (op == 3) {
      Live& l = leases[pick(leases.size())];
      (void)b.extend(l.lease, l.lease.capacity() + 1 + pick(8 * k));
    } else if (op == 4) {
      Live& l = leases[pick(leases.size())];
      if (l.tok.empty()) return;
      auto g = b.checkpoint(l.lease, l.tok.size());
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
      stored.push_back({b.retire(std::move(l.lease), len), std::move(l.tok), l.slot});
      ++done[3];
    } else if (op == 6 && !stored.empty()) {
      const Stored s = stored[pick(stored.size())];
      auto g = b.lease_from(s.cp, s.cp.tokens() + 1 + pick(8 * k));
      if (granted_or_evict(g)) {
        adopt(std::move(g).value(), s.tok, s.slot);
        ++done[4];
      }
    } else if (op == 7) {
      Live& p = leases[pick(leases.size())];
      if (p.tok.empty()) return;
      std::vector<std::uint32_t> tok = p.tok;
      const std::uint32_t slot = p.slot;
      auto g = b.fork(p.lease, p.tok.size(), p.tok.size() + 1 + pick(8 * k));
      if (granted_or_evict(g)) {
        adopt(std::move(g).value(), std::move(tok), slot);
        ++done[5];
      }
    } else if (op == 8) {
      const std::uint64_t which = pick(4);
      if (which == 0) {
        leases.erase(leases.begin() + static_cast<std::ptrdiff_t>(pick(leases.size())));
      } else if (which == 1 && !stored.empty()) {
        stored.erase(stored.begin() + static_cast<std::ptrdiff_t>(pick(stored.size())));
      } else if (which == 2 && !parked.empty()) {
        parked.erase(parked.begin() + static_cast<std::ptrdiff_t>(pick(parked.size())));
      } else if (which == 3 && !waking.empty()) {  // a dropped wake waits for its copies
        waking.erase(waking.begin() + static_cast<std::ptrdiff_t>(pick(waking.size())));
      }
    } else {
      b.settle();
    }
    trim();
  }
  void trim() {
    while (leases.size() > 5) leases.erase(leases.begin());
    while (stored.size() > 5) stored.erase(stored.begin());
    while (parked.size() > 6) parked.erase(parked.begin());
    while (waking.size() > 2) waking.erase(waking.begin());
  }
  // Drops everything the soak holds (a dropped wake waits for its copies).
  void clear() {
    waking.clear();
    leases.clear();
    stored.clear();
    parked.clear();
  }

  // Every live lease and checkpoint, bytes and slot; plus one deliberate mismatch, which the
  // backend must report (a check that cannot fail checks nothing).
  void check_all() {
    for (const auto& l : leases) {
      check(l);
      if (::testing::Test::HasFatalFailure()) return;
    }
    for (const auto& c : stored) {
      check(c);
      if (::testing::Test::HasFatalFailure()) return;
    }
    for (const auto& l : leases) {
      if (l.tok.empty()) continue;
      std::vector<std::uint32_t> wrong = l.tok;
      wrong.back() += 1;
      EXPECT_FALSE(b.check(std::vector<pool::PageId>(l.lease.page_ids().begin(), l.lease.page_ids().end()), wrong).empty())
          << "the check did not notice a wrong value at position " << wrong.size() - 1;
      EXPECT_FALSE(b.check_slot(*l.lease.seq_slot(), l.slot + 1).empty()) << "the slot check did not notice a wrong value";
      break;
    }
  }

  void print() const {
    auto u = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
    std::printf("[soak] granted: %llu leases, %llu positions written, %llu checkpoints, %llu retires, %llu lease_from, %llu forks\n",
                u(done[0]), u(done[1]), u(done[2]), u(done[3]), u(done[4]), u(done[5]));
    std::printf("[soak] host tier: %llu parks, %llu park_now, %llu wakes, %llu wake_now, %llu awake, %llu still waking\n",
                u(parks[0]), u(parks[1]), u(parks[2]), u(parks[3]), u(parks[4]), u(parks[5]));
    std::printf("[soak] denied: %llu ExceedsRow, %llu ExceedsPool, %llu Busy, %llu Remapping, %llu HostFull\n",
                u(denied[0]), u(denied[1]), u(denied[2]), u(denied[3]), u(denied[4]));
  }

  Backend& b;
  std::mt19937_64 rng;
  std::uint64_t k;  // positions scale: unit / 4 (the host soak's unit is 4)
  std::vector<Live> leases;
  std::vector<Stored> stored;
  std::vector<OnHost> parked;
  std::vector<InFlight<Waking>> waking;
  std::uint32_t next_value = 1;
  std::uint64_t done[6] = {};    // granted: leases, positions written, checkpoints, retires, lease_from, forks
  std::uint64_t parks[6] = {};   // park, park_now, wake, wake_now, awake (landed), awake (still in flight)
  std::uint64_t denied[5] = {};  // by DeniedKind
};

}  // namespace kern::pooltest
