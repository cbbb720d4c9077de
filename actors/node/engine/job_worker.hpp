// JobWorker: an engine's serial worker and its sticky fault (the engine room: executor_engine.hpp).
// It owns one WorkQueue (base/work_queue.hpp, one worker thread) that runs the engine's jobs in the
// order they were posted (bind, unbind, infer, swap_run, release, lend, load_shadow, drop_shadow),
// and the fault state every run on the device goes through (guarded).
//
// Jobs. The gpu_executor actor posts jobs and never waits: each job's completion callback runs on
// the worker thread (or the lane a run went to) and must not block (the gpu_executor's callbacks
// encode the client's answer from the run's outputs, then continue_on in actors/offload.hpp sends
// it to the actor in a message). A run's inputs may be made there too (RunInputs: decoding). The queue is bounded (`max_queue` inference
// jobs, try_post); a full queue rejects new work at once (overflow policy: reject newest, counted by
// the caller). Bind and unbind jobs (post) are never rejected: the router posts at most one per
// model it places. An inline run takes the queue's turn on the calling thread (run_here).
//
// The sticky fault. A device fault, or a run that throws, fails the running job and every later
// run (guarded answers device_fault with the fault's words: the engine is broken and says so in
// `broken()`); the engine keeps answering, so callers always get a reply. Nothing here mends it:
// the actor replaces a broken engine with a fresh one over a reopened device (restart). Fault
// injection (fault_next_kernel) takes the path of a real fault, not the device's.
//
// Stopping (stop(), or the destructor) runs the jobs still queued (each answers), then joins the
// worker; it blocks for as long as they take, so it never runs on an actor's thread nor on this
// worker (which cannot join itself). The fault state outlives the queue: the last jobs still run
// guarded, and their owner may still reach this object while they do. After stop(), post() is
// ignored and try_post() and run_here() refuse, as a WorkQueue being destroyed does.
//
// Thread safety: every member may be called from any thread; guarded() runs `fn` on the calling
// thread (the worker, a lane or an inline run), never under this object's lock.
#pragma once

#include <atomic>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.hpp"
#include "base/work_queue.hpp"
#include "gpu/device.hpp"

namespace ember::engine {

class JobWorker {
 public:
  /// Jobs on `device` (which outlives this worker), at most `max_queue` inference jobs waiting.
  JobWorker(gpu::Device& device, size_t max_queue)
      : device_(device), queue_(std::make_unique<WorkQueue>(WorkQueueOptions{.threads = 1, .capacity = max_queue})) {}
  ~JobWorker() { stop(); }
  JobWorker(const JobWorker&) = delete;
  JobWorker& operator=(const JobWorker&) = delete;

  /// A job that is never rejected (bind, unbind, release, lend, Shadows).
  void post(WorkQueue::Job job) {
    if (queue_) queue_->post(std::move(job));
  }
  /// An inference job; false, without queueing it, when `max_queue` wait already (reject newest).
  bool try_post(WorkQueue::Job job) { return queue_ && queue_->try_post(std::move(job)); }
  /// Runs `job` on the calling thread in the queue's turn (WorkQueue::run_here).
  bool run_here(const WorkQueue::Job& job, bool wait_for_turn) {
    return queue_ && queue_->run_here(job, wait_for_turn);
  }
  /// Inference jobs waiting (not the one running).
  size_t queued() const { return queue_ ? queue_->queued() : 0; }
  /// Runs the jobs still queued, then joins the worker (see the header). Not on the worker itself;
  /// while it runs, only the jobs it runs may call this object.
  void stop() { queue_.reset(); }

  /// Runs `fn` unless the engine is broken, marking it broken when the device faults or fn throws
  /// (see the header). `fn` returns a Result or a Status.
  template <class Fn>
  auto guarded(Fn&& fn) -> decltype(fn());
  /// Broken: every later guarded run fails.
  bool broken() const;
  /// Fault injection: the next guarded run faults the device as a failed kernel would.
  void fault_next_kernel() { fault_next_kernel_.store(true); }

 private:
  /// Marks the engine broken for `why` (a later fault's words replace an earlier's); returns them.
  std::string fail(std::string why);

  gpu::Device& device_;
  std::atomic<bool> fault_next_kernel_{false};
  mutable std::mutex mu_;
  std::string broken_;  // guarded by mu_: why the engine refuses work ("" = fine)
  /// Declared last: stopped (its last jobs run, its worker joined) before the fault state goes.
  std::unique_ptr<WorkQueue> queue_;
};

template <class Fn>
auto JobWorker::guarded(Fn&& fn) -> decltype(fn()) {
  {
    std::lock_guard lock(mu_);
    if (!broken_.empty()) return device_fault(broken_);
    if (fault_next_kernel_.exchange(false)) {
      broken_ = device_.info().name + ": injected fault: a kernel faulted";
      return device_fault(broken_);
    }
  }
  try {
    auto out = fn();
    if (!device_.status().ok()) fail(device_.status().error().message());
    return out;
  } catch (const std::exception& e) {
    return device_fault(fail(device_.info().name + ": executor threw: " + e.what()));
  }
}

}  // namespace ember::engine
