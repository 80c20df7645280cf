// A collective extern's count against its buffers (src/runtime/collective_args.hpp): each
// collective's sides at their exact fit and one element past it, and counts whose byte size
// overflows (a negative i32 count arrives as 2^32 - 1).
#include <gtest/gtest.h>

#include <cstdint>

#include "runtime/collective_args.hpp"

namespace kern::runtime {
namespace {

using cuda::NcclCollective;

TEST(CollectiveArgs, EachCollectivesSidesFitExactlyAndNotOneElementMore) {
  // 4 ranks, 2-byte elements, count 100: one side 200 bytes, the other 800.
  struct Case {
    NcclCollective c;
    std::uint64_t send, recv;
  };
  for (const Case& k : {Case{NcclCollective::AllReduce, 200, 200}, Case{NcclCollective::AllGather, 200, 800},
                        Case{NcclCollective::ReduceScatter, 800, 200}, Case{NcclCollective::AllToAll, 800, 800}}) {
    EXPECT_EQ(collective_count_problem(k.c, 100, 4, 2, k.send, k.recv), std::nullopt) << static_cast<int>(k.c);
    const auto short_send = collective_count_problem(k.c, 100, 4, 2, k.send - 1, k.recv);
    ASSERT_TRUE(short_send) << static_cast<int>(k.c);
    EXPECT_NE(short_send->find("send holds " + std::to_string(k.send - 1) + " bytes"), std::string::npos) << *short_send;
    const auto short_recv = collective_count_problem(k.c, 100, 4, 2, k.send, k.recv - 1);
    ASSERT_TRUE(short_recv) << static_cast<int>(k.c);
    EXPECT_NE(short_recv->find("recv holds"), std::string::npos) << *short_recv;
    EXPECT_NE(short_recv->find("needs " + std::to_string(k.recv) + " bytes"), std::string::npos) << *short_recv;
  }
}

TEST(CollectiveArgs, OverflowingCountsNeverFit) {
  const std::uint64_t huge = ~std::uint64_t{0};
  const auto p = collective_count_problem(NcclCollective::AllGather, huge / 2, 4, 2, huge, huge);
  ASSERT_TRUE(p);
  EXPECT_NE(p->find("more than 2^64 bytes"), std::string::npos) << *p;
  // A count of -1 written as i32 reads back as 2^32 - 1: far past a 4 KiB buffer.
  EXPECT_TRUE(collective_count_problem(NcclCollective::AllReduce, 0xffffffffu, 1, 4, 4096, 4096));
  EXPECT_EQ(collective_count_problem(NcclCollective::AllReduce, 0, 1, 4, 0, 0), std::nullopt);
}

}  // namespace
}  // namespace kern::runtime
