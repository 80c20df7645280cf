// The pipelined weight loader: a LoadPlan (staging.hpp) executed by N reader threads doing
// pread into a ring of slabs, and one sender (the calling thread) moving each completed slab
// out in fill order — to the device through pinned memory and a copy stream (DeviceWeightLoader),
// or anywhere a FillSink sends it (host tests).
//
// Fill f is read into slab f mod S by any reader threads (each read is one SlabRead); once all
// its reads are done the sender hands it to the sink, then waits for the previous fill's send to
// finish and gives that slab to the fill S later. Where each byte lands is the plan's decision,
// so the result never depends on thread timing. The first error (in plan order among those that
// happened: a short read, an I/O error, a CUDA error) stops every thread; in-flight sends are
// drained, all threads joined, and the error is thrown naming the buffer, tensor, and file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kern/weights/bind_plan.hpp"
#include "kern/cuda/cuda.hpp"
#include "kern/runtime/staging.hpp"
#include "kern/weights/tensors.hpp"

namespace kern::runtime {

struct LoaderOptions {
  unsigned threads = 0;  // reader threads; 0: default_load_threads()
  unsigned slabs = 8;    // slabs in the ring (>= 1; 2 or more overlap reading with sending)
  LoadLayout layout;     // slab size (32 MiB), largest pread (4 MiB), piece alignment (4 KiB)
  bool copy_2d = true;   // strided pieces as one cuMemcpy2DAsync each (else one H2D per row)
};

// min(16, hardware threads), at least 1.
unsigned default_load_threads();

// `base` with these environment variables applied when set (Error(Api) naming the variable
// when a value is not an integer in range): KERN_LOAD_THREADS [1, 256], KERN_LOAD_SLABS
// [1, 64], KERN_LOAD_SLAB_MIB [1, 1024], KERN_LOAD_READ_MIB [1, 1024], KERN_LOAD_2D (0 or 1).
LoaderOptions loader_options_from_env(LoaderOptions base,
                                      const std::function<const char*(const char*)>& getenv_fn = nullptr);

// One destination (a buffer) and the copies that fill it from the tensors.
struct LoadTarget {
  std::string buffer;                     // named in errors
  std::vector<weights::BindCopy> copies;  // from its bind plan (tensors read through Tensors::read)
};

// Receives completed fills, in fill order, on the thread that runs the pipeline.
class FillSink {
 public:
  virtual ~FillSink() = default;
  // Fill `index` is complete in slab `slab` (`data`): start moving it out. May return before
  // the bytes have left the slab.
  virtual void send(std::size_t index, const SlabFill& fill, std::size_t slab, const std::byte* data) = 0;
  // Returns once the last send from `slab` no longer needs its bytes.
  virtual void wait(std::size_t slab) = 0;
};

struct LoadCounters {
  std::uint64_t fills = 0, reads = 0, read_bytes = 0, payload_bytes = 0;
};

// Runs `plan` (made by plan_load from the targets' copies, in order): `threads` readers
// (>= 1) read into `slabs` (at least one, each `slab_capacity` bytes), the calling thread
// sends. Error(Api) when a slab is smaller than plan.max_fill_bytes(); Error(WeightArtifact)
// before anything starts when a tensor is missing.
LoadCounters run_load_pipeline(const LoadPlan& plan, std::span<const LoadTarget> targets,
                               const weights::Tensors& tensors, std::span<std::byte* const> slabs,
                               std::uint64_t slab_capacity, unsigned threads, FillSink& sink);

struct DeviceLoadStats {
  std::uint64_t payload_bytes = 0;  // bytes that landed in device buffers
  std::uint64_t read_bytes = 0;     // bytes read from the tensors (strided spans include gaps)
  std::uint64_t fills = 0;          // slab fills sent
  std::uint64_t reads = 0;          // preads
  std::uint64_t copies = 0;         // H2D / 2-D copy calls
  unsigned threads = 0;             // reader threads of the last load
  double seconds = 0;               // wall time of the loads (slab allocation included)
};

// Loads into device memory of the current context through pinned slabs (allocated on first
// use, grown when a later plan needs bigger ones, freed with the loader) and its own copy stream.
class DeviceWeightLoader {
 public:
  explicit DeviceWeightLoader(LoaderOptions options);
  ~DeviceWeightLoader();
  DeviceWeightLoader(const DeviceWeightLoader&) = delete;
  DeviceWeightLoader& operator=(const DeviceWeightLoader&) = delete;

  // Target i's copies land at device address dst[i] + dst_offset. Returns once every byte is
  // on the device (or throws; nothing is in flight after it returns either way).
  void load(std::span<const LoadTarget> targets, std::span<const cuda::DevicePtr> dst, const weights::Tensors& tensors);

  const LoaderOptions& options() const { return options_; }
  const DeviceLoadStats& stats() const { return stats_; }

 private:
  struct Device;
  LoaderOptions options_;
  std::unique_ptr<Device> device_;
  DeviceLoadStats stats_;
};

}  // namespace kern::runtime
