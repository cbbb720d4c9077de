// ShadowHost: the Shadows one device holds for Bodies elsewhere (AsyFunc; gpu/shadow_split.hpp), and
// the Body's side of a split run (the engine room: executor_engine.hpp).
//
// A Shadow is a range of a model's layers held on this device (load), its weights copied from the
// host copy into the model pool beside whole models under a name of its own ("#shadow/KEY/N"),
// ready to share batches with a Body of the same model on another device of the node. One Shadow a
// key: a load replaces the one held, drop lets it go. A Body's engine reaches the Shadow through
// this engine's gate (SwapRun::shadow) and holds it for its run (held()): a Shadow replaced or
// dropped meanwhile finishes that run first, and its pool memory goes back when the last holder lets
// go. A Shadow gone (dropped, or its device restarted) leaves its rows to the Body, which says so.
//
// Who calls: load() and drop() from the engine's jobs (its worker); held(), pool_names() from any
// thread (a Body's engine, the metrics); run_body_split() from the Body's worker (a split run never goes
// to a lane). Lock: one, over the map, never held while copying or running.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/model_key.hpp"
#include "actors/node/engine/device_memory.hpp"
#include "actors/node/engine/job_worker.hpp"
#include "actors/node/engine/resident_models.hpp"
#include "base/status.hpp"
#include "gpu/executor.hpp"
#include "gpu/shadow_split.hpp"
#include "model/host_tensor.hpp"

namespace ember::engine {

class ShadowHost {
 public:
  /// A Shadow held here: its executor, whose pool memory goes back when the last holder lets go.
  struct Held {
    DeviceMemory* memory = nullptr;
    std::string pool_name;
    std::unique_ptr<gpu::LayerExecutor> ex;
    ~Held();
  };

  /// Shadows on `device`, in `memory`'s pool, runs guarded by `worker` (all outlive this).
  ShadowHost(gpu::Device& device, DeviceMemory& memory, JobWorker& worker)
      : device_(device), memory_(memory), worker_(worker) {}

  /// Holds layers `range` of `key` from the host copy `model` (see the header); its weights' bytes.
  /// Errors: the pool's (out_of_memory), the range's (invalid_argument), a broken engine's.
  Result<uint64_t> load(const model_key& key, const std::shared_ptr<const gpu::Model>& model, gpu::LayerRange range);
  /// Lets the Shadow of `key` go; false when none was held.
  bool drop(const model_key& key);
  /// The Shadow of `key` held here, or null.
  std::shared_ptr<Held> held(const model_key& key) const;
  /// The pool names of the Shadows held (their bytes: DeviceMemory::bytes_of).
  std::vector<std::string> pool_names() const;
  /// Lets every Shadow go (the engine's destructor: no split elsewhere holds one any more).
  void clear();

 private:
  gpu::Device& device_;
  DeviceMemory& memory_;
  JobWorker& worker_;
  mutable std::mutex mu_;
  std::map<model_key, std::shared_ptr<Held>> shadows_;  // guarded by mu_
  uint64_t serial_ = 0;                                 // jobs only
};

/// A run of resident `body` (this device) with `share` of its rows on `shadow` (another device's,
/// held for the run; null when gone: the Body alone, said in `st`). Uploads and downloads go on
/// `stream` (through `staging` when set). A Body whose weights are still arriving, or a batch too
/// small to split, runs alone too. The caller runs it guarded.
Result<std::vector<gpu::HostTensor>> run_body_split(Resident& body, const model_key& key,
                                                    const std::vector<gpu::HostTensor>& inputs,
                                                    const ShadowHost::Held* shadow, double share, gpu::SplitStats& st,
                                                    gpu::Stream& stream, gpu::PinnedStaging* staging);

}  // namespace ember::engine
