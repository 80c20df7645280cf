// On a machine without a GPU driver, the CUDA shell fails with one clear Driver sentence.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include "kern/cuda/blaslt.hpp"
#include "kern/cuda/cuda.hpp"
#include "kern/cuda/vmm.hpp"
#include "kern/base/error.hpp"

namespace kern {
namespace {

bool driver_present() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) dlclose(h);
  return h != nullptr;
}

TEST(CudaShell, NoDriverIsOneDriverSentence) {
  if (driver_present()) GTEST_SKIP() << "this machine has a CUDA driver";
  for (int attempt = 0; attempt < 2; ++attempt) {  // a failed load is not sticky, fails the same way
    try {
      cuda::ensure_driver();
      FAIL() << "expected Error(Driver)";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Driver);
      const std::string msg = e.message();
      EXPECT_EQ(msg.rfind("no CUDA driver on this machine: libcuda.so.1 could not be loaded", 0), 0u) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos);
    }
  }
  EXPECT_THROW(cuda::device_count(), Error);
  EXPECT_THROW(cuda::vmm_info(0), Error);
  EXPECT_THROW(cuda::mem_info(), Error);
}

}  // namespace
}  // namespace kern
