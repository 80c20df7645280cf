// DeviceWeightLoader: the pipeline's sink for device memory (pinned slabs, a copy stream, one
// event per slab).
#include <algorithm>
#include <chrono>

#include "kern/base/error.hpp"
#include "kern/base/log.hpp"
#include "kern/runtime/weight_loader.hpp"

namespace kern::runtime {

struct DeviceWeightLoader::Device {
  std::vector<cuda::PinnedMemory> slabs;
  std::uint64_t slab_bytes = 0;
  cuda::Stream stream;                             // the copy stream
  std::vector<std::unique_ptr<cuda::Event>> done;  // per slab: its last send
};

namespace {

class DeviceSink final : public FillSink {
 public:
  DeviceSink(std::span<const LoadTarget> targets, std::span<const cuda::DevicePtr> dst, const cuda::Stream& stream,
             std::vector<std::unique_ptr<cuda::Event>>& done, bool copy_2d)
      : targets_(targets), dst_(dst), stream_(stream), done_(done), copy_2d_(copy_2d) {}

  void send(std::size_t, const SlabFill& fill, std::size_t slab, const std::byte* data) override {
    for (const SlabPiece& sp : fill.pieces) {
      const StagingPiece& p = sp.piece;
      const weights::BindCopy& c = targets_[sp.target].copies[p.copy];
      const cuda::DevicePtr base = dst_[sp.target];
      const std::byte* src = data + sp.slab_offset;
      try {
        if (!p.strided) {
          cuda::copy_h2d_async(base + p.dst_offset, src, p.bytes, stream_);
          ++copies;
        } else if (copy_2d_ && fits_2d_copy(c)) {
          cuda::copy_2d_async(base + p.dst_offset, c.dst_pitch, src, 0, c.src_pitch, p.width, p.rows, stream_);
          ++copies;
        } else {
          for (std::uint64_t r = 0; r < p.rows; ++r)
            cuda::copy_h2d_async(base + p.dst_offset + r * c.dst_pitch, src + r * c.src_pitch, p.width, stream_);
          copies += p.rows;
        }
      } catch (const Error& e) {
        throw Error::call(
            fmt::format("buffer {} tensor {}: {} of {} bytes to buffer offset {}", targets_[sp.target].buffer, c.tensor,
                        p.strided ? fmt::format("{} rows", p.rows) : std::string("copy"),
                        p.strided ? p.rows * p.width : p.bytes, p.dst_offset),
            e);
      }
    }
    done_[slab]->record(stream_);
  }

  void wait(std::size_t slab) override { done_[slab]->synchronize(); }

  std::uint64_t copies = 0;

 private:
  std::span<const LoadTarget> targets_;
  std::span<const cuda::DevicePtr> dst_;
  const cuda::Stream& stream_;
  std::vector<std::unique_ptr<cuda::Event>>& done_;
  bool copy_2d_;
};

}  // namespace

DeviceWeightLoader::DeviceWeightLoader(LoaderOptions options) : options_(std::move(options)) {
  if (options_.threads == 0) options_.threads = default_load_threads();
  if (options_.slabs == 0) fail(ErrorKind::Api, "weight loading needs at least one slab");
}

DeviceWeightLoader::~DeviceWeightLoader() {
  if (device_) {
    try {
      device_->stream.synchronize();
    } catch (const Error& e) {
      log().warn("weight loader: {}", e.what());
    }
  }
}

void DeviceWeightLoader::load(std::span<const LoadTarget> targets, std::span<const cuda::DevicePtr> dst,
                              const weights::Tensors& tensors) {
  if (dst.size() != targets.size())
    fail(ErrorKind::Api, "weight loading: {} targets but {} destinations", targets.size(), dst.size());
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<weights::BindCopy>> copies;
  copies.reserve(targets.size());
  for (const LoadTarget& t : targets) copies.push_back(t.copies);
  const LoadPlan plan = plan_load(copies, options_.layout);
  if (plan.fills.empty()) return;

  if (!device_) device_ = std::make_unique<Device>();
  Device& d = *device_;
  const std::uint64_t need = plan.max_fill_bytes();
  const std::size_t want = std::min<std::size_t>(options_.slabs, plan.fills.size());
  if (d.slab_bytes < need || d.slabs.size() < want) {
    d.stream.synchronize();
    const std::uint64_t bytes = std::max(d.slab_bytes, need);
    const std::size_t count = std::max(d.slabs.size(), want);
    d.slabs.clear();
    d.slab_bytes = 0;
    for (std::size_t i = 0; i < count; ++i)
      d.slabs.push_back(cuda::PinnedMemory::allocate(bytes, "weight staging slab"));
    d.slab_bytes = bytes;
    while (d.done.size() < count) d.done.push_back(std::make_unique<cuda::Event>());
  }
  std::vector<std::byte*> slabs;
  for (const auto& s : d.slabs) slabs.push_back(s.data());

  DeviceSink sink(targets, dst, d.stream, d.done, options_.copy_2d);
  const LoadCounters n = run_load_pipeline(plan, targets, tensors, slabs, d.slab_bytes, options_.threads, sink);
  d.stream.synchronize();

  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats_.payload_bytes += n.payload_bytes;
  stats_.read_bytes += n.read_bytes;
  stats_.fills += n.fills;
  stats_.reads += n.reads;
  stats_.copies += sink.copies;
  stats_.threads = options_.threads;
  stats_.seconds += seconds;
}

}  // namespace kern::runtime
