#include "base/work_queue.hpp"

#include <algorithm>

namespace ember {

WorkQueue::WorkQueue(WorkQueueOptions options) : options_(std::move(options)) {
  for (size_t i = 0; i < options_.threads; ++i) threads_.emplace_back([this] { loop(); });
}

WorkQueue::~WorkQueue() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

bool WorkQueue::admit(Job& job, bool bounded) {
  if (threads_.empty()) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return false;
    }
    job();  // inline: no thread of our own
    return true;
  }
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    if (bounded) {
      if (bounded_ >= options_.capacity) {
        ++rejected_;
        return false;
      }
      ++bounded_;
    }
    jobs_.push_back({std::move(job), bounded});
  }
  cv_.notify_one();
  return true;
}

bool WorkQueue::try_post(Job job) { return admit(job, true); }

void WorkQueue::post(Job job) { (void)admit(job, false); }

size_t WorkQueue::queued() const {
  std::lock_guard lock(mu_);
  return bounded_;
}

uint64_t WorkQueue::rejected() const {
  std::lock_guard lock(mu_);
  return rejected_;
}

bool WorkQueue::on_worker_thread() const {
  const auto self = std::this_thread::get_id();
  return std::any_of(threads_.begin(), threads_.end(), [&](const std::thread& t) { return t.get_id() == self; });
}

bool WorkQueue::run_here(const Job& job, bool wait_for_turn) {
  if (threads_.empty()) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return false;
    }
    job();
    return true;
  }
  if (options_.threads != 1) return false;
  {
    std::unique_lock lock(mu_);
    for (bool waited = false;; waited = true) {
      if (stopping_ || worker_busy_ || !jobs_.empty()) {
        lock.unlock();
        if (waited) turn_cv_.notify_one();  // the wake-up this caller took is passed on
        return false;
      }
      if (!here_busy_) break;
      if (!wait_for_turn) return false;
      turn_cv_.wait(lock);
    }
    here_busy_ = true;
  }
  struct Release {
    WorkQueue& q;
    ~Release() {
      bool queued = false;
      {
        std::lock_guard lock(q.mu_);
        q.here_busy_ = false;
        queued = !q.jobs_.empty();
      }
      if (queued) q.cv_.notify_all();  // the worker (it waits for the turn too)
      q.turn_cv_.notify_one();
    }
  } release{*this};
  job();
  return true;
}

void WorkQueue::loop() {
  if (options_.on_thread_start) options_.on_thread_start();
  const bool serial = options_.threads == 1;
  for (;;) {
    Entry entry;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return (stopping_ && jobs_.empty()) || (!jobs_.empty() && !here_busy_); });
      if (jobs_.empty()) return;  // stopping, and everything queued has run
      entry = std::move(jobs_.front());
      jobs_.pop_front();
      if (entry.bounded) --bounded_;
      if (serial) worker_busy_ = true;
    }
    entry.job();
    if (serial) {
      std::lock_guard lock(mu_);
      worker_busy_ = false;
    }
  }
}

}  // namespace ember
