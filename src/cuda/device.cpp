// Driver bring-up, device queries, primary contexts, streams and events.
#include <cstdlib>

#include "cuda/driver_api.hpp"
#include "kern/cuda/cuda.hpp"
#include "kern/base/error.hpp"

namespace kern::cuda {
using detail::api;

void ensure_driver() { (void)api(); }

ModuleLoading prefer_eager_module_loading() {
  if (detail::driver_initialized()) return ModuleLoading::AlreadyInitialized;
  if (const char* v = std::getenv("CUDA_MODULE_LOADING"); v != nullptr && *v != '\0') return ModuleLoading::CallerChose;
  ::setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  return ModuleLoading::AsAsked;
}

bool lazy_module_loading() {
  CUmoduleLoadingMode mode = CU_MODULE_EAGER_LOADING;
  KERN_CU(cuModuleGetLoadingMode, &mode);
  return mode == CU_MODULE_LAZY_LOADING;
}

int device_count() {
  int n = 0;
  KERN_CU(cuDeviceGetCount, &n);
  return n;
}

namespace detail {
CUdevice device_handle(int ordinal) {
  int n = device_count();
  if (ordinal < 0 || ordinal >= n)
    fail(ErrorKind::Api, "GPU {} does not exist: this machine has {} CUDA device(s)", ordinal, n);
  CUdevice d = 0;
  KERN_CU(cuDeviceGet, &d, ordinal);
  return d;
}
int attribute(CUdevice d, CUdevice_attribute a) {
  int v = 0;
  KERN_CU(cuDeviceGetAttribute, &v, a, d);
  return v;
}
}  // namespace detail
using detail::attribute;
using detail::device_handle;

DeviceInfo device_info(int ordinal) {
  CUdevice d = device_handle(ordinal);
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  KERN_CU(cuDeviceGetName, name, static_cast<int>(sizeof name - 1), d);
  info.name = name;
  info.cc_major = attribute(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info.cc_minor = attribute(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info.sm_count = attribute(d, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.max_shared_per_block_optin = attribute(d, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  size_t total = 0;
  KERN_CU(cuDeviceTotalMem, &total, d);
  info.total_memory = total;
  KERN_CU(cuDriverGetVersion, &info.driver_version);
  return info;
}

std::string pci_bus_id(int ordinal) {
  CUdevice d = device_handle(ordinal);
  char id[64] = {};
  KERN_CU(cuDeviceGetPCIBusId, id, static_cast<int>(sizeof id - 1), d);
  return id;
}

Context::Context(int ordinal) : ordinal_(ordinal) {
  CUdevice d = device_handle(ordinal);
  device_ = d;
  CUcontext c = nullptr;
  KERN_CU(cuDevicePrimaryCtxRetain, &c, d);
  ctx_ = c;
  make_current();
}

Context::~Context() {
  if (ctx_) detail::warn_if_failed(api().cuDevicePrimaryCtxRelease(device_), "cuDevicePrimaryCtxRelease");
}

void Context::make_current() const { KERN_CU(cuCtxSetCurrent, static_cast<CUcontext>(ctx_)); }

Stream::Stream() {
  CUstream s = nullptr;
  KERN_CU(cuStreamCreate, &s, CU_STREAM_NON_BLOCKING);
  s_ = s;
}

Stream::~Stream() {
  if (s_) detail::warn_if_failed(api().cuStreamDestroy(static_cast<CUstream>(s_)), "cuStreamDestroy");
}

void Stream::synchronize() const { KERN_CU(cuStreamSynchronize, static_cast<CUstream>(s_)); }

void Stream::wait(const Event& e) const {
  if (!e.recorded()) return;
  KERN_CU(cuStreamWaitEvent, static_cast<CUstream>(s_), static_cast<CUevent>(e.handle()), 0);
}

void* detail::create_event(unsigned flags) {
  CUevent e = nullptr;
  KERN_CU(cuEventCreate, &e, flags);
  return e;
}

void detail::destroy_event(void* e) {
  if (e) warn_if_failed(api().cuEventDestroy(static_cast<CUevent>(e)), "cuEventDestroy");
}

Event::Event() : e_(detail::create_event(CU_EVENT_DISABLE_TIMING)) {}

Event::~Event() { detail::destroy_event(e_); }

void Event::record(const Stream& s) {
  KERN_CU(cuEventRecord, static_cast<CUevent>(e_), detail::raw(s));
  recorded_ = true;
}

void Event::synchronize() const {
  if (recorded_) KERN_CU(cuEventSynchronize, static_cast<CUevent>(e_));
}

bool Event::query() const {
  if (!recorded_) return true;
  const CUresult r = api().cuEventQuery(static_cast<CUevent>(e_));
  if (r == CUDA_ERROR_NOT_READY) return false;
  detail::check(r, "cuEventQuery");
  return true;
}

}  // namespace kern::cuda
