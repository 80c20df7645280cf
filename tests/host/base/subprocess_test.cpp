// run_process: argv without a shell, output captured, exit status and signals reported,
// killed at the timeout.
#include <gtest/gtest.h>

#include <chrono>

#include "kern/base/error.hpp"
#include "kern/base/subprocess.hpp"
#include "thrown.hpp"

namespace kern {
namespace {

using namespace std::chrono_literals;

TEST(Subprocess, CapturesStdoutStderrAndExitStatus) {
  auto r = run_process({"/bin/sh", "-c", "printf 'out %s' \"$0\"; printf err >&2; exit 3", "arg;with spaces"}, 10s);
  EXPECT_EQ(r.out, "out arg;with spaces");  // argv passed as is, no shell re-splitting
  EXPECT_EQ(r.err, "err");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.describe_status(), "exit status 3");
}

TEST(Subprocess, LargeOutputOnBothStreamsDoesNotDeadlock) {
  auto r = run_process({"/bin/sh", "-c", "head -c 3000000 /dev/zero; head -c 2000000 /dev/zero >&2"}, 20s);
  EXPECT_TRUE(r.ok()) << r.describe_status();
  EXPECT_EQ(r.out.size(), 3000000u);
  EXPECT_EQ(r.err.size(), 2000000u);
  auto t = run_process({"/bin/sh", "-c", "head -c 100000 /dev/zero"}, 20s, 1000);
  EXPECT_EQ(t.out.size(), 1000u);
  EXPECT_TRUE(t.output_truncated);
}

TEST(Subprocess, KilledAtTheTimeout) {
  auto t0 = std::chrono::steady_clock::now();
  auto r = run_process({"/bin/sleep", "30"}, 200ms);
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
}

TEST(Subprocess, MissingProgramIsAnIoError) {
  Error e = test::thrown([] { run_process({"/nonexistent/kern-tool"}, 1s); });
  EXPECT_EQ(e.kind(), ErrorKind::Io);
  EXPECT_NE(std::string(e.what()).find("/nonexistent/kern-tool"), std::string::npos);
}

TEST(Subprocess, FindExecutableSearchesPath) {
  auto sh = find_executable("sh");
  ASSERT_TRUE(sh.has_value());
  EXPECT_EQ(sh->front(), '/');
  EXPECT_FALSE(find_executable("kern-no-such-tool-xyz").has_value());
  EXPECT_EQ(find_executable("/bin/sh"), std::optional<std::string>("/bin/sh"));
  EXPECT_FALSE(find_executable("/etc/passwd").has_value());  // not executable
}

}  // namespace
}  // namespace kern
