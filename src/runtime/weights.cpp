// Runtime::load_weights: every weight's bind plan through the pipelined loader (reader threads,
// pinned slabs, a copy stream), then derive programs (sources bound the same way), then once
// programs.
#include <algorithm>
#include <chrono>
#include <set>

#include "kern/weights/bind_plan.hpp"
#include "kern/base/error.hpp"
#include "kern/base/log.hpp"
#include "kern/weights/bf16_view.hpp"
#include "runtime/runtime_impl.hpp"

namespace kern::runtime {

void Runtime::Impl::bind_buffers(const std::vector<BufferSlot*>& bufs, const weights::Tensors& tensors,
                                 rt::DeviceWeightLoader& loader) {
  std::map<std::string, std::uint32_t> rank32;
  for (const auto& [g, r] : ranks) rank32[g] = static_cast<std::uint32_t>(r);
  std::vector<rt::LoadTarget> targets;
  std::vector<cuda::DevicePtr> dst;
  std::vector<std::pair<BufferSlot*, weights::BindPlan>> on_cpu;  // host placement: read by the CPU last
  for (BufferSlot* slot : bufs) {
    BufferSlot& b = *slot;
    weights::BindPlan plan = weights::plan_bind(b.name, *b.decl, b.bytes, tensors, rank32);
    stats.weight_bytes += b.bytes;
    if (b.host.data()) {
      // Host placement: device-resident tensors copy device to host (runtime stream), host and
      // file bytes are read by the CPU straight into the pinned buffer after the device copies.
      weights::BindPlan cpu = plan;
      cpu.copies.clear();
      for (const weights::BindCopy& c : plan.copies) {
        const weights::TensorInfo* t = tensors.find(c.tensor);
        if (!t) fail(ErrorKind::WeightArtifact, "buffer {}: tensor {} is missing", b.name, c.tensor);
        if (t->location.kind != weights::TensorLocation::Kind::Device) {
          cpu.copies.push_back(c);
        } else if (c.kind == weights::BindCopy::Kind::Strided && c.height > 1) {
          cuda::copy_2d_d2h_async(b.host.data() + c.dst_offset, c.dst_pitch, t->location.device + c.src_offset,
                                  c.src_pitch, c.width, c.height, *stream);
        } else {
          cuda::copy_d2h_async(b.host.data() + c.dst_offset, t->location.device + c.src_offset, c.width * c.height,
                               *stream);
        }
      }
      if (!cpu.copies.empty()) on_cpu.emplace_back(&b, std::move(cpu));
      continue;
    }
    // Device-resident tensors copy device to device (runtime stream); the rest through the loader.
    rt::LoadTarget target{b.name, {}};
    for (const weights::BindCopy& c : plan.copies) {
      const weights::TensorInfo* t = tensors.find(c.tensor);
      if (!t) fail(ErrorKind::WeightArtifact, "buffer {}: tensor {} is missing", b.name, c.tensor);
      if (t->location.kind == weights::TensorLocation::Kind::Device) {
        if (c.kind == weights::BindCopy::Kind::Strided && c.height > 1)
          cuda::copy_2d_async(b.addr + c.dst_offset, c.dst_pitch, nullptr, t->location.device + c.src_offset,
                              c.src_pitch, c.width, c.height, *stream);
        else
          cuda::copy_d2d_async(b.addr + c.dst_offset, t->location.device + c.src_offset, c.width * c.height, *stream);
      } else {
        target.copies.push_back(c);
      }
    }
    if (!target.copies.empty()) {
      targets.push_back(std::move(target));
      dst.push_back(b.addr);
    }
  }
  const std::uint64_t fills_before = loader.stats().fills;
  loader.load(targets, dst, tensors);
  stats.staging_chunks += loader.stats().fills - fills_before;
  for (auto& [b, plan] : on_cpu)
    weights::execute_bind_plan_on_host(plan, tensors, std::span<std::byte>(b->host.data(), b->bytes));
  stream->synchronize();
}

void Runtime::load_weights(const weights::Tensors& checkpoint) {
  Impl& r = *impl_;
  if (r.weights_loaded) fail(ErrorKind::Api, "load_weights runs once per runtime; weights are already loaded");
  const core::Manifest& m = *r.m;
  // f16 / f32 tensors bound to bf16 buffers are converted as the loader reads them.
  std::map<std::string, std::uint32_t> ranks32;
  for (const auto& [g, rk] : r.ranks) ranks32[g] = static_cast<std::uint32_t>(rk);
  const std::set<std::string> convert = weights::tensors_to_bf16(m, checkpoint, ranks32);
  const weights::Bf16View view(checkpoint, convert);
  const weights::Tensors& tensors = convert.empty() ? checkpoint : static_cast<const weights::Tensors&>(view);
  if (!convert.empty()) log().info("weights: {} f16 / f32 tensors are converted to bf16 while loading", convert.size());
  rt::DeviceWeightLoader loader(rt::loader_options_from_env({}));
  std::vector<BufferSlot*> weights;
  for (auto& [name, b] : r.buffers)
    if (b.decl->kind == core::BufferKind::Weight && !b.claimed) weights.push_back(&b);
  r.bind_buffers(weights, tensors, loader);
  {
    const rt::DeviceLoadStats& ls = loader.stats();
    log().info("weights: {:.2f} GB in {:.3f} s ({:.2f} GB/s; {} reader threads, {} slab fills, {} reads, {} copies)",
               ls.payload_bytes / 1e9, ls.seconds, ls.seconds > 0 ? ls.payload_bytes / 1e9 / ls.seconds : 0.0,
               ls.threads, ls.fills, ls.reads, ls.copies);
  }

  // Derive programs in name order, call by call; each source lives from just before its first
  // reading call to just after its last.
  std::vector<std::pair<const std::string*, const core::Program*>> derive;
  for (const auto& [name, p] : m.programs)
    if (p.derive) derive.emplace_back(&name, &p);
  std::map<std::string, std::pair<std::size_t, std::size_t>> last_reader;  // source -> (program, call)
  for (std::size_t pi = 0; pi < derive.size(); ++pi)
    for (std::size_t ci = 0; ci < derive[pi].second->calls.size(); ++ci)
      for (const auto& a : derive[pi].second->calls[ci].args)
        if (a.kind == core::CallArg::Kind::Buf) {
          auto it = r.buffers.find(a.name);
          if (it != r.buffers.end() && it->second.decl->kind == core::BufferKind::Source)
            last_reader[a.name] = {pi, ci};
        }
  Vars at_max;
  for (const auto& [n, v] : m.vars) at_max[n] = v.max;
  for (std::size_t pi = 0; pi < derive.size(); ++pi) {
    const core::Program& p = *derive[pi].second;
    for (std::size_t ci = 0; ci < p.calls.size(); ++ci) {
      const core::Call& call = p.calls[ci];
      for (const auto& a : call.args) {
        if (a.kind != core::CallArg::Kind::Buf) continue;
        BufferSlot& b = r.buffers.at(a.name);
        if (b.decl->kind != core::BufferKind::Source || b.alive) continue;
        b.device = cuda::DeviceMemory::allocate(b.bytes, "source " + b.name);
        b.addr = b.device.ptr();
        b.alive = true;
        r.bind_buffers({&b}, tensors, loader);
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
    if (b.decl->kind == core::BufferKind::Source && !last_reader.count(name)) {
      std::map<std::string, std::uint32_t> rank32;
      for (const auto& [g, rk] : r.ranks) rank32[g] = static_cast<std::uint32_t>(rk);
      (void)weights::plan_bind(name, *b.decl, b.bytes, tensors, rank32);
    }

  for (auto& [name, p] : r.programs)
    if (p.decl->once) r.run(p, at_max, 0, p.calls.size(), false);
  r.weights_loaded = true;
}

}  // namespace kern::runtime
