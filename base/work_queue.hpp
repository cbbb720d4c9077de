// WorkQueue: jobs run in submission order by a fixed set of threads the queue owns and joins (one
// thread: a serial queue). It is the one way Ember runs blocking work: an executor engine's device
// jobs, a SimDevice stream's operations, a node's fetches and multicast hops, a manager's
// repository scans. Actors never call a blocking function themselves: they post here through
// actors/offload.hpp and get the result back as a message.
//
// Bound and overflow policy. try_post() admits a job only while fewer than `capacity` jobs posted
// with it wait (reject newest: it returns false and the caller answers "queue full" and counts it).
// post() always admits: it is for work whose producer bounds itself (a device stream, which CUDA
// runs in launch order; bind and unbind jobs of an engine, one per model the router placed; one
// fetch per blob of a cache); its jobs do not count towards the bound.
//
// Taking the turn (serial queues only): run_here() runs a job on the calling thread instead of
// the queue's own, when the queue would have started it at once (nothing queued, and the worker
// idle). It keeps the queue's order: the worker starts nothing while such a job runs, and a job
// posted meanwhile runs after it. Callers that find the turn held by another run_here() wait for it
// (they take turns); callers that find the worker busy or jobs queued are refused at once (false)
// and post instead. A front-end thread runs a warm request on an idle device this way, without
// waking the device's worker (actors/node/inline_runs.hpp).
//
// Lifecycle: threads start in the constructor (with threads = 0 the queue runs every job inline on
// the posting thread, at once: deterministic actor tests use that); the destructor stops
// admitting, runs every job still queued, then joins. The destructor must not run on one of the
// queue's own threads (it cannot join itself); an owner that may be released there hands the
// queue to another thread first. Every member is thread-safe; nothing here throws but what a job
// throws, which terminates the program as in any thread.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ember {

struct WorkQueueOptions {
  /// Threads running jobs; 1 makes a serial queue; 0 runs each job inline, inside post().
  size_t threads = 1;
  /// try_post() jobs waiting at most (not counting those running); beyond it try_post() refuses.
  size_t capacity = 1024;
  /// Runs first on each thread (thread-local setup, such as OpenMP's thread count).
  std::function<void()> on_thread_start;
};

class WorkQueue {
 public:
  using Job = std::function<void()>;

  explicit WorkQueue(WorkQueueOptions options = {});
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  /// Queues `job` unless `capacity` try_post() jobs wait already (then false: the caller refuses
  /// the work and counts it). Also false once the destructor started.
  bool try_post(Job job);
  /// Queues `job` whatever the bound (see the header). Ignored once the destructor started.
  void post(Job job);

  /// Runs `job` on this thread, in the queue's order, if the queue would start it now; false, without
  /// running it, when a job is queued, the worker runs one, or the queue is stopping (see the
  /// header). Waits while another run_here() job runs, unless `wait_for_turn` is false (then false
  /// at once). Only for serial queues (threads = 1; a queue with no threads runs it inline as post()
  /// would); false on a queue with several threads.
  bool run_here(const Job& job, bool wait_for_turn = true);

  /// try_post() jobs waiting now (not those running).
  size_t queued() const;
  /// try_post() jobs refused so far.
  uint64_t rejected() const;
  /// True on one of this queue's threads.
  bool on_worker_thread() const;

 private:
  struct Entry {
    Job job;
    bool bounded = false;
  };
  bool admit(Job& job, bool bounded);
  void loop();

  const WorkQueueOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Entry> jobs_;  // guarded by mu_
  size_t bounded_ = 0;      // guarded by mu_: try_post() jobs in jobs_
  uint64_t rejected_ = 0;   // guarded by mu_
  bool stopping_ = false;   // guarded by mu_
  bool worker_busy_ = false;         // guarded by mu_: the worker runs a job
  bool here_busy_ = false;           // guarded by mu_: a run_here() job runs
  std::condition_variable turn_cv_;  // run_here() callers waiting for here_busy_ to clear
  std::vector<std::thread> threads_;
};

}  // namespace ember
