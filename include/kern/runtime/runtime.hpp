// kern-runtime: one verified manifest on one GPU.
//
// A Runtime owns the primary context of one GPU, one non-default stream, the manifest's
// modules, buffers, states, per-op scratch and CUDA graphs. The load path:
//   load(): hash the kernels dir, load only pinned modules, resolve every launch's entry with
//           an ABI check against cuFuncGetParamInfo, allocate buffers at var max, scratch,
//           states (via StateMemory), resolve every launch's arguments once;
//   load_weights(): bind weights through pinned staging, run derive programs (sources alive
//           only while read), then once programs.
// The run path: write_input / write_input_at (domain-checked, through resident pinned staging) →
// run / run_range (eager, or one cuGraphLaunch for `graph` programs) → read_output; or
// run_and_read (launch, queued readback, one wait) for a decode step.
// See docs/runtime.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kern/base/unique_fd.hpp"
#include "kern/core/handshake.hpp"
#include "kern/pool/host.hpp"
#include "kern/pool/pool.hpp"
#include "kern/pool/share.hpp"
#include "kern/runtime/domain.hpp"
#include "kern/runtime/host_state.hpp"
#include "kern/runtime/vars.hpp"
#include "kern/runtime/waking.hpp"
#include "kern/weights/tensors.hpp"
#include "kern/core/verify.hpp"

namespace kern::runtime {

struct RuntimeOptions {
  int gpu = 0;                                 // --gpu N: its primary context
  Capacity capacity;                           // paged / per-seq state sizing
  std::map<std::string, std::uint64_t> ranks;  // topology group -> this rank's index (default 0 for size-1 groups)
  bool eager = false;                          // never use graphs (--eager)
  // Host states: the caller's tensor for every `host` state of the manifest (and only those),
  // bound at load. Each must have exactly the declared layout (kern/runtime/host_state.hpp;
  // Error(Api) naming the state and what differs); kernels get a device pointer to it (device
  // memory of this GPU as it is, pinned host memory through its mapping, pageable host memory
  // page-locked and mapped by the runtime until it is destroyed). The memory must outlive the runtime.
  std::map<std::string, HostTensor> host_states;
};

// The multi-GPU handshake's runtime half (issue 20; docs/multi-gpu-handles.md, "The handshake in
// the runtime"). An offer with the descriptors its fd handles index, owned (what offer() makes and
// recv_offer receives), and an offer as connect takes it (its descriptors borrowed for the call).
struct HeldOffer {
  core::Offer offer;
  std::vector<UniqueFd> fds;
};
struct PeerOffer {
  core::Offer offer;
  std::vector<int> fds;
  static PeerOffer of(const HeldOffer& held);
};

// An offer between processes over a connected Unix-domain socket: its wire form with its
// descriptors as SCM_RIGHTS (kern/base/fd_passing.hpp). send_offer: Api error for more than 64
// descriptors; Io error when the peer vanishes or `timeout` passes. recv_offer: Io error for a peer
// that closes, a malformed offer or one whose fd indices disagree with the descriptors that came.
void send_offer(int sock, const HeldOffer& offer, std::chrono::milliseconds timeout);
HeldOffer recv_offer(int sock, std::chrono::milliseconds timeout);

// Counters a test or bench can read.
struct RuntimeStats {
  std::uint64_t kernel_launches = 0;  // cuLaunchKernel(Ex) calls
  std::uint64_t gemm_calls = 0;       // cuBLAS / cuBLASLt GEMMs enqueued
  std::uint64_t graph_captures = 0;
  std::uint64_t graph_launches = 0;
  std::uint64_t geometry_evaluations = 0;  // re-evaluations of a program's var-dependent values
  std::uint64_t weight_bytes = 0;          // bytes bound by load_weights
  std::uint64_t staging_chunks = 0;        // pinned staging chunks used by load_weights
};

// GPU time of one call of a program (Runtime::time_calls).
struct CallTime {
  std::size_t index = 0;  // call index in the program
  std::string label;      // the call's label ("" when it has none)
  std::string op;         // the op it calls
  double ms = 0;          // GPU milliseconds between events around its launches
};

class Runtime {
 public:
  // Error kinds: Driver (no GPU stack), KernelArtifact (module missing / tampered / ABI),
  // Manifest (unsupported extern or feature), Api (bad options), Cuda.
  static std::unique_ptr<Runtime> load(const core::Verified& manifest, const std::string& kernels_dir,
                                       const RuntimeOptions& options);
  // Loads `manifest` like load(), its weights sharing the reference runtime's memory where the
  // two manifests declare them identically (core::weight_claims: bound straight from the same
  // tensors, no program writing them; device placement): load_weights then binds only the others.
  // The shared memory lives until both runtimes are destroyed, in either order. Error(Api) when the
  // reference's weights are not loaded yet, or it runs on another GPU, or at another rank of a
  // topology group both declare. For kern test (A/B of two manifests over one checkpoint).
  static std::unique_ptr<Runtime> load_over(Runtime& reference, const core::Verified& manifest,
                                            const std::string& kernels_dir, const RuntimeOptions& options);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Binds every weight (WeightArtifact on a missing tensor or a size/dtype mismatch), runs
  // derive programs then once programs. Exactly once, before any run.
  void load_weights(const weights::Tensors& tensors);

  // Writes an input buffer: checked against its domain and size first (Domain / Api, and then
  // nothing is written). `prefix`: the bytes fill the buffer's start (else they must fill it).
  void write_input(std::string_view buffer, std::span<const std::byte> bytes, bool prefix = false);
  // Writes `bytes` at byte `offset` of an input, keeping its other bytes (a decode step writes
  // the one new page-table entry, not the row). The same checks first, on the written elements
  // (Api: not an input, range outside the buffer, offset or size not whole elements, a monotone
  // domain written past its start; Domain: a bad value), and then nothing is written.
  void write_input_at(std::string_view buffer, std::uint64_t offset, std::span<const std::byte> bytes);
  // Runs a whole program (graph replay when it declares `graph` and eager is off) and waits.
  void run(std::string_view program, const Vars& vars);
  // run() then read_output(output, offset, out) with one wait: the read is queued behind the
  // program (a decode step's token comes back with its only synchronization). The output range
  // is checked (Api) before anything runs. `before_wait` (may be empty) runs after the read is
  // queued and before the wait: input writes it makes are queued behind the read, so their host
  // work overlaps the program (a decode loop writes the next step's position, slot and seq_len
  // there). If it throws, nothing is waited for and `out` is not filled.
  void run_and_read(std::string_view program, const Vars& vars, std::string_view output, std::uint64_t offset,
                    std::span<std::byte> out, const std::function<void()>& before_wait = {});
  // Queues a whole program like run() (its graph captured on first use) without waiting;
  // synchronize(), a read or the next run waits.
  // For timing the host loop's phases (kern bench) and overlapping host work with the GPU.
  void launch(std::string_view program, const Vars& vars);
  // Waits until everything queued so far (copies, programs) has finished.
  void synchronize();
  // Runs calls [lo, hi) launch by launch and waits.
  void run_range(std::string_view program, const Vars& vars, std::size_t lo, std::size_t hi);
  // Queues calls [lo, hi) launch by launch without waiting (several ranks of one process interleave
  // an eager program call by call: driver::RanksExecutor).
  void launch_range(std::string_view program, const Vars& vars, std::size_t lo, std::size_t hi);
  // The program's calls; whether run() replays it as a CUDA graph (it declares `graph`, eager is off).
  std::size_t call_count(std::string_view program);
  bool replays_graph(std::string_view program);
  // Replays the graph captured for exactly these values of the vars the program reads; Api
  // error when none was captured for them (run() captures on first use).
  void replay(std::string_view program, const Vars& vars);
  void set_eager(bool eager);

  // Reads an output buffer (after the last run). read_buffer reads any device or host buffer
  // and any state (tests, probes).
  std::vector<std::byte> read_output(std::string_view buffer);
  // Reads `out.size()` bytes of output `buffer` starting at byte `offset`, through pinned memory
  // (a decode step reads back 8 bytes, not the whole buffer). Error(Api) if out of range.
  void read_output(std::string_view buffer, std::uint64_t offset, std::span<std::byte> out);
  std::vector<std::byte> read_buffer(std::string_view name);
  std::uint64_t buffer_bytes(std::string_view name) const;
  // The device address of a device-placed buffer whose memory exists now (not a source outside its
  // derive program): for device-side consumers on the same GPU (kern test's compare kernels read
  // two runtimes' logits there). Error(Api) otherwise.
  std::uint64_t device_address(std::string_view name) const;
  // The weights this runtime uses from its load_over reference (none after a plain load).
  struct SharedWeights {
    std::size_t buffers = 0;
    std::uint64_t bytes = 0;
  };
  SharedWeights shared_weights() const;

  // Profiling (profile.cpp; for kern bench, never on the serving path).
  // Runs `program` once (capturing its graph for these vars if needed), then `replays` graph
  // replays back to back with timing events around each: GPU ms per replay. Api error when the
  // program has no graph or the runtime is eager.
  std::vector<double> time_replays(std::string_view program, const Vars& vars, std::size_t replays);
  // Runs `program` eagerly with timing events between its calls, `reps` times (the host is given
  // a head start of queued copies so launch gaps do not count): per call, the median GPU ms.
  std::vector<CallTime> time_calls(std::string_view program, const Vars& vars, std::size_t reps = 5);
  // Fills every state but host states (the caller's memory) with one 16-bit pattern (e.g. a
  // small bf16 value) and waits.
  void fill_states(std::uint16_t pattern);

  // The state pool (docs/pool.md, runtime/state_pool.hpp): leases of pages and slots of the
  // pooled states, whose page-table rows and slots the caller writes into the protocol's inputs.
  // Denials are values; device copies run on the stream; a remap the pool plans runs on a
  // background thread and lands at a later call (settle() waits for it). Api error when the
  // manifest has no paged or per-seq state.
  pool::Granted<pool::Lease> lease(std::uint64_t tokens);
  pool::Granted<pool::Lease> lease_slot();
  std::optional<pool::Denied> extend(pool::Lease& lease, std::uint64_t tokens);
  pool::Granted<pool::Checkpoint> checkpoint(pool::Lease& lease, std::uint64_t len);
  pool::Checkpoint retire(pool::Lease&& lease, std::uint64_t len);
  pool::Granted<pool::Lease> lease_from(const pool::Checkpoint& cp, std::uint64_t tokens);
  // From the checkpoint's first `len` tokens (a whole-page multiple below its length when it has no
  // slot: what a prefix-index hit serves).
  pool::Granted<pool::Lease> lease_from(const pool::Checkpoint& cp, std::uint64_t len, std::uint64_t tokens);
  pool::Granted<pool::Lease> fork(pool::Lease& parent, std::uint64_t len, std::uint64_t tokens);
  void settle();
  const pool::Pool* state_pool() const;  // observation; null without pooled states
  // Sends the pool (after settle()) to another process over the connected Unix-domain socket
  // `sock`: its description, then its chunks' POSIX file descriptors (kern/runtime/pool_share.hpp,
  // where PoolView is the receiving end). Api error without pooled states or for fabric chunks
  // (KERN_NO_FABRIC=1 makes them descriptors); Io error when the peer vanishes or `timeout` passes
  // on one message. Returns the description sent.
  pool::PoolShare send_pool(int sock, std::chrono::milliseconds timeout);

  // The handshake (kern/core/handshake.hpp is its pure half). offer(): the manifest's digest, this
  // rank's index per topology group and one POSIX-fd handle per exported buffer a peer buffer
  // reaches. connect(offers of every group, in rank order, this rank's own among them): checks them
  // (core::plan_connect), imports each peer's handles once, and writes every peer buffer's address
  // array; until then every program but once programs refuses to run (Api). Api errors: a manifest
  // built in code (no digest), a peer buffer of a state (not built: states are pools of many
  // chunks), fabric chunks (set KERN_NO_FABRIC=1), connect before offer or twice, and every
  // refusal of plan_connect; Cuda errors when the driver refuses an import. NCCL groups are not
  // joined (not built): an offer carries no NCCL id.
  HeldOffer offer();
  void connect(const std::map<std::string, std::vector<PeerOffer>>& offers);
  bool connected() const;  // no peer buffer left to fill
  // Every rank in one process: each offers, then each connects with all the offers.
  static void connect_local(std::span<Runtime* const> ranks);
  // Before a process loads several ranks (driver::load_ranks): asks CUDA to load modules eagerly
  // (cuda::prefer_eager_module_loading), since a library kernel's first launch under lazy loading waits
  // for the GPU and so for a peer barrier spinning on a rank not launched yet (every barrier of a first
  // call timed out, 2 s each, in session 33's device round 1). Returns false, with a warning logged, when
  // this process loads lazily all the same (CUDA already initialized, or CUDA_MODULE_LOADING=LAZY set).
  static bool prefer_eager_module_loading();

  // The host tier: one pinned block (NUMA-bound to the GPU's node) for `pages` host pages and
  // `slots` host slots, reserved once. park / wake copy on a transfer stream that starts after
  // what the compute stream has enqueued and that the compute stream never waits for; a Waking
  // holds its lease until its copies land (awake never blocks). park_now / wake_now copy on the
  // compute stream, in order. park_if_room is the prefix index's evict() callback.
  void reserve_host(std::uint64_t pages, std::uint64_t slots);
  const pool::Host* host_tier() const;  // null before reserve_host
  std::variant<pool::Room, pool::Checkpoint> room(pool::Checkpoint cp);  // the checkpoint back when full
  pool::Parked park(pool::Room&& room);
  std::variant<pool::Parked, pool::Checkpoint> park_if_room(pool::Checkpoint cp);
  pool::Granted<Waking> wake(const pool::Parked& parked, std::uint64_t len, std::uint64_t tokens);
  std::variant<pool::Lease, Waking> awake(Waking&& waking);
  bool landed(const Waking& waking) const;
  void wait_transfers();  // blocks until every park / wake copy issued so far has landed
  pool::Granted<pool::Parked> park_now(const pool::Checkpoint& cp);
  pool::Granted<pool::Lease> wake_now(const pool::Parked& parked, std::uint64_t len, std::uint64_t tokens);

  // State bytes for tests: the objects alive at load (fixed states whole; pooled states from
  // page / slot 0 up to what the pool made at load; host states their bound span). Api error once
  // the pool has remapped (the bytes are no longer one contiguous run): write through leases'
  // rows and slots instead. zero_states leaves host states alone.
  std::vector<std::byte> read_state(std::string_view state);
  void read_state_at(std::string_view state, std::uint64_t offset, std::span<std::byte> out);
  void write_state_at(std::string_view state, std::uint64_t offset, std::span<const std::byte> bytes);
  void zero_states();
  int gpu() const;

  const RuntimeStats& stats() const;
  const core::Manifest& manifest() const;

  struct Impl;

 private:
  explicit Runtime(std::unique_ptr<Impl> impl);
  static std::unique_ptr<Runtime> load_claiming(const core::Verified& manifest, const std::string& kernels_dir,
                                                const RuntimeOptions& options, Runtime* reference);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kern::runtime
