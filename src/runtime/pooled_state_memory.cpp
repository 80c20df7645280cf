#include "runtime/pooled_state_memory.hpp"

#include "kern/base/error.hpp"
#include "kern/base/log.hpp"
#include "kern/pool/manifest_layout.hpp"
#include "runtime/state_plan.hpp"

namespace kern::runtime {

namespace {

HostMemoryFacts facts_of(const cuda::PointerAttributes& a) {
  using T = cuda::PointerAttributes::Type;
  HostMemoryFacts f;
  f.kind = a.type == T::Host      ? HostMemoryFacts::Kind::Pinned
           : a.type == T::Device  ? HostMemoryFacts::Kind::Device
           : a.type == T::Managed ? HostMemoryFacts::Kind::Managed
                                  : HostMemoryFacts::Kind::Unregistered;
  f.ordinal = a.ordinal;
  f.range_start = a.range_start;
  f.range_bytes = a.range_bytes;
  return f;
}

}  // namespace

PooledStateMemory::PooledStateMemory(const core::Manifest& m, const Capacity& capacity,
                                     const cuda::Context& context, const cuda::Stream& stream,
                                     const std::map<std::string, HostTensor>& host) {
  const int ordinal = context.ordinal();
  check_host_bindings(m, host);
  for (const auto& [name, t] : host) {
    const std::uint64_t span = check_host_tensor(name, *m.states.at(name).host, t);
    const cuda::PointerAttributes a = cuda::pointer_attributes(t.data);
    const auto address = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(t.data));
    cuda::DevicePtr device = 0;
    switch (plan_host_binding(name, address, span, facts_of(a), ordinal)) {
      case HostBinding::Register:
        registrations_.push_back(cuda::HostRegistration::map(t.data, span, "host state " + name));
        device = registrations_.back().device_ptr();
        break;
      case HostBinding::MapPinned:
        if (!a.device_ptr)
          fail(ErrorKind::Api,
               "host state {}: the bound address {} is pinned host memory with no device mapping in this context "
               "(pin it portable and mapped, or pass pageable memory for the runtime to register)",
               name, t.data);
        device = a.device_ptr;
        break;
      case HostBinding::Direct: device = address; break;
    }
    log().info("host state {}: {} bytes at {} ({}), device pointer {:#x}", name, span, t.data,
               a.type == cuda::PointerAttributes::Type::Unknown  ? "pageable host memory, registered"
               : a.type == cuda::PointerAttributes::Type::Host   ? "pinned host memory"
               : a.type == cuda::PointerAttributes::Type::Device ? "device memory"
                                                                 : "managed memory",
               device);
    host_.emplace(name, Pointer{device, span});
  }
  for (const auto& [name, s] : m.states) {
    if (s.host) continue;  // bound above
    if (s.bytes_per_seq && capacity.seqs == 0)
      fail(ErrorKind::Api, "state {} is per-sequence: load needs Capacity.seqs > 0", name);
    if (!s.bytes) continue;
    auto mem = cuda::DeviceMemory::allocate(s.bytes, "state " + name);
    cuda::memset_d8_async(mem.ptr(), 0, s.bytes, stream);
    fixed_.emplace(name, std::move(mem));
  }
  const pool::PoolLayout layout = pool::layout_of(m);
  if (layout.paged.empty() && layout.per_seq.empty()) return;
  const cuda::VmmInfo vmm = cuda::vmm_info(ordinal);
  if (!vmm.supported)
    fail(ErrorKind::Driver, "GPU {} has no virtual memory management (cuMemCreate): the state pool needs it", ordinal);
  chunk_bytes_ = pool::chunk_bytes_for(layout, vmm.granularity);
  // Every token the domains admit (capacity.tokens) must lie on a page the pool makes.
  const std::uint64_t unit = layout.unit();
  std::uint64_t tokens = 0;
  if (!layout.paged.empty() && __builtin_mul_overflow((capacity.tokens + unit - 1) / unit, unit, &tokens))
    fail(ErrorKind::Api, "Capacity.tokens {} overflows when rounded up to the page unit {}", capacity.tokens, unit);
  pool::PoolConfig config = pool::PoolConfig::from_capacity(layout, chunk_bytes_, pool::Capacity{tokens, capacity.seqs});
  if (!layout.paged.empty() && capacity.tokens == 0) {
    // No tokens given: every whole chunk of what is free now, less 1 GiB of headroom, with the
    // pages the chunks hold after the first slots.
    constexpr std::uint64_t kHeadroom = 1ull << 30;
    const cuda::MemInfo mem = cuda::mem_info();
    const std::uint64_t room = mem.free > kHeadroom ? mem.free - kHeadroom : 0;
    const std::uint64_t budget = room / chunk_bytes_;
    if (budget <= config.chunks)
      fail(ErrorKind::Api,
           "state pool: {} MiB free on GPU {} leaves no room for pages after {} MiB of slots and 1 GiB of headroom",
           mem.free >> 20, ordinal, (config.chunks * chunk_bytes_) >> 20);
    config.chunks = budget;
    config.tokens.reset();
    log().info("state pool: no token capacity given: {} chunks of {} MiB from {} MiB free (1 GiB headroom)", budget,
               chunk_bytes_ >> 20, mem.free >> 20);
  }
  auto [p, plan] = pool::Pool::create(layout, config);
  chunks_.reserve(config.chunks);
  for (std::uint64_t c = 0; c < config.chunks; ++c)
    chunks_.push_back(cuda::PhysicalChunk::create(chunk_bytes_, ordinal, /*want_fabric=*/true, "the state pool"));
  for (const pool::ArenaInfo& a : p.arenas())
    arenas_.push_back(cuda::VirtualRange::reserve(a.positions * chunk_bytes_, chunk_bytes_, "state " + a.state));
  // The initial plan, executed here on the caller's thread; nothing is live yet, so whole mapped
  // chunks are zeroed.
  device_ = std::make_unique<CudaStateDevice>(context, stream, arenas_, chunks_);
  for (const VmmOp& op : vmm_ops(plan, state_geometry(p, nullptr))) device_->vmm(op);
  for (const pool::Map& mp : plan.maps) device_->zero({mp.arena, mp.pos * chunk_bytes_, chunk_bytes_});
  // The objects alive at load, counted from id 0 while they exist (a fresh pool makes them in order).
  std::uint64_t pages = 0, slots = 0;
  while (pages < p.pages_max() && p.page_status(static_cast<pool::PageId>(pages)) != pool::ObjectStatus::Absent) ++pages;
  while (slots < p.slots_max() && p.slot_status(static_cast<pool::SlotId>(slots)) != pool::ObjectStatus::Absent) ++slots;
  const auto& arenas = p.arenas();
  for (std::size_t a = 0; a < arenas.size(); ++a) {
    const std::uint64_t reach = arenas[a].paged ? p.pages_max() : p.slots_max();
    pooled_.emplace(arenas[a].state, Pointer{arenas_[a].base(), reach * arenas[a].object_bytes});
    loaded_.emplace(arenas[a].state,
                    Pointer{arenas_[a].base(), (arenas[a].paged ? pages : slots) * arenas[a].object_bytes});
  }
  // Slot 0 is the null slot: the domains count seqs + 1 slots.
  reach_ = Capacity{p.pages_max() * unit, p.slots_max() > 0 ? p.slots_max() - 1 : 0};
  log().info("state pool: {} chunks of {} MiB ({} handles), {} arenas, {} pages of {} tokens, {} slots", config.chunks,
             chunk_bytes_ >> 20, cuda::handle_kind_name(handle_kind()), arenas.size(), pages, unit, slots);
  state_pool_ = std::make_unique<StatePool>(std::move(p), *device_);
}

PooledStateMemory::~PooledStateMemory() = default;

Pointer PooledStateMemory::region(std::string_view state) const {
  if (auto it = fixed_.find(state); it != fixed_.end()) return Pointer{it->second.ptr(), it->second.size()};
  if (auto it = host_.find(state); it != host_.end()) return it->second;
  if (auto it = pooled_.find(state); it != pooled_.end()) return it->second;
  fail(ErrorKind::Manifest, "unknown state '{}'", state);
}

Pointer PooledStateMemory::loaded(std::string_view state) const {
  if (auto it = fixed_.find(state); it != fixed_.end()) return Pointer{it->second.ptr(), it->second.size()};
  if (auto it = host_.find(state); it != host_.end()) return it->second;
  auto it = loaded_.find(state);
  if (it == loaded_.end()) fail(ErrorKind::Manifest, "unknown state '{}'", state);
  const pool::Pool& p = state_pool_->pool();
  if (p.remapped() > 0 || p.remapping())
    fail(ErrorKind::Api,
         "state {}: whole-state reads and writes address the pages and slots made at load, and the pool has "
         "remapped since ({} plan{} landed{}): read and write through leases' rows and slots instead",
         state, p.remapped(), p.remapped() == 1 ? "" : "s", p.remapping() ? ", one in flight" : "");
  return it->second;
}

Capacity PooledStateMemory::reach() const { return reach_; }

cuda::HandleKind PooledStateMemory::handle_kind() const {
  return chunks_.empty() ? cuda::HandleKind::PosixFd : chunks_.front().kind();
}

}  // namespace kern::runtime
