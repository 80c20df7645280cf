// The kernels directory: indexed by content, lookups by pinned hash, tamper detection.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "fixture_files.hpp"
#include "temp_dir.hpp"
#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/registry/registry.hpp"
#include "kern/base/sha256.hpp"

namespace kern {
namespace {

namespace fs = std::filesystem;

using kern::test::TempDir;

std::string message_of(const std::function<void()>& f, ErrorKind want) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), want) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

class RegistryDir : public ::testing::Test {
 protected:
  void SetUp() override {
    KERN_NEED_NVCC_FIXTURES();
    fs::copy_file(test::fixture("kernels_a.cubin"), dir / "attn-old.cubin");
    fs::copy_file(test::fixture("kernels_a.fatbin"), dir / "norm.fatbin");
    fs::copy_file(test::fixture("kernels_a.fatbin"), dir / "norm-copy.fatbin");  // same content, other name
    fs::copy_file(test::fixture("libkernels_ab.so"), dir / "ext.so");
    write_file(dir / "README.md", "kernels for tests\n");
    write_file(dir / ".hidden", "skipped");
    fs::create_directory(dir.path() / "subdir");
    cubin_sha = sha256_file_hex(test::fixture("kernels_a.cubin"));
    fatbin_sha = sha256_file_hex(test::fixture("kernels_a.fatbin"));
    so_sha = sha256_file_hex(test::fixture("libkernels_ab.so"));
  }
  TempDir dir;
  std::string cubin_sha, fatbin_sha, so_sha;
};

TEST_F(RegistryDir, IndexesEveryFileByContentSorted) {
  registry::Registry r = registry::Registry::scan(dir.path().string());
  EXPECT_EQ(r.files_hashed(), 5u);      // hidden file and subdir skipped
  ASSERT_EQ(r.artifacts().size(), 4u);  // the two equal fatbins fold into one
  for (std::size_t i = 1; i < r.artifacts().size(); ++i)
    EXPECT_LT(r.artifacts()[i - 1].sha256, r.artifacts()[i].sha256);

  const registry::Artifact& fat = r.lookup("norm", fatbin_sha);
  EXPECT_EQ(fat.kind, registry::ArtifactKind::Fatbin);
  EXPECT_EQ(fat.path, dir / "norm-copy.fatbin");  // first name in sorted order
  EXPECT_EQ(fat.duplicates, std::vector<std::string>{dir / "norm.fatbin"});
  EXPECT_EQ(r.lookup("attn", cubin_sha).kind, registry::ArtifactKind::Cubin);
  EXPECT_EQ(r.lookup("ext", so_sha).kind, registry::ArtifactKind::HostLibrary);
  EXPECT_GE(r.lookup("ext", so_sha).images, 2u);

  // Hashes are matched in either case.
  std::string upper = cubin_sha;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(&r.lookup("attn", upper), &r.lookup("attn", cubin_sha));
}

TEST_F(RegistryDir, ImagesComeFromThePinnedFile) {
  registry::Registry r = registry::Registry::scan(dir.path().string());
  auto images = r.images("attn", cubin_sha);
  ASSERT_EQ(images.size(), 1u);
  EXPECT_EQ(images[0].bytes, test::fixture_bytes("kernels_a.cubin"));
  EXPECT_EQ(r.images("ext", so_sha).size(), r.lookup("ext", so_sha).images);
}

TEST_F(RegistryDir, MissingModuleNamesModuleHashAndDir) {
  registry::Registry r = registry::Registry::scan(dir.path().string());
  std::string absent = to_hex(sha256("not in the dir"));
  std::string msg = message_of([&] { r.lookup("attn", absent); }, ErrorKind::KernelArtifact);
  EXPECT_NE(msg.find("module `attn`"), std::string::npos) << msg;
  EXPECT_NE(msg.find(absent.substr(0, 12)), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir.path().string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("5 files hashed"), std::string::npos) << msg;

  msg = message_of([&] { r.lookup("attn", "abcd"); }, ErrorKind::KernelArtifact);
  EXPECT_NE(msg.find("not a sha256"), std::string::npos) << msg;
}

TEST_F(RegistryDir, NonArtifactFileIsIndexedButRefused) {
  registry::Registry r = registry::Registry::scan(dir.path().string());
  std::string readme = sha256_file_hex(dir / "README.md");
  const registry::Artifact* a = r.find(readme);
  ASSERT_NE(a, nullptr);
  EXPECT_FALSE(a->kind.has_value());
  std::string msg = message_of([&] { r.lookup("doc", readme); }, ErrorKind::KernelArtifact);
  EXPECT_NE(msg.find("README.md is not a kernel artifact"), std::string::npos) << msg;
}

TEST_F(RegistryDir, FileChangedAfterScanIsDetected) {
  registry::Registry r = registry::Registry::scan(dir.path().string());
  auto bytes = read_file(dir / "attn-old.cubin");
  bytes[bytes.size() / 2] ^= 1;
  write_file(dir / "attn-old.cubin", bytes);
  std::string msg = message_of([&] { r.images("attn", cubin_sha); }, ErrorKind::KernelArtifact);
  EXPECT_NE(msg.find("changed since the kernels dir was hashed"), std::string::npos) << msg;
  // A fresh scan no longer knows the old hash.
  registry::Registry again = registry::Registry::scan(dir.path().string());
  EXPECT_EQ(again.find(cubin_sha), nullptr);
  EXPECT_NE(again.find(to_hex(sha256(bytes))), nullptr);
}

TEST(Registry, MissingDirIsAnIoError) {
  message_of([] { registry::Registry::scan("/nonexistent/kern-kernels"); }, ErrorKind::Io);
}

}  // namespace
}  // namespace kern
