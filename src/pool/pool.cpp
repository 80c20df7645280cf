#include "kern/pool/pool.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include "kern/base/error.hpp"
#include "pool/core.hpp"

namespace kern::pool {
namespace {

// Largest n in [0, hi] with cost(n) <= budget; cost is non-decreasing.
template <typename F>
std::uint64_t largest_fitting(std::uint64_t hi, std::uint64_t budget, F cost) {
  std::uint64_t lo = 0;
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo + 1) / 2;
    if (cost(mid) <= budget)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

detail::PoolCore& core(const detail::CoreRef& r) {
  if (!r) fail(ErrorKind::Api, "pool: use of a moved-from Pool");
  return *r.get();
}

void check_same(const detail::CoreRef& pool, const detail::CoreRef& handle, const char* what) {
  if (!handle) fail(ErrorKind::Api, "pool: {} is empty (moved from or default)", what);
  if (pool.get() != handle.get()) fail(ErrorKind::Api, "pool: {} belongs to another pool", what);
}

}  // namespace

PoolConfig PoolConfig::from_capacity(const PoolLayout& layout, std::uint64_t chunk_bytes, const Capacity& capacity) {
  layout.validate();
  if (!capacity.tokens)
    fail(ErrorKind::Api, "pool: Capacity without tokens is sized by the runtime from free memory, not here");
  PoolConfig c;
  c.chunk_bytes = chunk_bytes;
  c.first_slots = layout.per_seq.empty() ? 0 : capacity.seqs + 2;
  c.tokens = *capacity.tokens / layout.unit() * layout.unit();
  c.chunks = chunks_for(layout, chunk_bytes, *c.tokens, c.first_slots);
  return c;
}

std::pair<Pool, Remap> Pool::create(const PoolLayout& layout, const PoolConfig& config) {
  layout.validate();
  if (config.chunk_bytes == 0) fail(ErrorKind::Api, "pool: chunk_bytes is 0");
  detail::CoreRef ref(new detail::PoolCore);
  detail::PoolCore& c = *ref.get();
  c.layout = layout;
  c.unit = layout.unit();
  // Without page tables a row has no limit of its own: the clamp to pages_max below is its limit.
  c.row_pages = layout.row_pages().value_or(std::numeric_limits<std::uint64_t>::max());
  c.has_paged = !layout.paged.empty();
  c.has_seq = !layout.per_seq.empty();
  c.page_arenas = static_cast<std::uint32_t>(layout.paged.size());
  c.slot_arenas = static_cast<std::uint32_t>(layout.per_seq.size());

  // Provisional arenas (positions unknown) to size objects; then reserve the real extents.
  std::vector<ArenaInfo> arenas;
  for (const auto& s : layout.paged) arenas.push_back({s.name, true, c.unit * s.bytes_per_token, 0});
  for (const auto& s : layout.per_seq) arenas.push_back({s.name, false, s.bytes_per_seq, 0});
  c.chunks.init(arenas, config.chunk_bytes, 0);
  auto slot_cost = [&](std::uint64_t n) { return c.slot_chunks(n); };
  auto page_cost = [&](std::uint64_t n) { return c.page_chunks(n); };
  const std::uint64_t n = config.chunks;
  const std::uint64_t first_slots = c.has_seq ? config.first_slots : 0;
  if (c.has_seq && first_slots == 0) fail(ErrorKind::Api, "pool: a layout with per-seq states needs first_slots >= 1");
  const std::uint64_t id_cap = 0xfffffff0ull;
  std::uint64_t slots_max = 0, pages_max = 0;
  if (c.has_seq) slots_max = largest_fitting(std::min(id_cap, n * config.chunk_bytes + 1), n, slot_cost);
  if (c.has_seq && slot_cost(first_slots) > n)
    fail(ErrorKind::Api, "pool: a budget of {} chunks cannot hold the first {} slots ({} chunks)", n, first_slots,
         slot_cost(first_slots));
  const std::uint64_t slot0 = c.has_seq ? slot_cost(1) : 0;
  if (c.has_paged) pages_max = largest_fitting(std::min(id_cap, n * config.chunk_bytes + 1), n - slot0, page_cost);
  for (auto& a : arenas) a.positions = c.chunks.positions_for(&a - arenas.data(), a.paged ? pages_max : slots_max);
  c.chunks.init(arenas, config.chunk_bytes, n);
  c.pages.init(pages_max);
  c.row_pages = std::min(c.row_pages, pages_max);  // a row never names more pages than exist
  c.slots.init(slots_max);
  c.slot_refs.assign(slots_max, 0);

  Remap plan;
  plan.id = 0;
  for (std::uint32_t s = 0; s < first_slots; ++s) {
    for (std::uint32_t a = c.page_arenas; a < c.page_arenas + c.slot_arenas; ++a) c.chunks.map_object(a, s, plan);
    c.slots.set(s, ObjectStatus::Free);
    plan.made_slots.push_back(s);
  }
  if (c.has_seq) {
    c.slots.set(0, ObjectStatus::Held);  // the null slot, never leased
    c.slot_refs[0] = 1;
  }
  std::uint64_t first_pages = largest_fitting(pages_max, n - slot_cost(first_slots), page_cost);
  if (config.tokens) first_pages = std::min(first_pages, *config.tokens / c.unit);
  for (std::uint32_t p = 0; p < first_pages; ++p) {
    for (std::uint32_t a = 0; a < c.page_arenas; ++a) c.chunks.map_object(a, p, plan);
    c.pages.set(p, ObjectStatus::Free);
    plan.made_pages.push_back(p);
  }
  return {Pool(std::move(ref)), std::move(plan)};
}

// ---------------------------------------------------------------- leases

Granted<Lease> Pool::lease(std::uint64_t tokens) {
  detail::PoolCore& c = core(core_);
  if (!c.has_paged)
    fail(ErrorKind::Api, "pool: lease({}) needs a paged state; this layout has none (use lease_slot)", tokens);
  if (tokens == 0) fail(ErrorKind::Api, "pool: lease(0): a paged lease holds at least one token");
  auto t = c.take_row(tokens, 0, c.has_seq, c.has_seq);
  if (!t) return t.denied();
  Lease l;
  l.core_ = core_;
  l.pages_ = std::move(t.value().pages);
  l.slot_ = t.value().slot;
  l.unit_ = c.unit;
  l.paged_ = true;
  return l;
}

Granted<Lease> Pool::lease_slot() {
  detail::PoolCore& c = core(core_);
  if (!c.has_seq) fail(ErrorKind::Api, "pool: lease_slot() needs a per-seq state; this layout has none");
  if (!c.fits(0, true)) return Denied{DeniedKind::ExceedsPool};
  auto t = c.take(0, true);
  if (!t) return t.denied();
  Lease l;
  l.core_ = core_;
  l.slot_ = t.value().slot;
  l.unit_ = c.unit;
  return l;
}

std::optional<Denied> Pool::extend(Lease& lease, std::uint64_t tokens) {
  detail::PoolCore& c = core(core_);
  check_same(core_, lease.core_, "lease");
  if (!lease.paged_) fail(ErrorKind::Api, "pool: extend() on a slot-only lease");
  if (detail::ceil_div(tokens, c.unit) <= lease.pages_.size()) return std::nullopt;
  auto t = c.take_row(tokens, lease.pages_.size(), lease.slot_.has_value(), false);
  if (!t) return t.denied();
  lease.pages_.insert(lease.pages_.end(), t.value().pages.begin(), t.value().pages.end());
  return std::nullopt;
}

// ---------------------------------------------------------------- remaps

std::optional<Remap> Pool::take_pending() {
  detail::PoolCore& c = core(core_);
  if (!c.pending) return std::nullopt;
  c.in_flight = c.pending->id;
  std::optional<Remap> out = std::move(c.pending);
  c.pending.reset();
  return out;
}

void Pool::complete(const Remap& plan) {
  detail::PoolCore& c = core(core_);
  if (!c.in_flight || *c.in_flight != plan.id)
    fail(ErrorKind::Api, "pool: complete() of remap {} which is not in flight", plan.id);
  for (PageId p : plan.made_pages) c.pages.set(p, ObjectStatus::Free);
  for (PageId p : plan.unmade_pages) c.pages.set(p, ObjectStatus::Absent);
  for (SlotId s : plan.made_slots) c.slots.set(s, ObjectStatus::Free);
  for (SlotId s : plan.unmade_slots) c.slots.set(s, ObjectStatus::Absent);
  c.in_flight.reset();
  ++c.remapped;
}

bool Pool::remapping() const { return core(core_).pending || core(core_).in_flight; }
std::uint64_t Pool::remapped() const { return core(core_).remapped; }

// ---------------------------------------------------------------- observation

std::uint64_t Pool::unit() const { return core(core_).unit; }
std::uint64_t Pool::row_pages() const { return core(core_).row_pages; }
std::uint64_t Pool::max_seq_tokens() const { return row_pages() * unit(); }
std::uint64_t Pool::total() const { return core(core_).pages.live(); }
std::uint64_t Pool::used() const { return core(core_).pages.held(); }
std::uint64_t Pool::pages_max() const { return core(core_).pages.max(); }
std::uint64_t Pool::slots() const { return core(core_).slots.live(); }
std::uint64_t Pool::slots_used() const {
  const auto& c = core(core_);
  return c.has_seq ? c.slots.held() - 1 : 0;
}
std::uint64_t Pool::slots_max() const { return core(core_).slots.max(); }
std::uint64_t Pool::chunk_bytes() const { return core(core_).chunks.chunk_bytes(); }
std::uint64_t Pool::chunks() const { return core(core_).chunks.chunks(); }
std::uint64_t Pool::free_chunks() const { return core(core_).chunks.free_chunks(); }
const std::vector<ArenaInfo>& Pool::arenas() const { return core(core_).chunks.arenas(); }
std::optional<std::uint32_t> Pool::chunk_at(std::uint32_t arena, std::uint64_t pos) const {
  const auto& c = core(core_);
  if (arena >= c.chunks.arenas().size() || pos >= c.chunks.arenas()[arena].positions)
    fail(ErrorKind::Api, "pool: chunk_at({}, {}) is outside the arenas", arena, pos);
  const std::uint32_t ch = c.chunks.chunk(arena, pos);
  if (ch == detail::kNoChunk) return std::nullopt;
  return ch;
}
ObjectStatus Pool::page_status(PageId page) const {
  const auto& c = core(core_);
  if (page >= c.pages.max()) fail(ErrorKind::Api, "pool: page {} is beyond pages_max {}", page, c.pages.max());
  return c.pages.status(page);
}
ObjectStatus Pool::slot_status(SlotId slot) const {
  const auto& c = core(core_);
  if (slot >= c.slots.max()) fail(ErrorKind::Api, "pool: slot {} is beyond slots_max {}", slot, c.slots.max());
  return c.slots.status(slot);
}
std::uint64_t Pool::live_nodes() const { return core(core_).nodes.live(); }

void Pool::check_invariants() const {
  const auto& c = core(core_);
  const auto& arenas = c.chunks.arenas();
  std::vector<std::vector<std::uint32_t>> users(arenas.size());
  for (std::size_t a = 0; a < arenas.size(); ++a) users[a].assign(arenas[a].positions, 0);
  auto add = [&](std::uint32_t a0, std::uint32_t a1, std::uint64_t id) {
    for (std::uint32_t a = a0; a < a1; ++a) {
      auto [f, e] = c.chunks.span(a, id);
      for (std::uint64_t p = f; p < e; ++p) ++users[a][p];
    }
  };
  std::uint64_t live = 0, held = 0;
  for (std::uint32_t p = 0; p < c.pages.max(); ++p) {
    const ObjectStatus s = c.pages.status(p);
    live += s == ObjectStatus::Free || s == ObjectStatus::Held;
    held += s == ObjectStatus::Held;
    if (s != ObjectStatus::Absent && s != ObjectStatus::Leaving) add(0, c.page_arenas, p);
  }
  if (live != c.pages.live() || held != c.pages.held())
    fail(ErrorKind::Api, "pool invariant: page counters {}/{} but statuses say {}/{}", c.pages.live(), c.pages.held(),
         live, held);
  live = held = 0;
  for (std::uint32_t s = 0; s < c.slots.max(); ++s) {
    const ObjectStatus st = c.slots.status(s);
    live += st == ObjectStatus::Free || st == ObjectStatus::Held;
    held += st == ObjectStatus::Held;
    if ((st == ObjectStatus::Held) != (c.slot_refs[s] > 0))
      fail(ErrorKind::Api, "pool invariant: slot {} held={} with {} refs", s, st == ObjectStatus::Held, c.slot_refs[s]);
    if (st != ObjectStatus::Absent && st != ObjectStatus::Leaving) add(c.page_arenas, c.page_arenas + c.slot_arenas, s);
  }
  if (live != c.slots.live() || held != c.slots.held())
    fail(ErrorKind::Api, "pool invariant: slot counters {}/{} but statuses say {}/{}", c.slots.live(), c.slots.held(),
         live, held);
  std::vector<char> chunk_seen(c.chunks.chunks(), 0);
  std::uint64_t mapped = 0;
  for (std::uint32_t a = 0; a < arenas.size(); ++a)
    for (std::uint64_t p = 0; p < arenas[a].positions; ++p) {
      if (users[a][p] != c.chunks.users(a, p))
        fail(ErrorKind::Api, "pool invariant: arena {} position {} has {} users, objects say {}", a, p,
             c.chunks.users(a, p), users[a][p]);
      const std::uint32_t ch = c.chunks.chunk(a, p);
      if ((users[a][p] > 0) != (ch != detail::kNoChunk))
        fail(ErrorKind::Api, "pool invariant: arena {} position {} users {} chunk {}", a, p, users[a][p], ch);
      if (ch != detail::kNoChunk) {
        if (chunk_seen[ch]++) fail(ErrorKind::Api, "pool invariant: chunk {} mapped twice", ch);
        ++mapped;
      }
    }
  if (mapped + c.chunks.free_chunks() != c.chunks.chunks())
    fail(ErrorKind::Api, "pool invariant: {} mapped + {} free chunks != {}", mapped, c.chunks.free_chunks(),
         c.chunks.chunks());
  // Node pages are held; every live node's refs are at least its live children.
  std::vector<std::uint32_t> children(c.nodes.size(), 0);
  const std::vector<char> is_free = c.nodes.free_mask();
  std::uint64_t live_nodes = 0;
  for (std::uint32_t n = 0; n < c.nodes.size(); ++n) {
    if (is_free[n]) continue;
    ++live_nodes;
    if (c.pages.status(c.nodes[n].page) != ObjectStatus::Held)
      fail(ErrorKind::Api, "pool invariant: node {} page {} is not held", n, c.nodes[n].page);
    if (c.nodes[n].parent != kNoNode) ++children[c.nodes[n].parent];
  }
  if (live_nodes != c.nodes.live())
    fail(ErrorKind::Api, "pool invariant: {} live nodes, counter {}", live_nodes, c.nodes.live());
  for (std::uint32_t n = 0; n < c.nodes.size(); ++n)
    if (!is_free[n] && c.nodes[n].refs < std::max<std::uint32_t>(children[n], 1))
      fail(ErrorKind::Api, "pool invariant: node {} has {} refs but {} children", n, c.nodes[n].refs, children[n]);
}

}  // namespace kern::pool
