#include "runtime/cuda_state_device.hpp"

#include "kern/base/error.hpp"
#include "kern/base/log.hpp"
#include "kern/base/numa.hpp"

namespace kern::runtime {

namespace {

class EventFence final : public Fence {
 public:
  explicit EventFence(const cuda::Stream& s) { event_.record(s); }
  bool done() const override { return event_.query(); }
  void wait() override { event_.synchronize(); }

 private:
  cuda::Event event_;
};

}  // namespace

CudaStateDevice::CudaStateDevice(const cuda::Context& context, const cuda::Stream& stream,
                                 std::vector<cuda::VirtualRange>& arenas, const std::vector<cuda::PhysicalChunk>& chunks)
    : context_(context), stream_(stream), arenas_(arenas), chunks_(chunks) {}

void CudaStateDevice::vmm(const VmmOp& op) {
  context_.make_current();  // on the remap worker's thread (cheap; remaps are rare)
  cuda::VirtualRange& arena = arenas_.at(op.arena);
  switch (op.kind) {
    case VmmOp::Kind::Unmap: arena.unmap(op.offset); break;
    case VmmOp::Kind::Map: arena.map(op.offset, chunks_.at(op.chunk)); break;
    case VmmOp::Kind::Access: arena.set_access(op.offset, op.bytes, context_.ordinal()); break;
  }
}

void CudaStateDevice::zero(const ZeroOp& op) {
  cuda::memset_d8_async(arenas_.at(op.arena).base() + op.offset, 0, op.bytes, stream_);
}

void CudaStateDevice::enqueue(const CopyOp& op, const cuda::Stream& s) {
  using End = CopyOp::End;
  const bool src_host = op.src_end == End::Host, dst_host = op.dst_end == End::Host;
  if ((src_host || dst_host) && !host_.data()) fail(ErrorKind::Api, "state pool: a host copy before reserve_host");
  if (src_host && dst_host) fail(ErrorKind::Api, "state pool: a host-to-host copy");
  const auto device_at = [&](std::uint32_t arena, std::uint64_t offset) { return arenas_.at(arena).base() + offset; };
  const auto host_at = [&](std::uint64_t offset, std::uint64_t span) {
    if (offset + span > host_.size())
      fail(ErrorKind::Api, "state pool: host copy [{}, {}) beyond the {}-byte host block", offset, offset + span,
           host_.size());
    return host_.data() + offset;
  };
  const std::uint64_t src_span = (op.height - 1) * op.src_pitch + op.width;
  const std::uint64_t dst_span = (op.height - 1) * op.dst_pitch + op.width;
  if (!src_host && !dst_host) {
    const cuda::DevicePtr src = device_at(op.src_arena, op.src), dst = device_at(op.dst_arena, op.dst);
    if (op.height == 1)
      cuda::copy_d2d_async(dst, src, op.width, s);
    else
      cuda::copy_2d_async(dst, op.dst_pitch, nullptr, src, op.src_pitch, op.width, op.height, s);
  } else if (src_host) {
    const std::byte* src = host_at(op.src, src_span);
    const cuda::DevicePtr dst = device_at(op.dst_arena, op.dst);
    if (op.height == 1)
      cuda::copy_h2d_async(dst, src, op.width, s);
    else
      cuda::copy_2d_async(dst, op.dst_pitch, src, 0, op.src_pitch, op.width, op.height, s);
  } else {
    const cuda::DevicePtr src = device_at(op.src_arena, op.src);
    std::byte* dst = host_at(op.dst, dst_span);
    if (op.height == 1)
      cuda::copy_d2h_async(dst, src, op.width, s);
    else
      cuda::copy_2d_d2h_async(dst, op.dst_pitch, src, op.src_pitch, op.width, op.height, s);
  }
}

void CudaStateDevice::copy(const CopyOp& op) { enqueue(op, stream_); }

std::shared_ptr<Fence> CudaStateDevice::record() { return std::make_shared<EventFence>(stream_); }

void CudaStateDevice::reserve_host(std::uint64_t bytes) {
  if (host_.data()) fail(ErrorKind::Api, "state pool: the host block is reserved once");
  const int ordinal = context_.ordinal();
  const int nodes = base::numa_node_count();
  const std::string bus = cuda::pci_bus_id(ordinal);
  const int node = base::numa_node_of_pci(bus);
  {
    // Only where there is a choice: on a one-node machine the policy is left alone.
    base::MemoryPolicyScope policy(nodes > 1 ? node : -1);
    host_ = cuda::PinnedMemory::allocate(bytes, "the state pool's host tier");
    if (nodes <= 1)
      log().info("host tier: {} MiB pinned; this machine has {} NUMA node{} (no binding needed)", bytes >> 20, nodes,
                 nodes == 1 ? "" : "s");
    else if (policy.bound())
      log().info("host tier: {} MiB pinned on NUMA node {} (GPU {} at {}), {}", bytes >> 20, node, ordinal, bus,
                 policy.note());
    else
      log().warn("host tier: {} MiB pinned without NUMA binding (GPU {} at {}: {})", bytes >> 20, ordinal, bus,
                 policy.note());
  }
  transfer_ = std::make_unique<cuda::Stream>();
}

void CudaStateDevice::transfer_after_compute() {
  if (!transfer_) fail(ErrorKind::Api, "state pool: a transfer before reserve_host");
  compute_mark_.record(stream_);
  transfer_->wait(compute_mark_);
}

void CudaStateDevice::transfer(const CopyOp& op) {
  if (!transfer_) fail(ErrorKind::Api, "state pool: a transfer before reserve_host");
  enqueue(op, *transfer_);
}

std::shared_ptr<Fence> CudaStateDevice::record_transfer() {
  if (!transfer_) fail(ErrorKind::Api, "state pool: a transfer before reserve_host");
  return std::make_shared<EventFence>(*transfer_);
}

}  // namespace kern::runtime
