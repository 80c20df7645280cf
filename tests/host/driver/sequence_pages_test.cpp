// SequencePages: the one place a sequence's token slots and page-table rows come from.
#include <gtest/gtest.h>

#include "kern/driver/sequence_pages.hpp"
#include "kern/base/error.hpp"

namespace kern::driver {
namespace {

core::PageTable table(std::string name, std::uint64_t stride, std::uint64_t width) {
  core::PageTable t;
  t.buffer = std::move(name);
  t.state = "kv";
  t.stride = stride;
  t.width = width;
  return t;
}

TEST(SequencePages, SlotsAndRowsAgree) {
  SequencePages p({table("blocks", 16, 8)}, 1000);
  EXPECT_EQ(p.unit(), 16u);
  EXPECT_EQ(p.total_pages(), 62u);  // 1000 / 16
  EXPECT_EQ(p.row_pages(), 8u);
  EXPECT_EQ(p.max_tokens(), 128u);
  EXPECT_EQ(p.reserve(17), 2u);
  EXPECT_EQ(p.reserve(32), 0u);
  EXPECT_EQ(p.reserve(33), 1u);
  EXPECT_EQ(p.row(0), (std::vector<std::int64_t>{0, 1, 2}));
  for (std::uint64_t pos = 0; pos < 48; ++pos) {
    const std::uint64_t page = static_cast<std::uint64_t>(p.row(0)[pos / 16]);
    EXPECT_EQ(p.slot(pos), page * 16 + pos % 16);
  }
  EXPECT_THROW(p.slot(48), Error);
  p.clear();
  EXPECT_EQ(p.held_tokens(), 0u);
  EXPECT_THROW(p.slot(0), Error);
}

TEST(SequencePages, UnitIsTheLcmAndFinerTablesListSubPages) {
  // One table of pages of 8 and one of 4: unit 8; the stride-4 table lists 2 entries per page.
  SequencePages p({table("a", 8, 4), table("b", 4, 5)}, 64);
  EXPECT_EQ(p.unit(), 8u);
  EXPECT_EQ(p.row_pages(), 2u);  // min(4·8/8, 5·4/8 = 2)
  EXPECT_EQ(p.max_tokens(), 16u);
  p.reserve(9);
  EXPECT_EQ(p.row(0), (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(p.row(1), (std::vector<std::int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(p.slot(9), 9u);
}

TEST(SequencePages, RefusesPastCapacityOrRowReach) {
  SequencePages cap({table("t", 4, 100)}, 10);  // 2 whole pages
  EXPECT_EQ(cap.max_tokens(), 8u);
  try {
    cap.reserve(9);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Api);
    EXPECT_NE(std::string(e.what()).find("KV capacity of 8 tokens"), std::string::npos) << e.what();
  }
  SequencePages row({table("t", 4, 2)}, 400);
  try {
    row.reserve(9);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("one page-table row (2 pages of 4 tokens = 8 positions)"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(SequencePages({table("t", 0, 2)}, 400), Error);
  EXPECT_THROW(SequencePages({table("t", 4, 2)}, 0), Error);
}

TEST(SequencePages, NoTablesMeansTokenSlots) {
  SequencePages p({}, 5);
  EXPECT_EQ(p.unit(), 1u);
  EXPECT_EQ(p.max_tokens(), 5u);
  p.reserve(5);
  EXPECT_EQ(p.slot(4), 4u);
  EXPECT_THROW(p.reserve(6), Error);
}

}  // namespace
}  // namespace kern::driver
