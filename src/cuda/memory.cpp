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
