#include "kern/runtime/host_state.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kern/base/error.hpp"

namespace kern::runtime {
namespace {

std::string host_dims_text(std::span<const std::uint64_t> v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

}  // namespace

std::optional<std::uint64_t> span_elements(std::span<const std::uint64_t> shape, std::span<const std::uint64_t> strides) {
  if (shape.size() != strides.size()) return std::nullopt;
  std::uint64_t last = 0;  // index of the last element the layout reaches
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return std::nullopt;
    std::uint64_t term = 0;
    if (__builtin_mul_overflow(shape[i] - 1, strides[i], &term) || __builtin_add_overflow(last, term, &last))
      return std::nullopt;
  }
  std::uint64_t n = 0;
  if (__builtin_add_overflow(last, std::uint64_t{1}, &n)) return std::nullopt;
  return n;
}

std::optional<std::uint64_t> span_bytes(DType dtype, std::span<const std::uint64_t> shape,
                                        std::span<const std::uint64_t> strides) {
  auto n = span_elements(shape, strides);
  std::uint64_t bytes = 0;
  if (!n || __builtin_mul_overflow(*n, dtype_size(dtype), &bytes)) return std::nullopt;
  return bytes;
}

std::uint64_t check_host_tensor(std::string_view state, const core::HostState& decl, const HostTensor& t) {
  if (!t.data) fail(ErrorKind::Api, "host state {}: the bound tensor has a null address", state);
  if (t.dtype != decl.dtype)
    fail(ErrorKind::Api, "host state {}: the bound tensor is {}, the manifest declares {}", state,
         manifest_name(t.dtype), manifest_name(decl.dtype));
  if (t.shape.size() != decl.shape.size())
    fail(ErrorKind::Api, "host state {}: the bound tensor has {} dims (shape {}), the manifest declares {} (shape {})",
         state, t.shape.size(), host_dims_text(t.shape), decl.shape.size(), host_dims_text(decl.shape));
  if (t.strides.size() != t.shape.size())
    fail(ErrorKind::Api, "host state {}: the bound tensor has {} strides for its {} dims", state, t.strides.size(),
         t.shape.size());
  for (std::size_t i = 0; i < decl.shape.size(); ++i) {
    if (t.strides[i] != decl.strides[i])
      fail(ErrorKind::Api,
           "host state {}: dim {} of the bound tensor has stride {}, the manifest declares {} (strides {} vs {})",
           state, i, t.strides[i], decl.strides[i], host_dims_text(t.strides), host_dims_text(decl.strides));
    const bool open = i == 0 && decl.shape[0] == 0;
    if (open && t.shape[0] == 0)
      fail(ErrorKind::Api, "host state {}: the open outer extent of the bound tensor is 0; it must be at least 1",
           state);
    if (!open && t.shape[i] != decl.shape[i])
      fail(ErrorKind::Api, "host state {}: dim {} of the bound tensor has extent {}, the manifest declares {} "
           "(shape {} vs {})", state, i, t.shape[i], decl.shape[i], host_dims_text(t.shape), host_dims_text(decl.shape));
  }
  const std::uint64_t es = dtype_size(t.dtype);
  const auto address = reinterpret_cast<std::uintptr_t>(t.data);
  if (address % es != 0)
    fail(ErrorKind::Api, "host state {}: the bound address {:#x} is not aligned to its {}-byte {} elements", state,
         address, es, manifest_name(t.dtype));
  auto bytes = span_bytes(t.dtype, t.shape, t.strides);
  std::uint64_t end = 0;
  if (!bytes || __builtin_add_overflow(static_cast<std::uint64_t>(address), *bytes, &end))
    fail(ErrorKind::Api, "host state {}: the span of the bound tensor (shape {}, strides {}) overflows", state,
         host_dims_text(t.shape), host_dims_text(t.strides));
  return *bytes;
}

void check_host_bindings(const core::Manifest& m, const std::map<std::string, HostTensor>& bound) {
  for (const auto& [name, t] : bound) {
    auto it = m.states.find(name);
    if (it == m.states.end())
      fail(ErrorKind::Api, "a host tensor is bound to state {}, which the manifest does not declare", name);
    if (!it->second.host)
      fail(ErrorKind::Api, "a host tensor is bound to state {}, which is not a host state (the runtime allocates it)",
           name);
  }
  for (const auto& [name, s] : m.states)
    if (s.host && !bound.count(name))
      fail(ErrorKind::Api,
           "host state {} is not bound: load needs its tensor in RuntimeOptions::host_states (the caller owns its "
           "memory)",
           name);
}

HostBinding plan_host_binding(std::string_view state, std::uint64_t address, std::uint64_t span,
                              const HostMemoryFacts& f, int gpu) {
  using Kind = HostMemoryFacts::Kind;
  if (f.kind == Kind::Unregistered) return HostBinding::Register;
  if (f.kind == Kind::Device && f.ordinal != gpu)
    fail(ErrorKind::Api, "host state {}: the bound address {:#x} is device memory of GPU {}, this runtime runs on GPU {}",
         state, address, f.ordinal, gpu);
  if (f.range_bytes != 0) {
    const std::uint64_t used = address - f.range_start;  // address >= range_start when the driver reports a range
    if (address < f.range_start || used > f.range_bytes || span > f.range_bytes - used)
      fail(ErrorKind::Api,
           "host state {}: the bound tensor's {} bytes at {:#x} run past its {} allocation ({} bytes at {:#x})", state,
           span, address, f.kind == Kind::Pinned ? "pinned" : f.kind == Kind::Device ? "device" : "managed",
           f.range_bytes, f.range_start);
  }
  return f.kind == Kind::Pinned ? HostBinding::MapPinned : HostBinding::Direct;
}

}  // namespace kern::runtime
