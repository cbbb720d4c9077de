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

void WorkQueue::loop() {
  if (options_.on_thread_start) options_.on_thread_start();
  for (;;) {
    Entry entry;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, and everything queued has run
      entry = std::move(jobs_.front());
      jobs_.pop_front();
      if (entry.bounded) --bounded_;
    }
    entry.job();
  }
}

}  // namespace ember
