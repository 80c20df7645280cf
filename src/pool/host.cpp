#include "kern/pool/host.hpp"

#include <algorithm>
#include <atomic>

#include "kern/base/error.hpp"
#include "pool/core.hpp"
#include "pool/free_list.hpp"
#include "pool/handles.hpp"
#include "pool/grain_allocator.hpp"

namespace kern::pool {
namespace detail {

struct HostNode {
  std::uint64_t first = 0;  // first grain
  std::uint32_t parent = kNoNode;
  std::uint32_t refs = 0;
  std::uint32_t gen = 0;
};
struct HostSlot {
  std::uint64_t first = 0;
  std::uint32_t refs = 0;
};

struct HostCore {
  std::uint32_t refs = 1;
  std::uint64_t id = 0;
  CoreRef pool;
  std::uint64_t unit = 1, grain = 0, page_bytes = 0, page_grains = 0, slot_bytes = 0, slot_grains = 0;
  GrainAllocator alloc;
  Chains<HostNode> nodes;
  FreeList<HostSlot> slots;

  std::uint32_t make_node(std::uint64_t first, std::uint32_t parent) {
    const std::uint32_t n = nodes.make(parent);
    nodes[n].first = first;  // gen stays: it counts the id's uses
    return n;
  }
  void release_node(std::uint32_t n) {
    nodes.release(n, "host", [this](HostNode& node) {
      alloc.free(node.first, page_grains);
      ++node.gen;  // device twins pointing here are now dead
    });
  }
  std::uint32_t make_slot(std::uint64_t first) {
    const std::uint32_t s = slots.take();
    slots[s] = {first, 1};
    return s;
  }
  void retain_slot(std::uint32_t s) { ++slots[s].refs; }
  void release_slot(std::uint32_t s) {
    if (slots[s].refs == 0) fail(ErrorKind::Api, "host: internal error, slot {} released twice", s);
    if (--slots[s].refs != 0) return;
    alloc.free(slots[s].first, slot_grains);
    slots.give(s);
  }
  bool twin_live(const Twin& t) const {
    return t.host == id && t.node < nodes.size() && nodes[t.node].gen == t.gen && nodes[t.node].refs > 0;
  }
};

void retain(HostCore* core) { ++core->refs; }
void release(HostCore* core) {
  if (--core->refs == 0) delete core;
}

}  // namespace detail

namespace {

detail::HostCore& host_of(const detail::HostRef& r) {
  if (!r) fail(ErrorKind::Api, "host: use of a moved-from Host");
  return *r.get();
}

std::uint64_t next_host_id() {
  static std::atomic<std::uint64_t> next{1};
  return next++;
}

// wake() and restore() read a store parked on this host into the pool this host serves.
void check_wakes_here(const detail::HostCore& h, const detail::HostRef& parked, const detail::CoreRef& pool_core,
                      const char* verb) {
  if (!parked || parked.get() != &h) fail(ErrorKind::Api, "host: {}() of a store parked elsewhere", verb);
  if (!pool_core || pool_core.get() != h.pool.get()) fail(ErrorKind::Api, "host: {}() into another pool", verb);
}

// The fresh device pages[0, count) as a chain of nodes mirroring host nodes hchain[0, count),
// each remembering its twin (so parking them again copies nothing); the host -> device copies
// are appended. Returns the nodes, root first; the tail holds the one reference the caller owns.
std::vector<std::uint32_t> twinned_chain(detail::HostCore& h, detail::PoolCore& c,
                                         const std::vector<std::uint32_t>& hchain, const std::vector<PageId>& pages,
                                         std::uint64_t count, WakeCopies& copies) {
  std::vector<std::uint32_t> nodes;
  nodes.reserve(count);
  std::uint32_t prev = kNoNode;
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint32_t node = c.make_node(pages[i], prev);
    if (prev != kNoNode) c.release_node(prev);  // the hold moves to the new tail
    prev = node;
    c.nodes[node].twin = {h.id, hchain[i], h.nodes[hchain[i]].gen};
    copies.pages.push_back({h.nodes[hchain[i]].first * h.grain, pages[i]});
    nodes.push_back(node);
  }
  return nodes;
}

}  // namespace

// ---------------------------------------------------------------- Parked

Parked::Parked(const Parked& o) : host_(o.host_), tail_(o.tail_), len_(o.len_), pages_(o.pages_), slot_(o.slot_) {
  detail::Handles::retain(*this, host_);
}
Parked::Parked(Parked&& o) noexcept { detail::Handles::steal(*this, host_, o, o.host_); }
Parked& Parked::operator=(Parked o) noexcept {
  reset();
  detail::Handles::steal(*this, host_, o, o.host_);
  return *this;
}
Parked::~Parked() { reset(); }
void Parked::reset() noexcept { detail::Handles::drop(*this, host_); }
std::vector<HostOffset> Parked::offsets() const {
  std::vector<HostOffset> out;
  if (!host_) return out;
  const auto& h = *host_.get();
  for (std::uint32_t n : h.nodes.chain(tail_)) out.push_back(h.nodes[n].first * h.grain);
  return out;
}
std::optional<HostOffset> Parked::slot_offset() const {
  if (!host_ || !slot_) return std::nullopt;
  return host_.get()->slots[*slot_].first * host_.get()->grain;
}

// ---------------------------------------------------------------- Room

Room::Room(Room&& o) noexcept
    : host_(std::move(o.host_)),
      cp_(std::move(o.cp_)),
      reuse_tail_(std::exchange(o.reuse_tail_, kNoNode)),
      reuse_(std::exchange(o.reuse_, 0)),
      reserved_(std::move(o.reserved_)),
      slot_grain_(std::exchange(o.slot_grain_, std::nullopt)) {
  o.reserved_.clear();
}
Room& Room::operator=(Room&& o) noexcept {
  if (this != &o) {
    reset();
    host_ = std::move(o.host_);
    cp_ = std::move(o.cp_);
    reuse_tail_ = std::exchange(o.reuse_tail_, kNoNode);
    reuse_ = std::exchange(o.reuse_, 0);
    reserved_ = std::move(o.reserved_);
    o.reserved_.clear();
    slot_grain_ = std::exchange(o.slot_grain_, std::nullopt);
  }
  return *this;
}
Room::~Room() { reset(); }
void Room::reset() noexcept {
  if (host_) {
    auto& h = *host_.get();
    if (reuse_tail_ != kNoNode) h.release_node(reuse_tail_);
    for (std::uint64_t g : reserved_) h.alloc.free(g, h.page_grains);
    if (slot_grain_) h.alloc.free(*slot_grain_, h.slot_grains);
  }
  host_ = detail::HostRef();
  cp_ = Checkpoint();
  reuse_tail_ = kNoNode;
  reuse_ = 0;
  reserved_.clear();
  slot_grain_.reset();
}

// ---------------------------------------------------------------- Host

HostConfig HostConfig::for_objects(const Pool& pool, std::uint64_t pages, std::uint64_t slots, std::uint64_t grain) {
  const Host empty(pool, HostConfig{0, grain});  // its strides are the rule
  std::uint64_t a = 0, b = 0, bytes = 0;
  if (__builtin_mul_overflow(pages, empty.page_stride(), &a) || __builtin_mul_overflow(slots, empty.slot_stride(), &b) ||
      __builtin_add_overflow(a, b, &bytes))
    fail(ErrorKind::Api, "host: {} pages and {} slots overflow the host block's size", pages, slots);
  return HostConfig{bytes, grain};
}

Host::Host(const Pool& pool, const HostConfig& config) {
  if (!pool.core_) fail(ErrorKind::Api, "host: built from a moved-from Pool");
  if (config.grain == 0) fail(ErrorKind::Api, "host: grain is 0");
  const auto& c = *pool.core_.get();
  host_ = detail::HostRef(new detail::HostCore);
  auto& h = *host_.get();
  h.id = next_host_id();
  h.pool = pool.core_;
  h.unit = c.unit;
  h.grain = config.grain;
  h.page_bytes = c.unit * c.layout.bytes_per_token();
  h.slot_bytes = c.layout.bytes_per_seq();
  h.page_grains = detail::ceil_div(h.page_bytes, h.grain);
  h.slot_grains = detail::ceil_div(h.slot_bytes, h.grain);
  h.alloc.init(config.bytes / config.grain);
}

Granted<Room> Host::room(const Checkpoint& cp) {
  auto& h = host_of(host_);
  if (!cp.core_) fail(ErrorKind::Api, "host: room() for an empty checkpoint");
  if (cp.core_.get() != h.pool.get()) fail(ErrorKind::Api, "host: room() for a checkpoint of another pool");
  auto& c = *h.pool.get();
  const std::vector<std::uint32_t> chain = c.nodes.chain(cp.tail_);
  std::uint32_t prev = kNoNode;
  std::size_t i = 0;
  for (; i < chain.size(); ++i) {
    const detail::Twin& t = c.nodes[chain[i]].twin;
    if (!h.twin_live(t) || h.nodes[t.node].parent != prev) break;
    prev = t.node;
  }
  Room room;
  room.host_ = host_;
  for (std::size_t k = i; k < chain.size(); ++k) {
    auto g = h.alloc.alloc_low(h.page_grains);
    if (!g) return Denied{DeniedKind::HostFull};  // room's destructor gives back what it took
    room.reserved_.push_back(*g);
  }
  if (cp.slot_) {
    auto g = h.alloc.alloc_high(h.slot_grains);
    if (!g) return Denied{DeniedKind::HostFull};
    room.slot_grain_ = *g;
  }
  if (prev != kNoNode) h.nodes.retain(prev);
  room.reuse_tail_ = prev;
  room.reuse_ = i;
  room.cp_ = cp;
  return room;
}

std::pair<Parked, ParkCopies> Host::park(Room&& room) {
  auto& h = host_of(host_);
  if (!room.host_ || room.host_.get() != &h) fail(ErrorKind::Api, "host: park() of a room of another host");
  auto& c = *h.pool.get();
  const Checkpoint& cp = room.cp_;
  const std::vector<std::uint32_t> chain = c.nodes.chain(cp.tail_);
  ParkCopies copies;
  std::uint32_t current = std::exchange(room.reuse_tail_, kNoNode);  // one hold, moved along
  std::size_t next_reserved = 0;
  for (std::size_t i = room.reuse_; i < chain.size(); ++i) {
    detail::Node& dn = c.nodes[chain[i]];
    if (h.twin_live(dn.twin) && h.nodes[dn.twin.node].parent == current) {
      h.nodes.retain(dn.twin.node);
      if (current != kNoNode) h.release_node(current);
      current = dn.twin.node;
      continue;
    }
    if (next_reserved == room.reserved_.size()) fail(ErrorKind::Api, "host: internal error, room too small");
    const std::uint64_t g = room.reserved_[next_reserved++];
    const std::uint32_t n = h.make_node(g, current);
    if (current != kNoNode) h.release_node(current);
    current = n;
    dn.twin = {h.id, n, h.nodes[n].gen};
    copies.pages.push_back({dn.page, g * h.grain});
  }
  for (; next_reserved < room.reserved_.size(); ++next_reserved)
    h.alloc.free(room.reserved_[next_reserved], h.page_grains);
  room.reserved_.clear();
  Parked p;
  p.host_ = host_;
  p.tail_ = current;
  p.len_ = cp.len_;
  p.pages_ = cp.pages_;
  if (cp.slot_) {
    const std::uint64_t g = *std::exchange(room.slot_grain_, std::nullopt);
    p.slot_ = h.make_slot(g);
    copies.slot = {*cp.slot_, g * h.grain};
  }
  room.reset();
  return {std::move(p), std::move(copies)};
}

Granted<std::pair<Parked, ParkCopies>> Host::park(const Checkpoint& cp) {
  auto r = room(cp);
  if (!r) return r.denied();
  return park(std::move(r).value());
}

Granted<std::pair<Checkpoint, WakeCopies>> Host::wake(const Parked& parked, Pool& pool, std::uint64_t len) {
  auto& h = host_of(host_);
  check_wakes_here(h, parked.host_, pool.core_, "wake");
  auto& c = *h.pool.get();
  WakeCopies copies;
  Checkpoint cp;
  detail::check_resume_len(len, parked.len_, c.unit, parked.slot_ || parked.pages_ == 0, "host", "parked store",
                           "wake");
  const std::uint64_t n = parked.pages_ == 0 ? 0 : detail::ceil_div(len, c.unit);
  if (!c.fits(n, parked.slot_.has_value())) return Denied{DeniedKind::ExceedsPool};
  auto t = c.take(n, parked.slot_.has_value());
  if (!t) return t.denied();
  // Every page, the partial one too, is a frozen node: a checkpoint never writes.
  const std::vector<std::uint32_t> nodes = twinned_chain(h, c, h.nodes.chain(parked.tail_), t.value().pages, n, copies);
  cp.core_ = h.pool;
  cp.tail_ = nodes.empty() ? kNoNode : nodes.back();
  cp.len_ = len;
  cp.pages_ = n;
  if (parked.slot_) {
    cp.slot_ = t.value().slot;
    copies.slot = {h.slots[*parked.slot_].first * h.grain, *cp.slot_};
  }
  return std::pair{std::move(cp), std::move(copies)};
}

Granted<std::pair<Lease, WakeCopies>> Host::restore(const Parked& parked, Pool& pool, std::uint64_t len,
                                                    std::uint64_t tokens) {
  auto& h = host_of(host_);
  check_wakes_here(h, parked.host_, pool.core_, "restore");
  auto& c = *h.pool.get();
  WakeCopies copies;
  if (parked.pages_ == 0) {  // slot-only: the slot moves into a slot-only lease
    if (len != parked.len_)
      fail(ErrorKind::Api, "host: a slot-only parked store restores only at its length {}, not {}", parked.len_, len);
    if (!c.fits(0, true)) return Denied{DeniedKind::ExceedsPool};
    auto t = c.take(0, true);
    if (!t) return t.denied();
    Lease l;
    l.core_ = h.pool;
    l.unit_ = c.unit;
    l.slot_ = t.value().slot;
    l.prefix_ = l.position_ = len;
    copies.slot = {h.slots[*parked.slot_].first * h.grain, *l.slot_};
    return std::pair{std::move(l), std::move(copies)};
  }
  detail::check_resume_len(len, parked.len_, c.unit, parked.slot_.has_value(), "host", "parked store", "restore");
  if (tokens <= len)
    fail(ErrorKind::Api, "host: restore to {} tokens must hold more than the {} restored", tokens, len);
  // Unlike Pool::restore no page is held yet: the whole row is fresh, its first full pages
  // become the shared chain.
  const bool with_slot = parked.slot_.has_value();
  auto t = c.take_row(tokens, 0, with_slot, with_slot);
  if (!t) return t.denied();
  const std::vector<PageId>& pages = t.value().pages;
  const std::uint64_t full = len / c.unit;
  const std::vector<std::uint32_t> hchain = h.nodes.chain(parked.tail_);
  const std::vector<std::uint32_t> nodes = twinned_chain(h, c, hchain, pages, full, copies);
  // The partial page is the lease's own: it writes on past len, so the page keeps no twin (a
  // later park copies it again, as it must).
  if (len % c.unit != 0) copies.pages.push_back({h.nodes[hchain[full]].first * h.grain, pages[full]});
  if (with_slot) copies.slot = {h.slots[*parked.slot_].first * h.grain, *t.value().slot};
  Lease l = pool.start_lease(
      nodes, len, std::vector<PageId>(pages.begin() + static_cast<std::ptrdiff_t>(full), pages.end()), t.value().slot);
  if (!nodes.empty()) c.release_node(nodes.back());  // the lease took its own hold of the tail
  return std::pair{std::move(l), std::move(copies)};
}

std::uint64_t Host::grain() const { return host_of(host_).grain; }
std::uint64_t Host::page_bytes() const { return host_of(host_).page_bytes; }
std::uint64_t Host::page_stride() const { return host_of(host_).page_grains * host_of(host_).grain; }
std::uint64_t Host::slot_bytes() const { return host_of(host_).slot_bytes; }
std::uint64_t Host::slot_stride() const { return host_of(host_).slot_grains * host_of(host_).grain; }
std::uint64_t Host::capacity() const { return host_of(host_).alloc.grains() * host_of(host_).grain; }
std::uint64_t Host::used() const { return host_of(host_).alloc.used() * host_of(host_).grain; }
std::uint64_t Host::live_pages() const { return host_of(host_).nodes.live(); }
std::uint64_t Host::live_slots() const { return host_of(host_).slots.live(); }

void Host::check_invariants() const {
  const auto& h = host_of(host_);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;  // [first, len), live objects then free runs
  const std::vector<char> is_free = h.nodes.free_mask();
  std::uint64_t live = 0, used = 0;
  for (std::uint32_t n = 0; n < h.nodes.size(); ++n)
    if (!is_free[n]) {
      spans.emplace_back(h.nodes[n].first, h.page_grains);
      used += h.page_grains;
      ++live;
    }
  if (live != h.nodes.live()) fail(ErrorKind::Api, "host invariant: {} live pages, counter {}", live, h.nodes.live());
  const std::vector<char> slot_free = h.slots.free_mask();
  for (std::uint32_t s = 0; s < h.slots.size(); ++s)
    if (!slot_free[s]) {
      spans.emplace_back(h.slots[s].first, h.slot_grains);
      used += h.slot_grains;
    }
  if (used != h.alloc.used())
    fail(ErrorKind::Api, "host invariant: live objects use {} grains, allocator says {}", used, h.alloc.used());
  std::uint64_t last_end = 0;
  bool first_run = true;
  for (const auto& [f, l] : h.alloc.free_runs()) {
    if (!first_run && f <= last_end) fail(ErrorKind::Api, "host invariant: free runs at {} not coalesced", f);
    first_run = false;
    last_end = f + l;
    spans.emplace_back(f, l);
  }
  std::sort(spans.begin(), spans.end());
  std::uint64_t at = 0;
  for (const auto& [f, l] : spans) {
    if (f != at) fail(ErrorKind::Api, "host invariant: grains at {} overlap or are lost (next span at {})", at, f);
    at = f + l;
  }
  if (at != h.alloc.grains()) fail(ErrorKind::Api, "host invariant: spans cover {} of {} grains", at, h.alloc.grains());
}

}  // namespace kern::pool
