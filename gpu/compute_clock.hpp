// ComputeClock: the compute engine of a simulated device as a timeline, when the device is
// configured with a compute dilation (devices.compute_dilation = k > 0).
//
// Why: a SimDevice computes on host threads. A host with fewer cores than emulated devices (this
// project's 2-core machines emulate 4-device nodes) makes the emulated devices slow each other
// down whenever two compute at once, which no GPU does to another, and host noise (preemption,
// a hypervisor's steal) lands directly in request latencies. With a dilation, a kernel occupies its
// device for k times the host CPU time its computation took (the calling thread's CPU time, which
// waiting for a core does not advance): each device then behaves as an independent processor 1/k
// as fast as one host core, as long as the host has cores to spare for that (k at least about
// devices / cores, plus room for the copy engines). Copies are paced by LinkPacer as before; set
// their bandwidths to the same scale (for a device k times slower than a core, PCIe k times slower
// than the rate that is meant) so that copy/compute ratios stay those of the hardware emulated.
//
// Model: kernel i, which started computing on the host at s_i and used c_i of CPU time, occupies
// the device over [max(s_i, busy_until), + c_i * k) (kernels of one device, whichever stream
// launched them, run one after another, as they share the device's SMs). A stream makes what it
// does observable (events, callbacks, copies) only once the modelled end of its kernels has passed;
// between kernels it does not sleep, so the host computes ahead and sleeping costs one timer
// overshoot per observable point, not one per kernel.
//
// Guarantee (tests rely on it): with k > 0, work that follows a kernel on its stream is never
// observed before the kernel's start plus k times its CPU time. No upper bound: a host that cannot
// keep up makes kernels slower than the model, never faster.
//
// Thread-safe: book() may be called from any thread (every stream of the device). Never sleeps.
#pragma once

#include <chrono>
#include <mutex>

namespace ember::gpu {

class ComputeClock {
 public:
  using Clock = std::chrono::steady_clock;

  /// `dilation` <= 0 disables the model: book() returns the wall time the kernel ended at.
  explicit ComputeClock(double dilation) : dilation_(dilation) {}
  ComputeClock(const ComputeClock&) = delete;
  ComputeClock& operator=(const ComputeClock&) = delete;

  bool enabled() const { return dilation_ > 0; }
  double dilation() const { return dilation_; }

  /// Books a kernel that started on the host at `started` and used `cpu` of CPU time; returns the
  /// modelled end (the wall time now when disabled).
  Clock::time_point book(Clock::time_point started, Clock::duration cpu);

  /// Device time booked so far: the sum of k * cpu over every kernel (zero when disabled).
  Clock::duration booked() const;

 private:
  const double dilation_;
  mutable std::mutex mu_;
  Clock::time_point busy_until_{};  // guarded by mu_
  Clock::duration booked_{};        // guarded by mu_
};

/// CPU time the calling thread has used so far (CLOCK_THREAD_CPUTIME_ID).
ComputeClock::Clock::duration thread_cpu_time();

}  // namespace ember::gpu
