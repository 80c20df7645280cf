// Pool operations that move pages between leases and checkpoints: checkpoint, retire, restore,
// fork. Three rules: whole pages are shared; a partial page is copied to the new holder when
// it will be written; only a lease writes.
#include <utility>

#include "kern/base/error.hpp"
#include "kern/pool/pool.hpp"
#include "pool/core.hpp"

namespace kern::pool {
namespace {

detail::PoolCore& core_checked(const detail::CoreRef& pool, const detail::CoreRef& handle, const char* what) {
  if (!pool) fail(ErrorKind::Api, "pool: use of a moved-from Pool");
  if (!handle) fail(ErrorKind::Api, "pool: {} is empty (moved from or default)", what);
  if (pool.get() != handle.get()) fail(ErrorKind::Api, "pool: {} belongs to another pool", what);
  return *pool.get();
}

}  // namespace

void Pool::seal(detail::PoolCore& c, Lease& l, std::uint64_t upto) {
  if (upto > l.pages_.size()) upto = l.pages_.size();
  while (l.shared_ < upto) {
    const std::uint32_t prev = l.nodes_.empty() ? kNoNode : l.nodes_.back();
    const std::uint32_t n = c.make_node(l.pages_[l.shared_], prev);
    if (prev != kNoNode) c.release_node(prev);  // the lease's hold moves to the new tail
    l.nodes_.push_back(n);
    ++l.shared_;
  }
}

Lease Pool::start_lease(const std::vector<std::uint32_t>& chain, std::uint64_t len, std::vector<PageId> fresh,
                        std::optional<SlotId> slot) {
  detail::PoolCore& c = *core_.get();
  const std::uint64_t full = len / c.unit;
  Lease l;
  l.core_ = core_;
  l.unit_ = c.unit;
  l.paged_ = true;
  l.nodes_.assign(chain.begin(), chain.begin() + static_cast<std::ptrdiff_t>(full));
  l.pages_.reserve(full + fresh.size());
  for (std::uint32_t n : l.nodes_) l.pages_.push_back(c.nodes[n].page);
  l.pages_.insert(l.pages_.end(), fresh.begin(), fresh.end());
  if (full > 0) c.nodes.retain(l.nodes_.back());
  l.shared_ = full;
  l.slot_ = slot;
  l.prefix_ = l.position_ = len;
  return l;
}

Granted<std::pair<Checkpoint, DeviceCopies>> Pool::checkpoint(Lease& lease, std::uint64_t len) {
  detail::PoolCore& c = core_checked(core_, lease.core_, "lease");
  Checkpoint cp;
  DeviceCopies copies;
  if (!lease.paged_) {
    if (len == 0) fail(ErrorKind::Api, "pool: checkpoint of a slot-only lease at length 0");
    auto t = c.take(0, true);
    if (!t) return t.denied();
    cp.core_ = core_;
    cp.len_ = len;
    cp.slot_ = t.value().slot;
    copies.slot = {*lease.slot_, *cp.slot_};
    return std::pair{std::move(cp), std::move(copies)};
  }
  if (len == 0 || len > lease.capacity())
    fail(ErrorKind::Api, "pool: checkpoint at {} tokens of a lease holding {}", len, lease.capacity());
  if (lease.slot_ && len != lease.position_)
    fail(ErrorKind::Api, "pool: a lease with per-seq state checkpoints only at its position {}, not {}",
         lease.position_, len);
  const std::uint64_t full = len / c.unit;
  const bool partial = len % c.unit != 0;
  const bool copy_partial = partial && lease.shared_ <= full;  // the partial page is still written
  auto t = c.take(copy_partial ? 1 : 0, lease.slot_.has_value());
  if (!t) return t.denied();
  seal(c, lease, full);
  cp.core_ = core_;
  cp.len_ = len;
  cp.pages_ = detail::ceil_div(len, c.unit);
  if (copy_partial) {
    const PageId q = t.value().pages[0];
    cp.tail_ = c.make_node(q, full > 0 ? lease.nodes_[full - 1] : kNoNode);
    copies.pages.push_back({lease.pages_[full], q});
  } else {
    cp.tail_ = lease.nodes_[cp.pages_ - 1];  // frozen already: shared as it is
    c.nodes.retain(cp.tail_);
  }
  if (lease.slot_) {
    cp.slot_ = t.value().slot;
    copies.slot = {*lease.slot_, *cp.slot_};
  }
  return std::pair{std::move(cp), std::move(copies)};
}

Checkpoint Pool::retire(Lease&& lease, std::uint64_t len) {
  detail::PoolCore& c = core_checked(core_, lease.core_, "lease");
  Checkpoint cp;
  cp.core_ = core_;
  cp.len_ = len;
  if (len == 0) fail(ErrorKind::Api, "pool: retire at length 0");
  if (lease.paged_) {
    if (len > lease.capacity())
      fail(ErrorKind::Api, "pool: retire at {} tokens of a lease holding {}", len, lease.capacity());
    if (lease.slot_ && len != lease.position_)
      fail(ErrorKind::Api, "pool: a lease with per-seq state retires only at its position {}, not {}", lease.position_,
           len);
    cp.pages_ = detail::ceil_div(len, c.unit);
    seal(c, lease, cp.pages_);
    cp.tail_ = lease.nodes_[cp.pages_ - 1];
    c.nodes.retain(cp.tail_);
  }
  cp.slot_ = std::exchange(lease.slot_, std::nullopt);  // handed over, no copy
  lease.reset();
  return cp;
}

Granted<std::pair<Lease, DeviceCopies>> Pool::slot_only_copy(SlotId src, std::uint64_t len) {
  detail::PoolCore& c = *core_.get();
  auto t = c.take(0, true);
  if (!t) return t.denied();
  Lease l;
  l.core_ = core_;
  l.unit_ = c.unit;
  l.slot_ = t.value().slot;
  l.prefix_ = l.position_ = len;
  DeviceCopies copies;
  copies.slot = {src, *l.slot_};
  return std::pair{std::move(l), std::move(copies)};
}

Granted<std::pair<Lease, DeviceCopies>> Pool::restore(const Checkpoint& cp, std::uint64_t len, std::uint64_t tokens) {
  detail::PoolCore& c = core_checked(core_, cp.core_, "checkpoint");
  DeviceCopies copies;
  if (cp.pages_ == 0) {  // slot-only: moves the slot only
    if (len != cp.len_) fail(ErrorKind::Api, "pool: a slot-only checkpoint restores only at its length {}", cp.len_);
    return slot_only_copy(*cp.slot_, len);
  }
  detail::check_resume_len(len, cp.len_, c.unit, static_cast<bool>(cp.slot_), "pool", "checkpoint", "restore");
  if (tokens <= len)
    fail(ErrorKind::Api, "pool: restore to {} tokens must hold more than the {} restored", tokens, len);
  const std::uint64_t full = len / c.unit;
  auto t = c.take_row(tokens, full, cp.slot_.has_value(), cp.slot_.has_value());
  if (!t) return t.denied();
  const std::vector<std::uint32_t> chain = c.nodes.chain(cp.tail_);
  if (len % c.unit != 0) copies.pages.push_back({c.nodes[chain[full]].page, t.value().pages[0]});
  if (cp.slot_) copies.slot = {*cp.slot_, *t.value().slot};
  Lease l = start_lease(chain, len, std::move(t.value().pages), t.value().slot);
  return std::pair{std::move(l), std::move(copies)};
}

Granted<std::pair<Lease, DeviceCopies>> Pool::fork(Lease& parent, std::uint64_t len, std::uint64_t tokens) {
  detail::PoolCore& c = core_checked(core_, parent.core_, "lease");
  DeviceCopies copies;
  if (!parent.paged_) return slot_only_copy(*parent.slot_, len);
  if (len == 0 || len > parent.capacity())
    fail(ErrorKind::Api, "pool: fork at {} tokens of a lease holding {}", len, parent.capacity());
  if (parent.slot_ && len != parent.position_)
    fail(ErrorKind::Api, "pool: a lease with per-seq state forks only at its position {}, not {}", parent.position_,
         len);
  if (tokens <= len) fail(ErrorKind::Api, "pool: fork to {} tokens must hold more than the {} shared", tokens, len);
  const std::uint64_t full = len / c.unit;
  auto t = c.take_row(tokens, full, parent.slot_.has_value(), parent.slot_.has_value());
  if (!t) return t.denied();
  seal(c, parent, full);
  if (len % c.unit != 0) copies.pages.push_back({parent.pages_[full], t.value().pages[0]});
  if (parent.slot_) copies.slot = {*parent.slot_, *t.value().slot};
  Lease l = start_lease(parent.nodes_, len, std::move(t.value().pages), t.value().slot);
  return std::pair{std::move(l), std::move(copies)};
}

}  // namespace kern::pool
