#include "runtime/state_memory.hpp"

#include "kern/base/error.hpp"

namespace kern::runtime {

ContiguousStateMemory::ContiguousStateMemory(const core::Manifest& m, const Capacity& capacity,
                                             const cuda::Stream& stream) {
  for (const auto& [name, s] : m.states) {
    std::uint64_t bytes = 0;
    if (s.host) fail(ErrorKind::Manifest, "state {} is host-provided; host states are not supported yet", name);
    if (s.bytes) {
      bytes = s.bytes;
    } else if (s.bytes_per_token) {
      if (capacity.tokens == 0) fail(ErrorKind::Api, "state {} is paged: load needs Capacity.tokens > 0", name);
      if (__builtin_mul_overflow(s.bytes_per_token, capacity.tokens, &bytes))
        fail(ErrorKind::Api, "state {}: {} bytes per token × {} tokens overflows", name, s.bytes_per_token,
             capacity.tokens);
    } else if (s.bytes_per_seq) {
      if (capacity.seqs == 0) fail(ErrorKind::Api, "state {} is per-sequence: load needs Capacity.seqs > 0", name);
      if (__builtin_mul_overflow(s.bytes_per_seq, capacity.seqs + 1, &bytes))
        fail(ErrorKind::Api, "state {}: {} bytes per seq × {} slots overflows", name, s.bytes_per_seq,
             capacity.seqs + 1);
    }
    auto mem = cuda::DeviceMemory::allocate(bytes, "state " + name);
    cuda::memset_d8_async(mem.ptr(), 0, bytes, stream);
    states_.emplace(name, std::move(mem));
  }
}

Pointer ContiguousStateMemory::region(std::string_view state) const {
  auto it = states_.find(state);
  if (it == states_.end()) fail(ErrorKind::Manifest, "unknown state '{}'", state);
  return Pointer{it->second.ptr(), it->second.size()};
}

}  // namespace kern::runtime
