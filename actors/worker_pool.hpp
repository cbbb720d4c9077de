// WorkerPool: a few threads for blocking work an actor must not do itself (fetching a model over
// the network, reading a repository from disk). Jobs run in submission order as threads free up;
// each job reports back by sending its actor a message, never by touching actor state.
//
// The queue is unbounded by design: its producers bound themselves (the model cache starts at most
// one fetch per blob, the manager one scan at a time). The destructor runs what is queued, then
// joins. Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ember {

class WorkerPool {
 public:
  explicit WorkerPool(size_t threads) {
    for (size_t i = 0; i < std::max<size_t>(1, threads); ++i) threads_.emplace_back([this] { loop(); });
  }
  ~WorkerPool() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  /// True on one of this pool's threads.
  bool on_worker_thread() const {
    for (const auto& t : threads_)
      if (t.get_id() == std::this_thread::get_id()) return true;
    return false;
  }

  void submit(std::function<void()> job) {
    {
      std::lock_guard lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;  // guarded by mu_
  bool stop_ = false;                       // guarded by mu_
  std::vector<std::thread> threads_;
};

/// Releases `owner`, which owns threads (an ExecutorEngine, a WorkerPool). A job's callback may
/// hold the last reference to the actor that owns them, so the actor's state can be destroyed on one
/// of those very threads, which cannot join itself: then the release happens on a new thread.
template <class T>
void release_off_own_thread(std::shared_ptr<T>& owner) {
  if (owner && owner->on_worker_thread()) std::thread([doomed = std::move(owner)] {}).detach();
  owner.reset();
}

}  // namespace ember
