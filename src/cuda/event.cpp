// Timing events (cuEventCreate with timing, cuEventElapsedTime).
#include "kern/cuda/event.hpp"

#include <utility>

#include "cuda/driver_api.hpp"
#include "kern/base/error.hpp"

namespace kern::cuda {
using detail::api;

TimingEvent::TimingEvent() : e_(detail::create_event(CU_EVENT_DEFAULT)) {}

TimingEvent::~TimingEvent() { detail::destroy_event(e_); }

TimingEvent::TimingEvent(TimingEvent&& o) noexcept
    : e_(std::exchange(o.e_, nullptr)), recorded_(std::exchange(o.recorded_, false)) {}

TimingEvent& TimingEvent::operator=(TimingEvent&& o) noexcept {
  if (this != &o) {
    detail::destroy_event(e_);
    e_ = std::exchange(o.e_, nullptr);
    recorded_ = std::exchange(o.recorded_, false);
  }
  return *this;
}

void TimingEvent::record(const Stream& s) {
  KERN_CU(cuEventRecord, static_cast<CUevent>(e_), detail::raw(s));
  recorded_ = true;
}

void TimingEvent::synchronize() const {
  if (!recorded_) fail(ErrorKind::Api, "timing event synchronized before it was recorded");
  KERN_CU(cuEventSynchronize, static_cast<CUevent>(e_));
}

float elapsed_ms(const TimingEvent& start, const TimingEvent& end) {
  if (!start.recorded_ || !end.recorded_) fail(ErrorKind::Api, "elapsed_ms: both events must be recorded first");
  end.synchronize();
  float ms = 0;
  KERN_CU(cuEventElapsedTime, &ms, static_cast<CUevent>(start.e_), static_cast<CUevent>(end.e_));
  return ms;
}

}  // namespace kern::cuda
