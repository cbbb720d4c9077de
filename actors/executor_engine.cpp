#include "actors/executor_engine.hpp"

#include <algorithm>
#include <chrono>

namespace ember {

namespace {
using Clock = std::chrono::steady_clock;
uint64_t us_between(Clock::time_point a, Clock::time_point b) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(b - a).count());
}
}  // namespace

ExecutorEngine::ExecutorEngine(std::unique_ptr<gpu::Device> device, size_t max_queue)
    : device_(std::move(device)), max_queue_(max_queue) {
  worker_ = std::thread([this] { loop(); });
}

ExecutorEngine::~ExecutorEngine() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
  models_.clear();  // before the device goes
}

void ExecutorEngine::post(Job job) {
  {
    std::lock_guard lock(mu_);
    if (job.counts) ++queued_inference_;
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void ExecutorEngine::loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (stop_) break;
      job = std::move(jobs_.front());
      jobs_.pop_front();
      if (job.counts) --queued_inference_;
    }
    job.run();
  }
  // Shutting down: the remaining jobs still get an answer (their callbacks see the stop).
  std::deque<Job> rest;
  {
    std::lock_guard lock(mu_);
    rest.swap(jobs_);
  }
  for (auto& job : rest) job.run();
}

void ExecutorEngine::bind(const model_key& key, std::shared_ptr<const gpu::Model> model,
                          std::function<void(Status)> done) {
  post({[this, key, model = std::move(model), done = std::move(done)] {
          if (models_.count(key)) return done(Status::OK());
          auto ex = gpu::LayerExecutor::create(*device_, model, {0, model->num_layers()});
          if (!ex.ok()) return done(ex.error());
          models_[key] = std::move(*ex);
          {
            std::lock_guard lock(mu_);
            bound_.push_back(key);
          }
          done(Status::OK());
        },
        false});
}

void ExecutorEngine::unbind(const model_key& key, std::function<void()> done) {
  post({[this, key, done = std::move(done)] {
          models_.erase(key);
          {
            std::lock_guard lock(mu_);
            bound_.erase(std::remove(bound_.begin(), bound_.end(), key), bound_.end());
          }
          done();
        },
        false});
}

bool ExecutorEngine::infer(const model_key& key, std::vector<gpu::HostTensor> inputs,
                           std::function<void(InferResult)> done) {
  {
    std::lock_guard lock(mu_);
    if (queued_inference_ >= max_queue_ || stop_) return false;
  }
  const auto enqueued = Clock::now();
  post({[this, key, enqueued, inputs = std::move(inputs), done = std::move(done)] {
          InferResult r;
          const auto start = Clock::now();
          r.queue_us = us_between(enqueued, start);
          auto it = models_.find(key);
          if (it == models_.end()) {
            r.outputs = unavailable("model " + key.to_string() + " is not bound to " + device_->info().name);
          } else {
            r.outputs = it->second->run_host(inputs);
          }
          r.compute_us = us_between(start, Clock::now());
          done(std::move(r));
        },
        true});
  return true;
}

size_t ExecutorEngine::queued() const {
  std::lock_guard lock(mu_);
  return queued_inference_;
}

std::vector<model_key> ExecutorEngine::bound() const {
  std::lock_guard lock(mu_);
  return bound_;
}

}  // namespace ember
