// Artifact parsing against real nvcc output: cubin, fatbin, and a host .so whose
// .nv_fatbin section must split into exactly the containers nvcc -fatbin produces.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>

#include "fixture_files.hpp"
#include "kern/base/error.hpp"
#include "kern/registry/registry.hpp"

namespace kern {
namespace {

using test::fixture_bytes;

std::set<std::uint32_t> arches(const registry::DeviceImage& img) {
  std::set<std::uint32_t> s;
  for (const auto& e : img.entries) s.insert(e.arch);
  return s;
}

void put_u64(std::vector<std::byte>& b, std::size_t at, std::uint64_t v) { std::memcpy(b.data() + at, &v, 8); }
void put_u16(std::vector<std::byte>& b, std::size_t at, std::uint16_t v) { std::memcpy(b.data() + at, &v, 2); }
std::uint64_t get_u64(const std::vector<std::byte>& b, std::size_t at) {
  std::uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}

void expect_kernel_artifact_error(std::span<const std::byte> bytes, const std::string& what) {
  try {
    registry::extract_device_images(bytes, what);
    ADD_FAILURE() << what << " was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::KernelArtifact) << e.what();
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

// The one device image in fixture `file` (named `name`, of `kind`): the whole file, unchanged.
// An empty image when there is not exactly one (the test has failed then).
registry::DeviceImage whole_image(const std::string& file, const std::string& name, registry::ArtifactKind kind) {
  const auto bytes = fixture_bytes(file);
  EXPECT_EQ(registry::artifact_kind(bytes, name), kind);
  auto images = registry::extract_device_images(bytes, name);
  EXPECT_EQ(images.size(), 1u);
  if (images.size() != 1) return {};
  EXPECT_EQ(images[0].bytes, bytes);
  return images[0];
}

TEST(Artifact, CubinIsHandedOverWholeWithItsFunctions) {
  KERN_NEED_NVCC_FIXTURES();
  const registry::DeviceImage image = whole_image("kernels_a.cubin", "a.cubin", registry::ArtifactKind::Cubin);
  EXPECT_EQ(image.functions, (std::vector<std::string>{"kern_test_add_one", "kern_test_scale"}));
  ASSERT_EQ(image.entries.size(), 1u);
  EXPECT_EQ(image.entries[0].arch, 90u);
}

TEST(Artifact, FatbinHoldsOneImagePerArch) {
  KERN_NEED_NVCC_FIXTURES();
  const registry::DeviceImage image = whole_image("kernels_a.fatbin", "a.fatbin", registry::ArtifactKind::Fatbin);
  EXPECT_EQ(arches(image), (std::set<std::uint32_t>{80, 90}));
  for (const auto& e : image.entries) {
    EXPECT_EQ(e.kind, registry::FatbinEntry::Kind::Elf);
    EXPECT_FALSE(e.compressed);
    EXPECT_EQ(e.functions, (std::vector<std::string>{"kern_test_add_one", "kern_test_scale"}));
  }
  EXPECT_NE(image.description.find("sm_80"), std::string::npos) << image.description;
}

TEST(Artifact, SharedLibraryContainersAreExactlyWhatNvccEmbedded) {
  KERN_NEED_NVCC_FIXTURES();
  auto so = fixture_bytes("libkernels_ab.so");
  EXPECT_EQ(registry::artifact_kind(so, "lib.so"), registry::ArtifactKind::HostLibrary);
  auto images = registry::extract_device_images(so, "lib.so");
  ASSERT_GE(images.size(), 2u);

  // The containers, in order, tile the raw section objcopy cut out (up to zero padding).
  auto section = fixture_bytes("libkernels_ab.nv_fatbin");
  std::size_t at = 0;
  for (const auto& img : images) {
    while (at < section.size() && section[at] == std::byte{0}) ++at;
    ASSERT_LE(at + img.bytes.size(), section.size());
    EXPECT_TRUE(std::equal(img.bytes.begin(), img.bytes.end(), section.begin() + static_cast<std::ptrdiff_t>(at)));
    at += img.bytes.size();
  }
  while (at < section.size() && section[at] == std::byte{0}) ++at;
  EXPECT_EQ(at, section.size());

  // Each source's nvcc -fatbin output is one of the containers, byte for byte.
  for (const char* name : {"kernels_a.fatbin", "kernels_b.fatbin"}) {
    auto fat = fixture_bytes(name);
    auto same = [&](const registry::DeviceImage& img) { return img.bytes == fat; };
    EXPECT_EQ(std::count_if(images.begin(), images.end(), same), 1) << name;
  }
  std::set<std::string> functions;
  for (const auto& img : images) functions.insert(img.functions.begin(), img.functions.end());
  EXPECT_TRUE(functions.count("kern_test_twice"));
  EXPECT_TRUE(functions.count("kern_test_add_one"));
}

TEST(Artifact, EveryTruncationIsAnErrorNeverACrash) {
  KERN_NEED_NVCC_FIXTURES();
  for (const char* name : {"kernels_a.cubin", "kernels_a.fatbin", "libkernels_ab.so"}) {
    auto bytes = fixture_bytes(name);
    std::size_t step = bytes.size() > 20000 ? 7 : 1;
    for (std::size_t n = 0; n < bytes.size(); n += step)
      expect_kernel_artifact_error(std::span(bytes).first(n), std::string(name) + " cut at " + std::to_string(n));
  }
}

TEST(Artifact, LyingSizesAreRejected) {
  KERN_NEED_NVCC_FIXTURES();
  auto fat = fixture_bytes("kernels_a.fatbin");
  auto big = fat;
  put_u64(big, 8, get_u64(fat, 8) + 1);  // container payload one byte longer than the file
  expect_kernel_artifact_error(big, "longer");
  auto huge = fat;
  put_u64(huge, 8, ~std::uint64_t{0});  // overflow bait
  expect_kernel_artifact_error(huge, "huge");
  auto entry = fat;
  put_u64(entry, 16 + 8, ~std::uint64_t{0} - 10);  // first entry's payload size
  expect_kernel_artifact_error(entry, "entry");
  auto header = fat;
  put_u16(header, 6, 0);  // header size 0 would loop forever
  expect_kernel_artifact_error(header, "header");

  auto so = fixture_bytes("libkernels_ab.so");
  auto shoff = so;
  put_u64(shoff, 0x28, so.size() - 10);  // section table past the end
  expect_kernel_artifact_error(shoff, "shoff");
}

TEST(Artifact, GarbageAndForeignFilesAreNotArtifacts) {
  std::vector<std::byte> empty;
  expect_kernel_artifact_error(empty, "empty");
  std::string text = "#!/bin/sh\necho not a kernel\n";
  expect_kernel_artifact_error(std::as_bytes(std::span(text)), "script");
  // A 32-bit ELF header.
  std::vector<std::byte> elf32(64, std::byte{0});
  const unsigned char id[] = {0x7f, 'E', 'L', 'F', 1, 1, 1};
  std::memcpy(elf32.data(), id, sizeof id);
  expect_kernel_artifact_error(elf32, "elf32");
}

TEST(Artifact, HostElfWithoutDeviceCodeIsRejected) {
  auto self = read_file("/proc/self/exe");  // this test binary: x86-64 ELF, no .nv_fatbin
  try {
    registry::artifact_kind(std::as_bytes(std::span(self)), "self");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::KernelArtifact);
    EXPECT_NE(std::string(e.what()).find(".nv_fatbin"), std::string::npos) << e.what();
  }
}

TEST(Artifact, RandomCorruptionNeverCrashes) {
  KERN_NEED_NVCC_FIXTURES();
  std::uint64_t state = 0x5eed;
  auto next = [&] {  // splitmix64
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  int rejected = 0, accepted = 0;
  for (const char* name : {"kernels_a.cubin", "kernels_a.fatbin", "libkernels_ab.so"}) {
    auto base = fixture_bytes(name);
    for (int round = 0; round < 300; ++round) {
      auto b = base;
      int flips = 1 + static_cast<int>(next() % 8);
      for (int f = 0; f < flips; ++f) {
        // Bias towards headers, where the structure lives.
        std::size_t limit = next() % 2 ? std::min<std::size_t>(b.size(), 256) : b.size();
        b[next() % limit] = static_cast<std::byte>(next());
      }
      try {
        registry::extract_device_images(b, name);
        ++accepted;
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::KernelArtifact) << e.what();
        ++rejected;
      }
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace kern
