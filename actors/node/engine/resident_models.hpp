// ResidentModels: the models resident on one device (one gpu::LayerExecutor each, its weights in
// the engine's model pool) and what other threads may know of them (the engine room:
// executor_engine.hpp).
//
// Two views. The executors themselves (find, add, erase) belong to the thread running the engine's
// jobs: its worker, or an inline run in the queue's turn, which only reads them; runs in lanes use
// an executor the worker looked up for them, and the worker drains the lanes before it erases one.
// The published view (publish, unpublish; holds, batches, segments, bound) is what any thread may
// ask: a model is published once its weights are all on the device and unpublished when it goes,
// so a device-to-device copy never reads half-copied or freed weights while the router's lock
// holds the model resident (Torpor §4.4). Models are addressed through pool handles: a model
// swapped out and in again may land elsewhere.
//
// Lock: one, over the published view only, never held while calling out.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "actors/model_key.hpp"
#include "base/status.hpp"
#include "gpu/executor.hpp"
#include "model/model.hpp"

namespace ember::engine {

/// A model resident on the device.
struct Resident {
  std::shared_ptr<const gpu::Model> model;
  std::unique_ptr<gpu::LayerExecutor> ex;
  /// Views of `ex` a split runs around and inside a Shadow's range, by (first, last) layer.
  /// Declared after `ex`: destroyed first, their streams drained before ex's weights go.
  std::map<std::pair<uint32_t, uint32_t>, std::unique_ptr<gpu::LayerExecutor>> views;

  /// A view of `ex` over `range`, made on first use (the thread running jobs only).
  Result<gpu::LayerExecutor*> view(gpu::LayerRange range);
};

class ResidentModels {
 public:
  // -- the executors: the thread running jobs only --------------------------------------------
  /// The resident model `key`, or null.
  Resident* find(const model_key& key);
  bool contains(const model_key& key) const { return models_.count(key) > 0; }
  Resident& add(const model_key& key, Resident resident);
  /// Drops the executor (it drains its streams before its blocks go back; the caller frees them).
  void erase(const model_key& key) { models_.erase(key); }
  /// Some resident model's key, nullopt when none is.
  std::optional<model_key> any() const;
  bool empty() const { return models_.empty(); }
  void clear() { models_.clear(); }

  // -- the published view: any thread ---------------------------------------------------------
  /// `key`'s weights are all on the device, where `ex` says.
  void publish(const model_key& key, const gpu::LayerExecutor& ex);
  void unpublish(const model_key& key);
  /// Resident now (a hint: the answer may change at once).
  bool holds(const model_key& key) const;
  /// Resident and batching dynamically (model.json's serving).
  bool batches(const model_key& key) const;
  /// Where a resident model's weights live; nullopt when not resident.
  std::optional<std::vector<gpu::WeightSegment>> segments(const model_key& key) const;
  std::vector<model_key> bound() const;

 private:
  std::map<model_key, Resident> models_;  // the thread running jobs only
  mutable std::mutex mu_;
  std::map<model_key, std::vector<gpu::WeightSegment>> published_;  // guarded by mu_
  std::set<model_key> batching_;                                    // guarded by mu_: published, batching
};

}  // namespace ember::engine
