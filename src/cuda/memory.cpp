// Device and pinned host memory, and copies.
#include <utility>

#include "cuda/driver_api.hpp"
#include "kern/cuda/cuda.hpp"
#include "kern/base/error.hpp"

namespace kern::cuda {
using detail::api;

using detail::raw;

DeviceMemory DeviceMemory::allocate(std::size_t bytes, std::string_view what) {
  DeviceMemory m;
  if (bytes == 0) return m;
  CUdeviceptr p = 0;
  detail::check_while(api().cuMemAlloc(&p, bytes), "cuMemAlloc", ErrorKind::Cuda,
                      "allocating {} bytes of device memory for {}", bytes, what);
  m.ptr_ = p;
  m.size_ = bytes;
  return m;
}

DeviceMemory::~DeviceMemory() {
  if (ptr_) detail::warn_if_failed(api().cuMemFree(ptr_), "cuMemFree");
}

DeviceMemory::DeviceMemory(DeviceMemory&& o) noexcept
    : ptr_(std::exchange(o.ptr_, 0)), size_(std::exchange(o.size_, 0)) {}

DeviceMemory& DeviceMemory::operator=(DeviceMemory&& o) noexcept {
  if (this != &o) {
    if (ptr_) detail::warn_if_failed(api().cuMemFree(ptr_), "cuMemFree");
    ptr_ = std::exchange(o.ptr_, 0);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

PinnedMemory PinnedMemory::allocate(std::size_t bytes, std::string_view what) {
  PinnedMemory m;
  if (bytes == 0) return m;
  void* p = nullptr;
  detail::check_while(api().cuMemHostAlloc(&p, bytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
                      "cuMemHostAlloc", ErrorKind::Cuda, "allocating {} bytes of pinned host memory for {}", bytes, what);
  m.data_ = static_cast<std::byte*>(p);
  m.size_ = bytes;
  return m;
}

PinnedMemory::~PinnedMemory() {
  if (data_) detail::warn_if_failed(api().cuMemFreeHost(data_), "cuMemFreeHost");
}

PinnedMemory::PinnedMemory(PinnedMemory&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

PinnedMemory& PinnedMemory::operator=(PinnedMemory&& o) noexcept {
  if (this != &o) {
    if (data_) detail::warn_if_failed(api().cuMemFreeHost(data_), "cuMemFreeHost");
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

DevicePtr PinnedMemory::device_ptr() const {
  if (!data_) return 0;
  CUdeviceptr p = 0;
  KERN_CU(cuMemHostGetDevicePointer, &p, data_, 0);
  return p;
}

PointerAttributes pointer_attributes(const void* address) {
  const auto ptr = reinterpret_cast<CUdeviceptr>(address);
  unsigned int type = 0;
  unsigned int managed = 0;
  int ordinal = -1;
  CUpointer_attribute which[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  void* data[] = {&type, &managed, &ordinal};
  // An address CUDA does not know gets the attributes' null values and CUDA_SUCCESS.
  KERN_CU(cuPointerGetAttributes, 3, which, data, ptr);
  PointerAttributes a;
  a.ordinal = ordinal;
  a.device_ptr = ptr;
  if (managed)
    a.type = PointerAttributes::Type::Managed;
  else if (type == CU_MEMORYTYPE_DEVICE)
    a.type = PointerAttributes::Type::Device;
  else if (type == CU_MEMORYTYPE_HOST)
    a.type = PointerAttributes::Type::Host;
  if (a.type == PointerAttributes::Type::Unknown) {
    a.device_ptr = 0;
    return a;
  }
  // The allocation holding the address: where the driver does not say (or names a range that does
  // not hold it), the range stays unknown.
  CUdeviceptr start = 0;
  std::size_t size = 0;
  CUpointer_attribute range[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void* rd[] = {&start, &size};
  if (api().cuPointerGetAttributes(2, range, rd, ptr) == CUDA_SUCCESS && start <= ptr && ptr - start < size) {
    a.range_start = start;
    a.range_bytes = size;
  }
  if (a.type == PointerAttributes::Type::Host) {
    // No device pointer (pinned without DEVICEMAP in another context): 0, which the caller refuses.
    CUdeviceptr dev = 0;
    CUpointer_attribute dp[] = {CU_POINTER_ATTRIBUTE_DEVICE_POINTER};
    void* dd[] = {&dev};
    a.device_ptr = api().cuPointerGetAttributes(1, dp, dd, ptr) == CUDA_SUCCESS ? dev : 0;
  }
  return a;
}

HostRegistration HostRegistration::map(void* host, std::size_t bytes, std::string_view what) {
  HostRegistration r;
  if (!host || bytes == 0) return r;
  detail::check_while(api().cuMemHostRegister(host, bytes, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP),
                      "cuMemHostRegister", ErrorKind::Api, "page-locking and mapping {} bytes of host memory at {} for {}",
                      bytes, host, what);
  r.host_ = host;
  CUdeviceptr dev = 0;
  const CUresult got = api().cuMemHostGetDevicePointer(&dev, host, 0);
  if (got != CUDA_SUCCESS) {
    detail::warn_if_failed(api().cuMemHostUnregister(host), "cuMemHostUnregister");
    r.host_ = nullptr;
    detail::check_while(got, "cuMemHostGetDevicePointer", ErrorKind::Api,
                        "mapping {} bytes of registered host memory at {} for {}", bytes, host, what);
  }
  r.device_ = dev;
  return r;
}

HostRegistration::~HostRegistration() {
  if (host_) detail::warn_if_failed(api().cuMemHostUnregister(host_), "cuMemHostUnregister");
}

HostRegistration::HostRegistration(HostRegistration&& o) noexcept
    : host_(std::exchange(o.host_, nullptr)), device_(std::exchange(o.device_, 0)) {}

HostRegistration& HostRegistration::operator=(HostRegistration&& o) noexcept {
  if (this != &o) {
    if (host_) detail::warn_if_failed(api().cuMemHostUnregister(host_), "cuMemHostUnregister");
    host_ = std::exchange(o.host_, nullptr);
    device_ = std::exchange(o.device_, 0);
  }
  return *this;
}

void copy_h2d_async(DevicePtr dst, const void* src, std::size_t bytes, const Stream& s) {
  if (bytes) KERN_CU(cuMemcpyHtoDAsync, dst, src, bytes, raw(s));
}
void copy_d2h_async(void* dst, DevicePtr src, std::size_t bytes, const Stream& s) {
  if (bytes) KERN_CU(cuMemcpyDtoHAsync, dst, src, bytes, raw(s));
}
void copy_d2d_async(DevicePtr dst, DevicePtr src, std::size_t bytes, const Stream& s) {
  if (bytes) KERN_CU(cuMemcpyDtoDAsync, dst, src, bytes, raw(s));
}
void memset_d8_async(DevicePtr dst, std::uint8_t value, std::size_t bytes, const Stream& s) {
  if (bytes) KERN_CU(cuMemsetD8Async, dst, value, bytes, raw(s));
}

void copy_2d_async(DevicePtr dst, std::size_t dst_pitch, const void* src_host, DevicePtr src_dev, std::size_t src_pitch,
                   std::size_t width, std::size_t height, const Stream& s) {
  if (!width || !height) return;
  CUDA_MEMCPY2D c{};  // every field is set below; zero is "unused" for the rest
  c.srcXInBytes = 0;
  c.srcY = 0;
  if (src_host) {
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = src_host;
  } else {
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = src_dev;
  }
  c.srcPitch = src_pitch;
  c.dstXInBytes = 0;
  c.dstY = 0;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = dst;
  c.dstPitch = dst_pitch;
  c.WidthInBytes = width;
  c.Height = height;
  KERN_CU(cuMemcpy2DAsync, &c, raw(s));
}

void copy_2d_d2h_async(void* dst_host, std::size_t dst_pitch, DevicePtr src, std::size_t src_pitch, std::size_t width,
                       std::size_t height, const Stream& s) {
  if (!width || !height) return;
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  c.srcDevice = src;
  c.srcPitch = src_pitch;
  c.dstMemoryType = CU_MEMORYTYPE_HOST;
  c.dstHost = dst_host;
  c.dstPitch = dst_pitch;
  c.WidthInBytes = width;
  c.Height = height;
  KERN_CU(cuMemcpy2DAsync, &c, raw(s));
}

}  // namespace kern::cuda
