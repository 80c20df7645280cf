// Runtime::load_weights: bind plans through pinned staging, derive programs, once programs.
#include <algorithm>
#include <array>
#include <set>

#include "kern/bind_plan.hpp"
#include "kern/error.hpp"
#include "kern/log.hpp"
#include "kern/runtime/staging.hpp"
#include "runtime/runtime_impl.hpp"

namespace kern {
namespace {

constexpr std::uint64_t kChunkBytes = 64ull << 20;

// Two pinned chunks used alternately: one is read into while the other's DMA runs.
struct Staging {
  std::array<cuda::PinnedMemory, 2> chunk;
  std::array<cuda::Event, 2> done;
  std::size_t next = 0;
};

}  // namespace

void Runtime::Impl::bind_buffer(BufferSlot& b, const Tensors& tensors) {
  std::map<std::string, std::uint32_t> rank32;
  for (const auto& [g, r] : ranks) rank32[g] = static_cast<std::uint32_t>(r);
  BindPlan plan = plan_bind(b.name, *b.decl, b.bytes, tensors, rank32);
  stats.weight_bytes += b.bytes;
  if (b.host.data()) {
    execute_bind_plan_on_host(plan, tensors, std::span<std::byte>(b.host.data(), b.bytes));
    return;
  }
  // Device-resident tensors copy device to device; the rest through staging.
  std::vector<BindCopy> staged;
  for (const BindCopy& c : plan.copies) {
    const TensorInfo* t = tensors.find(c.tensor);
    if (!t) fail(ErrorKind::WeightArtifact, "buffer {}: tensor {} is missing", b.name, c.tensor);
    if (t->location.kind == TensorLocation::Kind::Device) {
      if (c.kind == BindCopy::Kind::Strided && c.height > 1)
        cuda::copy_2d_async(b.addr + c.dst_offset, c.dst_pitch, nullptr, t->location.device + c.src_offset, c.src_pitch,
                            c.width, c.height, *stream);
      else
        cuda::copy_d2d_async(b.addr + c.dst_offset, t->location.device + c.src_offset, c.width * c.height, *stream);
    } else {
      staged.push_back(c);
    }
  }
  if (staged.empty()) return;
  auto pieces = rt::plan_staging(staged, kChunkBytes);
  Staging st;
  for (auto& c : st.chunk) c = cuda::PinnedMemory::allocate(std::min<std::uint64_t>(kChunkBytes, b.bytes), "weight staging");
  for (const rt::StagingPiece& p : pieces) {
    const BindCopy& c = staged[p.copy];
    const std::size_t slot = st.next;
    st.next ^= 1;
    st.done[slot].synchronize();  // the chunk's previous DMA has finished
    tensors.read(c.tensor, p.src_offset, p.bytes, st.chunk[slot].data());
    if (p.strided) {
      // One read per piece; the rows are scattered with one H2D each (cuMemcpy2DAsync from
      // pinned host memory was refused with CUDA_ERROR_INVALID_VALUE on the H200 test machine).
      for (std::uint64_t r = 0; r < p.rows; ++r)
        cuda::copy_h2d_async(b.addr + p.dst_offset + r * c.dst_pitch, st.chunk[slot].data() + r * c.src_pitch, p.width,
                             *stream);
    } else
      cuda::copy_h2d_async(b.addr + p.dst_offset, st.chunk[slot].data(), p.bytes, *stream);
    st.done[slot].record(*stream);
    ++stats.staging_chunks;
  }
  stream->synchronize();
}

void Runtime::load_weights(const Tensors& tensors) {
  Impl& r = *impl_;
  if (r.weights_loaded) fail(ErrorKind::Api, "load_weights runs once per runtime; weights are already loaded");
  const manifest::Manifest& m = *r.m;
  for (auto& [name, b] : r.buffers)
    if (b.decl->kind == manifest::BufferKind::Weight) r.bind_buffer(b, tensors);
  r.stream->synchronize();

  // Derive programs in name order, call by call; each source lives from just before its first
  // reading call to just after its last.
  std::vector<std::pair<const std::string*, const manifest::Program*>> derive;
  for (const auto& [name, p] : m.programs)
    if (p.derive) derive.emplace_back(&name, &p);
  std::map<std::string, std::pair<std::size_t, std::size_t>> last_reader;  // source -> (program, call)
  for (std::size_t pi = 0; pi < derive.size(); ++pi)
    for (std::size_t ci = 0; ci < derive[pi].second->calls.size(); ++ci)
      for (const auto& a : derive[pi].second->calls[ci].args)
        if (a.kind == manifest::CallArg::Kind::Buf) {
          auto it = r.buffers.find(a.name);
          if (it != r.buffers.end() && it->second.decl->kind == manifest::BufferKind::Source)
            last_reader[a.name] = {pi, ci};
        }
  Vars at_max;
  for (const auto& [n, v] : m.vars) at_max[n] = v.max;
  for (std::size_t pi = 0; pi < derive.size(); ++pi) {
    const manifest::Program& p = *derive[pi].second;
    for (std::size_t ci = 0; ci < p.calls.size(); ++ci) {
      const manifest::Call& call = p.calls[ci];
      for (const auto& a : call.args) {
        if (a.kind != manifest::CallArg::Kind::Buf) continue;
        BufferSlot& b = r.buffers.at(a.name);
        if (b.decl->kind != manifest::BufferKind::Source || b.alive) continue;
        b.device = cuda::DeviceMemory::allocate(b.bytes, "source " + b.name);
        b.addr = b.device.ptr();
        b.alive = true;
        r.bind_buffer(b, tensors);
      }
      ProgramExec one;
      one.name = *derive[pi].first;
      one.decl = &p;
      one.calls.push_back(r.build_call(one.name, ci, call));
      r.vars.assign(at_max, r.var_values, one.name);
      r.apply(one);
      r.enqueue(one, 0, 1);
      r.stream->synchronize();
      for (auto& [src, at] : last_reader)
        if (at == std::pair(pi, ci)) {
          BufferSlot& b = r.buffers.at(src);
          b.device = cuda::DeviceMemory();
          b.addr = 0;
          b.alive = false;
        }
    }
  }
  // Sources no derive program reads are still checked against the checkpoint.
  for (auto& [name, b] : r.buffers)
    if (b.decl->kind == manifest::BufferKind::Source && !last_reader.count(name)) {
      std::map<std::string, std::uint32_t> rank32;
      for (const auto& [g, rk] : r.ranks) rank32[g] = static_cast<std::uint32_t>(rk);
      (void)plan_bind(name, *b.decl, b.bytes, tensors, rank32);
    }

  for (auto& [name, p] : r.programs)
    if (p.decl->once) r.run(p, at_max, 0, p.calls.size(), false);
  r.weights_loaded = true;
}

}  // namespace kern
