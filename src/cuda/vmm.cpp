// VMM: physical chunks and reserved address ranges (include/kern/cuda/vmm.hpp).
#include "kern/cuda/vmm.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "cuda/driver_api.hpp"
#include "kern/base/error.hpp"
#include "kern/base/log.hpp"

namespace kern::cuda {
using detail::api;

namespace {

CUmemAllocationProp device_prop(int ordinal, CUmemAllocationHandleType handle) {
  CUmemAllocationProp prop;
  std::memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = ordinal;
  prop.requestedHandleTypes = handle;
  return prop;
}

bool fabric_forbidden() {
  const char* v = std::getenv("KERN_NO_FABRIC");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

}  // namespace

VmmInfo vmm_info(int ordinal) {
  const CUdevice d = detail::device_handle(ordinal);
  VmmInfo info;
  info.supported = detail::attribute(d, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) != 0;
  info.posix_fd = detail::attribute(d, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED) != 0;
  info.fabric = detail::attribute(d, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED) != 0;
  if (!info.supported) return info;
  const CUmemAllocationProp prop = device_prop(ordinal, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  size_t g = 0;
  KERN_CU(cuMemGetAllocationGranularity, &g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  info.granularity = g;
  KERN_CU(cuMemGetAllocationGranularity, &g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  info.recommended = g;
  return info;
}

MemInfo mem_info() {
  size_t free = 0, total = 0;
  KERN_CU(cuMemGetInfo, &free, &total);
  return {free, total};
}

const char* handle_kind_name(HandleKind k) { return k == HandleKind::Fabric ? "fabric" : "POSIX file descriptor"; }

PhysicalChunk PhysicalChunk::create(std::uint64_t bytes, int ordinal, bool want_fabric, std::string_view what) {
  const VmmInfo info = vmm_info(ordinal);
  if (!info.supported) fail(ErrorKind::Driver, "GPU {} does not support virtual memory management (cuMemCreate)", ordinal);
  if (bytes == 0 || bytes % info.granularity != 0)
    fail(ErrorKind::Api, "{}: a chunk of {} bytes is not a positive multiple of the granularity {}", what, bytes,
         info.granularity);
  PhysicalChunk c;
  c.bytes_ = bytes;
  CUmemGenericAllocationHandle h = 0;
  if (want_fabric && info.fabric && !fabric_forbidden()) {
    const CUmemAllocationProp prop = device_prop(ordinal, CU_MEM_HANDLE_TYPE_FABRIC);
    const CUresult r = api().cuMemCreate(&h, bytes, &prop, 0);
    if (r == CUDA_SUCCESS) {
      c.handle_ = h;
      c.kind_ = HandleKind::Fabric;
      return c;
    }
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      log().warn("fabric handles refused (cuMemCreate: {}): chunks use POSIX file descriptors instead",
                 static_cast<int>(r));
  }
  if (!info.posix_fd) fail(ErrorKind::Driver, "GPU {} offers neither fabric nor POSIX file-descriptor handles", ordinal);
  const CUmemAllocationProp prop = device_prop(ordinal, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  detail::check_while(api().cuMemCreate(&h, bytes, &prop, 0), "cuMemCreate", ErrorKind::Cuda,
                      "creating a {}-byte chunk for {}", bytes, what);
  c.handle_ = h;
  c.kind_ = HandleKind::PosixFd;
  return c;
}

PhysicalChunk PhysicalChunk::import_fd(int fd, std::uint64_t bytes, std::string_view what) {
  if (fd < 0) fail(ErrorKind::Api, "{}: descriptor {} is not open", what, fd);
  if (bytes == 0) fail(ErrorKind::Api, "{}: a chunk of 0 bytes", what);
  CUmemGenericAllocationHandle h = 0;
  // The POSIX-fd handle type passes the descriptor itself as the "handle pointer".
  void* os_handle = reinterpret_cast<void*>(static_cast<std::intptr_t>(fd));
  detail::check_while(api().cuMemImportFromShareableHandle(&h, os_handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                      "cuMemImportFromShareableHandle", ErrorKind::Cuda, "importing descriptor {} for {}", fd, what);
  PhysicalChunk c;
  c.handle_ = h;
  c.bytes_ = bytes;
  c.kind_ = HandleKind::PosixFd;
  return c;
}

PhysicalChunk::~PhysicalChunk() {
  if (handle_) detail::warn_if_failed(api().cuMemRelease(handle_), "cuMemRelease");
}

PhysicalChunk::PhysicalChunk(PhysicalChunk&& o) noexcept
    : handle_(std::exchange(o.handle_, 0)), bytes_(std::exchange(o.bytes_, 0)), kind_(o.kind_) {}

PhysicalChunk& PhysicalChunk::operator=(PhysicalChunk&& o) noexcept {
  if (this != &o) {
    if (handle_) detail::warn_if_failed(api().cuMemRelease(handle_), "cuMemRelease");
    handle_ = std::exchange(o.handle_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
    kind_ = o.kind_;
  }
  return *this;
}

int PhysicalChunk::export_fd() const {
  if (kind_ != HandleKind::PosixFd) fail(ErrorKind::Api, "export_fd: the chunk has a {} handle", handle_kind_name(kind_));
  int fd = -1;
  KERN_CU(cuMemExportToShareableHandle, &fd, handle_, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  return fd;
}

VirtualRange VirtualRange::reserve(std::uint64_t bytes, std::uint64_t alignment, std::string_view what) {
  VirtualRange v;
  if (bytes == 0) return v;
  CUdeviceptr p = 0;
  detail::check_while(api().cuMemAddressReserve(&p, bytes, alignment, 0, 0), "cuMemAddressReserve", ErrorKind::Cuda,
                      "reserving {} bytes of addresses for {}", bytes, what);
  v.base_ = p;
  v.bytes_ = bytes;
  return v;
}

void VirtualRange::release() noexcept {
  for (const auto& [off, n] : mapped_) detail::warn_if_failed(api().cuMemUnmap(base_ + off, n), "cuMemUnmap");
  mapped_.clear();
  if (base_) detail::warn_if_failed(api().cuMemAddressFree(base_, bytes_), "cuMemAddressFree");
  base_ = 0;
  bytes_ = 0;
}

VirtualRange::~VirtualRange() { release(); }

VirtualRange::VirtualRange(VirtualRange&& o) noexcept
    : base_(std::exchange(o.base_, 0)), bytes_(std::exchange(o.bytes_, 0)), mapped_(std::move(o.mapped_)) {
  o.mapped_.clear();
}

VirtualRange& VirtualRange::operator=(VirtualRange&& o) noexcept {
  if (this != &o) {
    release();
    base_ = std::exchange(o.base_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
    mapped_ = std::move(o.mapped_);
    o.mapped_.clear();
  }
  return *this;
}

void VirtualRange::map(std::uint64_t offset, const PhysicalChunk& chunk) {
  const std::uint64_t n = chunk.bytes();
  if (n == 0 || offset > bytes_ || n > bytes_ - offset)
    fail(ErrorKind::Api, "map: [{}, +{}) leaves the reserved range of {} bytes", offset, n, bytes_);
  auto next = mapped_.lower_bound(offset);
  if (next != mapped_.end() && next->first < offset + n)
    fail(ErrorKind::Api, "map: [{}, +{}) overlaps the mapping at {}", offset, n, next->first);
  if (next != mapped_.begin()) {
    const auto prev = std::prev(next);
    if (prev->first + prev->second > offset)
      fail(ErrorKind::Api, "map: [{}, +{}) overlaps the mapping at {}", offset, n, prev->first);
  }
  KERN_CU(cuMemMap, base_ + offset, n, 0, chunk.handle(), 0);
  mapped_.emplace(offset, n);
}

void VirtualRange::unmap(std::uint64_t offset) {
  const auto it = mapped_.find(offset);
  if (it == mapped_.end()) fail(ErrorKind::Api, "unmap: no mapping starts at offset {}", offset);
  KERN_CU(cuMemUnmap, base_ + offset, it->second);
  mapped_.erase(it);
}

void VirtualRange::set_access(std::uint64_t offset, std::uint64_t bytes, int ordinal) {
  if (bytes == 0 || offset > bytes_ || bytes > bytes_ - offset)
    fail(ErrorKind::Api, "set_access: [{}, +{}) leaves the reserved range of {} bytes", offset, bytes, bytes_);
  CUmemAccessDesc desc;
  std::memset(&desc, 0, sizeof desc);
  desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc.location.id = ordinal;
  desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  KERN_CU(cuMemSetAccess, base_ + offset, bytes, &desc, 1);
}

}  // namespace kern::cuda
