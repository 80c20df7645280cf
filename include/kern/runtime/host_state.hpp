// Host states (schema v5, docs/runtime.md "Host states"): a state declared
// `host: {"dtype", "shape", "strides"}` lives in memory the caller owns. The caller binds a
// tensor to it at load (RuntimeOptions::host_states) and must prove the tensor has exactly the
// declared layout: the same dtype, rank and strides, fixed extents equal, the open outer extent
// (declared 0) at least 1. The runtime addresses the tensor's span,
//   ((Σ (extent − 1) · stride) + 1) elements × dtype bytes,
// through a device pointer: device memory of the runtime's GPU as it is, pinned host memory
// through its mapping, pageable host memory registered (page-locked and mapped) by the runtime.
//
// This header is the pure part (layout checks, span arithmetic, the binding decision from the
// driver's pointer attributes), host-tested in tests/host/runtime/host_state_test.cpp; the CUDA
// part is src/runtime/host_states.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kern/base/dtype.hpp"
#include "kern/core/manifest.hpp"

namespace kern::runtime {

// A caller's tensor bound to a host state. `data` is its first element: a host address
// (pageable or pinned) or a device address of the runtime's GPU. The memory must outlive the
// runtime; the runtime never frees it.
struct HostTensor {
  void* data = nullptr;
  DType dtype = DType::U8;
  std::vector<std::uint64_t> shape;    // extents, outermost first
  std::vector<std::uint64_t> strides;  // in elements, outermost first
};

// Σ (extent − 1) · stride + 1: the elements from the first to the last one the layout reaches.
// nullopt when a rank differs from the strides' count, an extent is 0 (no element) or the sum
// overflows u64.
std::optional<std::uint64_t> span_elements(std::span<const std::uint64_t> shape, std::span<const std::uint64_t> strides);
// span_elements × dtype_size; nullopt on the same conditions or when the product overflows.
std::optional<std::uint64_t> span_bytes(DType dtype, std::span<const std::uint64_t> shape,
                                        std::span<const std::uint64_t> strides);

// Checks `tensor` against host state `state`'s declaration and returns its span in bytes.
// Error(Api) "host state S: ..." naming what differs: a null address, the dtype, the rank, the
// tensor's own strides count, a stride, a fixed extent, an open outer extent of 0, an address
// not aligned to the element size, a span that overflows or wraps the address space.
std::uint64_t check_host_tensor(std::string_view state, const core::HostState& decl, const HostTensor& tensor);

// Every host state of `m` is bound and every binding names a host state of `m`; Error(Api)
// naming the first unbound state or the first binding that names no host state.
void check_host_bindings(const core::Manifest& m, const std::map<std::string, HostTensor>& bound);

// What the driver says about the memory at a bound address (the runtime's CUDA side fills this).
struct HostMemoryFacts {
  enum class Kind : std::uint8_t {
    Unregistered,  // not known to CUDA: pageable host memory
    Pinned,        // page-locked host memory (cuMemHostAlloc / cuMemHostRegister)
    Device,        // device memory (cuMemAlloc, VMM)
    Managed,       // managed memory (cuMemAllocManaged)
  };
  Kind kind = Kind::Unregistered;
  int ordinal = -1;                 // the device it was allocated on (Device)
  std::uint64_t range_start = 0;    // the allocation holding the address, when the driver says
  std::uint64_t range_bytes = 0;    // (0: unknown)
};

enum class HostBinding : std::uint8_t {
  Register,   // pageable: page-lock and map [address, + span) for the runtime's lifetime
  MapPinned,  // pinned: the device pointer of its mapping
  Direct,     // device or managed memory: the address itself
};

// The binding of `span` bytes at `address` for a runtime on GPU `gpu`. Error(Api) naming the
// state for device memory of another GPU, or a span running past the allocation the driver
// reports for the address.
HostBinding plan_host_binding(std::string_view state, std::uint64_t address, std::uint64_t span,
                              const HostMemoryFacts& facts, int gpu);

}  // namespace kern::runtime
