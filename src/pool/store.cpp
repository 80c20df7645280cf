#include "kern/pool/store.hpp"

#include "pool/core.hpp"

namespace kern::pool {

Checkpoint::Checkpoint(const Checkpoint& o) : core_(o.core_), tail_(o.tail_), len_(o.len_), pages_(o.pages_), slot_(o.slot_) {
  if (core_) {
    if (tail_ != kNoNode) core_.get()->retain_node(tail_);
    if (slot_) core_.get()->retain_slot(*slot_);
  }
}

Checkpoint::Checkpoint(Checkpoint&& o) noexcept
    : core_(std::move(o.core_)),
      tail_(std::exchange(o.tail_, kNoNode)),
      len_(std::exchange(o.len_, 0)),
      pages_(std::exchange(o.pages_, 0)),
      slot_(std::exchange(o.slot_, std::nullopt)) {}

Checkpoint& Checkpoint::operator=(Checkpoint o) noexcept {
  reset();
  core_ = std::move(o.core_);
  tail_ = std::exchange(o.tail_, kNoNode);
  len_ = std::exchange(o.len_, 0);
  pages_ = std::exchange(o.pages_, 0);
  slot_ = std::exchange(o.slot_, std::nullopt);
  return *this;
}

Checkpoint::~Checkpoint() { reset(); }

void Checkpoint::reset() noexcept {
  if (core_) {
    if (tail_ != kNoNode) core_.get()->release_node(tail_);
    if (slot_) core_.get()->release_slot(*slot_);
  }
  core_ = detail::CoreRef();
  tail_ = kNoNode;
  len_ = pages_ = 0;
  slot_.reset();
}

std::vector<PageId> Checkpoint::page_ids() const {
  std::vector<PageId> out;
  if (!core_) return out;
  for (std::uint32_t n : core_.get()->chain(tail_)) out.push_back(core_.get()->nodes[n].page);
  return out;
}

}  // namespace kern::pool
