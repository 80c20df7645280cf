// kern capture's command line without a GPU: what it refuses and says before and after running a
// program (the injection library itself runs in the GPU test, tests/gpu/capture).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "kern/base/file.hpp"
#include "kern_cli.hpp"

namespace {

namespace fs = std::filesystem;
using kern_test::run_kern;

class CaptureCli : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kern_test::kern_binary())) << "build the kern target first";
    dir_ = fs::temp_directory_path() / ("kern_capture_cli_dirs_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string at(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(CaptureCli, NothingToRunIsAUsageError) {
  const auto r = run_kern("capture -o '" + at("c") + "'", "capture_cli");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("nothing to run"), std::string::npos) << r.err;
}

TEST_F(CaptureCli, AProgramThatNeverInitialisesCudaLeavesNoRecord) {
  const auto r = run_kern("capture -o '" + at("c") + "' -- true", "capture_cli");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("`true` (status 0) left no record"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_TRUE(fs::is_directory(at("c") + "/modules"));
}

TEST_F(CaptureCli, AnExistingCaptureIsNotOverwritten) {
  fs::create_directories(at("c"));
  kern::write_file(at("c") + "/capture.jsonl", "{\"kern_capture\": 1}\n");
  const auto r = run_kern("capture -o '" + at("c") + "' -- true", "capture_cli");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("holds a capture already"), std::string::npos) << r.err;
  EXPECT_EQ(kern::read_file(at("c") + "/capture.jsonl"), "{\"kern_capture\": 1}\n");
}

TEST_F(CaptureCli, AMissingInjectionLibraryOrProgramIsNamed) {
  auto r = run_kern("capture -o '" + at("c") + "' --inject '" + at("none.so") + "' -- true", "capture_cli");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no injection library at " + at("none.so")), std::string::npos) << r.err;
  r = run_kern("capture -o '" + at("d") + "' -- '" + at("no-such-program") + "'", "capture_cli");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot start " + at("no-such-program")), std::string::npos) << r.err;
}

}  // namespace
