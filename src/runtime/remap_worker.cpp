#include "runtime/remap_worker.hpp"

#include "kern/base/error.hpp"

namespace kern::runtime {

RemapWorker::RemapWorker(StateDevice& device) : device_(device), thread_([this] { run(); }) {}

RemapWorker::~RemapWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void RemapWorker::start(std::vector<VmmOp> ops, std::shared_ptr<Fence> after) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (busy_) fail(ErrorKind::Api, "remap worker: a plan is already in flight");
    job_ = std::move(ops);
    fence_ = std::move(after);
    busy_ = true;
    landed_ = false;
    error_ = nullptr;
  }
  cv_.notify_all();
}

bool RemapWorker::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_;
}

bool RemapWorker::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_ && landed_;
}

void RemapWorker::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !busy_ || landed_; });
}

void RemapWorker::collect() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!busy_ || !landed_) fail(ErrorKind::Api, "remap worker: no landed plan to collect");
  busy_ = false;
  landed_ = false;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void RemapWorker::run() {
  for (;;) {
    std::vector<VmmOp> ops;
    std::shared_ptr<Fence> fence;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || job_.has_value(); });
      if (!job_) return;  // stopping with nothing to do
      ops = std::move(*job_);
      job_.reset();
      fence = std::move(fence_);
    }
    std::exception_ptr error;
    try {
      if (fence) fence->wait();
      for (const VmmOp& op : ops) device_.vmm(op);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      landed_ = true;
      error_ = error;
    }
    cv_.notify_all();
  }
}

}  // namespace kern::runtime
