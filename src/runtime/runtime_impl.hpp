// Runtime internals shared by the load, weights, io and execution files.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kern/core/externs.hpp"
#include "kern/cuda/blas.hpp"
#include "kern/cuda/blaslt.hpp"
#include "kern/cuda/cuda.hpp"
#include "kern/cuda/nccl.hpp"
#include "kern/cuda/vmm.hpp"
#include "kern/runtime/runtime.hpp"
#include "kern/runtime/args.hpp"
#include "kern/runtime/domain.hpp"
#include "kern/runtime/program_vars.hpp"
#include "kern/runtime/vars.hpp"
#include "kern/runtime/weight_loader.hpp"
#include "runtime/pooled_state_memory.hpp"

namespace kern::runtime {

namespace rt = runtime;

struct BufferSlot {
  std::string name;
  const core::Buffer* decl = nullptr;
  std::uint64_t bytes = 0;              // at var max
  cuda::DeviceMemory device;            // device placement
  // A weight whose memory two runtimes share (Runtime::load_over): the claiming runtime's and, once
  // claimed, the reference's (moved out of `device`); whichever runtime is destroyed last frees it.
  std::shared_ptr<cuda::DeviceMemory> shared;
  bool claimed = false;                 // load_over: bound by the reference; load_weights skips it
  cuda::PinnedMemory host;              // host placement (weights)
  cuda::PinnedMemory staging;           // inputs: resident pinned staging
  std::unique_ptr<cuda::Event> staged;  // inputs: created at load (io.cpp counts waits instead)
  bool copy_queued = false;             // inputs: an H2D from `staging` was queued ...
  std::uint64_t copy_wait = 0;          // ... when Impl::waits had this value (landed once waits exceeds it)
  std::optional<rt::DomainRule> domain;
  bool alive = false;        // sources: allocated for the derive program reading them
  cuda::DevicePtr addr = 0;  // what kernels see (device pointer or mapped pinned host)
  // export: true (issue 20): one exportable VMM chunk mapped at `addr` (the range before the chunk
  // in destruction order: declared after it).
  cuda::PhysicalChunk exported_chunk;
  cuda::VirtualRange exported_range;
};

// One launch of one call, resolved at load.
struct LaunchExec {
  const core::ExternSpec* ext = nullptr;  // extern launches: their catalogue row (in_runtime)
  cuda::Function fn;
  std::array<rt::CompiledExpr, 3> grid;
  std::optional<rt::CompiledExpr> shared_mem;
  std::optional<std::uint32_t> when_var;
  std::optional<std::uint64_t> when_min, when_max;
  rt::ArgImage image;                  // kernel launches
  std::vector<rt::ArgValue> ext_args;  // extern launches
  // Evaluated per var assignment:
  cuda::LaunchGeometry geometry;
  bool active = true;
  cuda::GemmShape gemm;
  cuda::GemmOperands gemm_ops;
  // Collective externs: the topology group its last arg names and the collective (load); the count
  // at the current vars and the group's communicator (apply: no lookup per launch).
  std::string group;
  cuda::NcclCollective collective = cuda::NcclCollective::AllReduce;
  std::uint64_t count = 0;
  const cuda::NcclComm* comm = nullptr;
};

struct CallExec {
  std::size_t index = 0;
  const core::Call* decl = nullptr;
  std::vector<LaunchExec> launches;
  std::string context() const;  // "program P call i (label) op O"
  std::string program;
};

struct ProgramExec {
  std::string name;
  const core::Program* decl = nullptr;
  std::vector<CallExec> calls;
  std::vector<std::uint32_t> read_vars;
  std::vector<std::uint64_t> key;  // values of read_vars the images currently hold
  bool applied = false;
  std::map<std::vector<std::uint64_t>, cuda::Graph> graphs;
};

struct Runtime::Impl {
  std::unique_ptr<core::Verified> verified;  // keeps the manifest alive
  const core::Manifest* m = nullptr;
  RuntimeOptions options;
  bool pdl_supported = false;  // the device is sm_90 or newer: launches keep their `pdl`
  int sm_count = 0;            // the device's multiprocessors (cooperative launches' co-residency)
  std::set<std::pair<std::string, std::size_t>> cooperative_checked;  // (op, launch) proven to fit
  rt::VarTable vars;
  std::vector<std::uint64_t> var_values;  // run-time scratch, sized at load
  std::unique_ptr<cuda::Context> context;
  std::unique_ptr<cuda::Stream> stream;
  std::unique_ptr<cuda::BlasLt> blas;  // created when a cuBLASLt GEMM extern is used
  std::unique_ptr<cuda::Blas> cublas;  // created when a cuBLAS GEMM extern is used (bound to `stream`)
  std::vector<std::vector<cuda::Module>> modules_storage;
  std::map<std::string, std::vector<cuda::Module>*, std::less<>> modules;
  std::map<std::string, BufferSlot, std::less<>> buffers;
  std::unique_ptr<rt::PooledStateMemory> states;
  std::map<std::string, std::map<std::string, cuda::DeviceMemory, std::less<>>, std::less<>> scratch;  // op -> name
  std::map<std::string, ProgramExec, std::less<>> programs;  // batch / plain programs (resolved at load)
  std::map<std::string, std::uint64_t> ranks;
  bool weights_loaded = false;
  RuntimeStats stats;
  std::uint64_t waits = 0;  // stream synchronizations made through wait() (io.cpp, exec.cpp)
  // The handshake (peers.cpp): the peer buffers connect() fills, whether it ran, the offer it
  // checks the others against, and the peers' memory this rank imported (ranges declared after the
  // chunks: unmapped first).
  std::vector<std::string> peer_buffers;
  bool connected_once = false;
  std::optional<core::Offer> offered;
  // connect's first half (imports, peer arrays): the NCCL ids of the groups still to join.
  std::map<std::string, core::NcclUniqueId> attach(const std::map<std::string, std::vector<PeerOffer>>& offers);
  // connect's second half: joins every collective group of size > 1 (blocking until every rank
  // joins: ranks of one thread call it inside cuda::nccl_group).
  void join(const std::map<std::string, core::NcclUniqueId>& ids);
  std::vector<cuda::PhysicalChunk> imported_chunks;
  std::vector<cuda::VirtualRange> imported_ranges;
  // NCCL: one communicator per topology group some collective launch names; a size-1 group joins
  // at load, the others at connect (until then programs refuse to run, as for unfilled peers).
  std::set<std::string> collective_groups;
  std::map<std::string, cuda::NcclComm> comms;
  // Peer buffers filled (or none) and every collective group joined.
  bool ready() const { return (peer_buffers.empty() || connected_once) && comms.size() == collective_groups.size(); }

  // io.cpp
  // Waits for the stream and counts it: staging queued before a counted wait is free again.
  void wait();
  // Output `name` with bytes [offset, offset + bytes) in range; Error(Api) otherwise.
  BufferSlot& output_range(std::string_view name, std::uint64_t offset, std::uint64_t bytes);
  // Queues the device-to-host copy of an output range into its pinned staging (nothing for a
  // host-placed output); finish_read copies it out after a wait.
  void queue_read(BufferSlot& b, std::uint64_t offset, std::uint64_t bytes);
  void finish_read(const BufferSlot& b, std::uint64_t offset, std::span<std::byte> out) const;

  // load.cpp
  void load_modules(const std::string& kernels_dir);
  // Allocates every buffer; `claims` (load_over): candidate buffer -> the reference's slot whose
  // memory it uses instead.
  void allocate(const std::map<std::string, BufferSlot*>& claims = {});
  // load_over: which of this manifest's weights use `ref`'s memory (core::weight_claims, device
  // placement only); Error(Api) when ref's weights are not loaded, or it runs on another GPU or rank.
  std::map<std::string, BufferSlot*> claims_over(Impl& ref);
  cuda::Function resolve_entry(const std::string& op_name, std::size_t launch_index, const core::Launch& l);
  CallExec build_call(const std::string& program, std::size_t index, const core::Call& call);
  // Error(Manifest) unless a cooperative launch's grid at its peak vars is resident all at once.
  void check_cooperative(const std::string& op_name, std::size_t launch_index, const core::Launch& l,
                         const LaunchExec& e, const std::vector<std::uint64_t>& at_max);
  rt::ResolveContext resolve_context(const std::string& op_name);
  rt::Pointer pointer_of(const core::CallArg& a) const;

  // exec.cpp (the hot path)
  // Error(Api) naming what awaits connect (peer buffers, NCCL groups) unless ready(); once programs
  // excepted: they run in load_weights.
  void require_connected(const ProgramExec& p) const;
  void prepare(ProgramExec& p, const Vars& given);
  void apply(ProgramExec& p);
  void enqueue(ProgramExec& p, std::size_t lo, std::size_t hi);
  void enqueue_call(CallExec& c);
  // Runs calls [lo, hi) (a graph replay for a whole graph program); waits unless `wait_done` is false.
  void run(ProgramExec& p, const Vars& given, std::size_t lo, std::size_t hi, bool whole, bool wait_done = true);

  // weights.cpp: binds buffers (all weights at once, or one source) through the loader
  void bind_buffers(const std::vector<BufferSlot*>& bufs, const weights::Tensors& t, rt::DeviceWeightLoader& loader);

  ProgramExec& program(std::string_view name);
  BufferSlot& buffer(std::string_view name);
};

}  // namespace kern::runtime
