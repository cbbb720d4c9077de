// ExecutorEngine: the blocking half of a gpu_executor. It owns one device, the models bound to it
// (one gpu::LayerExecutor each) and one worker thread that runs jobs in order: bind, unbind, infer.
//
// The gpu_executor actor posts jobs and never waits: each job's completion callback runs on the
// worker thread and must not block (the actor's callback just sends itself a message). The queue
// is bounded (`max_queue` inference jobs); a full queue rejects new work at once with an
// `unavailable` Error (overflow policy: reject newest, counted by the caller). Bind and unbind jobs
// are never rejected. A device fault fails the running job and every later one (the device is
// sticky-faulted); the engine keeps answering, so callers always get a reply.
//
// Thread safety: every public member may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actors/messages.hpp"
#include "config/status.hpp"
#include "gpu/device.hpp"
#include "gpu/executor.hpp"

namespace ember {

class ExecutorEngine {
 public:
  struct InferResult {
    Result<std::vector<gpu::HostTensor>> outputs = internal_error("not run");
    uint64_t queue_us = 0;
    uint64_t compute_us = 0;
  };

  ExecutorEngine(std::unique_ptr<gpu::Device> device, size_t max_queue);
  /// Runs the jobs already queued (each still answers), then joins the worker.
  ~ExecutorEngine();
  ExecutorEngine(const ExecutorEngine&) = delete;
  ExecutorEngine& operator=(const ExecutorEngine&) = delete;

  const gpu::DeviceInfo& device_info() const { return device_->info(); }
  gpu::MemoryInfo memory() const { return device_->memory(); }
  Status device_status() const { return device_->status(); }

  /// Uploads the model's weights (all layers) to the device. Binding a bound key again is OK.
  void bind(const model_key& key, std::shared_ptr<const gpu::Model> model, std::function<void(Status)> done);
  /// Frees the model's device memory after the jobs queued before it ran.
  void unbind(const model_key& key, std::function<void()> done);
  /// Runs the model on host tensors; `done` gets the outputs (named as the model names them).
  /// Returns false, without calling `done`, when the queue is full.
  bool infer(const model_key& key, std::vector<gpu::HostTensor> inputs, std::function<void(InferResult)> done);

  size_t queued() const;
  /// True on the engine's worker thread (where completion callbacks run).
  bool on_worker_thread() const { return std::this_thread::get_id() == worker_.get_id(); }
  std::vector<model_key> bound() const;

 private:
  struct Job {
    std::function<void()> run;
    bool counts = false;  // an inference job, subject to max_queue
  };
  void post(Job job);
  void loop();

  std::unique_ptr<gpu::Device> device_;
  const size_t max_queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;                                             // guarded by mu_
  size_t queued_inference_ = 0;                                      // guarded by mu_
  bool stop_ = false;                                                // guarded by mu_
  std::map<model_key, std::unique_ptr<gpu::LayerExecutor>> models_;  // worker thread only
  std::vector<model_key> bound_;  // guarded by mu_: a copy of models_' keys for other threads
  std::thread worker_;
};

}  // namespace ember
