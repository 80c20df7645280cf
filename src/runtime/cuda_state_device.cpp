#include "runtime/cuda_state_device.hpp"

#include "kern/base/error.hpp"

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

void CudaStateDevice::copy(const CopyOp& op) {
  if (op.src_end != CopyOp::End::Device || op.dst_end != CopyOp::End::Device)
    fail(ErrorKind::Api, "state pool: host-tier copies are not on the GPU yet");
  const cuda::DevicePtr src = arenas_.at(op.src_arena).base() + op.src, dst = arenas_.at(op.dst_arena).base() + op.dst;
  if (op.height == 1) {
    cuda::copy_d2d_async(dst, src, op.width, stream_);
  } else {
    cuda::copy_2d_async(dst, op.dst_pitch, nullptr, src, op.src_pitch, op.width, op.height, stream_);
  }
}

std::shared_ptr<Fence> CudaStateDevice::record() { return std::make_shared<EventFence>(stream_); }

}  // namespace kern::runtime
