// Lanes: concurrent runs on one device (binding.streams > 1; StreamBox's functions as streams of
// one runtime), for its engine (the engine room: executor_engine.hpp).
//
// The engine's worker hands each run of a resident model (an infer job, or a swap_run that needs no
// copy, eviction or profile) to one of `streams` lane threads (beside) and goes on with the next
// job, so runs of different models execute at once, each on its model's own stream (its
// LayerExecutor's), with its hand-off copies on a stream from this pool (take_stream: created once,
// reused). One model's runs keep their order: they form a strand, one run at a time, each next run
// queued behind the lanes' other work (round robin between models). Every job that changes what is
// resident, or where (bind, unbind, a swap-in, an eviction, a profile), first waits until no run is
// in a lane (drain): a model's weights never go while a run reads them. An inline run leaves a
// model with a run in a lane to its strand (in_lane).
//
// Who calls: beside() and drain() from the engine's worker only; the rest from any thread. A run
// handed on must not block on this object (it may take and give streams).
//
// Destruction joins the lane threads, running the runs still queued; the owner drains first (the
// engine: after its worker, before its models go).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "actors/model_key.hpp"
#include "base/work_queue.hpp"
#include "gpu/device.hpp"

namespace ember::engine {

class Lanes {
 public:
  /// `streams` lane threads for runs on `device` (which outlives this).
  Lanes(gpu::Device& device, uint32_t streams);
  ~Lanes();
  Lanes(const Lanes&) = delete;
  Lanes& operator=(const Lanes&) = delete;

  /// Runs `run` in a lane, after the runs of `key` handed on before it (its strand). Worker only.
  void beside(const model_key& key, std::function<void()> run);
  /// Waits until no run is in a lane or waits for one. Worker only (and the engine's destructor).
  void drain();
  /// `key` has a run in a lane, or waiting for one.
  bool in_lane(const model_key& key) const;

  /// A stream of the device for a run's hand-off copies: a free one, else a new one.
  std::unique_ptr<gpu::Stream> take_stream();
  /// Gives a stream back for the next run (it has no copy pending).
  void give_stream(std::unique_ptr<gpu::Stream> stream);

  /// Runs executing in lanes now, and the most seen at once so far.
  uint32_t running() const;
  uint32_t peak() const;
  /// Runs waiting behind their strand's run.
  size_t waiting() const;

 private:
  /// Runs one lane task: `run`, then hands the strand's next run to the back of the lanes' queue.
  void step(const model_key& key, const std::function<void()>& run);

  gpu::Device& device_;
  mutable std::mutex mu_;
  std::condition_variable idle_;  // notified when `strands_` empties
  /// Models with a run in a lane, each with the runs waiting behind it (its strand).
  std::map<model_key, std::deque<std::function<void()>>> strands_;  // guarded by mu_
  size_t waiting_ = 0;                                              // guarded by mu_: runs in the deques
  uint32_t active_ = 0, peak_ = 0;                                  // guarded by mu_
  std::vector<std::unique_ptr<gpu::Stream>> streams_;               // guarded by mu_: free hand-off streams
  /// Declared last: joined first in the destructor, while the state its tasks use still lives.
  std::unique_ptr<WorkQueue> threads_;
};

}  // namespace ember::engine
