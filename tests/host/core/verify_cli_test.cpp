// Runs the built `kern verify` on valid and invalid manifests: exit codes, summary on stdout,
// one violation per line on stderr with the path first.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "kern/base/file.hpp"
#include "kern_cli.hpp"

namespace {

using kern_test::CliResult;
CliResult run_kern(const std::string& args) { return kern_test::run_kern(args, "verify_cli"); }

std::string src(const std::string& rel) { return std::string(KERN_SOURCE_DIR) + "/" + rel; }

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

class VerifyCli : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(std::string(KERN_BINARY_DIR) + "/bin/kern")) << "build the kern target first";
  }
};

TEST_F(VerifyCli, ValidManifestPrintsSummary) {
  CliResult r = run_kern("verify '" + src("examples/qwen3-like.json") + "'");
  EXPECT_EQ(r.code, 0) << r.err;
  for (const char* want : {"vars:", "tokens", "1..256", "states:", "kv", "buffers (bytes at var max):", "weight:",
                           "ops:", "launches per module:", "extern:cublaslt_bf16_tn", "programs:", "decode",
                           "serving protocol:", "axes: rows=tokens groups=seqs", "page table: block_table -> kv",
                           "chunk: prefill", "once: load", "ok"})
    EXPECT_NE(r.out.find(want), std::string::npos) << "missing '" << want << "' in:\n" << r.out;
  EXPECT_TRUE(r.err.empty()) << r.err;
}

// `kern verify` of an invalid fixture: exit 1, nothing on stdout, and stderr's lines, as many as
// `prefixes` and each starting with its own.
std::vector<std::string> expect_verify_fails(const std::string& fixture, const std::vector<std::string>& prefixes) {
  CliResult r = run_kern("verify '" + src("tests/fixtures/manifests/invalid/" + fixture) + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(r.out.empty()) << r.out;
  const auto ls = lines(r.err);
  EXPECT_EQ(ls.size(), prefixes.size()) << r.err;
  for (std::size_t i = 0; i < ls.size() && i < prefixes.size(); ++i)
    EXPECT_EQ(ls[i].rfind(prefixes[i], 0), 0u) << ls[i];
  return ls;
}

TEST_F(VerifyCli, InvalidManifestListsEveryViolationPathFirst) {
  const auto ls = expect_verify_fails("three_violations.json",
                                      {"ops.embedding.impl.launches[0].grid[1]: ", "ops.gemm.impl.launches[0].entry: ",
                                       "vars.unused: ", "3 violations"});
  ASSERT_EQ(ls.size(), 4u);
  EXPECT_EQ(ls[3], "3 violations");
}

TEST_F(VerifyCli, ProtocolFailureIsAnErrorWhenThereIsABatchProgram) {
  const auto ls = expect_verify_fails("protocol_no_token.json", {"buffers: ", ""});
  ASSERT_FALSE(ls.empty());
  EXPECT_NE(ls[0].find("[P.token]"), std::string::npos);
}

TEST_F(VerifyCli, NoBatchProgramMeansNoServingProtocolButValid) {
  CliResult r = run_kern("verify '" + src("tests/fixtures/manifests/harness/demo_no_batch.json") + "'");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("no serving protocol:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[P.batch]"), std::string::npos) << r.out;
}

TEST_F(VerifyCli, ParseErrorAndUsage) {
  CliResult bad = run_kern("verify '" + src("tests/fixtures/manifests/invalid/does_not_exist.json") + "'");
  EXPECT_EQ(bad.code, 1);
  EXPECT_FALSE(bad.err.empty());
  CliResult usage = run_kern("verify --no-such-flag x.json");
  EXPECT_EQ(usage.code, 2);
  CliResult none = run_kern("verify");  // no manifest and no kern.toml above the temp dir
  EXPECT_EQ(none.code, 2) << none.err;
}

}  // namespace
