#include <gtest/gtest.h>

#include "kern/base/error.hpp"
#include "kern/pool/prefix.hpp"
#include "prefix_items.hpp"

namespace kern::pool {
namespace {

using testing::Far;
using testing::Item;
using Index = Prefix<Item, Far>;
using Keys = std::vector<std::vector<Token>>;

Item item(std::vector<Token> const& key, bool slot, std::uint64_t id) { return Item{key.size(), slot, id}; }

std::uint64_t hit_id(const Index::Hit& h) {
  return h.found.index() == 0 ? std::get<0>(h.found).id : std::get<1>(h.found).of.id;
}

TEST(Prefix, NeverCoversTheLastPromptToken) {
  Index idx(2);
  const std::vector<Token> k{1, 2, 3, 4};
  idx.insert(k, item(k, false, 1));
  auto h = idx.lookup(std::vector<Token>{1, 2, 3, 4});
  ASSERT_TRUE(h);
  EXPECT_EQ(h->len, 2u);  // whole pages of the first three tokens
  h = idx.lookup(std::vector<Token>{1, 2, 3, 4, 5});
  ASSERT_TRUE(h);
  EXPECT_EQ(h->len, 4u);
  EXPECT_EQ(h->tier(), Tier::Resident);
  EXPECT_FALSE(idx.lookup(std::vector<Token>{1}));
  EXPECT_FALSE(idx.lookup(std::vector<Token>{7, 1, 2}));
}

TEST(Prefix, StatefulEntriesOnlyAtTheirOwnLength) {
  Index idx(2);
  const std::vector<Token> k{1, 2, 3};
  idx.insert(k, item(k, true, 1));
  EXPECT_FALSE(idx.lookup(std::vector<Token>{1, 2, 3}));  // would cover the last token
  auto h = idx.lookup(std::vector<Token>{1, 2, 3, 9});
  ASSERT_TRUE(h);
  EXPECT_EQ(h->len, 3u);                                     // exact, not page aligned
  EXPECT_FALSE(idx.lookup(std::vector<Token>{1, 2, 4, 9}));  // off the path: never
}

TEST(Prefix, StatelessEntriesOffThePathShareWholePages) {
  Index idx(2);
  const std::vector<Token> k{1, 2, 3, 4, 5, 6};
  idx.insert(k, item(k, false, 1));
  auto h = idx.lookup(std::vector<Token>{1, 2, 3, 9, 9});  // diverges inside the edge after 3 tokens
  ASSERT_TRUE(h);
  EXPECT_EQ(h->len, 2u);
  const std::vector<Token> s{1, 2, 7};
  idx.insert(s, item(s, false, 2));                      // splits the edge at 2
  h = idx.lookup(std::vector<Token>{1, 2, 3, 4, 8, 8});  // beside the path below node [1,2,3,...]
  ASSERT_TRUE(h);
  EXPECT_EQ(h->len, 4u);
  EXPECT_EQ(hit_id(*h), 1u);
  idx.check_invariants();
}

TEST(Prefix, ResidentWinsTies) {
  Index idx(2);
  const std::vector<Token> a{1, 2, 3, 4}, b{1, 2, 5, 6};
  idx.insert(a, item(a, false, 1));
  idx.insert(b, item(b, false, 2));
  // Park a (the colder one after b's insert).
  auto ev = idx.evict([](Item&& r) { return std::variant<Far, Item>(Far{r}); });
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->key, a);
  EXPECT_FALSE(ev->dropped);
  auto h = idx.lookup(std::vector<Token>{1, 2, 7, 7});  // both share one page with the prompt
  ASSERT_TRUE(h);
  EXPECT_EQ(h->len, 2u);
  EXPECT_EQ(h->tier(), Tier::Resident);
  EXPECT_EQ(hit_id(*h), 2u);
  h = idx.lookup(std::vector<Token>{1, 2, 3, 4, 0});  // the longer parked one wins on length
  ASSERT_TRUE(h);
  EXPECT_EQ(h->len, 4u);
  EXPECT_EQ(h->tier(), Tier::Parked);
}

TEST(Prefix, GrowingChainKeepsOneEntry) {
  Index idx(2);
  std::vector<Token> k;
  for (Token t = 0; t < 10; ++t) {
    k.push_back(t);
    if (k.size() % 2 == 0) idx.insert(k, item(k, false, k.size()));
  }
  EXPECT_EQ(idx.size(), 1u);
  EXPECT_EQ(idx.nodes(), 1u);
  auto h = idx.lookup(std::vector<Token>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  ASSERT_TRUE(h);
  EXPECT_EQ(h->len, 10u);
  // A stateful entry one page shorter is not removed.
  Index st(2);
  const std::vector<Token> a{1, 2}, b{1, 2, 3, 4};
  st.insert(a, item(a, true, 1));
  st.insert(b, item(b, false, 2));
  EXPECT_EQ(st.size(), 2u);
}

TEST(Prefix, LruRestampsWholePathRootNewest) {
  Index idx(4);
  const std::vector<Token> a{1, 2}, b{1, 2, 3, 4, 5}, c{7, 8};
  idx.insert(a, item(a, false, 1));
  idx.insert(b, item(b, false, 2));  // restamps b then a: a newest
  idx.insert(c, item(c, false, 3));
  EXPECT_EQ(idx.lru(Tier::Resident), (Keys{b, a, c}));
  ASSERT_TRUE(idx.lookup(std::vector<Token>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(idx.lru(Tier::Resident), (Keys{c, b, a}));
  // Eviction without a host tier drops the coldest; the tree prunes and merges.
  auto ev = idx.evict();
  ASSERT_TRUE(ev);
  EXPECT_TRUE(ev->dropped);
  EXPECT_EQ(ev->key, c);
  ev = idx.evict();
  EXPECT_EQ(ev->key, b);
  EXPECT_EQ(idx.nodes(), 1u);
  idx.check_invariants();
  ev = idx.evict();
  EXPECT_EQ(ev->key, a);
  EXPECT_EQ(idx.nodes(), 0u);
  EXPECT_FALSE(idx.evict());
}

TEST(Prefix, EvictParksThenDropsParkedWhenHostIsFull) {
  Index idx(2);
  const std::vector<Token> a{1, 2}, b{3, 4}, c{5, 6};
  idx.insert(a, item(a, false, 1));
  idx.insert(b, item(b, false, 2));
  idx.insert(c, item(c, false, 3));
  std::size_t host_room = 1;
  auto park = [&](Item&& r) -> std::variant<Far, Item> {
    if (host_room == 0) return r;  // host full: handed back
    --host_room;
    return Far{r};
  };
  auto ev = idx.evict(park);
  EXPECT_EQ(ev->key, a);
  EXPECT_FALSE(ev->dropped);
  EXPECT_EQ(idx.parked(), 1u);
  ev = idx.evict([&](Item&& r) -> std::variant<Far, Item> {
    if (idx.parked() > 0) return r;  // full while a is parked
    return Far{r};
  });
  EXPECT_EQ(ev->key, b);
  EXPECT_FALSE(ev->dropped);
  EXPECT_EQ(ev->parked_dropped, 1u);
  EXPECT_EQ(idx.lru(Tier::Parked), (Keys{b}));
  ev = idx.evict([](Item&& r) -> std::variant<Far, Item> { return r; });  // never room
  EXPECT_EQ(ev->key, c);
  EXPECT_TRUE(ev->dropped);
  EXPECT_EQ(ev->parked_dropped, 1u);
  EXPECT_EQ(idx.size(), 0u);
  // Re-inserting a parked entry makes it resident too; evicting it then only drops the copy.
  idx.insert_parked(a, Far{item(a, false, 4)});
  idx.insert(a, item(a, false, 5));
  EXPECT_EQ(idx.resident(), 1u);
  EXPECT_EQ(idx.parked(), 1u);
  ev = idx.evict();
  EXPECT_FALSE(ev->dropped);
  EXPECT_EQ(idx.size(), 1u);
  EXPECT_EQ(idx.resident(), 0u);
}

TEST(Prefix, HitHoldsItsClone) {
  Index idx(2);
  const std::vector<Token> a{1, 2, 3};
  idx.insert(a, item(a, true, 9));
  auto h = idx.lookup(std::vector<Token>{1, 2, 3, 4});
  ASSERT_TRUE(h);
  idx.evict();
  EXPECT_EQ(idx.size(), 0u);
  EXPECT_EQ(hit_id(*h), 9u);
}

TEST(Prefix, KeyMustMatchStoredLength) {
  Index idx(2);
  const std::vector<Token> a{1, 2, 3};
  EXPECT_THROW(idx.insert(a, Item{2, false, 1}), Error);
  idx.insert(a, item(a, false, 1));
  EXPECT_THROW(idx.insert(a, item(a, true, 2)), Error);  // disagrees about per-seq state
}

TEST(Prefix, DeepTreeIsDestroyedIteratively) {
  // A branch every other token, inserted deepest first (each insert splits the top edge, so
  // building stays cheap): an 8k-node-deep path that a recursive destructor would
  // walk 8k frames down.
  Index idx(1);
  const int depth = 8000;
  for (int i = depth; i > 0; i -= 2) {
    std::vector<Token> side(static_cast<std::size_t>(i), 0);
    side.back() = 1;
    idx.insert(side, Item{side.size(), true, static_cast<std::uint64_t>(i)});
  }
  EXPECT_EQ(idx.size(), 4000u);
  EXPECT_GE(idx.nodes(), 7999u);
  auto h = idx.lookup(std::vector<Token>{0, 0, 0, 1, 5});
  ASSERT_TRUE(h);
  EXPECT_EQ(h->len, 4u);
}

}  // namespace
}  // namespace kern::pool
