// The multimem scan (include/kern/registry/multimem_scan.hpp) on committed nvcc output
// (fixtures/multimem.cu says how each was built) and on the registry's clean fixtures: ld_reduce found
// in sm_90 SASS in both its forms, multimem in PTX, clean modules passed, what cannot be scanned
// refused, lying bytes an error.
#include "kern/registry/multimem_scan.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "fixture_files.hpp"
#include "kern/base/error.hpp"
#include "kern/base/file.hpp"

namespace kern::registry {
namespace {

std::vector<std::byte> committed(const std::string& name) {
  const std::string s = read_file(std::string(KERN_SOURCE_DIR) + "/tests/host/registry/fixtures/" + name);
  auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

std::string kernel_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::KernelArtifact) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

TEST(MultimemScan, FindsLdReduceInSm90Sass) {
  const auto found = scan_multimem(committed("multimem_ldr.cubin"), "multimem_ldr.cubin");
  ASSERT_EQ(found.size(), 2u);
  std::set<std::string> whats, wheres;
  for (const auto& f : found) whats.insert(f.what), wheres.insert(f.where);
  EXPECT_EQ(whats, (std::set<std::string>{"multimem.ld_reduce (floating-point)", "multimem.ld_reduce (integer)"}));
  EXPECT_EQ(wheres, (std::set<std::string>{"sm_90 SASS .text.reduce_f32", "sm_90 SASS .text.reduce_u32"}));
  const std::string e = kernel_error([] { refuse_multimem(committed("multimem_ldr.cubin"), "m.cubin", "plain"); });
  EXPECT_NE(e.find("kernel plain receives a peer buffer"), std::string::npos) << e;
  EXPECT_NE(e.find("multimem.ld_reduce"), std::string::npos) << e;
}

// multimem.st / multimem.red are st / red in SASS: the scan cannot see them there (the header says
// why), but it sees them in PTX.
TEST(MultimemScan, StoresAreInvisibleInSassButNotInPtx) {
  EXPECT_TRUE(scan_multimem(committed("multimem_st.cubin"), "multimem_st.cubin").empty());
  const auto found = scan_multimem(committed("multimem_ptx.fatbin"), "multimem_ptx.fatbin");
  ASSERT_EQ(found.size(), 2u);  // multimem.st and multimem.red in the compute_90 PTX; none in its sm_90 SASS
  for (const auto& f : found) {
    EXPECT_EQ(f.where, "compute_90 PTX");
    EXPECT_EQ(f.what, "multimem. in PTX");
  }
  EXPECT_NE(kernel_error([] { refuse_multimem(committed("multimem_ptx.fatbin"), "p.fatbin", "store_all"); }).find(
                "compute_90 PTX"),
            std::string::npos);
}

TEST(MultimemScan, WhatCannotBeScannedIsRefused) {
  // CUDA 13 compresses PTX with zstd unless told not to.
  EXPECT_NE(kernel_error([] { scan_multimem(committed("multimem_ptx_zstd.fatbin"), "z.fatbin"); }).find("compressed"),
            std::string::npos);
  EXPECT_NE(kernel_error([] { scan_multimem(committed("plain_sm100.cubin"), "b.cubin"); }).find("sm_100"),
            std::string::npos);
  // A lying cubin: a text section cut short of its declared size, then bytes that are no artifact.
  auto cut = committed("multimem_ldr.cubin");
  cut.resize(cut.size() / 2);
  kernel_error([&] { scan_multimem(cut, "cut.cubin"); });
  const std::vector<std::byte> junk(64, std::byte{0x41});
  kernel_error([&] { scan_multimem(junk, "junk"); });
}

// kern's own kind of module: nvcc's default fatbin of sm_90a and sm_80 SASS with no multimem passes,
// and so does every kernel of the registry's fixtures.
TEST(MultimemScan, CleanModulesPass) {
  EXPECT_TRUE(scan_multimem(committed("multimem_st.cubin"), "st").empty());
  KERN_NEED_NVCC_FIXTURES();
  for (const char* f : {"kernels_a.cubin", "kernels_a.fatbin", "kernels_b.fatbin"}) {
    EXPECT_TRUE(scan_multimem(kern::test::fixture_bytes(f), f).empty()) << f;
    refuse_multimem(kern::test::fixture_bytes(f), f, "kern_test_add_one");  // no throw
  }
}

}  // namespace
}  // namespace kern::registry
