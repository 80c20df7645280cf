// The dlopen table of libcuda.so.1. Internal to kern_cuda: the only file set that names
// CUDA driver symbols. cuda.h is used for types only; nothing links libcuda.
#pragma once

#include <cuda.h>

#include <fmt/format.h>

#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "kern/base/error.hpp"
#include "kern/cuda/cuda.hpp"

namespace kern::cuda::detail {

// X(pretty name, exported symbol). The exported symbol is the versioned one cuda.h maps the
// pretty name to (cuMemAlloc -> cuMemAlloc_v2); the pretty name is what errors print.
#define KERN_CUDA_DRIVER_FUNCTIONS(X)                                                         \
  X(cuInit, cuInit)                                                                           \
  X(cuDriverGetVersion, cuDriverGetVersion)                                                   \
  X(cuGetErrorName, cuGetErrorName)                                                           \
  X(cuGetErrorString, cuGetErrorString)                                                       \
  X(cuDeviceGetCount, cuDeviceGetCount)                                                       \
  X(cuDeviceGet, cuDeviceGet)                                                                 \
  X(cuDeviceGetName, cuDeviceGetName)                                                         \
  X(cuDeviceGetAttribute, cuDeviceGetAttribute)                                               \
  X(cuDeviceTotalMem, cuDeviceTotalMem_v2)                                                    \
  X(cuDeviceGetPCIBusId, cuDeviceGetPCIBusId)                                                 \
  X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain)                                       \
  X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2)                                  \
  X(cuCtxSetCurrent, cuCtxSetCurrent)                                                         \
  X(cuStreamCreate, cuStreamCreate)                                                           \
  X(cuStreamDestroy, cuStreamDestroy_v2)                                                      \
  X(cuStreamSynchronize, cuStreamSynchronize)                                                 \
  X(cuStreamWaitEvent, cuStreamWaitEvent)                                                     \
  X(cuStreamBeginCapture, cuStreamBeginCapture_v2)                                            \
  X(cuStreamEndCapture, cuStreamEndCapture)                                                   \
  X(cuEventCreate, cuEventCreate)                                                             \
  X(cuEventDestroy, cuEventDestroy_v2)                                                        \
  X(cuEventRecord, cuEventRecord)                                                             \
  X(cuEventSynchronize, cuEventSynchronize)                                                   \
  X(cuEventQuery, cuEventQuery)                                                               \
  X(cuEventElapsedTime, cuEventElapsedTime_v2)                                                \
  X(cuMemAlloc, cuMemAlloc_v2)                                                                \
  X(cuMemFree, cuMemFree_v2)                                                                  \
  X(cuMemHostAlloc, cuMemHostAlloc)                                                           \
  X(cuMemFreeHost, cuMemFreeHost)                                                             \
  X(cuMemHostGetDevicePointer, cuMemHostGetDevicePointer_v2)                                  \
  X(cuMemHostRegister, cuMemHostRegister_v2)                                                  \
  X(cuMemHostUnregister, cuMemHostUnregister)                                                 \
  X(cuPointerGetAttributes, cuPointerGetAttributes)                                           \
  X(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2)                                                  \
  X(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2)                                                  \
  X(cuMemcpyDtoDAsync, cuMemcpyDtoDAsync_v2)                                                  \
  X(cuMemcpy2DAsync, cuMemcpy2DAsync_v2)                                                      \
  X(cuMemsetD8Async, cuMemsetD8Async)                                                         \
  X(cuModuleLoadData, cuModuleLoadData)                                                       \
  X(cuModuleGetLoadingMode, cuModuleGetLoadingMode)                                           \
  X(cuModuleUnload, cuModuleUnload)                                                           \
  X(cuModuleGetFunction, cuModuleGetFunction)                                                 \
  X(cuFuncGetParamInfo, cuFuncGetParamInfo)                                                   \
  X(cuFuncSetAttribute, cuFuncSetAttribute)                                                   \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, cuOccupancyMaxActiveBlocksPerMultiprocessor) \
  X(cuLaunchKernel, cuLaunchKernel)                                                           \
  X(cuLaunchKernelEx, cuLaunchKernelEx)                                                       \
  X(cuTensorMapEncodeTiled, cuTensorMapEncodeTiled)                                           \
  X(cuGraphInstantiate, cuGraphInstantiateWithFlags)                                          \
  X(cuGraphLaunch, cuGraphLaunch)                                                             \
  X(cuGraphDestroy, cuGraphDestroy)                                                           \
  X(cuGraphExecDestroy, cuGraphExecDestroy)                                                   \
  X(cuMemGetInfo, cuMemGetInfo_v2)                                                            \
  X(cuMemGetAllocationGranularity, cuMemGetAllocationGranularity)                             \
  X(cuMemCreate, cuMemCreate)                                                                 \
  X(cuMemRelease, cuMemRelease)                                                               \
  X(cuMemExportToShareableHandle, cuMemExportToShareableHandle)                               \
  X(cuMemImportFromShareableHandle, cuMemImportFromShareableHandle)                           \
  X(cuMemAddressReserve, cuMemAddressReserve)                                                 \
  X(cuMemAddressFree, cuMemAddressFree)                                                       \
  X(cuMemMap, cuMemMap)                                                                       \
  X(cuMemUnmap, cuMemUnmap)                                                                   \
  X(cuMemSetAccess, cuMemSetAccess)

struct DriverApi {
#define KERN_CUDA_FIELD(pretty, symbol) decltype(&::symbol) pretty = nullptr;
  KERN_CUDA_DRIVER_FUNCTIONS(KERN_CUDA_FIELD)
#undef KERN_CUDA_FIELD
};

// A dlopen table loaded once, under a lock, by `load()`. A failed load is retried on the next
// call (and fails the same way): no sticky state.
template <class Table, class Load>
const Table& load_once(Load load) {
  static std::mutex mu;
  static Table* loaded = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (!loaded) loaded = new Table(load());
  return *loaded;
}

// The loaded table (loads on first use; Error(Driver) if libcuda.so.1 or a symbol is missing
// or cuInit fails).
const DriverApi& api();
// Whether api() has loaded the driver and run cuInit in this process (without loading it).
bool driver_initialized();

// Throws Error(Cuda) "<call> failed: <NAME> (<string>)" unless r == CUDA_SUCCESS.
void check(CUresult r, std::string_view call);
// The same message without throwing (for destructors).
void warn_if_failed(CUresult r, std::string_view call);
// "<call> failed: <NAME> (<string>)" for a result that is not CUDA_SUCCESS.
std::string describe_failure(CUresult r, std::string_view call);
// Throws Error(kind) "<what the caller was doing>: <call> failed: ..." unless r == CUDA_SUCCESS
// (the description is formatted only on failure).
template <class... Args>
void check_while(CUresult r, std::string_view call, ErrorKind kind, fmt::format_string<Args...> doing, Args&&... args) {
  if (r == CUDA_SUCCESS) return;
  fail(kind, "{}: {}", fmt::format(doing, std::forward<Args>(args)...), describe_failure(r, call));
}

// A new event with these CU_EVENT_* flags, and its destruction (a warning if it fails; null is a
// no-op): Event and TimingEvent.
void* create_event(unsigned flags);
void destroy_event(void* e);

// The device of `ordinal` (Error(Api) when there is none) and one of its attributes.
CUdevice device_handle(int ordinal);
int attribute(CUdevice d, CUdevice_attribute a);

// A Stream's driver handle (Stream holds it as void* so that its header names no CUDA type).
inline CUstream raw(const Stream& s) { return static_cast<CUstream>(s.handle()); }

}  // namespace kern::cuda::detail

// Calls a driver function through the table and checks its result.
#define KERN_CU(fn, ...) ::kern::cuda::detail::check(::kern::cuda::detail::api().fn(__VA_ARGS__), #fn)
