// Copy, move and drop of the two stored-chain handles, Checkpoint (device pages, in the pool's
// books) and Parked (host pages, in the host tier's): each is a counted reference `ref` to its
// books, a chain tail, a length, a page count and an optional slot. The books name their chains
// `nodes` and have retain_slot, release_node and release_slot.
#pragma once

#include <optional>
#include <utility>

#include "kern/pool/store.hpp"

namespace kern::pool::detail {

struct Handles {
  template <class H, class R>
  static void retain(H& h, R& ref) {  // after a copy: h is one more holder
    if (!ref) return;
    if (h.tail_ != kNoNode) ref->nodes.retain(h.tail_);
    if (h.slot_) ref->retain_slot(*h.slot_);
  }
  template <class H, class R>
  static void steal(H& h, R& ref, H& o, R& oref) noexcept {  // h empty; o left empty
    ref = std::move(oref);
    h.tail_ = std::exchange(o.tail_, kNoNode);
    h.len_ = std::exchange(o.len_, 0);
    h.pages_ = std::exchange(o.pages_, 0);
    h.slot_ = std::exchange(o.slot_, std::nullopt);
  }
  template <class H, class R>
  static void drop(H& h, R& ref) noexcept {
    if (ref) {
      if (h.tail_ != kNoNode) ref->release_node(h.tail_);
      if (h.slot_) ref->release_slot(*h.slot_);
    }
    ref = R();
    h.tail_ = kNoNode;
    h.len_ = h.pages_ = 0;
    h.slot_.reset();
  }
};

}  // namespace kern::pool::detail
