// The `cooperative` launch flag (kern extension to schema v5): parsed as a bool, default false,
// kept on extern launches by the parser and refused there by the verifier (R12.cooperative), as
// it is together with `cluster`; allowed with `pdl`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kern/base/error.hpp"
#include "kern/core/manifest.hpp"
#include "kern/core/verify.hpp"
#include "parse_support.hpp"
#include "verify_fixtures.hpp"

namespace kern::core {
namespace {

using testing::describe;
using testing::parse_error;
using ::testing::StartsWith;
using testing::toy;
using testing::toy_launch;

const Launch& toy_launch_of(const Manifest& m) { return m.ops.at("scale_rows").impl.launches[0]; }

TEST(CooperativeParse, DefaultsToFalseAndReadsBothBooleans) {
  EXPECT_FALSE(toy_launch_of(parse_manifest(toy().dump())).cooperative);
  for (bool v : {true, false}) {
    Json doc = toy();
    toy_launch(doc)["cooperative"] = v;
    EXPECT_EQ(toy_launch_of(parse_manifest(doc.dump())).cooperative, v);
  }
  Json doc = toy();
  toy_launch(doc)["cooperative"] = true;
  toy_launch(doc)["pdl"] = true;
  const Launch l = toy_launch_of(parse_manifest(doc.dump()));
  EXPECT_TRUE(l.cooperative);
  EXPECT_TRUE(l.pdl);
}

TEST(CooperativeParse, RejectsNonBooleansNamingThePath) {
  const Json bad[] = {"true", 1, 0, nullptr, Json::array({true})};
  for (const Json& v : bad) {
    Json doc = toy();
    toy_launch(doc)["cooperative"] = v;
    const std::string m = parse_error(doc);
    EXPECT_THAT(m, StartsWith("ops.scale_rows.impl.launches[0].cooperative: expected true or false, got ")) << v.dump();
  }
}

TEST(CooperativeParse, ParserKeepsItOnExternsForTheVerifier) {
  Json doc = toy();
  toy_launch(doc) = {{"entry", "extern:cublaslt_bf16_tn"}, {"cooperative", true}};
  EXPECT_TRUE(toy_launch_of(parse_manifest(doc.dump())).cooperative);
}

// qwen3-like: embedding launch 0 is a plain kernel launch, attn_decode launch 0 has a cluster
// and pdl, gemm launch 0 is an extern.
std::vector<Violation> qwen_violations(const std::string& patch) {
  return check(testing::parse_patched("qwen", patch));
}

// vs is exactly one R12.cooperative finding, at `path` with `message`.
void expect_only_cooperative(const std::vector<Violation>& vs, const std::string& path, const std::string& message) {
  ASSERT_EQ(vs.size(), 1u) << describe(vs);
  EXPECT_EQ(vs[0].rule, "R12.cooperative");
  EXPECT_EQ(vs[0].path, path);
  EXPECT_EQ(vs[0].message, message);
}

TEST(CooperativeVerify, AllowedOnKernelLaunchesAlsoWithPdl) {
  auto vs = qwen_violations(R"([{"op":"add","path":"/ops/embedding/impl/launches/0/cooperative","value":true}])");
  EXPECT_TRUE(vs.empty()) << describe(vs);
  vs = qwen_violations(R"([{"op":"add","path":"/ops/embedding/impl/launches/0/cooperative","value":true},
                           {"op":"add","path":"/ops/embedding/impl/launches/0/pdl","value":true}])");
  EXPECT_TRUE(vs.empty()) << describe(vs);
  vs = qwen_violations(R"([{"op":"add","path":"/ops/attn_decode/impl/launches/0/cooperative","value":false}])");
  EXPECT_TRUE(vs.empty()) << describe(vs);
}

TEST(CooperativeVerify, RejectedTogetherWithCluster) {
  const auto vs =
      qwen_violations(R"([{"op":"add","path":"/ops/attn_decode/impl/launches/0/cooperative","value":true}])");
  expect_only_cooperative(vs, "ops.attn_decode.impl.launches[0].cooperative",
                          "cooperative is not supported together with cluster");
  // Without the cluster the same launch is fine.
  const auto ok = qwen_violations(R"([{"op":"add","path":"/ops/attn_decode/impl/launches/0/cooperative","value":true},
                                      {"op":"remove","path":"/ops/attn_decode/impl/launches/0/cluster"}])");
  EXPECT_TRUE(ok.empty()) << describe(ok);
}

TEST(CooperativeVerify, RejectedOnExterns) {
  const auto vs = qwen_violations(R"([{"op":"add","path":"/ops/gemm/impl/launches/0/cooperative","value":true}])");
  expect_only_cooperative(vs, "ops.gemm.impl.launches[0].cooperative", "cooperative is not allowed on extern launches");
  // A typed manifest built in code gets the same answer, and verify() refuses it.
  Manifest m = testing::parse_patched("qwen", "");
  m.ops["gemm"].impl.launches[0].cooperative = true;
  try {
    verify(std::move(m));
    FAIL() << "verify accepted a cooperative extern";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::ManifestVerify);
    EXPECT_THAT(e.details(), ::testing::ElementsAre("ops.gemm.impl.launches[0].cooperative: cooperative is not allowed "
                                                    "on extern launches [R12.cooperative]"));
  }
}

}  // namespace
}  // namespace kern::core
