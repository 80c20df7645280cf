// Virtual memory management (cuMemCreate / cuMemAddressReserve / cuMemMap): physical chunks with
// exportable handles, and address ranges reserved once that chunks are mapped into and out of. The
// state pool's arenas are built from these (docs/design/pool-on-gpu.md). No CUDA type is named.
#pragma once

#include <cstdint>
#include <map>

#include "kern/cuda/cuda.hpp"

namespace kern::cuda {

// What a device offers for VMM.
struct VmmInfo {
  bool supported = false;         // CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
  bool posix_fd = false;          // POSIX file-descriptor handles supported
  bool fabric = false;            // fabric handles supported (the attribute; creation may still be refused)
  std::uint64_t granularity = 0;  // minimum chunk size and alignment for a device allocation
  std::uint64_t recommended = 0;  // the driver's recommended granularity
};
VmmInfo vmm_info(int ordinal);

// Free and total memory of the device of the current context (cuMemGetInfo).
struct MemInfo {
  std::uint64_t free = 0, total = 0;
};
MemInfo mem_info();

enum class HandleKind { PosixFd, Fabric };
const char* handle_kind_name(HandleKind k);

// One physical allocation on a device (cuMemCreate), exportable so that another process can map it
// later without a re-allocation; released on destruction (its memory lives on while it is mapped).
class PhysicalChunk {
 public:
  PhysicalChunk() = default;
  // A fabric handle when `want_fabric`, the device reports support and KERN_NO_FABRIC is not 1;
  // POSIX file descriptors otherwise. A refused fabric creation falls back with one warning per
  // process. `bytes` must be a multiple of vmm_info(ordinal).granularity.
  static PhysicalChunk create(std::uint64_t bytes, int ordinal, bool want_fabric, std::string_view what);
  // Another process's chunk of `bytes` from a POSIX file descriptor it exported
  // (cuMemImportFromShareableHandle); the descriptor stays the caller's. Error(Cuda) naming `what`
  // when the driver refuses it (not a CUDA allocation's descriptor, another device's, ...).
  static PhysicalChunk import_fd(int fd, std::uint64_t bytes, std::string_view what);
  ~PhysicalChunk();
  PhysicalChunk(PhysicalChunk&& o) noexcept;
  PhysicalChunk& operator=(PhysicalChunk&& o) noexcept;
  std::uint64_t bytes() const { return bytes_; }
  HandleKind kind() const { return kind_; }
  std::uint64_t handle() const { return handle_; }
  // A POSIX file descriptor for the chunk (cuMemExportToShareableHandle), owned by the caller;
  // Error(Api) for a fabric chunk.
  int export_fd() const;

 private:
  std::uint64_t handle_ = 0;
  std::uint64_t bytes_ = 0;
  HandleKind kind_ = HandleKind::PosixFd;
};

// A reserved range of device addresses (cuMemAddressReserve) that never moves. Chunks are mapped
// whole at offsets (cuMemMap), made accessible to the device (cuMemSetAccess) and unmapped again;
// the destructor unmaps what is still mapped and frees the range.
class VirtualRange {
 public:
  VirtualRange() = default;
  static VirtualRange reserve(std::uint64_t bytes, std::uint64_t alignment, std::string_view what);
  ~VirtualRange();
  VirtualRange(VirtualRange&& o) noexcept;
  VirtualRange& operator=(VirtualRange&& o) noexcept;
  DevicePtr base() const { return base_; }
  std::uint64_t bytes() const { return bytes_; }
  // Maps `chunk` at [offset, offset + chunk.bytes()) (Error(Api) when that overlaps a mapping or
  // leaves the range).
  void map(std::uint64_t offset, const PhysicalChunk& chunk);
  // Unmaps the mapping that starts at `offset` (Error(Api) when none does).
  void unmap(std::uint64_t offset);
  // Read-write access for device `ordinal` over [offset, offset + bytes), which may span several
  // mappings (each must be mapped).
  void set_access(std::uint64_t offset, std::uint64_t bytes, int ordinal);
  std::size_t mappings() const { return mapped_.size(); }

 private:
  void release() noexcept;
  DevicePtr base_ = 0;
  std::uint64_t bytes_ = 0;
  std::map<std::uint64_t, std::uint64_t> mapped_;  // offset -> bytes
};

}  // namespace kern::cuda
