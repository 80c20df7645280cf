// Valid manifests pass; check() collects every violation in a deterministic order; verify()
// throws one ManifestVerify error listing them all; check() stays fast on a 1 MB manifest.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "kern/base/error.hpp"
#include "kern/core/protocol.hpp"
#include "verify_fixtures.hpp"

namespace kern::core {
namespace {

using testing::describe;
using testing::parse_patched;

std::vector<std::string> valid_files() {
  std::vector<std::string> out = {std::string(KERN_SOURCE_DIR) + "/examples/toy.json",
                                  std::string(KERN_SOURCE_DIR) + "/examples/qwen3-like.json"};
  std::vector<std::string> more;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(KERN_SOURCE_DIR) + "/tests/fixtures/manifests/valid"))
    if (e.path().extension() == ".json") more.push_back(e.path().string());
  std::sort(more.begin(), more.end());
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

TEST(VerifyValid, EveryValidManifestPassesCheckAndProtocol) {
  const auto files = valid_files();
  ASSERT_GE(files.size(), 4u);
  for (const auto& f : files) {
    SCOPED_TRACE(f);
    Manifest m = parse_manifest_file(f);
    const auto vs = check(m);
    EXPECT_TRUE(vs.empty()) << describe(vs);
    if (!vs.empty()) continue;
    Verified v = verify(std::move(m));
    const auto pv = protocol_violations(v);
    EXPECT_TRUE(pv.empty()) << describe(pv);
    EXPECT_NO_THROW(check_protocol(v));
  }
}

// Every collective extern of the catalogue, in the two-rank fixture's place of its all-reduce: the
// four collectives x four dtypes (the fixture's buffers are bf16, so the others differ in dtype
// only: one rule, R6.extern, names the mismatch).
TEST(VerifyValid, EveryNcclExternVerifiesWhereItsDtypeFits) {
  for (const char* coll : {"allreduce", "allgather", "reducescatter", "alltoall"})
    for (const char* dt : {"bf16", "f32"}) {
      const std::string name = std::string("nccl_") + coll + "_" + dt;
      const auto vs = check(parse_patched(
          "tp2", R"([{"op":"replace","path":"/ops/allreduce/impl/launches/0/entry","value":"extern:)" + name + R"("}])"));
      if (std::string(dt) == "bf16") {
        EXPECT_TRUE(vs.empty()) << name << "\n" << describe(vs);
      } else {
        ASSERT_FALSE(vs.empty()) << name;
        for (const auto& v : vs) EXPECT_EQ(v.rule, "R6.extern") << name << "\n" << describe(vs);
      }
    }
}

TEST(VerifyValid, HarnessManifestWithoutBatchPassesCheckButHasNoProtocol) {
  Verified v = verify(
      parse_manifest_file(std::string(KERN_SOURCE_DIR) + "/tests/fixtures/manifests/harness/demo_no_batch.json"));
  const auto pv = protocol_violations(v);
  bool no_batch = false;
  for (const auto& x : pv) no_batch |= x.rule == "P.batch";
  EXPECT_TRUE(no_batch) << describe(pv);
}

TEST(VerifyCollect, ReportsEveryViolationInOrder) {
  const std::string patch = R"([
    {"op":"add","path":"/vars/unused","value":{"max":4}},
    {"op":"replace","path":"/ops/embedding/impl/launches/0/block","value":[0,1,1]},
    {"op":"replace","path":"/ops/embedding/impl/launches/0/grid/1","value":0},
    {"op":"replace","path":"/modules/argmax/sha256","value":"xyz"},
    {"op":"replace","path":"/schema_version","value":5}])";
  Manifest m = parse_patched("qwen", patch);
  const auto a = check(m);
  const auto b = check(m);
  ASSERT_EQ(a.size(), 4u) << describe(a);
  ASSERT_EQ(b.size(), a.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].line(), b[i].line());
  EXPECT_EQ(a[0].rule, "R5.sha256");
  EXPECT_EQ(a[1].rule, "R6.block");
  EXPECT_EQ(a[2].rule, "R6.grid");
  EXPECT_EQ(a[3].rule, "R10.unused");
}

TEST(VerifyCollect, VerifyThrowsWithOneLinePerViolation) {
  Manifest m = parse_patched("qwen", R"([{"op":"add","path":"/vars/unused","value":{"max":4}},
                                        {"op":"add","path":"/states/unused","value":{"bytes":8}}])");
  try {
    verify(std::move(m));
    FAIL() << "verify accepted a broken manifest";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::ManifestVerify);
    EXPECT_EQ(e.message(), "2 violations");
    ASSERT_EQ(e.details().size(), 2u);
    EXPECT_EQ(e.details()[0].rfind("vars.unused: ", 0), 0u) << e.details()[0];
    EXPECT_NE(e.details()[0].find("[R10.unused]"), std::string::npos);
    EXPECT_EQ(e.details()[1].rfind("states.unused: ", 0), 0u) << e.details()[1];
  }
}

TEST(VerifyValid, VerifiedKeepsTheManifest) {
  Verified v = verify(parse_manifest_file(std::string(KERN_SOURCE_DIR) + "/examples/qwen3-like.json"));
  EXPECT_EQ(v->model, "qwen3-like-tiny");
  EXPECT_EQ(v.manifest().programs.count("decode"), 1u);
}

// Clones layer 1 of the Qwen3-like example into `layers` layers: a generated manifest of the
// size real ones have (the original qwen3-4b is ~533 KB with 36 layers).
Json big_manifest(int layers) {
  Json j = testing::load_fixture("qwen");
  const int per_layer = 512;
  j["states"]["kv"]["bytes_per_token"] = per_layer * layers;
  Json bufs = j["buffers"];
  for (int l = 2; l < layers; ++l)
    for (const auto& [name, b] : bufs.items())
      if (name.rfind("layers.1.", 0) == 0) j["buffers"]["layers." + std::to_string(l) + "." + name.substr(9)] = b;
  for (const char* prog : {"prefill", "decode"}) {
    Json calls = Json::array();
    Json layer1 = Json::array();
    for (const auto& c : j["programs"][prog]["calls"])
      if (c.value("label", "").rfind("layers.1.", 0) == 0) layer1.push_back(c);
    for (const auto& c : j["programs"][prog]["calls"]) {
      if (c.value("label", "") == "final_norm") {
        for (int l = 2; l < layers; ++l) {
          const std::string pre = "layers." + std::to_string(l) + ".";
          for (Json k : layer1) {
            k["label"] = pre + k["label"].get<std::string>().substr(9);
            for (auto& a : k["args"]) {
              if (a.contains("buf") && a["buf"].get<std::string>().rfind("layers.1.", 0) == 0)
                a["buf"] = pre + a["buf"].get<std::string>().substr(9);
              if (a.contains("state")) a["offset"] = l * per_layer;
            }
            calls.push_back(k);
          }
        }
      }
      calls.push_back(c);
    }
    j["programs"][prog]["calls"] = calls;
  }
  return j;
}

TEST(VerifyPerformance, CheckOnAOneMegabyteManifest) {
  // Layers are added until the text passes 1 MB (about 140 layers, each call unrolled).
  int layers = 64;
  std::string text = big_manifest(layers).dump(1);
  while (text.size() < 1000000u) text = big_manifest(layers += 16).dump(1);
  const auto t0 = std::chrono::steady_clock::now();
  Manifest m = parse_manifest(text);
  const auto t1 = std::chrono::steady_clock::now();
  std::vector<Violation> vs;
  constexpr int kRuns = 5;
  const std::clock_t cpu0 = std::clock();
  for (int i = 0; i < kRuns; ++i) vs = check(m);
  const std::clock_t cpu1 = std::clock();
  const auto t2 = std::chrono::steady_clock::now();
  Verified v = verify(std::move(m));
  const auto t3 = std::chrono::steady_clock::now();
  (void)check_protocol(v);
  const auto t4 = std::chrono::steady_clock::now();
  EXPECT_TRUE(vs.empty()) << describe(vs);
  using ms = std::chrono::duration<double, std::milli>;
  std::printf(
      "[perf] manifest %zu bytes, %d layers: parse %.2f ms, check %.2f ms wall / %.2f ms CPU (mean of %d), verify %.2f "
      "ms, protocol %.2f ms\n",
      text.size(), layers, ms(t1 - t0).count(), ms(t2 - t1).count() / kRuns,
      1000.0 * double(cpu1 - cpu0) / CLOCKS_PER_SEC / kRuns, kRuns, ms(t3 - t2).count(), ms(t4 - t3).count());
}

}  // namespace
}  // namespace kern::core
