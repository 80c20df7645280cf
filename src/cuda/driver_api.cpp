#include "cuda/driver_api.hpp"

#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <string>

#include "kern/base/error.hpp"
#include "kern/base/log.hpp"

namespace kern::cuda::detail {
namespace {

std::atomic<bool> driver_loaded{false};  // cuInit has run (CUDA_MODULE_LOADING is read by then)

DriverApi load_driver() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    fail(ErrorKind::Driver, "no CUDA driver on this machine: libcuda.so.1 could not be loaded ({})",
         why ? why : "unknown reason");
  }
  DriverApi a;
#define KERN_CUDA_LOAD(pretty, symbol)                                  \
  a.pretty = reinterpret_cast<decltype(a.pretty)>(dlsym(lib, #symbol)); \
  if (!a.pretty) fail(ErrorKind::Driver, "the CUDA driver libcuda.so.1 lacks {} (driver too old for kern)", #symbol);
  KERN_CUDA_DRIVER_FUNCTIONS(KERN_CUDA_LOAD)
#undef KERN_CUDA_LOAD
  CUresult r = a.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    a.cuGetErrorName(r, &name);
    fail(ErrorKind::Driver, "the CUDA driver is installed but cuInit failed: {} (no usable GPU?)",
         name ? name : std::to_string(static_cast<int>(r)));
  }
  driver_loaded = true;
  return a;
}

std::string describe(CUresult r, std::string_view call) {
  const char* name = nullptr;
  const char* str = nullptr;
  const DriverApi& a = api();
  a.cuGetErrorName(r, &name);
  a.cuGetErrorString(r, &str);
  return fmt::format("{} failed: {} ({})", call, name ? name : std::to_string(static_cast<int>(r)),
                     str ? str : "no description");
}

}  // namespace

const DriverApi& api() { return load_once<DriverApi>(load_driver); }

bool driver_initialized() { return driver_loaded; }

void check(CUresult r, std::string_view call) {
  if (r == CUDA_SUCCESS) return;
  throw Error(ErrorKind::Cuda, describe(r, call));
}

std::string describe_failure(CUresult r, std::string_view call) { return describe(r, call); }

void warn_if_failed(CUresult r, std::string_view call) {
  if (r == CUDA_SUCCESS) return;
  log().warn("{}", describe(r, call));
}

}  // namespace kern::cuda::detail
