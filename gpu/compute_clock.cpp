#include "gpu/compute_clock.hpp"

#include <time.h>

#include <algorithm>

namespace ember::gpu {

ComputeClock::Clock::time_point ComputeClock::book(Clock::time_point started, Clock::duration cpu) {
  if (!enabled()) return Clock::now();
  const auto busy = std::chrono::duration_cast<Clock::duration>(cpu * dilation_);
  std::lock_guard lock(mu_);
  busy_until_ = std::max(busy_until_, started) + busy;
  booked_ += busy;
  return busy_until_;
}

ComputeClock::Clock::duration ComputeClock::booked() const {
  std::lock_guard lock(mu_);
  return booked_;
}

ComputeClock::Clock::duration thread_cpu_time() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::duration_cast<ComputeClock::Clock::duration>(std::chrono::seconds(ts.tv_sec) +
                                                                   std::chrono::nanoseconds(ts.tv_nsec));
}

}  // namespace ember::gpu
