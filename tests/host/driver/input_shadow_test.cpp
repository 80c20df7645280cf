// InputShadow over the fake executor and the driver's toy manifest: only the elements from the
// first change on are written (ranged), monotone inputs from their start, nothing when nothing
// changed, nothing remembered from a refused write.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "fake_executor.hpp"
#include "kern/driver/input_shadow.hpp"
#include "kern/base/error.hpp"
#include "kern/core/manifest.hpp"
#include "kern/core/verify.hpp"

namespace kern::driver {
namespace {

using test::Event;
using test::FakeExecutor;
using Ints = std::vector<std::int64_t>;

const core::Verified& shadow_toy() {
  static const core::Verified v = core::verify(
      core::parse_manifest_file(std::string(KERN_SOURCE_DIR) + "/tests/host/driver/fixtures/driver-toy.json"));
  return v;
}

std::vector<std::byte> i32s(const Ints& v) {
  std::vector<std::byte> out(v.size() * 4);
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::int32_t x = static_cast<std::int32_t>(v[i]);
    std::memcpy(out.data() + 4 * i, &x, 4);
  }
  return out;
}
std::vector<std::byte> i64s(const Ints& v) {
  std::vector<std::byte> out(v.size() * 8);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

TEST(InputShadow, WritesOnlyFromTheFirstChangedElement) {
  FakeExecutor fake(shadow_toy().manifest());
  InputShadow shadow(shadow_toy().manifest());
  // First write: everything, as a prefix write.
  EXPECT_EQ(shadow.write(fake, "table", i32s({0, 1})), 8u);
  ASSERT_EQ(fake.events.size(), 1u);
  EXPECT_TRUE(fake.events[0].prefix);
  EXPECT_EQ(fake.events[0].values, (Ints{0, 1}));
  // The same bytes again, or a shorter prefix of them: nothing.
  EXPECT_EQ(shadow.write(fake, "table", i32s({0, 1})), 0u);
  EXPECT_EQ(shadow.write(fake, "table", i32s({0})), 0u);
  EXPECT_EQ(fake.events.size(), 1u);
  // The row grows by one page: that entry only, at its byte offset.
  EXPECT_EQ(shadow.write(fake, "table", i32s({0, 1, 2})), 4u);
  ASSERT_EQ(fake.events.size(), 2u);
  EXPECT_FALSE(fake.events[1].prefix);
  EXPECT_EQ(fake.events[1].offset, 8u);
  EXPECT_EQ(fake.events[1].values, (Ints{2}));
  // A change in the middle: from that element to the end of what is given.
  EXPECT_EQ(shadow.write(fake, "table", i32s({0, 3, 2, 3})), 12u);
  EXPECT_EQ(fake.events[2].offset, 4u);
  EXPECT_EQ(fake.events[2].values, (Ints{3, 2, 3}));
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(fake.get("table", i), (Ints{0, 3, 2, 3})[i]);
  // A change in the first element is a prefix write again.
  EXPECT_EQ(shadow.write(fake, "table", i32s({1})), 4u);
  EXPECT_TRUE(fake.events[3].prefix);
  EXPECT_EQ(fake.get("table", 1), 3);  // the rest kept
  EXPECT_EQ(shadow.known("table").size(), 16u);
}

TEST(InputShadow, ElementsNotBytes) {
  // i64 1 -> 257 changes the second byte of element 1 (byte 9): the write starts at the element.
  FakeExecutor fake(shadow_toy().manifest());
  InputShadow shadow(shadow_toy().manifest());
  shadow.write(fake, "pos", i64s({5, 1}));
  EXPECT_EQ(shadow.write(fake, "pos", i64s({5, 257})), 8u);
  EXPECT_EQ(fake.events.back().offset, 8u);
  EXPECT_EQ(fake.events.back().values, (Ints{257}));
}

TEST(InputShadow, MonotoneInputsAreWrittenFromTheirStart) {
  FakeExecutor fake(shadow_toy().manifest());
  InputShadow shadow(shadow_toy().manifest());
  shadow.write(fake, "cu", i32s({0, 2}));
  EXPECT_EQ(shadow.write(fake, "cu", i32s({0, 1})), 8u);  // element 1 changed, written from 0
  EXPECT_TRUE(fake.events.back().prefix);
  EXPECT_EQ(fake.events.back().values, (Ints{0, 1}));
}

TEST(InputShadow, RefusedWritesAreNotRememberedAndClearForgets) {
  FakeExecutor fake(shadow_toy().manifest());
  InputShadow shadow(shadow_toy().manifest());
  shadow.write(fake, "table", i32s({0, 1}));
  // More entries than the whole table holds: the fake refuses (as the runtime does), the shadow
  // keeps {0, 1}.
  Ints too_many(1000);
  std::iota(too_many.begin(), too_many.end(), 0);
  EXPECT_THROW(shadow.write(fake, "table", i32s(too_many)), Error);
  EXPECT_EQ(shadow.known("table").size(), 8u);
  EXPECT_EQ(shadow.write(fake, "table", i32s({0, 1, 2})), 4u);
  EXPECT_EQ(fake.events.back().offset, 8u);
  try {
    shadow.write(fake, "next", i64s({1}));
    ADD_FAILURE() << "an output was written";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Api);
    EXPECT_NE(std::string(e.what()).find("'next' is not an input"), std::string::npos) << e.what();
  }
  shadow.clear();
  EXPECT_TRUE(shadow.known("table").empty());
  EXPECT_EQ(shadow.write(fake, "table", i32s({0, 1, 2})), 12u);  // everything again
  EXPECT_TRUE(fake.events.back().prefix);
}

}  // namespace
}  // namespace kern::driver
