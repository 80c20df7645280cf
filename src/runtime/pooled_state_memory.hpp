// States in the pool (issue 16, step one of the runtime wiring): every paged and per-sequence state
// is an arena of VMM address space reserved once for its whole reach, backed by physical chunks
// created at load and mapped where the pool's initial plan says (kern/pool: the decisions; this
// class only executes them). Fixed-size states stay plain allocations. Addresses never move, so
// argument images and captured graphs stay valid across later remaps. Host states are the
// caller's tensors (RuntimeOptions::host_states), checked against their declared layout and
// bound through a device pointer (kern/runtime/host_state.hpp).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kern/cuda/vmm.hpp"
#include "kern/pool/pool.hpp"
#include "kern/runtime/host_state.hpp"
#include "runtime/cuda_state_device.hpp"
#include "runtime/state_memory.hpp"
#include "runtime/state_pool.hpp"

namespace kern::runtime {

class PooledStateMemory final : public StateMemory {
 public:
  // The pool's budget is Capacity {tokens rounded up to the page unit, seqs}, or with tokens 0
  // every chunk that fits in the device's free memory less 1 GiB of headroom (buffers and scratch
  // are allocated before this). Everything mapped is zeroed on `stream`. Error(Api) for a per-seq
  // state without seqs, Error(Driver) when the device has no VMM. `host` binds every host state
  // (Error(Api) for a missing, extra or mismatched tensor; host states are never zeroed).
  PooledStateMemory(const core::Manifest& m, const Capacity& capacity, const cuda::Context& context,
                    const cuda::Stream& stream, const std::map<std::string, HostTensor>& host = {});
  ~PooledStateMemory() override;
  // Fixed states: their allocation. Pooled states: the arena's whole reach (every page or slot a
  // remap can ever make), so argument images and graphs built at load address them all. Host
  // states: the bound tensor's span at its device pointer.
  Pointer region(std::string_view state) const override;
  // The bytes alive at load: fixed states whole, pooled states pages 0.. or slots 0.. up to what
  // the pool made first (contiguous from the base). Api error once the pool has remapped.
  Pointer loaded(std::string_view state) const;
  // The tokens and sequences the domains admit: every page and slot the arenas reach.
  Capacity reach() const;
  // The pool, executing on this memory (none when the manifest has no pooled state).
  StatePool* state_pool() { return state_pool_.get(); }
  const pool::Pool* pool() const { return state_pool_ ? &state_pool_->pool() : nullptr; }
  std::uint64_t chunk_bytes() const { return chunk_bytes_; }
  cuda::HandleKind handle_kind() const;
  const std::vector<cuda::PhysicalChunk>& chunks() const { return chunks_; }  // index: the pool's chunk number

 private:
  std::map<std::string, cuda::DeviceMemory, std::less<>> fixed_;
  std::map<std::string, Pointer, std::less<>> host_;       // host states: span at the device pointer
  std::vector<cuda::HostRegistration> registrations_;     // pageable host tensors the runtime pinned
  std::uint64_t chunk_bytes_ = 0;
  std::vector<cuda::PhysicalChunk> chunks_;  // index: the pool's chunk number
  std::vector<cuda::VirtualRange> arenas_;   // index: the pool's arena number (destroyed before the chunks)
  std::map<std::string, Pointer, std::less<>> pooled_;  // the reach
  std::map<std::string, Pointer, std::less<>> loaded_;  // alive at load
  Capacity reach_;
  std::unique_ptr<CudaStateDevice> device_;
  std::unique_ptr<StatePool> state_pool_;  // destroyed first: its worker stops before the arenas go
};

}  // namespace kern::runtime
