// The pool's share description (kern/pool/share.hpp): what describe_share says about a pool's
// arenas before and after a remap, the wire form's round trip, and every malformed description
// refused with an Io error naming its field.
#include <gtest/gtest.h>

#include <set>

#include "kern/base/error.hpp"
#include "kern/pool/share.hpp"
#include "layouts.hpp"

namespace kern::pool {
namespace {

using namespace kern::pool::testing;

// Every mapped position names a distinct chunk, and the description agrees with chunk_at.
void expect_matches(const Pool& pool, const PoolShare& s) {
  EXPECT_EQ(s.chunk_bytes, pool.chunk_bytes());
  EXPECT_EQ(s.chunks, pool.chunks());
  ASSERT_EQ(s.arenas.size(), pool.arenas().size());
  std::set<std::int64_t> seen;
  for (std::size_t a = 0; a < s.arenas.size(); ++a) {
    EXPECT_EQ(s.arenas[a].state, pool.arenas()[a].state);
    EXPECT_EQ(s.arenas[a].paged, pool.arenas()[a].paged);
    EXPECT_EQ(s.arenas[a].object_bytes, pool.arenas()[a].object_bytes);
    ASSERT_EQ(s.arenas[a].chunks.size(), pool.arenas()[a].positions);
    for (std::uint64_t p = 0; p < s.arenas[a].chunks.size(); ++p) {
      const auto c = pool.chunk_at(static_cast<std::uint32_t>(a), p);
      EXPECT_EQ(s.arenas[a].chunks[p], c ? static_cast<std::int64_t>(*c) : -1) << a << " " << p;
      if (c) {
        EXPECT_TRUE(seen.insert(*c).second) << "chunk " << *c << " at two positions";
      }
    }
  }
}

TEST(PoolShare, DescribesEveryArenaPositionAndRoundTrips) {
  const PoolLayout l = stateful();
  Pool pool = make_pool(l, 32, 2);
  const PoolShare s = describe_share(pool);
  expect_matches(pool, s);
  std::uint64_t mapped = 0;
  for (const SharedArena& a : s.arenas)
    for (std::int64_t c : a.chunks) mapped += c >= 0;
  EXPECT_EQ(mapped, pool.chunks());  // the initial plan maps every chunk
  const std::string wire = write_pool_share(s);
  EXPECT_EQ(parse_pool_share(wire), s);
  EXPECT_EQ(write_pool_share(parse_pool_share(wire)), wire);
  EXPECT_EQ(wire.rfind(R"({"kern_pool_share":1,"chunk_bytes":40,"chunks":28,"arenas":[{"state":"kv","paged":true,)", 0),
            0u)
      << wire;
}

TEST(PoolShare, FollowsARemap) {
  Pool pool = make_pool(stateful(), 32, 2);
  Lease s1 = take(pool.lease_slot()), s2 = take(pool.lease_slot()), s3 = take(pool.lease_slot());
  const PoolShare before = describe_share(pool);
  ASSERT_FALSE(pool.lease_slot().ok());  // a fourth slot needs chunks of free pages
  auto plan = pool.take_pending();
  ASSERT_TRUE(plan);
  pool.complete(*plan);
  const PoolShare after = describe_share(pool);
  expect_matches(pool, after);
  ASSERT_FALSE(plan->maps.empty());
  for (const Map& m : plan->maps) {
    EXPECT_EQ(before.arenas[m.arena].chunks[m.pos], -1) << "position " << m.pos << " was free before";
    EXPECT_EQ(after.arenas[m.arena].chunks[m.pos], static_cast<std::int64_t>(m.chunk));
  }
  for (const Unmap& u : plan->unmaps) EXPECT_EQ(after.arenas[u.arena].chunks[u.pos], -1);
}

void expect_refused(const std::string& text, const std::string& needle) {
  try {
    (void)parse_pool_share(text);
    ADD_FAILURE() << "accepted: " << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "'" << needle << "' not in: " << e.what();
  }
}

std::string arena(const std::string& chunks, const std::string& extra = "") {
  return R"({"state":"kv","paged":true,"object_bytes":8,"chunks":)" + chunks + extra + "}";
}
std::string share(const std::string& arenas, std::uint64_t chunks = 3, const std::string& head = "") {
  return R"({"kern_pool_share":1,"chunk_bytes":64,"chunks":)" + std::to_string(chunks) + head + R"(,"arenas":[)" +
         arenas + "]}";
}

TEST(PoolShare, MalformedDescriptionsAreIoErrorsNamingTheField) {
  EXPECT_NO_THROW(parse_pool_share(share(arena("[0,-1,2,1]"))));
  expect_refused("", "pool share");
  expect_refused("[]", "expected an object");
  expect_refused(share(arena("[0,1,2]")).replace(19, 1, "2"), "kern_pool_share: expected 1");
  expect_refused(share(arena("[0,1,2]"), 3, R"(,"extra":1)"), "extra: unknown field");
  expect_refused(R"({"kern_pool_share":1,"chunks":3,"arenas":[]})", "missing field 'chunk_bytes'");
  expect_refused(R"({"kern_pool_share":1,"chunk_bytes":0,"chunks":3,"arenas":[]})", "chunk_bytes: 0 is not");
  expect_refused(R"({"kern_pool_share":1,"chunk_bytes":-4,"chunks":3,"arenas":[]})", "non-negative integer");
  expect_refused(share(arena("[0,1,2]"), 1048577), "1048577 chunks, more than 2^20");
  expect_refused(share(""), "0 arenas");
  expect_refused(share(arena("[0]") + "," + arena("[1]")), "arenas[1].state: 'kv' repeated");
  expect_refused(share(R"({"state":"","paged":true,"object_bytes":8,"chunks":[0]})"), "arenas[0].state");
  expect_refused(share(R"({"state":"kv","paged":1,"object_bytes":8,"chunks":[0]})"), "arenas[0].paged");
  expect_refused(share(R"({"state":"kv","paged":true,"object_bytes":0,"chunks":[0]})"), "an object of 0 bytes");
  expect_refused(share(R"({"state":"kv","paged":true,"chunks":[0]})"), "missing field 'object_bytes'");
  expect_refused(share(arena("[]")), "no positions");
  expect_refused(share(arena("{}")), "arenas[0].chunks: expected an array");
  expect_refused(share(arena("[0,3]")), "arenas[0].chunks[1]: chunk 3 is not -1");
  expect_refused(share(arena("[0,-2]")), "chunk -2 is not");
  expect_refused(share(arena("[0,1.5]")), "expected a chunk index");
  expect_refused(share(arena("[0,18446744073709551615]")), "is not -1");
  expect_refused(share(arena("[1,-1,1]")), "chunk 1 mapped at two positions");
  expect_refused(share(arena("[0]", R"(,"x":1)")), "arenas[0].x: unknown field");
  // An arena reserving more than 2^48 bytes is refused before its positions are read.
  std::string many = "[-1";
  for (int i = 0; i < 256; ++i) many += ",-1";
  expect_refused(R"({"kern_pool_share":1,"chunk_bytes":1099511627776,"chunks":0,"arenas":[)" + arena(many + "]") + "]}",
                 "257 positions of 1099511627776 bytes reserve more than 2^48 bytes");
}

}  // namespace
}  // namespace kern::pool
