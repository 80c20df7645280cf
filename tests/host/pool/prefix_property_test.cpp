// The prefix index against a linear-scan reference: same entries, same lookup length and tier,
// same LRU order (logical clock with whole-path restamping), same evictions.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "kern/pool/prefix.hpp"
#include "prefix_items.hpp"

namespace kern::pool {
namespace {

using testing::Far;
using testing::Item;
using Index = Prefix<Item, Far>;
using Key = std::vector<Token>;

struct RefEntry {
  bool resident = false, parked = false, slot = false;
  std::uint64_t tick = 0, resident_id = 0, parked_id = 0;
};

class Reference {
 public:
  explicit Reference(std::uint64_t unit) : unit_(unit) {}
  std::map<Key, RefEntry> entries;

  void restamp(const Key& key) {
    for (std::size_t len = key.size(); len > 0; --len) {
      auto it = entries.find(Key(key.begin(), key.begin() + static_cast<std::ptrdiff_t>(len)));
      if (it != entries.end()) it->second.tick = ++clock_;
    }
  }
  void insert(const Key& key, bool slot, std::uint64_t id, bool parked) {
    RefEntry& e = entries[key];
    e.slot = slot;
    if (parked && !e.parked) {
      e.parked = true;
      e.parked_id = id;
    }
    if (!parked && !e.resident) {
      e.resident = true;
      e.resident_id = id;
    }
    if (!parked && !slot && key.size() > unit_) {
      auto it = entries.find(Key(key.begin(), key.end() - static_cast<std::ptrdiff_t>(unit_)));
      if (it != entries.end() && !it->second.slot && it->second.resident && !it->second.parked) entries.erase(it);
    }
    restamp(key);
  }
  std::uint64_t usable(const Key& key, const RefEntry& e, const Key& prompt) const {
    const std::uint64_t n = prompt.size(), limit = n - 1;
    std::uint64_t c = 0;
    while (c < key.size() && c < n && key[c] == prompt[c]) ++c;
    if (c == key.size() && key.size() <= limit) return key.size();
    if (e.slot) return 0;
    return std::min(c, limit) / unit_ * unit_;
  }
  // (len, resident) of the best usable entry.
  std::pair<std::uint64_t, bool> best(const Key& prompt) const {
    std::pair<std::uint64_t, bool> b{0, false};
    if (prompt.size() < 2) return b;
    for (const auto& [k, e] : entries) {
      const std::uint64_t u = usable(k, e, prompt);
      if (u > b.first || (u == b.first && u > 0 && e.resident && !b.second)) b = {u, e.resident};
    }
    return b;
  }
  const Key* coldest(bool resident) const {
    const Key* out = nullptr;
    std::uint64_t t = ~0ull;
    for (const auto& [k, e] : entries)
      if ((resident ? e.resident : e.parked) && e.tick < t) {
        t = e.tick;
        out = &k;
      }
    return out;
  }
  void drop_coldest_parked() {
    const Key k = *coldest(false);
    RefEntry& e = entries[k];
    if (e.resident)
      e.parked = false;
    else
      entries.erase(k);
  }
  std::vector<Key> lru(bool resident) const {
    std::vector<std::pair<std::uint64_t, Key>> v;
    for (const auto& [k, e] : entries)
      if (resident ? e.resident : e.parked) v.emplace_back(e.tick, k);
    std::sort(v.begin(), v.end());
    std::vector<Key> out;
    for (auto& [t, k] : v) out.push_back(k);
    return out;
  }

 private:
  std::uint64_t unit_;
  std::uint64_t clock_ = 0;
};

void run(std::uint64_t seed, std::uint64_t unit, std::uint64_t ops, std::vector<std::uint64_t>& trace) {
  std::mt19937_64 rng(seed);
  auto rand = [&](std::uint64_t n) { return rng() % n; };
  Index idx(unit);
  Reference ref(unit);
  std::uint64_t next_id = 1, host_room = 12;
  std::map<std::uint64_t, Key> id_key;
  auto random_key = [&]() {
    Key k(1 + rand(14));
    for (auto& t : k) t = static_cast<Token>(rand(3));
    return k;
  };
  auto slot_of = [](const Key& k) {  // a key always has the same kind
    std::uint64_t h = 7;
    for (Token t : k) h = h * 31 + static_cast<std::uint64_t>(t) + 1;
    return h % 5 == 0;
  };
  for (std::uint64_t i = 0; i < ops; ++i) {
    const std::uint64_t op = rand(100);
    if (op < 30) {
      const Key k = random_key();
      const bool slot = slot_of(k);
      const std::uint64_t id = next_id++;
      id_key[id] = k;
      if (op < 25) {
        idx.insert(k, Item{k.size(), slot, id});
        ref.insert(k, slot, id, false);
      } else {
        idx.insert_parked(k, Far{Item{k.size(), slot, id}});
        ref.insert(k, slot, id, true);
      }
    } else if (op < 80) {
      Key prompt = random_key();
      prompt.push_back(static_cast<Token>(rand(3)));
      const auto want = ref.best(prompt);
      auto hit = idx.lookup(prompt);
      if (want.first == 0) {
        ASSERT_FALSE(hit) << "op " << i;
        trace.push_back(0);
        continue;
      }
      ASSERT_TRUE(hit) << "op " << i;
      ASSERT_EQ(hit->len, want.first) << "op " << i;
      ASSERT_EQ(hit->tier() == Tier::Resident, want.second) << "op " << i;
      const std::uint64_t id = hit->found.index() == 0 ? std::get<0>(hit->found).id : std::get<1>(hit->found).of.id;
      const Key& k = id_key.at(id);
      const RefEntry& e = ref.entries.at(k);
      ASSERT_EQ(hit->tier() == Tier::Resident ? e.resident_id : e.parked_id, id);
      ASSERT_EQ(ref.usable(k, e, prompt), hit->len);
      ref.restamp(k);
      trace.push_back(hit->len * 2 + (hit->tier() == Tier::Resident));
      trace.push_back(id);
    } else if (op < 92) {
      // Evict through a host of limited room.
      const Key* coldest = ref.coldest(true);
      auto park = [&](Item&& r) -> std::variant<Far, Item> {
        if (idx.parked() >= host_room) return r;
        return Far{r};
      };
      auto ev = idx.evict(park);
      if (!coldest) {
        ASSERT_FALSE(ev);
        continue;
      }
      ASSERT_TRUE(ev);
      const Key k = *coldest;
      ASSERT_EQ(ev->key, k) << "op " << i;
      RefEntry& e = ref.entries[k];
      std::uint64_t dropped = 0;
      bool gone = false;
      if (e.parked) {
        e.resident = false;
      } else {
        for (;;) {
          std::uint64_t parked = 0;
          for (auto& [kk, ee] : ref.entries) parked += ee.parked;
          if (parked < host_room) {
            RefEntry& ee = ref.entries[k];
            ee.parked = true;
            ee.parked_id = ee.resident_id;
            ee.resident = false;
            break;
          }
          if (!ref.coldest(false)) {
            ref.entries.erase(k);
            gone = true;
            break;
          }
          ref.drop_coldest_parked();
          ++dropped;
        }
      }
      ASSERT_EQ(ev->dropped, gone);
      ASSERT_EQ(ev->parked_dropped, dropped);
      trace.push_back(1000 + ev->key.size() + dropped * 100 + gone);
    } else if (op < 96) {
      const Key* coldest = ref.coldest(true);
      auto ev = idx.evict();
      if (!coldest) {
        ASSERT_FALSE(ev);
        continue;
      }
      ASSERT_EQ(ev->key, *coldest);
      RefEntry& e = ref.entries[*coldest];
      if (e.parked)
        e.resident = false;
      else
        ref.entries.erase(*coldest);
    } else {
      const Key* coldest = ref.coldest(false);
      auto k = idx.drop_coldest_parked();
      ASSERT_EQ(k.has_value(), coldest != nullptr);
      if (coldest) {
        ASSERT_EQ(*k, *coldest);
        ref.drop_coldest_parked();
      }
    }
    std::uint64_t resident = 0, parked = 0;
    for (auto& [k, e] : ref.entries) {
      resident += e.resident;
      parked += e.parked;
    }
    ASSERT_EQ(idx.size(), ref.entries.size()) << "op " << i;
    ASSERT_EQ(idx.resident(), resident);
    ASSERT_EQ(idx.parked(), parked);
    if (i % 1000 == 0) {
      idx.check_invariants();
      ASSERT_EQ(idx.lru(Tier::Resident), ref.lru(true));
      ASSERT_EQ(idx.lru(Tier::Parked), ref.lru(false));
    }
  }
  idx.check_invariants();
}

TEST(PrefixProperty, MatchesLinearScanReference) {
  for (std::uint64_t seed : {1, 2, 3})
    for (std::uint64_t unit : {1, 2, 4}) {
      std::vector<std::uint64_t> trace;
      run(seed * 10 + unit, unit, 20000, trace);
    }
}

TEST(PrefixProperty, SameCallsSameDecisions) {
  std::vector<std::uint64_t> a, b;
  run(99, 2, 20000, a);
  run(99, 2, 20000, b);
  EXPECT_GT(a.size(), 10000u);
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace kern::pool
