// DeviceMemory: one device's memory as its engine holds it (the engine room: executor_engine.hpp),
// under one lock. It owns
//   - the reservation made at start: one region for a DeviceMemoryPool of model weights, the rest of
//     the device (the workspace) left for activations and scratch. The pool takes the device memory
//     minus the workspace in whole partitions: 128 MiB (Torpor) on real devices, smaller on small
//     (test) devices so that a pool holds at least 8 of them;
//   - activation lending: runs' activations come from the workspace first; under a burst they
//     borrow whole partitions of the model pool and give them back as soon as they are free again
//     (gpu/activation_pool.hpp);
//   - the host copies of models pinned (page-locked) for swaps, once per model, and the pinned
//     staging region that pageable copies go through (binding.staging);
//   - the copy elbow measured at start (the swap-in group size);
//   - the accounting: free pool bytes as others read them, and what the device holds by use.
// Weights and Shadows are placed in the pool by name (a model key's, "#shadow/KEY/N",
// "#activations/N"); eviction only frees pool blocks.
//
// Who calls: the engine's parts. placer(), free(), bytes_of(), the activation pool and the
// accounting: any thread. pin_host(): the thread running jobs only.
//
// Lock order: the activation pool's lock, then this one (its grow and shrink callbacks take it).
// This lock is never held while calling into the activation pool, the device or another part, and
// only for pool bookkeeping (no copy, no wait).
//
// The free bytes others read (totals().pool_free) are those at the last commit (publish(), a
// free(), a lend to activations): a swap-in's blocks count once its model is published or freed.
//
// Destruction: the activation pool first (its segments go back; every run and kept value must be
// gone), then the staging region, the pinned host copies, the region. The owner destroys this
// after every model, Shadow and kept value on the device, before the device.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.hpp"
#include "gpu/activation_pool.hpp"
#include "gpu/device.hpp"
#include "gpu/device_memory_pool.hpp"
#include "gpu/executor.hpp"
#include "gpu/pinned_staging.hpp"
#include "model/model.hpp"

namespace ember {

/// An engine's memory: the pool, the workspace, and (memory_use) what the device holds by use.
struct EngineMemory {
  uint64_t pool_capacity = 0;
  uint64_t pool_free = 0;
  /// Device memory outside the pool (activations, scratch).
  uint64_t workspace = 0;
  /// What the device holds now, by use (ExecutorEngine::memory_use; zero from engine_memory()).
  struct Use {
    uint64_t capacity = 0;     // the device's memory
    uint64_t used = 0;         // allocated on the device: the pool's region whole, buffers of the workspace
    uint64_t weights = 0;      // pool bytes models hold
    uint64_t activations = 0;  // runs' buffers: the workspace's in use and the pool's lent segments
    uint64_t kept = 0;         // values kept on the device for a workflow's next steps
    uint64_t shadows = 0;      // pool bytes Shadows hold (AsyFunc; not counted in `weights`)
    uint64_t lent = 0;         // pool bytes lent to the activation pool (a share of weights' room)
  } use;
};

namespace engine {

class DeviceMemory {
 public:
  /// Reserves the pool on `device` (which outlives this), leaving `workspace_bytes` (0: an eighth
  /// of the device, at least 256 MiB, at most half) outside it; measures the copy elbow unless
  /// `group_bytes` is set; makes a pinned staging region of `staging_bytes` (0: none). Blocking,
  /// ~0.1 s. invalid_argument when the workspace leaves no room for models.
  static Result<std::unique_ptr<DeviceMemory>> reserve(gpu::Device& device, uint64_t workspace_bytes,
                                                       uint64_t group_bytes, uint64_t staging_bytes);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  uint64_t workspace() const { return workspace_; }
  uint64_t partition_bytes() const { return pool_->config().partition_bytes; }
  /// The swap-in copy group size, and the elbow probe ((size, GB/s) per size; empty when set).
  uint64_t group_bytes() const { return group_bytes_; }
  const std::vector<std::pair<uint64_t, double>>& elbow_curve() const { return elbow_curve_; }

  /// Places weights in the pool under `name` (all of a model's groups, or none). Any thread.
  gpu::WeightPlacer placer(std::string name);
  /// Frees `name`'s blocks of the pool (unknown: nothing) and commits the free bytes. Any thread.
  void free(const std::string& name);
  /// Pool bytes `name` holds.
  uint64_t bytes_of(const std::string& name) const;
  /// Commits the free bytes others read (a model was published). Any thread.
  void commit();
  /// Page-locks the model's host copy once (cudaHostRegister on CUDA): swaps then copy at full
  /// speed. The thread running jobs only.
  Status pin_host(const std::shared_ptr<const gpu::Model>& model);

  /// Runs' activation buffers (workspace first, then lent segments of the pool).
  gpu::ActivationPool& activations() { return *activations_; }
  gpu::ActivationPool::Stats activation_stats() const { return activations_->stats(); }
  /// The pinned staging region; null without one.
  gpu::PinnedStaging* staging() const { return staging_.get(); }

  /// The pool's capacity and committed free bytes, and the workspace (`use` zero).
  EngineMemory totals() const;
  /// totals() with `use` filled, from the device's own figures, `kept_bytes` (values kept on the
  /// device, other devices' moved here included) and the pool blocks of `shadows` (their names).
  EngineMemory use(uint64_t kept_bytes, const std::vector<std::string>& shadows) const;

  /// Fault injection: the next `n` placements of weights fail as out of memory.
  void fail_allocations(uint64_t n) { fail_allocations_.store(n); }

 private:
  explicit DeviceMemory(gpu::Device& device) : device_(device) {}
  Status reserve(uint64_t workspace_bytes, uint64_t group_bytes, uint64_t staging_bytes);
  /// The activation pool's growth: a segment of whole partitions of the model pool.
  Result<gpu::ActivationSegment> lend(uint64_t bytes);

  gpu::Device& device_;
  uint64_t workspace_ = 0;
  uint64_t group_bytes_ = 0;
  std::vector<std::pair<uint64_t, double>> elbow_curve_;
  std::shared_ptr<gpu::DeviceBuffer> region_;  // the pool's reservation
  std::atomic<uint64_t> fail_allocations_{0};
  mutable std::mutex mu_;
  std::optional<gpu::DeviceMemoryPool> pool_;  // guarded by mu_
  uint64_t committed_free_ = 0;                // guarded by mu_: the free bytes others read
  uint64_t segments_ = 0;                      // guarded by mu_: activation segments lent so far

  std::map<const void*, std::shared_ptr<const gpu::Model>> pinned_;  // jobs only
  std::unique_ptr<gpu::PinnedStaging> staging_;
  /// Lends from the pool (see the header): destroyed first.
  std::unique_ptr<gpu::ActivationPool> activations_;
};

}  // namespace engine
}  // namespace ember
