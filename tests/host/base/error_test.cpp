#include <gtest/gtest.h>

#include "kern/base/error.hpp"

using namespace kern;

TEST(Error, CallWrapsAndKeepsRootKind) {
  Error inner(ErrorKind::Domain, "buffer token_ids[3] = 200000 is above 151935");
  Error e = Error::call("program decode call 3 (embed) op embedding", inner);
  EXPECT_EQ(e.kind(), ErrorKind::Call);
  EXPECT_EQ(e.root_kind(), ErrorKind::Domain);
  EXPECT_STREQ(e.what(),
               "program decode call 3 (embed) op embedding: Domain: buffer token_ids[3] = 200000 is above 151935");
}

TEST(Error, DetailsOnePerLine) {
  Error e(ErrorKind::ManifestVerify, "2 violations", {"vars.t.max: must be >= 1", "ops.x: unused"});
  EXPECT_STREQ(e.what(), "ManifestVerify: 2 violations\n  vars.t.max: must be >= 1\n  ops.x: unused");
}
