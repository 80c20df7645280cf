// Timing on the device: events that record a point on a stream and the GPU time between two.
// (kern::cuda::Event is the cheap, timing-disabled kind the runtime orders copies with.)
#pragma once

#include "kern/cuda/cuda.hpp"

namespace kern::cuda {

class TimingEvent {
 public:
  TimingEvent();  // cuEventCreate with timing enabled
  ~TimingEvent();
  TimingEvent(const TimingEvent&) = delete;
  TimingEvent& operator=(const TimingEvent&) = delete;
  TimingEvent(TimingEvent&& o) noexcept;
  TimingEvent& operator=(TimingEvent&& o) noexcept;

  void record(const Stream& s);
  void synchronize() const;  // waits for the recorded point (Api error when never recorded)
  bool recorded() const { return recorded_; }

 private:
  friend float elapsed_ms(const TimingEvent& start, const TimingEvent& end);
  void* e_ = nullptr;
  bool recorded_ = false;
};

// GPU milliseconds between two recorded events (waits for `end`). Api error when either was
// never recorded; Cuda error from the driver otherwise.
float elapsed_ms(const TimingEvent& start, const TimingEvent& end);

}  // namespace kern::cuda
