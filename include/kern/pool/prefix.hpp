// Prefix index: a token radix tree mapping prompts to stored prefixes (checkpoints on the device,
// parked stores on the host, or tuples of them for a group of GPUs). Pure and deterministic:
// recency is a logical clock, children are ordered, the same calls give the same decisions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <utility>
#include <variant>
#include <vector>

#include "kern/base/error.hpp"

namespace kern::pool {

using Token = std::int32_t;

// What the index stores: a copyable holder that knows its length and whether it carries
// per-seq state (then usable only at exactly its length).
template <typename T>
concept Kept = std::copy_constructible<T> && requires(const T& t) {
  { t.tokens() } -> std::convertible_to<std::uint64_t>;
  { t.has_slot() } -> std::convertible_to<bool>;
};

enum class Tier { Resident, Parked };

template <Kept R, Kept P = R>
class Prefix {
 public:
  struct Hit {
    std::uint64_t len;         // tokens of the prompt the stored prefix serves
    std::variant<R, P> found;  // a clone: later evictions cannot invalidate it
    Tier tier() const { return found.index() == 0 ? Tier::Resident : Tier::Parked; }
  };
  struct Evicted {
    bool dropped = false;  // false: the entry is parked now; true: it left the index
    std::vector<Token> key;
    std::uint64_t parked_dropped = 0;  // parked entries dropped to make host room
  };

  explicit Prefix(std::uint64_t unit) : unit_(unit) {
    if (unit == 0) fail(ErrorKind::Api, "prefix: page unit 0");
    root_ = new Node;
  }
  Prefix(const Prefix&) = delete;
  Prefix& operator=(const Prefix&) = delete;
  Prefix(Prefix&& o) noexcept
      : unit_(o.unit_),
        root_(std::exchange(o.root_, nullptr)),
        clock_(o.clock_),
        entries_(o.entries_),
        nodes_(o.nodes_),
        resident_lru_(std::move(o.resident_lru_)),
        parked_lru_(std::move(o.parked_lru_)) {}
  ~Prefix() { destroy(); }

  // Adds a resident entry under key (key.size() == r.tokens()). An existing resident entry is
  // only touched (r is dropped); a parked-only one becomes resident too. A stateless resident-only
  // entry exactly one page shorter on the same path is removed: a sequence checkpointing every
  // page keeps one growing entry.
  void insert(std::span<const Token> key, R r) {
    Node* x = add_entry(key, &Node::resident, std::move(r), "insert");
    if (!x->slot && key.size() > unit_) {
      Node* shorter = find(key.first(key.size() - unit_));
      if (shorter && !shorter->slot && shorter->resident && !shorter->parked) remove_entry(shorter);
    }
    restamp(x);
  }

  // Adds (or completes) a parked entry, e.g. one parked outside evict().
  void insert_parked(std::span<const Token> key, P p) {
    restamp(add_entry(key, &Node::parked, std::move(p), "insert_parked"));
  }

  // The longest usable entry for a prompt, never covering its last token. On the prompt's path
  // an entry is usable at its own length; a stateless entry off the path at the whole pages it
  // shares with the prompt. Ties go to resident. A hit restamps its path (root newest).
  std::optional<Hit> lookup(std::span<const Token> prompt) {
    const std::uint64_t n = prompt.size();
    if (n < 2) return std::nullopt;
    const std::uint64_t limit = n - 1;
    std::vector<Node*> path{root_};
    Node* node = root_;
    Node* diverge = nullptr;  // child whose edge the prompt leaves inside
    std::uint64_t d = 0, m = 0;
    while (d < n) {
      auto it = node->children.find(prompt[d]);
      if (it == node->children.end()) break;
      Node* c = it->second;
      std::uint64_t l = 0;
      while (l < c->edge.size() && d + l < n && c->edge[l] == prompt[d + l]) ++l;
      if (l == c->edge.size()) {
        node = c;
        d += l;
        path.push_back(c);
        continue;
      }
      diverge = c;
      m = d + l;
      break;
    }
    if (!diverge) m = d;

    Best best;
    // Entries on the path, deepest first.
    for (auto it = path.rbegin(); it != path.rend(); ++it) {
      Node* x = *it;
      if (x == root_ || !has_entry(x)) continue;
      std::uint64_t usable = 0;
      if (x->depth <= limit)
        usable = x->depth;
      else if (!x->slot)
        usable = limit / unit_ * unit_;
      consider(best, usable, x->resident.has_value(), x, nullptr, nullptr, false);
    }
    // Stateless entries off the path: inside the edge the prompt leaves, then beside each path node.
    if (diverge && diverge->stateless_below > 0)
      consider(best, std::min(m, limit) / unit_ * unit_, diverge->stateless_resident_below > 0, nullptr, diverge,
               nullptr, true);
    for (std::size_t i = path.size(); i-- > 0;) {
      Node* x = path[i];
      Node* next = i + 1 < path.size() ? path[i + 1] : diverge;
      const std::uint64_t all = x->stateless_below - (is_stateless(x) ? 1 : 0) - (next ? next->stateless_below : 0);
      if (all == 0) continue;
      const std::uint64_t res = x->stateless_resident_below - (is_stateless(x) && x->resident ? 1 : 0) -
                                (next ? next->stateless_resident_below : 0);
      consider(best, std::min(x->depth, limit) / unit_ * unit_, res > 0, nullptr, x, next, false);
    }
    if (!best.found) return std::nullopt;
    Node* e = best.node;
    if (!e)
      e = best.whole ? first_in(best.region, best.resident) : first_beside(best.region, best.except, best.resident);
    restamp(e);
    if (best.resident) return Hit{best.len, std::variant<R, P>(std::in_place_index<0>, *e->resident)};
    return Hit{best.len, std::variant<R, P>(std::in_place_index<1>, *e->parked)};
  }

  // The caller's answer to Busy: the coldest resident entry is parked through `park` (which
  // returns the parked store, or hands the resident one back when the host is full: then the
  // coldest parked entry is dropped and parking retried), or dropped when nothing parked is left.
  // An entry already parked just releases its device copy. nullopt if nothing is resident.
  template <typename F>
  std::optional<Evicted> evict(F&& park) {
    if (resident_lru_.empty()) return std::nullopt;
    Node* e = resident_lru_.begin()->second;
    Evicted out{false, key_of(e), 0};
    if (e->parked) {
      release_resident(e);
      return out;
    }
    for (;;) {
      std::variant<P, R> res = park(R(*e->resident));
      if (res.index() == 0) {
        const auto before = counts(e);
        e->parked.emplace(std::get<0>(std::move(res)));
        e->resident.reset();
        resident_lru_.erase(e->tick);
        parked_lru_.emplace(e->tick, e);
        adjust(e, before);
        return out;
      }
      if (parked_lru_.empty()) break;
      drop_coldest_parked();
      ++out.parked_dropped;
    }
    remove_entry(e);
    out.dropped = true;
    return out;
  }
  // No host tier: the coldest resident entry is dropped.
  std::optional<Evicted> evict() {
    if (resident_lru_.empty()) return std::nullopt;
    Node* e = resident_lru_.begin()->second;
    Evicted out{true, key_of(e), 0};
    if (e->parked) {
      release_resident(e);
      out.dropped = false;
      return out;
    }
    remove_entry(e);
    return out;
  }
  // The caller's answer to HostFull: the coldest parked copy is dropped (the entry stays if it is
  // resident too). Returns its key, nullopt if nothing is parked.
  std::optional<std::vector<Token>> drop_coldest_parked() {
    if (parked_lru_.empty()) return std::nullopt;
    Node* e = parked_lru_.begin()->second;
    std::vector<Token> key = key_of(e);
    if (e->resident) {
      const auto before = counts(e);
      e->parked.reset();
      parked_lru_.erase(e->tick);
      adjust(e, before);
    } else {
      remove_entry(e);
    }
    return key;
  }

  std::uint64_t unit() const { return unit_; }
  std::uint64_t size() const { return entries_; }
  std::uint64_t resident() const { return resident_lru_.size(); }
  std::uint64_t parked() const { return parked_lru_.size(); }
  std::uint64_t nodes() const { return nodes_; }  // root excluded
  // Keys of resident (or parked) entries from coldest to newest.
  std::vector<std::vector<Token>> lru(Tier tier) const {
    std::vector<std::vector<Token>> out;
    for (const auto& [t, e] : tier == Tier::Resident ? resident_lru_ : parked_lru_) out.push_back(key_of(e));
    return out;
  }
  // Structural check for tests: counters, no entry-less leaf, no mergeable node. Throws Api.
  void check_invariants() const {
    std::vector<const Node*> stack{root_};
    std::uint64_t seen = 0;
    while (!stack.empty()) {
      const Node* x = stack.back();
      stack.pop_back();
      std::uint64_t sl = is_stateless(x), sr = is_stateless(x) && x->resident;
      for (const auto& [t, c] : x->children) {
        if (c->parent != x || c->edge.empty() || c->edge[0] != t || c->depth != x->depth + c->edge.size())
          fail(ErrorKind::Api, "prefix invariant: bad child link at depth {}", x->depth);
        sl += c->stateless_below;
        sr += c->stateless_resident_below;
        stack.push_back(c);
      }
      if (sl != x->stateless_below || sr != x->stateless_resident_below)
        fail(ErrorKind::Api, "prefix invariant: counters wrong at depth {}", x->depth);
      if (x != root_) {
        ++seen;
        if (!has_entry(x) && x->children.size() < 2)
          fail(ErrorKind::Api, "prefix invariant: entry-less node with {} children at depth {}", x->children.size(),
               x->depth);
      }
    }
    if (seen != nodes_) fail(ErrorKind::Api, "prefix invariant: {} nodes, counter {}", seen, nodes_);
  }

 private:
  struct Node {
    std::vector<Token> edge;
    Node* parent = nullptr;
    std::map<Token, Node*> children;
    std::optional<R> resident;
    std::optional<P> parked;
    bool slot = false;
    std::uint64_t tick = 0;
    std::uint64_t depth = 0;
    std::uint64_t stateless_below = 0;           // stateless entries in the subtree, self included
    std::uint64_t stateless_resident_below = 0;  // of which resident
  };
  struct Best {
    bool found = false;
    std::uint64_t len = 0;
    bool resident = false;
    Node* node = nullptr;    // an entry on the path, or
    Node* region = nullptr;  // a subtree (skip_self: beside `except` under it)
    Node* except = nullptr;
    bool whole = false;  // search the region whole, else only beside `except` below it
  };

  // The node at `key`, holding `e` as its resident or parked `entry`, unless it holds one
  // of that kind already (then `e` is dropped). `what` names the operation in errors.
  template <class E>
  Node* add_entry(std::span<const Token> key, std::optional<E> Node::*entry, E e, const char* what) {
    check_key(key, e.tokens(), what);
    Node* x = place(key);
    if (has_entry(x) && x->slot != e.has_slot())
      fail(ErrorKind::Api, "prefix: {} at {} tokens disagrees with the existing entry about per-seq state", what,
           key.size());
    if (!(x->*entry)) {
      const auto before = counts(x);
      if (!has_entry(x)) ++entries_;
      x->slot = e.has_slot();
      (x->*entry).emplace(std::move(e));
      adjust(x, before);
    }
    return x;
  }

  static bool has_entry(const Node* x) { return x->resident.has_value() || x->parked.has_value(); }
  static bool is_stateless(const Node* x) { return has_entry(x) && !x->slot; }
  std::pair<int, int> counts(const Node* x) const {
    return {is_stateless(x) ? 1 : 0, is_stateless(x) && x->resident ? 1 : 0};
  }
  void adjust(Node* x, std::pair<int, int> before) {
    const auto after = counts(x);
    const std::int64_t ds = after.first - before.first, dr = after.second - before.second;
    if (ds == 0 && dr == 0) return;
    for (Node* y = x; y; y = y->parent) {
      y->stateless_below += ds;
      y->stateless_resident_below += dr;
    }
  }

  void check_key(std::span<const Token> key, std::uint64_t tokens, const char* what) const {
    if (key.empty()) fail(ErrorKind::Api, "prefix: {} with an empty key", what);
    if (key.size() != tokens)
      fail(ErrorKind::Api, "prefix: {} key of {} tokens for a store of {}", what, key.size(), tokens);
  }

  void consider(Best& b, std::uint64_t len, bool resident, Node* node, Node* region, Node* except, bool whole) {
    if (len == 0) return;
    if (b.found && (len < b.len || (len == b.len && (b.resident || !resident)))) return;
    b = Best{true, len, resident, node, region, except, whole};
  }

  Node* first_in(Node* s, bool resident) const {
    for (;;) {
      if (is_stateless(s) && (!resident || s->resident)) return s;
      Node* next = nullptr;
      for (const auto& [t, c] : s->children)
        if ((resident ? c->stateless_resident_below : c->stateless_below) > 0) {
          next = c;
          break;
        }
      if (!next) fail(ErrorKind::Api, "prefix: internal error, counters promise an entry that is not there");
      s = next;
    }
  }
  Node* first_beside(Node* x, Node* except, bool resident) const {
    for (const auto& [t, c] : x->children)
      if (c != except && (resident ? c->stateless_resident_below : c->stateless_below) > 0)
        return first_in(c, resident);
    fail(ErrorKind::Api, "prefix: internal error, counters promise an entry beside the path");
  }

  Node* find(std::span<const Token> key) const {
    Node* x = root_;
    std::uint64_t d = 0;
    while (d < key.size()) {
      auto it = x->children.find(key[d]);
      if (it == x->children.end()) return nullptr;
      Node* c = it->second;
      if (key.size() - d < c->edge.size()) return nullptr;
      for (std::size_t l = 0; l < c->edge.size(); ++l)
        if (c->edge[l] != key[d + l]) return nullptr;
      d += c->edge.size();
      x = c;
    }
    return x;
  }

  // The node spelling key, created (splitting an edge) when missing.
  Node* place(std::span<const Token> key) {
    Node* x = root_;
    std::uint64_t d = 0;
    while (d < key.size()) {
      auto it = x->children.find(key[d]);
      if (it == x->children.end()) {
        Node* leaf = new Node;
        ++nodes_;
        leaf->edge.assign(key.begin() + d, key.end());
        leaf->parent = x;
        leaf->depth = key.size();
        x->children.emplace(key[d], leaf);
        return leaf;
      }
      Node* c = it->second;
      std::uint64_t l = 0;
      while (l < c->edge.size() && d + l < key.size() && c->edge[l] == key[d + l]) ++l;
      if (l < c->edge.size()) {  // split c's edge at l
        Node* mid = new Node;
        ++nodes_;
        mid->edge.assign(c->edge.begin(), c->edge.begin() + l);
        mid->parent = x;
        mid->depth = d + l;
        mid->stateless_below = c->stateless_below;
        mid->stateless_resident_below = c->stateless_resident_below;
        c->edge.erase(c->edge.begin(), c->edge.begin() + l);
        c->parent = mid;
        mid->children.emplace(c->edge[0], c);
        it->second = mid;
        c = mid;
      }
      x = c;
      d += l;
    }
    return x;
  }

  std::vector<Token> key_of(const Node* x) const {
    std::vector<const Node*> up;
    for (; x != root_; x = x->parent) up.push_back(x);
    std::vector<Token> key;
    for (auto it = up.rbegin(); it != up.rend(); ++it) key.insert(key.end(), (*it)->edge.begin(), (*it)->edge.end());
    return key;
  }

  // Every entry on the path to x gets a new tick: x oldest, the root-most newest.
  void restamp(Node* x) {
    for (Node* y = x; y != root_; y = y->parent) {
      if (!has_entry(y)) continue;
      if (y->resident) resident_lru_.erase(y->tick);
      if (y->parked) parked_lru_.erase(y->tick);
      y->tick = ++clock_;
      if (y->resident) resident_lru_.emplace(y->tick, y);
      if (y->parked) parked_lru_.emplace(y->tick, y);
    }
  }

  void release_resident(Node* e) {
    const auto before = counts(e);
    e->resident.reset();
    resident_lru_.erase(e->tick);
    adjust(e, before);
  }

  void remove_entry(Node* e) {
    const auto before = counts(e);
    if (e->resident) resident_lru_.erase(e->tick);
    if (e->parked) parked_lru_.erase(e->tick);
    e->resident.reset();
    e->parked.reset();
    e->slot = false;
    --entries_;
    adjust(e, before);
    prune(e);
  }

  // Removes entry-less leaves upward and merges an entry-less node with its only child.
  void prune(Node* x) {
    while (x != root_ && !has_entry(x)) {
      Node* parent = x->parent;
      if (x->children.empty()) {
        parent->children.erase(x->edge[0]);
        delete x;
        --nodes_;
        x = parent;
        continue;
      }
      if (x->children.size() == 1) {
        Node* c = x->children.begin()->second;
        c->edge.insert(c->edge.begin(), x->edge.begin(), x->edge.end());
        c->parent = parent;
        parent->children[x->edge[0]] = c;
        delete x;
        --nodes_;
      }
      return;
    }
  }

  void destroy() {
    if (!root_) return;
    std::vector<Node*> stack{root_};
    while (!stack.empty()) {
      Node* x = stack.back();
      stack.pop_back();
      for (auto& [t, c] : x->children) stack.push_back(c);
      delete x;
    }
    root_ = nullptr;
  }

  std::uint64_t unit_;
  Node* root_ = nullptr;
  std::uint64_t clock_ = 0;
  std::uint64_t entries_ = 0;
  std::uint64_t nodes_ = 0;
  std::map<std::uint64_t, Node*> resident_lru_, parked_lru_;
};

}  // namespace kern::pool
