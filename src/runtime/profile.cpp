// Profiling for kern bench: timing events around graph replays and around each call of an
// eager run, and a fill of the state memory. Nothing here is on the serving path.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kern/cuda/event.hpp"
#include "kern/base/error.hpp"
#include "runtime/runtime_impl.hpp"

namespace kern::runtime {
namespace {

// Queues device copies that keep the GPU busy for a while, so the host can enqueue a whole
// eager program before the GPU reaches it (launch gaps then do not show up between events).
class HeadStart {
 public:
  static constexpr std::size_t kBytes = 128u << 20;
  HeadStart()
      : a_(cuda::DeviceMemory::allocate(kBytes, "profiling head start")),
        b_(cuda::DeviceMemory::allocate(kBytes, "profiling head start")) {}
  void enqueue(const cuda::Stream& s, int copies) const {
    for (int i = 0; i < copies; ++i)
      cuda::copy_d2d_async(i % 2 ? a_.ptr() : b_.ptr(), i % 2 ? b_.ptr() : a_.ptr(), kBytes, s);
  }

 private:
  cuda::DeviceMemory a_, b_;
};

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int Runtime::gpu() const { return impl_->options.gpu; }

std::vector<double> Runtime::time_replays(std::string_view program, const Vars& vars, std::size_t replays) {
  Impl& r = *impl_;
  ProgramExec& p = r.program(program);
  if (!p.decl->graph) fail(ErrorKind::Api, "time_replays: program {} does not declare graph", p.name);
  if (r.options.eager) fail(ErrorKind::Api, "time_replays: the runtime is eager (no graphs)");
  if (replays == 0) fail(ErrorKind::Api, "time_replays: at least one replay");
  r.run(p, vars, 0, p.calls.size(), true);  // captures the graph for these vars when needed
  auto it = p.graphs.find(p.key);
  if (it == p.graphs.end()) fail(ErrorKind::Api, "time_replays: no graph captured for program {}", p.name);
  std::vector<cuda::TimingEvent> marks(replays + 1);
  marks[0].record(*r.stream);
  for (std::size_t i = 0; i < replays; ++i) {
    it->second.launch(*r.stream);
    marks[i + 1].record(*r.stream);
  }
  r.stats.graph_launches += replays;
  r.stream->synchronize();
  std::vector<double> ms(replays);
  for (std::size_t i = 0; i < replays; ++i) ms[i] = cuda::elapsed_ms(marks[i], marks[i + 1]);
  return ms;
}

std::vector<CallTime> Runtime::time_calls(std::string_view program, const Vars& vars, std::size_t reps) {
  Impl& r = *impl_;
  ProgramExec& p = r.program(program);
  if (p.decl->once) fail(ErrorKind::Api, "time_calls: program {} is a once program", p.name);
  if (!r.weights_loaded) fail(ErrorKind::Api, "time_calls: load_weights must run first");
  if (reps == 0) fail(ErrorKind::Api, "time_calls: at least one repetition");
  r.require_connected(p);
  r.prepare(p, vars);
  const std::size_t n = p.calls.size();
  if (n == 0) return {};
  const HeadStart head;
  std::vector<cuda::TimingEvent> marks(n + 1);
  std::vector<std::vector<double>> per_call(n);
  for (std::size_t rep = 0; rep < reps + 1; ++rep) {        // the first repetition warms up
    head.enqueue(*r.stream, static_cast<int>(16 + n / 4));  // ~60 us of copies per 4 calls queued
    marks[0].record(*r.stream);
    for (std::size_t i = 0; i < n; ++i) {
      r.enqueue(p, i, i + 1);
      marks[i + 1].record(*r.stream);
    }
    r.stream->synchronize();
    if (rep == 0) continue;
    for (std::size_t i = 0; i < n; ++i) per_call[i].push_back(cuda::elapsed_ms(marks[i], marks[i + 1]));
  }
  std::vector<CallTime> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const core::Call& c = *p.calls[i].decl;
    out[i].index = i;
    out[i].label = c.label;
    out[i].op = c.op;
    out[i].ms = median_of(per_call[i]);
  }
  return out;
}

void Runtime::fill_states(std::uint16_t pattern) {
  Impl& r = *impl_;
  constexpr std::size_t kChunk = 16u << 20;
  cuda::PinnedMemory host = cuda::PinnedMemory::allocate(kChunk, "state fill pattern");
  for (std::size_t i = 0; i < kChunk / 2; ++i) std::memcpy(host.data() + 2 * i, &pattern, 2);
  for (const auto& [name, decl] : r.m->states) {
    if (decl.host) continue;  // the caller's memory
    const rt::Pointer region = r.states->loaded(name);
    const std::size_t first = std::min<std::size_t>(kChunk, region.bytes);
    if (first == 0) continue;
    cuda::copy_h2d_async(region.address, host.data(), first & ~std::size_t{1}, *r.stream);
    // Double the filled prefix with device copies until the region is covered.
    std::size_t done = first & ~std::size_t{1};
    while (done < region.bytes) {
      const std::size_t n = std::min(done, region.bytes - done);
      cuda::copy_d2d_async(region.address + done, region.address, n, *r.stream);
      done += n;
    }
  }
  r.stream->synchronize();
}

}  // namespace kern::runtime
