// The CUDA shell's VMM layer on the device (include/kern/cuda/vmm.hpp), the ground the state pool's
// arenas stand on: a reserved range keeps its address while chunks move in and out of it, the bytes
// follow the chunk, one access call may span several mappings, a graph captured before a remap
// writes through the new mapping, handles export as POSIX file descriptors and KERN_NO_FABRIC forces
// them, misuse is an Api error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <vector>

#include "kern/base/error.hpp"
#include "kern/cuda/cuda.hpp"
#include "kern/cuda/vmm.hpp"

namespace kern::gputest {
namespace {

using cuda::PhysicalChunk;
using cuda::VirtualRange;

struct Vmm : ::testing::Test {
  void SetUp() override {
    cuda::ensure_driver();
    ASSERT_GE(cuda::device_count(), 1);
    ctx = std::make_unique<cuda::Context>(0);
    info = cuda::vmm_info(0);
    ASSERT_TRUE(info.supported);
    ASSERT_TRUE(info.posix_fd);
    ASSERT_GT(info.granularity, 0u);
    g = info.granularity;
  }
  // The first and last byte of [addr, addr + g).
  std::pair<int, int> ends(cuda::DevicePtr addr, const cuda::Stream& s) const {
    unsigned char a = 0, b = 0;
    cuda::copy_d2h_async(&a, addr, 1, s);
    cuda::copy_d2h_async(&b, addr + g - 1, 1, s);
    s.synchronize();
    return {a, b};
  }
  std::unique_ptr<cuda::Context> ctx;
  cuda::VmmInfo info;
  std::uint64_t g = 0;
};

TEST_F(Vmm, BytesFollowTheChunkWhileTheAddressStays) {
  std::printf("[vmm] granularity %llu B (recommended %llu), fabric attribute %d, POSIX fd %d\n",
              static_cast<unsigned long long>(g), static_cast<unsigned long long>(info.recommended),
              static_cast<int>(info.fabric), static_cast<int>(info.posix_fd));
  std::vector<PhysicalChunk> c;
  for (int i = 0; i < 3; ++i) c.push_back(PhysicalChunk::create(g, 0, /*want_fabric=*/true, "vmm test"));
  std::printf("[vmm] handle kind: %s\n", cuda::handle_kind_name(c[0].kind()));
  VirtualRange r = VirtualRange::reserve(4 * g, g, "vmm test");
  const cuda::DevicePtr base = r.base();
  ASSERT_NE(base, 0u);
  for (int i = 0; i < 3; ++i) r.map(i * g, c[i]);
  r.set_access(0, 3 * g, 0);  // one call over three mappings
  cuda::Stream s;
  const unsigned char pattern[3] = {0x11, 0x22, 0x33};
  for (int i = 0; i < 3; ++i) cuda::memset_d8_async(base + i * g, pattern[i], g, s);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(ends(base + i * g, s), std::make_pair(int{pattern[i]}, int{pattern[i]}));
  // swap chunks 1 and 2 between positions 1 and 2
  r.unmap(g);
  r.unmap(2 * g);
  r.map(g, c[2]);
  r.map(2 * g, c[1]);
  r.set_access(g, 2 * g, 0);
  EXPECT_EQ(r.base(), base);
  EXPECT_EQ(ends(base + g, s), std::make_pair(0x33, 0x33)) << "position 1 shows chunk 2's bytes";
  EXPECT_EQ(ends(base + 2 * g, s), std::make_pair(0x22, 0x22)) << "position 2 shows chunk 1's bytes";
  EXPECT_EQ(ends(base, s), std::make_pair(0x11, 0x11)) << "position 0 untouched";
  EXPECT_EQ(r.mappings(), 3u);
}

TEST_F(Vmm, AGraphCapturedBeforeARemapWritesThroughTheNewMapping) {
  PhysicalChunk a = PhysicalChunk::create(g, 0, false, "vmm test a");
  PhysicalChunk b = PhysicalChunk::create(g, 0, false, "vmm test b");
  VirtualRange r = VirtualRange::reserve(g, g, "vmm test");
  r.map(0, a);
  r.set_access(0, g, 0);
  cuda::Stream s;
  cuda::memset_d8_async(r.base(), 0x00, g, s);
  const cuda::Graph graph = cuda::Graph::capture(s, [&] { cuda::memset_d8_async(r.base(), 0x5a, g, s); });
  s.synchronize();
  r.unmap(0);
  r.map(0, b);
  r.set_access(0, g, 0);
  cuda::memset_d8_async(r.base(), 0x00, g, s);
  graph.launch(s);
  EXPECT_EQ(ends(r.base(), s), std::make_pair(0x5a, 0x5a)) << "the replay wrote chunk b";
  r.unmap(0);
  r.map(0, a);
  r.set_access(0, g, 0);
  EXPECT_EQ(ends(r.base(), s), std::make_pair(0x00, 0x00)) << "chunk a kept its own (zeroed) bytes";
}

TEST_F(Vmm, HandlesExportAndNoFabricForcesFileDescriptors) {
  ASSERT_EQ(setenv("KERN_NO_FABRIC", "1", 1), 0);
  PhysicalChunk c = PhysicalChunk::create(g, 0, /*want_fabric=*/true, "vmm test");
  unsetenv("KERN_NO_FABRIC");
  EXPECT_EQ(c.kind(), cuda::HandleKind::PosixFd);
  const int fd = c.export_fd();
  EXPECT_GE(fd, 0);
  if (fd >= 0) close(fd);
}

TEST_F(Vmm, MisuseIsAnApiError) {
  PhysicalChunk c = PhysicalChunk::create(g, 0, false, "vmm test");
  VirtualRange r = VirtualRange::reserve(2 * g, g, "vmm test");
  r.map(0, c);
  auto kind_of = [](auto&& f) -> std::optional<ErrorKind> {
    try {
      f();
    } catch (const Error& e) {
      return e.kind();
    }
    return std::nullopt;
  };
  EXPECT_EQ(kind_of([&] { r.map(0, c); }), ErrorKind::Api) << "overlap";
  EXPECT_EQ(kind_of([&] { r.map(2 * g, c); }), ErrorKind::Api) << "outside the range";
  EXPECT_EQ(kind_of([&] { r.unmap(g); }), ErrorKind::Api) << "nothing mapped there";
  EXPECT_EQ(kind_of([&] { (void)PhysicalChunk::create(g + 1, 0, false, "odd"); }), ErrorKind::Api) << "granularity";
  const cuda::MemInfo m = cuda::mem_info();
  EXPECT_GT(m.total, 0u);
  EXPECT_LE(m.free, m.total);
}

}  // namespace
}  // namespace kern::gputest
