// Runtime::load: modules, ABI checks, allocation, argument resolution.
#include <algorithm>
#include <map>

#include "kern/base/error.hpp"
#include "kern/base/json.hpp"
#include "kern/base/log.hpp"
#include "kern/core/peer_kernels.hpp"
#include "kern/registry/multimem_scan.hpp"
#include "kern/registry/registry.hpp"
#include "runtime/cooperative.hpp"
#include "runtime/gemm_args.hpp"
#include "runtime/pooled_state_memory.hpp"
#include "kern/core/weight_claims.hpp"
#include "runtime/runtime_impl.hpp"

namespace kern::runtime {

std::string CallExec::context() const {
  return fmt::format("program {} call {}{} op {}", program, index,
                     decl && !decl->label.empty() ? " (" + decl->label + ")" : std::string(), decl ? decl->op : "?");
}

void Runtime::Impl::load_modules(const std::string& kernels_dir) {
  if (m->modules.empty()) return;
  registry::Registry reg = registry::Registry::scan(kernels_dir);
  // A kernel that receives a peer buffer: its module must hold no multimem instruction (issue 20;
  // NVLink multicast must never run here), checked before anything of it loads.
  // One scan per such module, naming its first such kernel.
  std::map<std::string, std::string> peer_modules;
  for (const core::PeerKernel& k : core::peer_kernels(*m)) peer_modules.try_emplace(k.module, k.entry);
  for (const auto& [name, mod] : m->modules) {
    std::vector<registry::DeviceImage> images = reg.images(name, mod.sha256);  // KernelArtifact when missing / changed
    if (auto peer = peer_modules.find(name); peer != peer_modules.end())
      for (const registry::DeviceImage& img : images)
        registry::refuse_multimem(img.bytes, fmt::format("module {} ({})", name, img.description), peer->second);
    std::vector<cuda::Module> loaded;
    std::string failures;
    for (const registry::DeviceImage& img : images) {
      try {
        loaded.push_back(cuda::Module::load(img.bytes, fmt::format("module {} ({})", name, img.description)));
      } catch (const Error& e) {
        failures += fmt::format("{}{}", failures.empty() ? "" : "; ", e.message());
      }
    }
    if (loaded.empty())
      fail(ErrorKind::KernelArtifact, "module {} (sha256 {}): no device image loads on GPU {}: {}", name, mod.sha256,
           options.gpu, failures.empty() ? "the artifact holds no device image" : failures);
    if (!failures.empty()) log().debug("module {}: skipped images that do not load here: {}", name, failures);
    modules_storage.push_back(std::move(loaded));
  }
  std::size_t i = 0;
  for (const auto& [name, mod] : m->modules) modules[name] = &modules_storage[i++];
}

cuda::Function Runtime::Impl::resolve_entry(const std::string& op_name, std::size_t li, const core::Launch& l) {
  auto it = modules.find(l.module);
  if (it == modules.end())
    fail(ErrorKind::KernelArtifact, "op {} launch {}: module '{}' is not loaded", op_name, li, l.module);
  const std::vector<core::ParamType>& declared = l.params ? *l.params : m->ops.at(op_name).params;
  std::vector<cuda::Function> matches;
  std::vector<std::string> mismatches;
  std::size_t defining = 0;
  for (const cuda::Module& mod : *it->second) {
    auto f = mod.function(l.entry);
    if (!f) continue;
    ++defining;
    auto layout = f->param_info();
    if (auto why = rt::abi_mismatch(declared, layout))
      mismatches.push_back(*why);
    else
      matches.push_back(*f);
  }
  const std::string sha = m->modules.at(l.module).sha256;
  if (defining == 0)
    fail(ErrorKind::KernelArtifact, "op {} launch {}: module {} (sha256 {}) has no entry '{}'", op_name, li, l.module,
         sha, l.entry);
  if (matches.empty()) {
    if (defining == 1)
      fail(ErrorKind::KernelArtifact, "op {} launch {}: ABI mismatch for {} in module {}: {}", op_name, li, l.entry,
           l.module, mismatches[0]);
    std::string all;
    for (std::size_t i = 0; i < mismatches.size(); ++i)
      all += fmt::format("{}image {}: {}", i ? "; " : "", i, mismatches[i]);
    fail(ErrorKind::KernelArtifact,
         "op {} launch {}: none of the {} images of module {} defining {} matches the declared params: {}", op_name, li,
         defining, l.module, l.entry, all);
  }
  if (matches.size() > 1)
    fail(ErrorKind::KernelArtifact,
         "op {} launch {}: {} images of module {} define {} with the declared layout; ambiguous", op_name, li,
         matches.size(), l.module, l.entry);
  return matches[0];
}

namespace {
std::uint64_t buffer_bytes_at_max(const core::Buffer& b, const core::VarLookup& vmax, const std::string& name) {
  std::uint64_t elems = core::shape_elements(b.shape, vmax, "buffers." + name);
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(elems, dtype_size(b.dtype), &bytes))
    fail(ErrorKind::Manifest, "buffers.{}: byte size overflows at var max", name);
  return bytes;
}
}  // namespace

void Runtime::Impl::allocate(const std::map<std::string, BufferSlot*>& claims) {
  std::map<std::string, std::uint64_t> vmax;
  for (const auto& [n, v] : m->vars) vmax[n] = v.max;
  const auto lookup = core::lookup_in(vmax);
  for (const auto& [name, b] : m->buffers) {
    BufferSlot s;
    s.name = name;
    s.decl = &b;
    s.bytes = buffer_bytes_at_max(b, lookup, name);
    if (b.kind == core::BufferKind::Peer) peer_buffers.push_back(name);  // zeroed until connect fills it
    const bool vmm_export = b.exported && b.kind != core::BufferKind::Weight && b.kind != core::BufferKind::Source;
    if (b.exported && !vmm_export) log().warn("buffer {}: an exported {} is allocated privately", name, core::to_string(b.kind));
    if (vmm_export) {
      // One exportable VMM chunk (issue 20): peers on other ranks import it through offer / connect.
      const std::uint64_t g = cuda::vmm_info(options.gpu).granularity;
      const std::uint64_t rounded = (s.bytes + g - 1) / g * g;
      s.exported_chunk = cuda::PhysicalChunk::create(rounded, options.gpu, /*want_fabric=*/true, "buffer " + name);
      s.exported_range = cuda::VirtualRange::reserve(rounded, g, "buffer " + name);
      s.exported_range.map(0, s.exported_chunk);
      s.exported_range.set_access(0, rounded, options.gpu);
      s.addr = s.exported_range.base();
      s.alive = true;
      cuda::memset_d8_async(s.addr, 0, rounded, *stream);
    } else if (b.placement == core::Placement::Host) {
      s.host = cuda::PinnedMemory::allocate(s.bytes, "host weight " + name);
      s.addr = s.host.device_ptr();
      s.alive = true;
    } else if (auto claim = claims.find(name); claim != claims.end()) {
      BufferSlot& ref = *claim->second;
      if (!ref.shared) ref.shared = std::make_shared<cuda::DeviceMemory>(std::move(ref.device));
      s.shared = ref.shared;
      s.addr = ref.addr;
      s.alive = true;
      s.claimed = true;
    } else if (b.kind != core::BufferKind::Source) {  // sources: allocated while derive programs read them
      s.device = cuda::DeviceMemory::allocate(s.bytes, "buffer " + name);
      s.addr = s.device.ptr();
      s.alive = true;
      if (b.kind != core::BufferKind::Weight) cuda::memset_d8_async(s.addr, 0, s.bytes, *stream);
    }
    if (b.kind == core::BufferKind::Input) {
      s.staging = cuda::PinnedMemory::allocate(s.bytes, "input staging " + name);
      s.staged = std::make_unique<cuda::Event>();
    }
    buffers.emplace(name, std::move(s));
  }
  for (const auto& [op_name, op] : m->ops) {
    auto& mine = scratch[op_name];
    for (const auto& [sname, sc] : op.impl.scratch) {
      std::uint64_t elems = core::shape_elements(sc.shape, lookup, "ops." + op_name + ".impl.scratch." + sname);
      std::uint64_t bytes = 0;
      if (__builtin_mul_overflow(elems, dtype_size(sc.dtype), &bytes))
        fail(ErrorKind::Manifest, "ops.{}.impl.scratch.{}: byte size overflows", op_name, sname);
      mine.emplace(sname, cuda::DeviceMemory::allocate(bytes, "scratch " + sname + " of op " + op_name));
    }
  }
  // The pool last: with no token capacity it takes what the buffers and scratch left. Input
  // domains then admit every page and slot its arenas reach (a remap may make any of them).
  states = std::make_unique<rt::PooledStateMemory>(*m, options.capacity, *context, *stream, options.host_states);
  for (auto& [name, slot] : buffers)
    if (slot.decl->kind == core::BufferKind::Input) slot.domain = rt::resolve_domain(*m, name, *slot.decl, states->reach());
}

rt::Pointer Runtime::Impl::pointer_of(const core::CallArg& a) const {
  rt::Pointer base;
  if (a.kind == core::CallArg::Kind::State) {
    base = states->region(a.name);
  } else {
    auto it = buffers.find(a.name);
    if (it == buffers.end()) fail(ErrorKind::Manifest, "unknown buffer '{}'", a.name);
    if (!it->second.alive)
      fail(ErrorKind::Manifest, "source buffer {} is read outside the derive program that loads it", a.name);
    base = {it->second.addr, it->second.bytes};
  }
  if (a.offset > base.bytes)
    fail(ErrorKind::Manifest, "offset {} is past the end of {} ({} bytes)", a.offset, a.name, base.bytes);
  return {base.address + a.offset, base.bytes - a.offset};
}

rt::ResolveContext Runtime::Impl::resolve_context(const std::string& op_name) {
  rt::ResolveContext ctx;
  ctx.vars = &vars;
  ctx.pointer = [this](const core::CallArg& a) { return pointer_of(a); };
  ctx.scratch = [this, op_name](std::string_view s) {
    auto& mine = scratch.at(op_name);
    auto it = mine.find(s);
    if (it == mine.end()) fail(ErrorKind::Manifest, "op {} has no scratch '{}'", op_name, s);
    return rt::Pointer{it->second.ptr(), it->second.size()};
  };
  ctx.rank = [this](std::string_view g) {
    auto it = ranks.find(std::string(g));
    if (it == ranks.end()) fail(ErrorKind::Api, "no rank index given for topology group '{}'", g);
    return it->second;
  };
  ctx.encode_tensormap = [](const cuda::TensormapSpec& s) { return cuda::encode_tensormap_tiled(s); };
  return ctx;
}

CallExec Runtime::Impl::build_call(const std::string& program, std::size_t index, const core::Call& call) {
  CallExec c;
  c.index = index;
  c.decl = &call;
  c.program = program;
  try {
    const core::Op& op = m->ops.at(call.op);
    rt::ResolveContext ctx = resolve_context(call.op);
    std::vector<std::uint64_t> at_max = vars.at_max();
    for (std::size_t li = 0; li < op.impl.launches.size(); ++li) {
      const core::Launch& l = op.impl.launches[li];
      LaunchExec e;
      if (l.when) {
        auto vi = vars.index(l.when->var);
        if (!vi) fail(ErrorKind::Manifest, "launch {}: when reads undeclared var {}", li, l.when->var);
        e.when_var = *vi;
        e.when_min = l.when->min;
        e.when_max = l.when->max;
      }
      std::vector<rt::ArgValue> values = rt::resolve_launch_args(op, l, call, ctx);
      if (l.is_extern()) {
        const std::string_view name = l.extern_name();
        e.ext = core::find_extern(name);
        if (!e.ext || !e.ext->in_runtime)
          fail(ErrorKind::Manifest, "launch {}: extern:{} is not supported yet", li, name);
        if (e.ext->family == core::ExternSpec::Family::Collective) {
          // send, recv, count, {"rank": group} (R6.extern): the group names the communicator.
          e.group = l.args->back().name;
          const std::string_view k = e.ext->collective;
          e.collective = k == "allreduce"       ? cuda::NcclCollective::AllReduce
                         : k == "allgather"     ? cuda::NcclCollective::AllGather
                         : k == "reducescatter" ? cuda::NcclCollective::ReduceScatter
                                                : cuda::NcclCollective::AllToAll;
          collective_groups.insert(e.group);
          e.ext_args = std::move(values);
          c.launches.push_back(std::move(e));
          continue;
        }
        if (auto problem = rt::gemm_args_problem(*e.ext, values))
          fail(ErrorKind::Manifest, "launch {}: extern:{}: {}", li, name, *problem);
        if (e.ext->library == core::ExternSpec::Library::Cublas) {
          if (!cublas) cublas = std::make_unique<cuda::Blas>(*stream);
        } else if (!blas) {
          blas = std::make_unique<cuda::BlasLt>();
        }
        // Row invariance: the algorithm is chosen at m's value at the var bounds (docs/runtime.md).
        const rt::ArgValue& m_arg = values[rt::GemmArgIndex(*e.ext).m];
        if (l.algo_candidate) e.gemm.candidate = *l.algo_candidate;
        e.gemm.per_m_equivalent = l.algo_per_m.value_or(false);
        if (l.algo_m) {
          e.gemm.m_ref = *l.algo_m;
        } else {
          const std::optional<std::uint64_t> at_bound = rt::int_value_at(m_arg, at_max.data());
          if (!at_bound) fail(ErrorKind::Manifest, "launch {}: extern:{} m overflows at the var bounds", li, name);
          e.gemm.m_ref = *at_bound;
        }
        if (l.algo) {
          const core::Algo& a = *l.algo;
          e.gemm.algo = cuda::GemmAlgo{a.id,      a.tile,   a.stages,      a.split_k,      a.reduction,
                                       a.swizzle, a.custom, a.inner_shape, a.cluster_shape};
        }
        // A cuBLASLt launch whose shape is literal but for m (a weight GEMM) has its algorithm
        // chosen now, or its pinned one built, and checked (cublasLtMatmulAlgoCheck) at m_ref and
        // at m = 1: one that cannot run the launch's shape is a Blas error at load naming the call
        // and the shape rather than at the first run. Other m are checked as they come.
        if (e.ext->library == core::ExternSpec::Library::CublasLt && e.gemm.m_ref > 0 &&
            rt::gemm_shape_is_literal_but_m(*e.ext, values)) {
          cuda::GemmShape s = e.gemm;
          if (rt::gemm_shape_at(*e.ext, values, at_max.data(), s) && s.ldc >= s.n && s.lda >= s.k &&
              (e.ext->k_multiple <= 1 || s.k % e.ext->k_multiple == 0)) {
            for (const std::uint64_t m : {e.gemm.m_ref, std::uint64_t{1}}) {
              s.m = m;
              blas->prepare(s);
            }
          }
        }
        e.ext_args = std::move(values);
      } else {
        e.fn = resolve_entry(call.op, li, l);
        const std::vector<core::ParamType>& declared = l.params ? *l.params : op.params;
        auto layout = e.fn.param_info();
        std::vector<std::uint64_t> offsets;
        for (const auto& p : layout) offsets.push_back(p.offset);
        (void)declared;
        e.image = rt::ArgImage(values, offsets);
        for (int d = 0; d < 3; ++d) e.grid[d] = rt::CompiledExpr::compile(l.grid[d], vars);
        e.geometry.block = l.block;
        e.geometry.cluster = l.cluster;
        e.geometry.pdl = l.pdl && pdl_supported;
        if (l.shared_mem) {
          e.shared_mem = rt::CompiledExpr::compile(*l.shared_mem, vars);
          auto peak = e.shared_mem->eval(at_max.data());
          if (!peak) fail(ErrorKind::Manifest, "launch {}: shared_mem overflows at var max", li);
          // Raised whenever dynamic shared memory is asked for: the 48 KiB default bounds static
          // plus dynamic, so a kernel with static shared memory needs it below 48 KiB of dynamic too.
          if (*peak > 0) {
            try {
              e.fn.set_max_dynamic_shared(static_cast<std::uint32_t>(*peak));
            } catch (const Error& err) {
              fail(ErrorKind::Manifest,
                   "launch {} ({}): shared_mem is {} bytes at var max, more than the kernel can get beside its static "
                   "shared memory ({})",
                   li, l.entry, *peak, err.what());
            }
          }
        }
        if (l.cooperative) check_cooperative(call.op, li, l, e, at_max);
      }
      c.launches.push_back(std::move(e));
    }
  } catch (const Error& err) {
    throw Error::call(c.context(), err);
  }
  return c;
}

// The grid of a cooperative launch must be resident all at once (its blocks wait for each other):
// its block count at the launch's peak var values against what the device holds at once for its
// block size and dynamic shared memory. Runs after MAX_DYNAMIC_SHARED_SIZE_BYTES is raised.
void Runtime::Impl::check_cooperative(const std::string& op_name, std::size_t li, const core::Launch& l,
                                      const LaunchExec& e, const std::vector<std::uint64_t>& at_max) {
  if (cooperative_checked.count({op_name, li})) return;  // the same figures for every call of the op
  const std::string where =
      json_path_index(json_path_key(json_path_key(json_path_key("ops", op_name), "impl"), "launches"), li);
  const std::vector<std::uint64_t> peak = rt::launch_peak_vars(at_max, e.when_var, e.when_max);
  const std::uint64_t blocks = rt::grid_blocks_at(e.grid, peak.data(), where);
  std::uint64_t shared = 0;
  if (e.shared_mem) {
    auto v = e.shared_mem->eval(peak.data());
    if (!v) fail(ErrorKind::Manifest, "{}: shared_mem overflows at the var bounds", where);
    shared = *v;
  }
  const std::uint32_t threads = l.block[0] * l.block[1] * l.block[2];  // <= 1024 (verified)
  const int per_sm = e.fn.max_active_blocks_per_sm(threads, static_cast<std::uint32_t>(shared));
  log().debug(
      "{} ({}): cooperative grid of {} blocks; {} threads and {} B dynamic shared memory per block; "
      "{} per SM x {} SMs = {} resident",
      where, l.entry, blocks, threads, shared, per_sm, sm_count, static_cast<std::int64_t>(per_sm) * sm_count);
  rt::check_cooperative_fit(where, blocks, per_sm, sm_count);
  cooperative_checked.emplace(op_name, li);
}

ProgramExec& Runtime::Impl::program(std::string_view name) {
  auto it = programs.find(name);
  if (it == programs.end()) {
    auto d = m->programs.find(std::string(name));
    if (d != m->programs.end() && d->second.derive)
      fail(ErrorKind::Api, "program {} is a derive program: it ran during load_weights and cannot run again", name);
    fail(ErrorKind::Api, "unknown program '{}'", name);
  }
  return it->second;
}

BufferSlot& Runtime::Impl::buffer(std::string_view name) {
  auto it = buffers.find(name);
  if (it == buffers.end()) fail(ErrorKind::Api, "unknown buffer '{}'", name);
  return it->second;
}

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Runtime::~Runtime() {
  if (impl_ && impl_->stream) {
    try {
      impl_->stream->synchronize();
    } catch (const Error& e) {
      log().warn("runtime teardown: {}", e.message());
    }
  }
}

std::unique_ptr<Runtime> Runtime::load(const core::Verified& verified, const std::string& kernels_dir,
                                       const RuntimeOptions& options) {
  return load_claiming(verified, kernels_dir, options, nullptr);
}

std::unique_ptr<Runtime> Runtime::load_over(Runtime& reference, const core::Verified& verified,
                                            const std::string& kernels_dir, const RuntimeOptions& options) {
  return load_claiming(verified, kernels_dir, options, &reference);
}

std::unique_ptr<Runtime> Runtime::load_claiming(const core::Verified& verified, const std::string& kernels_dir,
                                                const RuntimeOptions& options, Runtime* reference) {
  auto impl = std::make_unique<Impl>();
  impl->verified = std::make_unique<core::Verified>(verified);
  impl->m = &impl->verified->manifest();
  const core::Manifest& m = *impl->m;
  impl->options = options;
  impl->vars = rt::VarTable(m);
  impl->var_values.assign(impl->vars.size(), 0);
  for (const auto& [g, size] : m.topology) {
    auto it = options.ranks.find(g);
    if (it == options.ranks.end()) {
      if (size != 1) fail(ErrorKind::Api, "topology group {} has {} ranks: load needs this rank's index", g, size);
      impl->ranks[g] = 0;
    } else {
      if (it->second >= size)
        fail(ErrorKind::Api, "rank {} is outside topology group {} of size {}", it->second, g, size);
      impl->ranks[g] = it->second;
    }
  }
  cuda::ensure_driver();
  impl->context = std::make_unique<cuda::Context>(options.gpu);
  // Programmatic dependent launch exists from sm_90 on; below it a launch's `pdl` is dropped (the
  // kernels' griddepcontrol instructions compile to nothing there), so one manifest serves both.
  const cuda::DeviceInfo device = cuda::device_info(options.gpu);
  impl->pdl_supported = device.cc_major >= 9;
  impl->sm_count = device.sm_count;  // cooperative launches are checked against it
  impl->stream = std::make_unique<cuda::Stream>();
  impl->load_modules(kernels_dir);
  std::map<std::string, BufferSlot*> claims;
  if (reference) claims = impl->claims_over(*reference->impl_);
  impl->allocate(claims);
  for (const auto& [name, p] : m.programs) {
    if (p.derive) continue;  // resolved call by call inside load_weights
    ProgramExec pe;
    pe.name = name;
    pe.decl = &p;
    for (std::size_t i = 0; i < p.calls.size(); ++i) pe.calls.push_back(impl->build_call(name, i, p.calls[i]));
    pe.read_vars = rt::program_read_vars(m, p, impl->vars);
    pe.key.assign(pe.read_vars.size(), 0);
    impl->programs.emplace(name, std::move(pe));
  }
  // Collective groups of one rank join now, larger ones at connect.
  for (const std::string& g : impl->collective_groups)
    if (m.topology.at(g) == 1) impl->comms.emplace(g, cuda::NcclComm::init(1, cuda::nccl_unique_id(), 0));
  impl->stream->synchronize();
  return std::unique_ptr<Runtime>(new Runtime(std::move(impl)));
}

std::map<std::string, BufferSlot*> Runtime::Impl::claims_over(Impl& ref) {
  if (!ref.weights_loaded)
    fail(ErrorKind::Api, "load_over: the reference runtime's weights are not loaded yet (load_weights first)");
  if (ref.options.gpu != options.gpu)
    fail(ErrorKind::Api, "load_over: the reference runtime is on GPU {}, this one would be on GPU {}: weights are "
         "shared on one GPU only", ref.options.gpu, options.gpu);
  for (const auto& [group, rank] : ranks)
    if (auto it = ref.ranks.find(group); it != ref.ranks.end() && it->second != rank)
      fail(ErrorKind::Api, "load_over: topology group {}: the reference runtime is rank {}, this one rank {}", group,
           it->second, rank);
  const core::WeightClaims wc = core::weight_claims(*m, *ref.m);
  std::map<std::string, BufferSlot*> out;
  for (const core::WeightClaim& c : wc.claimed) {
    BufferSlot& r = ref.buffers.at(c.reference);
    // Host-placed weights are bound again: the pinned copy is the caller's to share, not ours.
    if (r.decl->placement != core::Placement::Device || !r.alive || r.addr == 0) continue;
    out.emplace(c.buffer, &r);
  }
  for (const core::WeightNotClaimed& n : wc.not_claimed) log().debug("load_over: {} is bound again: {}", n.buffer, n.why);
  log().info("load_over: {} of the reference's weights are shared, {} are bound again", out.size(),
             wc.not_claimed.size() + (wc.claimed.size() - out.size()));
  return out;
}

Runtime::SharedWeights Runtime::shared_weights() const {
  SharedWeights s;
  for (const auto& [name, b] : impl_->buffers)
    if (b.claimed) {
      ++s.buffers;
      s.bytes += b.bytes;
    }
  return s;
}

std::uint64_t Runtime::device_address(std::string_view name) const {
  auto it = impl_->buffers.find(name);
  if (it == impl_->buffers.end()) fail(ErrorKind::Api, "device_address: no buffer {}", name);
  const BufferSlot& b = it->second;
  if (b.decl->placement != core::Placement::Device || !b.alive || b.addr == 0)
    fail(ErrorKind::Api, "device_address: buffer {} has no device memory now ({} {})", name,
         core::to_string(b.decl->kind), b.decl->placement == core::Placement::Host ? "in host memory" : "not allocated");
  return b.addr;
}

const RuntimeStats& Runtime::stats() const { return impl_->stats; }
const core::Manifest& Runtime::manifest() const { return *impl_->m; }
void Runtime::set_eager(bool eager) { impl_->options.eager = eager; }

}  // namespace kern::runtime
