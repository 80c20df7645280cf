// Property test of the pool and host tier against a reference model. Memory is simulated at the
// chunk level (through the pool's own position -> chunk map), so a remap that moved a chunk from
// under a live object, a copy list that misses a page, or a page handed out twice shows up as a
// wrong stamp somewhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "kern/pool/host.hpp"
#include "kern/pool/pool.hpp"
#include "layouts.hpp"

namespace kern::pool {
namespace {

constexpr std::uint64_t kPoison = 0xdeadbeefdeadbeefull;

struct LeaseM {
  Lease h;
  std::vector<std::uint64_t> tok;  // expected stamp per position, 0 = not written
  std::uint64_t state = 0;
};
struct CpM {
  Checkpoint h;
  std::vector<std::uint64_t> tok;
  std::uint64_t state = 0;
};
struct ParkM {
  Parked h;
  std::vector<std::uint64_t> tok;
  std::uint64_t state = 0;
};

class Sim {
 public:
  Sim(const PoolLayout& layout, std::uint64_t tokens, std::uint64_t seqs, std::uint64_t host_grains, std::uint64_t seed)
      : layout_(layout), pool_(make(layout, tokens, seqs)), host_(pool_, HostConfig{host_grains * 64, 64}), rng_(seed) {
    unit_ = pool_.unit();
    chunk_ = pool_.chunk_bytes();
    chunk_mem_.assign(pool_.chunks() * chunk_ / 8, kPoison);
    host_mem_.assign(host_.capacity() / 8, kPoison);
    stateful_ = !layout_.per_seq.empty();
  }

  void run(std::uint64_t ops) {
    for (std::uint64_t i = 0; i < ops; ++i) {
      step();
      if (i % 500 == 499) check_all();
    }
    check_all();
    leases_.clear();
    cps_.clear();
    parked_.clear();
    finish_remaps();
    EXPECT_EQ(pool_.used(), 0u);
    EXPECT_EQ(pool_.slots_used(), 0u);
    EXPECT_EQ(pool_.live_nodes(), 0u);
    EXPECT_EQ(host_.used(), 0u);
    pool_.check_invariants();
    host_.check_invariants();
  }

  const std::vector<std::uint64_t>& trace() const { return trace_; }
  std::uint64_t granted() const { return granted_; }
  std::uint64_t denied(DeniedKind k) const { return denials_[static_cast<int>(k)]; }
  std::uint64_t remaps() const { return pool_.remapped(); }
  std::uint64_t host_restores() const { return host_restores_; }

 private:
  static Pool make(const PoolLayout& l, std::uint64_t tokens, std::uint64_t seqs) {
    auto [pool, plan] = Pool::create(l, PoolConfig::from_capacity(l, 40, Capacity{tokens, seqs}));
    return std::move(pool);
  }
  std::uint64_t rand(std::uint64_t n) { return n == 0 ? 0 : rng_() % n; }

  // ---- simulated memory
  std::uint64_t& word(std::uint32_t arena, std::uint64_t off) {
    const auto ch = pool_.chunk_at(arena, off / chunk_);
    if (!ch) {
      ADD_FAILURE() << "arena " << arena << " byte " << off << " is not mapped";
      static std::uint64_t sink;
      return sink;
    }
    return chunk_mem_[*ch * (chunk_ / 8) + (off % chunk_) / 8];
  }
  std::uint64_t token_word(PageId page, std::uint64_t t, std::uint32_t s) {
    return word(s, (page * unit_ + t) * layout_.paged[s].bytes_per_token);
  }
  void write_token(std::uint64_t token_slot, std::uint64_t stamp) {
    for (std::uint32_t s = 0; s < layout_.paged.size(); ++s)
      word(s, token_slot * layout_.paged[s].bytes_per_token) = stamp * 16 + s;
  }
  std::uint32_t seq_arena(std::size_t q) const { return static_cast<std::uint32_t>(layout_.paged.size() + q); }
  void write_slot(SlotId slot, std::uint64_t stamp) {
    for (std::size_t q = 0; q < layout_.per_seq.size(); ++q) {
      const std::uint64_t b = layout_.per_seq[q].bytes_per_seq;
      word(seq_arena(q), slot * b) = stamp * 16 + q;
      word(seq_arena(q), slot * b + b - 8) = stamp * 16 + q + 8;
    }
  }
  void expect_slot(SlotId slot, std::uint64_t stamp) {
    for (std::size_t q = 0; q < layout_.per_seq.size(); ++q) {
      const std::uint64_t b = layout_.per_seq[q].bytes_per_seq;
      ASSERT_EQ(word(seq_arena(q), slot * b), stamp * 16 + q) << "slot " << slot;
      ASSERT_EQ(word(seq_arena(q), slot * b + b - 8), stamp * 16 + q + 8) << "slot " << slot;
    }
  }
  void copy_page(PageId src, PageId dst) {
    for (std::uint64_t t = 0; t < unit_; ++t)
      for (std::uint32_t s = 0; s < layout_.paged.size(); ++s) {
        const std::uint64_t b = layout_.paged[s].bytes_per_token;
        word(s, (dst * unit_ + t) * b) = word(s, (src * unit_ + t) * b);
      }
  }
  void copy_slot(SlotId src, SlotId dst) {
    for (std::size_t q = 0; q < layout_.per_seq.size(); ++q) {
      const std::uint64_t b = layout_.per_seq[q].bytes_per_seq;
      word(seq_arena(q), dst * b) = word(seq_arena(q), src * b);
      word(seq_arena(q), dst * b + b - 8) = word(seq_arena(q), src * b + b - 8);
    }
  }
  void run_copies(const DeviceCopies& c) {
    for (const auto& p : c.pages) {
      copy_page(p.src, p.dst);
      trace_.push_back(p.src * 100000 + p.dst);
    }
    if (c.slot) {
      copy_slot(c.slot->src, c.slot->dst);
      trace_.push_back(c.slot->src * 1000 + c.slot->dst);
    }
  }
  // Host layout: one page of every paged state back to back; a slot likewise.
  std::uint64_t& host_token(HostOffset page, std::uint64_t t, std::uint32_t s) {
    std::uint64_t off = page;
    for (std::uint32_t k = 0; k < s; ++k) off += unit_ * layout_.paged[k].bytes_per_token;
    return host_mem_[(off + t * layout_.paged[s].bytes_per_token) / 8];
  }
  std::uint64_t& host_slot(HostOffset slot, std::size_t q, bool last) {
    std::uint64_t off = slot;
    for (std::size_t k = 0; k < q; ++k) off += layout_.per_seq[k].bytes_per_seq;
    if (last) off += layout_.per_seq[q].bytes_per_seq - 8;
    return host_mem_[off / 8];
  }
  void run_park(const ParkCopies& c) {
    for (const auto& p : c.pages) {
      for (std::uint64_t t = 0; t < unit_; ++t)
        for (std::uint32_t s = 0; s < layout_.paged.size(); ++s)
          host_token(p.dst, t, s) = token_word(static_cast<PageId>(p.src), t, s);
      trace_.push_back(p.src * 100000 + p.dst);
    }
    if (c.slot)
      for (std::size_t q = 0; q < layout_.per_seq.size(); ++q) {
        const std::uint64_t b = layout_.per_seq[q].bytes_per_seq;
        host_slot(c.slot->dst, q, false) = word(seq_arena(q), c.slot->src * b);
        host_slot(c.slot->dst, q, true) = word(seq_arena(q), c.slot->src * b + b - 8);
      }
  }
  void run_wake(const WakeCopies& c) {
    for (const auto& p : c.pages) {
      for (std::uint64_t t = 0; t < unit_; ++t)
        for (std::uint32_t s = 0; s < layout_.paged.size(); ++s) {
          const std::uint64_t b = layout_.paged[s].bytes_per_token;
          word(s, (p.dst * unit_ + t) * b) = host_token(p.src, t, s);
        }
      trace_.push_back(p.src * 100000 + p.dst);
    }
    if (c.slot)
      for (std::size_t q = 0; q < layout_.per_seq.size(); ++q) {
        const std::uint64_t b = layout_.per_seq[q].bytes_per_seq;
        word(seq_arena(q), c.slot->dst * b) = host_slot(c.slot->src, q, false);
        word(seq_arena(q), c.slot->dst * b + b - 8) = host_slot(c.slot->src, q, true);
      }
  }

  // ---- remaps: take the plan (the runtime zeroes newly mapped chunks: poison them), land later
  void remap_step() {
    if (in_flight_) {
      pool_.complete(*in_flight_);
      in_flight_.reset();
      trace_.push_back(7777);
      return;
    }
    if (auto plan = pool_.take_pending()) {
      for (const auto& m : plan->maps) std::fill_n(chunk_mem_.begin() + m.chunk * (chunk_ / 8), chunk_ / 8, kPoison);
      for (const auto& m : plan->maps) trace_.push_back(m.arena * 1000000 + m.pos * 1000 + m.chunk);
      in_flight_ = std::move(plan);
    }
  }
  void finish_remaps() {
    for (int i = 0; i < 4; ++i) remap_step();
  }

  template <typename T>
  bool note(const Granted<T>& g) {
    if (g.ok()) {
      ++granted_;
      trace_.push_back(1);
      return true;
    }
    ++denials_[static_cast<int>(g.denied().kind)];
    trace_.push_back(100 + static_cast<int>(g.denied().kind));
    return false;
  }

  // ---- checks
  void check(const LeaseM& l) {
    if (!l.h.paged()) {
      if (l.h.seq_slot()) expect_slot(*l.h.seq_slot(), l.state);
      return;
    }
    const auto pages = l.h.page_ids();
    ASSERT_EQ(l.tok.size(), pages.size() * unit_);
    for (std::uint64_t p = 0; p < l.tok.size(); ++p) {
      if (l.tok[p] == 0) continue;
      for (std::uint32_t s = 0; s < layout_.paged.size(); ++s)
        ASSERT_EQ(token_word(pages[p / unit_], p % unit_, s), l.tok[p] * 16 + s) << "lease position " << p;
    }
    if (l.h.seq_slot()) expect_slot(*l.h.seq_slot(), l.state);
  }
  void check(const CpM& c) {
    const auto pages = c.h.page_ids();
    ASSERT_EQ(pages.size(), c.h.pages());
    for (std::uint64_t p = 0; p < c.tok.size(); ++p)
      for (std::uint32_t s = 0; s < layout_.paged.size(); ++s)
        ASSERT_EQ(token_word(pages[p / unit_], p % unit_, s), c.tok[p] * 16 + s) << "checkpoint position " << p;
    if (c.h.seq_slot()) expect_slot(*c.h.seq_slot(), c.state);
  }
  void check(ParkM& c) {
    const auto offs = c.h.offsets();
    ASSERT_EQ(offs.size(), c.h.pages());
    for (std::uint64_t p = 0; p < c.tok.size(); ++p)
      for (std::uint32_t s = 0; s < layout_.paged.size(); ++s)
        ASSERT_EQ(host_token(offs[p / unit_], p % unit_, s), c.tok[p] * 16 + s) << "parked position " << p;
    if (c.h.slot_offset())
      for (std::size_t q = 0; q < layout_.per_seq.size(); ++q) {
        ASSERT_EQ(host_slot(*c.h.slot_offset(), q, false), c.state * 16 + q);
        ASSERT_EQ(host_slot(*c.h.slot_offset(), q, true), c.state * 16 + q + 8);
      }
  }
  void check_all() {
    for (auto& l : leases_) check(l);
    for (auto& c : cps_) check(c);
    for (auto& c : parked_) check(c);
    // Occupancy: the pool holds exactly what live handles name, and no lease's own page or
    // slot is named by anything else.
    std::multiset<PageId> named;
    std::set<PageId> own;
    std::multiset<SlotId> slots;
    for (auto& l : leases_) {
      const auto ids = l.h.page_ids();
      for (std::size_t i = 0; i < ids.size(); ++i) {
        named.insert(ids[i]);
        if (i >= l.h.shared()) {
          ASSERT_TRUE(own.insert(ids[i]).second) << "page " << ids[i] << " owned twice";
        }
      }
      if (l.h.seq_slot()) slots.insert(*l.h.seq_slot());
    }
    for (auto& c : cps_) {
      for (PageId p : c.h.page_ids()) named.insert(p);
      if (c.h.seq_slot()) slots.insert(*c.h.seq_slot());
    }
    for (PageId p : own) ASSERT_EQ(named.count(p), 1u) << "own page " << p << " is shared";
    for (auto& l : leases_)
      if (l.h.seq_slot()) {
        ASSERT_EQ(slots.count(*l.h.seq_slot()), 1u);
      }
    ASSERT_EQ(std::set<PageId>(named.begin(), named.end()).size(), pool_.used());
    ASSERT_EQ(std::set<SlotId>(slots.begin(), slots.end()).size(), pool_.slots_used());
    std::set<HostOffset> host_pages, host_slots;
    for (auto& c : parked_) {
      for (HostOffset o : c.h.offsets()) host_pages.insert(o);
      if (c.h.slot_offset()) host_slots.insert(*c.h.slot_offset());
    }
    ASSERT_EQ(host_pages.size(), host_.live_pages());
    ASSERT_EQ(host_.used(), host_pages.size() * host_.page_stride() + host_.live_slots() * host_.slot_stride());
    pool_.check_invariants();
    host_.check_invariants();
  }

  // ---- operations
  void step() {
    const std::uint64_t live = leases_.size() + cps_.size() + parked_.size();
    std::uint64_t op = rand(100);
    if (live > 28 && op < 60) op = 90;  // keep the population bounded: drop
    if (op < 10)
      do_lease();
    else if (op < 13)
      do_lease_slot();
    else if (op < 38)
      do_write();
    else if (op < 44)
      do_extend();
    else if (op < 52)
      do_checkpoint();
    else if (op < 55)
      do_retire();
    else if (op < 61)
      do_restore();
    else if (op < 66)
      do_fork();
    else if (op < 71)
      do_park();
    else if (op < 73)
      do_wake();
    else if (op < 75)
      do_restore_parked();
    else if (op < 76)
      do_room();
    else if (op < 82)
      remap_step();
    else
      do_drop();
  }

  LeaseM new_lease(Lease h) {
    LeaseM m;
    m.h = std::move(h);
    m.tok.assign(m.h.page_ids().size() * unit_, 0);
    if (m.h.seq_slot() && !m.h.prefix()) {  // fresh slot: the runtime zeroes it (here: a stamp)
      m.state = ++stamp_;
      write_slot(*m.h.seq_slot(), m.state);
    }
    return m;
  }

  void do_lease() {
    const std::uint64_t tokens = 1 + rand(pool_.max_seq_tokens() + 8);
    auto g = pool_.lease(tokens);
    const bool row = (tokens + unit_ - 1) / unit_ > pool_.row_pages();
    ASSERT_EQ(!g.ok() && g.denied().kind == DeniedKind::ExceedsRow, row);
    if (!note(g)) return;
    leases_.push_back(new_lease(std::move(g).value()));
    for (PageId p : leases_.back().h.page_ids()) trace_.push_back(p);
    check(leases_.back());
  }
  void do_lease_slot() {
    if (!stateful_) return;
    auto g = pool_.lease_slot();
    if (!note(g)) return;
    leases_.push_back(new_lease(std::move(g).value()));
    trace_.push_back(*leases_.back().h.seq_slot());
  }
  void do_write() {
    if (leases_.empty()) return;
    LeaseM& l = leases_[rand(leases_.size())];
    if (!l.h.paged()) {
      l.state = ++stamp_;
      write_slot(*l.h.seq_slot(), l.state);
      return;
    }
    const std::uint64_t n = 1 + rand(6);
    for (std::uint64_t i = 0; i < n && l.h.position() < l.h.capacity(); ++i) {
      const std::uint64_t pos = l.h.position();
      const std::uint64_t st = ++stamp_;
      write_token(l.h.slot(pos), st);
      l.tok[pos] = st;
      if (l.h.seq_slot()) {
        l.state = st;
        write_slot(*l.h.seq_slot(), st);
      }
    }
    // Positions below prefix or in sealed pages are refused.
    if (l.h.prefix() > 0) {
      EXPECT_THROW(l.h.slot(l.h.prefix() - 1), Error);
    }
    if (l.h.shared() > 0) {
      EXPECT_THROW(l.h.slot(l.h.shared() * unit_ - 1), Error);
    }
  }
  void do_extend() {
    if (leases_.empty()) return;
    LeaseM& l = leases_[rand(leases_.size())];
    if (!l.h.paged()) return;
    const std::uint64_t tokens = l.h.capacity() + 1 + rand(3 * unit_);
    auto d = pool_.extend(l.h, tokens);
    if (d) {
      ++denials_[static_cast<int>(d->kind)];
      trace_.push_back(100 + static_cast<int>(d->kind));
      return;
    }
    trace_.push_back(2);
    l.tok.resize(l.h.page_ids().size() * unit_, 0);
  }
  // A length the lease can be checkpointed / forked / retired at, 0 if none.
  std::uint64_t pick_len(const LeaseM& l) {
    if (!l.h.paged()) return 1 + rand(50);
    if (l.h.position() == 0) return 0;
    if (l.h.seq_slot()) return l.h.position();
    return 1 + rand(l.h.position());
  }
  void do_checkpoint() {
    if (leases_.empty()) return;
    LeaseM& l = leases_[rand(leases_.size())];
    const std::uint64_t len = pick_len(l);
    if (len == 0) return;
    auto g = pool_.checkpoint(l.h, len);
    if (!note(g)) return;
    auto [cp, copies] = std::move(g).value();
    run_copies(copies);
    CpM m;
    m.h = std::move(cp);
    if (l.h.paged()) m.tok.assign(l.tok.begin(), l.tok.begin() + static_cast<std::ptrdiff_t>(len));
    m.state = l.state;
    cps_.push_back(std::move(m));
    check(cps_.back());
  }
  void do_retire() {
    if (leases_.empty()) return;
    const std::size_t i = rand(leases_.size());
    LeaseM& l = leases_[i];
    const std::uint64_t len = pick_len(l);
    if (len == 0) return;
    CpM m;
    if (l.h.paged()) m.tok.assign(l.tok.begin(), l.tok.begin() + static_cast<std::ptrdiff_t>(len));
    m.state = l.state;
    m.h = pool_.retire(std::move(l.h), len);
    trace_.push_back(3);
    leases_.erase(leases_.begin() + static_cast<std::ptrdiff_t>(i));
    cps_.push_back(std::move(m));
    check(cps_.back());
  }
  void do_restore() {
    if (cps_.empty()) return;
    CpM& c = cps_[rand(cps_.size())];
    std::uint64_t len = c.h.tokens();
    if (!c.h.has_slot() && c.h.pages() > 0 && rand(2) == 0 && len / unit_ > 0) len = (1 + rand(len / unit_)) * unit_;
    const std::uint64_t tokens = c.h.pages() == 0 ? 0 : len + 1 + rand(3 * unit_);
    auto g = pool_.restore(c.h, len, tokens);
    adopt(g, c, len);
  }
  // A lease that restore or fork granted (unless denied): its copies run, then its first `len`
  // tokens and its state are those of `from`, the store it came from.
  template <typename G, typename From>
  void adopt(G& g, const From& from, std::uint64_t len) {
    if (!note(g)) return;
    auto [lease, copies] = std::move(g).value();
    run_copies(copies);
    LeaseM m = new_lease(std::move(lease));
    for (std::uint64_t p = 0; p < len && p < m.tok.size(); ++p) m.tok[p] = from.tok[p];
    m.state = from.state;
    leases_.push_back(std::move(m));
    check(leases_.back());
  }
  void do_fork() {
    if (leases_.empty()) return;
    LeaseM& l = leases_[rand(leases_.size())];
    const std::uint64_t len = pick_len(l);
    if (len == 0) return;
    const std::uint64_t tokens = l.h.paged() ? len + 1 + rand(3 * unit_) : 0;
    auto g = pool_.fork(l.h, len, tokens);
    adopt(g, l, len);
  }
  void do_park() {
    if (cps_.empty()) return;
    CpM& c = cps_[rand(cps_.size())];
    auto g = host_.park(c.h);
    if (!note(g)) return;
    auto [p, copies] = std::move(g).value();
    run_park(copies);
    ParkM m;
    m.h = std::move(p);
    m.tok = c.tok;
    m.state = c.state;
    parked_.push_back(std::move(m));
    check(parked_.back());
    if (rand(2) == 0) {  // the runtime usually lets the device copy go once parked
      cps_.erase(cps_.begin() + static_cast<std::ptrdiff_t>(&c - cps_.data()));
    }
  }
  void do_room() {
    if (cps_.empty()) return;
    const std::uint64_t before = host_.used();
    {
      auto g = host_.room(cps_[rand(cps_.size())].h);
      note(g);
    }
    ASSERT_EQ(host_.used(), before);
  }
  void do_wake() {
    if (parked_.empty()) return;
    ParkM& p = parked_[rand(parked_.size())];
    std::uint64_t len = p.h.tokens();
    if (!p.h.has_slot() && p.h.pages() > 0 && rand(2) == 0 && len / unit_ > 0) len = (1 + rand(len / unit_)) * unit_;
    auto g = host_.wake(p.h, pool_, len);
    if (!note(g)) return;
    auto [cp, copies] = std::move(g).value();
    run_wake(copies);
    CpM m;
    m.h = std::move(cp);
    m.tok.assign(p.tok.begin(),
                 p.tok.begin() + static_cast<std::ptrdiff_t>(std::min<std::uint64_t>(len, p.tok.size())));
    m.state = p.state;
    cps_.push_back(std::move(m));
    check(cps_.back());
  }
  // Host::restore: a lease straight from the host. Exactly one copy per page up to len and one
  // of the slot; the whole row is fresh, its full pages sealed into the chain.
  void do_restore_parked() {
    if (parked_.empty()) return;
    ParkM& p = parked_[rand(parked_.size())];
    std::uint64_t len = p.h.tokens();
    if (!p.h.has_slot() && p.h.pages() > 0 && rand(2) == 0 && len / unit_ > 0) len = (1 + rand(len / unit_)) * unit_;
    const std::uint64_t tokens = p.h.pages() == 0 ? 0 : len + 1 + rand(3 * unit_);
    const std::uint64_t used = pool_.used(), slots_used = pool_.slots_used(), nodes = pool_.live_nodes();
    auto g = host_.restore(p.h, pool_, len, tokens);
    if (!note(g)) {
      ASSERT_EQ(pool_.used(), used);  // a denial keeps nothing
      ASSERT_EQ(pool_.slots_used(), slots_used);
      ASSERT_EQ(pool_.live_nodes(), nodes);
      return;
    }
    auto [lease, copies] = std::move(g).value();
    const std::uint64_t woken = p.h.pages() == 0 ? 0 : (len + unit_ - 1) / unit_;
    ASSERT_EQ(copies.pages.size(), woken);
    ASSERT_EQ(copies.slot.has_value(), p.h.has_slot());
    ASSERT_EQ(lease.shared(), p.h.pages() == 0 ? 0 : len / unit_);
    ASSERT_EQ(lease.prefix(), len);
    ASSERT_EQ(pool_.used(), used + lease.page_ids().size());
    ASSERT_EQ(pool_.slots_used(), slots_used + (p.h.has_slot() ? 1 : 0));
    run_wake(copies);
    ++host_restores_;
    LeaseM m = new_lease(std::move(lease));
    for (std::uint64_t t = 0; t < len && t < m.tok.size(); ++t) m.tok[t] = p.tok[t];
    m.state = p.state;
    leases_.push_back(std::move(m));
    check(leases_.back());
  }
  void do_drop() {
    const std::uint64_t total = leases_.size() + cps_.size() + parked_.size();
    if (total == 0) return;
    std::uint64_t i = rand(total);
    trace_.push_back(9);
    if (i < leases_.size()) {
      leases_.erase(leases_.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
    i -= leases_.size();
    if (i < cps_.size()) {
      cps_.erase(cps_.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
    i -= cps_.size();
    parked_.erase(parked_.begin() + static_cast<std::ptrdiff_t>(i));
  }

  PoolLayout layout_;
  Pool pool_;
  Host host_;
  std::mt19937_64 rng_;
  std::uint64_t unit_ = 1, chunk_ = 1, stamp_ = 0, granted_ = 0, host_restores_ = 0;
  std::uint64_t denials_[5] = {};
  bool stateful_ = false;
  std::vector<std::uint64_t> chunk_mem_, host_mem_;
  std::vector<LeaseM> leases_;
  std::vector<CpM> cps_;
  std::vector<ParkM> parked_;
  std::optional<Remap> in_flight_;
  std::vector<std::uint64_t> trace_;
};

constexpr std::uint64_t kOps = 100000;

void run_seed(const PoolLayout& layout, std::uint64_t tokens, std::uint64_t seqs, std::uint64_t host_grains,
              std::uint64_t seed, bool twice) {
  Sim a(layout, tokens, seqs, host_grains, seed);
  a.run(kOps);
  std::printf(
      "seed %lu: granted %lu, denied row %lu pool %lu busy %lu remapping %lu hostfull %lu, remaps %lu, "
      "host restores %lu, trace %zu\n",
      static_cast<unsigned long>(seed), static_cast<unsigned long>(a.granted()),
      static_cast<unsigned long>(a.denied(DeniedKind::ExceedsRow)),
      static_cast<unsigned long>(a.denied(DeniedKind::ExceedsPool)),
      static_cast<unsigned long>(a.denied(DeniedKind::Busy)),
      static_cast<unsigned long>(a.denied(DeniedKind::Remapping)),
      static_cast<unsigned long>(a.denied(DeniedKind::HostFull)), static_cast<unsigned long>(a.remaps()),
      static_cast<unsigned long>(a.host_restores()), a.trace().size());
  EXPECT_GT(a.granted(), kOps / 10);
  EXPECT_GT(a.denied(DeniedKind::Busy) + a.denied(DeniedKind::Remapping), 0u);
  EXPECT_GT(a.denied(DeniedKind::ExceedsRow), 0u);
  EXPECT_GT(a.denied(DeniedKind::HostFull), 0u);
  EXPECT_GT(a.host_restores(), 0u);
  if (layout.per_seq.size()) {
    EXPECT_GT(a.remaps(), 0u);
  }
  if (twice) {
    Sim b(layout, tokens, seqs, host_grains, seed);
    b.run(kOps);
    EXPECT_EQ(a.trace(), b.trace());  // same calls, same decisions
  }
}

TEST(PoolProperty, PureKv) {
  for (std::uint64_t seed : {1, 2, 3}) run_seed(testing::pure_kv(), 192, 1, 40, seed, seed == 1);
}

TEST(PoolProperty, WithPerSeqState) {
  for (std::uint64_t seed : {11, 12, 13}) run_seed(testing::stateful(), 160, 6, 40, seed, seed == 11);
}

}  // namespace
}  // namespace kern::pool
