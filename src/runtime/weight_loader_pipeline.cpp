// run_load_pipeline: reader threads fill slabs, the calling thread sends them in fill order.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "kern/base/error.hpp"
#include "kern/runtime/weight_loader.hpp"

namespace kern::runtime {
namespace {

// "buffer B tensor T (bytes [a, +n) of the tensor, file F)".
std::string where(const LoadTarget& target, const weights::TensorInfo& t, std::uint64_t offset, std::uint64_t bytes,
                  const weights::Tensors& tensors) {
  std::string file;
  if (t.location.kind == weights::TensorLocation::Kind::File && t.location.file < tensors.files().size())
    file = fmt::format(", file {}", tensors.files()[t.location.file]);
  return fmt::format("loading weights: buffer {} tensor {} (bytes [{}, +{}) of the tensor{})", target.buffer, t.name,
                     offset, bytes, file);
}

class Pipeline {
 public:
  Pipeline(const LoadPlan& plan, std::span<const LoadTarget> targets, const weights::Tensors& tensors,
           std::span<std::byte* const> slabs, FillSink& sink)
      : plan_(plan), targets_(targets), tensors_(tensors), slabs_(slabs), sink_(sink) {
    // Resolve every tensor once, before any thread starts.
    infos_.resize(targets.size());
    for (std::size_t t = 0; t < targets.size(); ++t)
      for (const weights::BindCopy& c : targets[t].copies) {
        const weights::TensorInfo* info = tensors.find(c.tensor);
        if (info == nullptr)
          fail(ErrorKind::WeightArtifact, "buffer {}: tensor {} is not in the checkpoint", targets[t].buffer, c.tensor);
        infos_[t].push_back(info);
      }
    for (std::size_t f = 0; f < plan.fills.size(); ++f)
      for (std::size_t r = 0; r < plan.fills[f].reads.size(); ++r) tasks_.push_back({f, r});
    remaining_ = std::make_unique<std::atomic<std::size_t>[]>(plan.fills.size());
    for (std::size_t f = 0; f < plan.fills.size(); ++f) remaining_[f].store(plan.fills[f].reads.size());
    ticket_.resize(slabs.size());
    for (std::size_t s = 0; s < slabs.size(); ++s) ticket_[s] = s;
  }

  LoadCounters run(unsigned threads) {
    {
      Readers readers(*this);
      for (std::size_t i = 0; i < std::min<std::size_t>(threads, tasks_.size()); ++i)
        readers.threads.emplace_back([this] { read_loop(); });
      send_loop();
    }  // readers stopped (on error) and joined
    drain();
    std::lock_guard<std::mutex> l(mu_);
    if (error_) throw *error_;
    LoadCounters out;
    out.fills = plan_.fills.size();
    out.reads = plan_.read_count;
    out.read_bytes = plan_.read_bytes;
    out.payload_bytes = plan_.payload_bytes;
    return out;
  }

 private:
  // Joins every reader on scope exit, stopping them first if the load did not complete.
  struct Readers {
    Pipeline& p;
    std::vector<std::thread> threads;
    explicit Readers(Pipeline& pipeline) : p(pipeline) {}
    ~Readers() {
      if (!p.sent_all_) p.stop();
      for (auto& t : threads) t.join();
    }
  };

  void stop() {
    std::lock_guard<std::mutex> l(mu_);
    stopped_ = true;
    slab_free_.notify_all();
    fill_done_.notify_all();
  }

  // Keeps the error of the earliest task (plan order) among those that failed.
  void record(std::size_t order, Error e) {
    std::lock_guard<std::mutex> l(mu_);
    if (!error_ || order < error_order_) {
      error_ = std::move(e);
      error_order_ = order;
    }
    stopped_ = true;
    slab_free_.notify_all();
    fill_done_.notify_all();
  }

  void read_loop() {
    for (;;) {
      const std::size_t t = next_task_.fetch_add(1);
      if (t >= tasks_.size()) return;
      const std::size_t f = tasks_[t].first, r = tasks_[t].second;  // not a structured binding: clang-14 cannot capture one
      const std::size_t s = f % slabs_.size();
      {
        std::unique_lock<std::mutex> l(mu_);
        slab_free_.wait(l, [&] { return stopped_ || ticket_[s] == f; });
        if (stopped_) return;
      }
      const SlabFill& fill = plan_.fills[f];
      const SlabRead& rd = fill.reads[r];
      const SlabPiece& piece = fill.pieces[rd.piece];
      const LoadTarget& target = targets_[piece.target];
      const weights::TensorInfo& info = *infos_[piece.target][piece.piece.copy];
      try {
        tensors_.read(info, rd.src_offset, rd.bytes, slabs_[s] + rd.slab_offset);
      } catch (const Error& e) {
        record(t, Error::call(where(target, info, rd.src_offset, rd.bytes, tensors_), e));
        return;
      } catch (const std::exception& e) {
        record(t, Error(ErrorKind::Io,
                        fmt::format("{}: {}", where(target, info, rd.src_offset, rd.bytes, tensors_), e.what())));
        return;
      }
      if (remaining_[f].fetch_sub(1) == 1) {
        std::lock_guard<std::mutex> l(mu_);
        fill_done_.notify_all();
      }
    }
  }

  void send_loop() {
    const std::size_t keep = slabs_.size() >= 2 ? 1 : 0;  // sends left running while the next fill is awaited
    for (std::size_t f = 0; f < plan_.fills.size(); ++f) {
      {
        std::unique_lock<std::mutex> l(mu_);
        fill_done_.wait(l, [&] { return stopped_ || remaining_[f].load() == 0; });
        if (stopped_) return;
      }
      const std::size_t s = f % slabs_.size();
      try {
        in_flight_.push_back(f);
        sink_.send(f, plan_.fills[f], s, slabs_[s]);
        while (in_flight_.size() > keep) {
          const std::size_t g = in_flight_.front();
          sink_.wait(g % slabs_.size());
          in_flight_.pop_front();
          std::lock_guard<std::mutex> l(mu_);
          ticket_[g % slabs_.size()] = g + slabs_.size();
          slab_free_.notify_all();
        }
      } catch (const Error& e) {
        record(tasks_.size() + f, Error::call(fmt::format("loading weights: sending slab fill {} of {} ({})", f,
                                                          plan_.fills.size(), describe(plan_.fills[f])),
                                              e));
        return;
      } catch (const std::exception& e) {
        record(tasks_.size() + f, Error(ErrorKind::Cuda, fmt::format("loading weights: sending slab fill {} of {}: {}",
                                                                     f, plan_.fills.size(), e.what())));
        return;
      }
    }
    sent_all_ = true;
  }

  // Waits for every send still in flight; errors here only matter when nothing failed before.
  void drain() {
    while (!in_flight_.empty()) {
      const std::size_t g = in_flight_.front();
      in_flight_.pop_front();
      try {
        sink_.wait(g % slabs_.size());
      } catch (const Error& e) {
        record(tasks_.size() + g, Error::call(fmt::format("loading weights: waiting for slab fill {}", g), e));
      }
    }
  }

  std::string describe(const SlabFill& fill) const {
    if (fill.pieces.empty()) return "empty";
    const SlabPiece& first = fill.pieces.front();
    const SlabPiece& last = fill.pieces.back();
    return fmt::format("buffer {} tensor {} .. buffer {} tensor {}", targets_[first.target].buffer,
                       targets_[first.target].copies[first.piece.copy].tensor, targets_[last.target].buffer,
                       targets_[last.target].copies[last.piece.copy].tensor);
  }

  const LoadPlan& plan_;
  std::span<const LoadTarget> targets_;
  const weights::Tensors& tensors_;
  std::span<std::byte* const> slabs_;
  FillSink& sink_;
  std::vector<std::vector<const weights::TensorInfo*>> infos_;
  std::vector<std::pair<std::size_t, std::size_t>> tasks_;  // (fill, read) in plan order
  std::unique_ptr<std::atomic<std::size_t>[]> remaining_;   // reads left per fill
  std::atomic<std::size_t> next_task_{0};
  std::deque<std::size_t> in_flight_;  // sender thread only
  bool sent_all_ = false;              // sender thread only (read after the readers' scope)

  std::mutex mu_;
  std::condition_variable slab_free_, fill_done_;
  std::vector<std::size_t> ticket_;  // per slab: the fill that may read into it now
  bool stopped_ = false;
  std::optional<Error> error_;
  std::size_t error_order_ = std::numeric_limits<std::size_t>::max();
};

}  // namespace

LoadCounters run_load_pipeline(const LoadPlan& plan, std::span<const LoadTarget> targets,
                               const weights::Tensors& tensors, std::span<std::byte* const> slabs,
                               std::uint64_t slab_capacity, unsigned threads, FillSink& sink) {
  if (slab_capacity < plan.max_fill_bytes())
    fail(ErrorKind::Api, "weight loading: slabs of {} bytes cannot hold a fill of {} bytes", slab_capacity,
         plan.max_fill_bytes());
  if (threads == 0) fail(ErrorKind::Api, "weight loading needs at least one reader thread");
  if (slabs.empty()) fail(ErrorKind::Api, "weight loading needs at least one slab");
  for (const SlabFill& fill : plan.fills)
    for (const SlabPiece& p : fill.pieces)
      if (p.target >= targets.size() || p.piece.copy >= targets[p.target].copies.size())
        fail(ErrorKind::Api, "weight loading: the plan names target {} copy {}, which the targets lack", p.target,
             p.piece.copy);
  Pipeline pipeline(plan, targets, tensors, slabs, sink);
  return pipeline.run(threads);
}

}  // namespace kern::runtime
