// The pool's one free-list allocator: objects addressed by dense u32 ids, freed ids reused last
// freed first (device page nodes, host page nodes, host slots); and, over it, chains of reference
// counted nodes (device and host checkpoints: a node's count is its children plus its holders).
#pragma once

#include <cstdint>
#include <vector>

#include "kern/base/error.hpp"
#include "kern/pool/store.hpp"

namespace kern::pool::detail {

template <class T>
class FreeList {
 public:
  // A live id: the last one freed, its object left as it was (fields that outlive one use, such
  // as a generation, stay), or a new default-constructed one.
  std::uint32_t take() {
    std::uint32_t id;
    if (!free_.empty()) {
      id = free_.back();
      free_.pop_back();
    } else {
      id = static_cast<std::uint32_t>(items_.size());
      items_.emplace_back();
    }
    ++live_;
    return id;
  }
  void give(std::uint32_t id) {
    free_.push_back(id);
    --live_;
  }

  T& operator[](std::uint32_t id) { return items_[id]; }
  const T& operator[](std::uint32_t id) const { return items_[id]; }
  std::uint32_t size() const { return static_cast<std::uint32_t>(items_.size()); }  // ids ever handed out
  std::uint64_t live() const { return live_; }
  std::vector<char> free_mask() const {  // 1 at every free id (invariant checks)
    std::vector<char> mask(items_.size(), 0);
    for (std::uint32_t id : free_) mask[id] = 1;
    return mask;
  }

 private:
  std::vector<T> items_;
  std::vector<std::uint32_t> free_;
  std::uint64_t live_ = 0;
};

// Chains of nodes with `parent` and `refs` fields. `what` names the chains in errors ("pool").
template <class Node>
class Chains : public FreeList<Node> {
 public:
  // A node with refs = 1 under `parent` (which gains a ref); its other fields are the caller's.
  std::uint32_t make(std::uint32_t parent) {
    const std::uint32_t n = this->take();
    Node& node = (*this)[n];
    node.parent = parent;
    node.refs = 1;
    if (parent != kNoNode) ++(*this)[parent].refs;
    return n;
  }
  void retain(std::uint32_t n) { ++(*this)[n].refs; }
  // Drops one ref of `n`; a node left without refs is freed (`on_free(node)` first) and drops
  // its parent's ref in turn, in a loop: a 65k-node chain unwinds without stack growth.
  template <class OnFree>
  void release(std::uint32_t n, const char* what, OnFree&& on_free) {
    while (n != kNoNode) {
      Node& node = (*this)[n];
      if (node.refs == 0) fail(ErrorKind::Api, "{}: internal error, node {} released twice", what, n);
      if (--node.refs != 0) return;
      on_free(node);
      const std::uint32_t parent = node.parent;
      node.parent = kNoNode;
      this->give(n);
      n = parent;
    }
  }
  std::vector<std::uint32_t> chain(std::uint32_t tail) const {  // root first
    std::vector<std::uint32_t> out;
    for (std::uint32_t n = tail; n != kNoNode; n = (*this)[n].parent) out.push_back(n);
    return {out.rbegin(), out.rend()};
  }
};

}  // namespace kern::pool::detail
