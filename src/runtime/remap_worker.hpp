// The background thread that executes remap plans (docs/design/pool-on-gpu.md, "Remap pipeline"):
// it waits for the plan's fence (everything enqueued before the plan), then unmaps, maps and sets
// access in the plan's order. One plan at a time; the main thread polls done() and never waits
// unless it asks to (wait()).
#pragma once

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "runtime/state_device.hpp"

namespace kern::runtime {

class RemapWorker {
 public:
  explicit RemapWorker(StateDevice& device);
  ~RemapWorker();  // finishes the plan in flight, then stops
  RemapWorker(const RemapWorker&) = delete;
  RemapWorker& operator=(const RemapWorker&) = delete;

  // Starts a plan; Error(Api) while another is in flight.
  void start(std::vector<VmmOp> ops, std::shared_ptr<Fence> after);
  bool busy() const;  // a plan started and not yet collected
  bool done() const;  // the plan in flight has landed (or failed)
  // Blocks until the plan in flight has landed, then hands it back (rethrowing its failure).
  void wait();
  // The landed plan is collected: the worker is free for the next one (rethrows its failure).
  void collect();

 private:
  void run();
  StateDevice& device_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<std::vector<VmmOp>> job_;
  std::shared_ptr<Fence> fence_;
  bool busy_ = false, landed_ = false, stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace kern::runtime
