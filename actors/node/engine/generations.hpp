// Generations: the generative models an engine serves token by token, one GenerationLoop each
// (generation_loop.hpp; the engine room: executor_engine.hpp; docs/design/generation.md). It makes a
// model's loop when its first request joins (its cache shape and tokenizer read from the model's
// generation section and the tokenizer bytes it carries), attaches the model's executor while the
// model is resident, and runs every attached loop's next step in turn.
//
// A loop's model leaving the device (evicting): its streams are parked (preempted, their blocks
// swapped to host memory or dropped to be recomputed, generation_batcher.hpp, then taken out of the
// loop: parked_generations.hpp) and handed to the caller, who hands them to whichever device binds
// the model next (resume, here or on another engine); the loop stays, detached and empty, until the
// model is resident again (the next join or resume attaches it). Nothing is dropped.
// The device breaking (fail_all): every stream ends with the error as its final output.
//
// Who calls: the engine's worker thread only (not thread-safe), as for the loops; stats() too (the
// engine copies what metrics read). Time is passed in. A step blocks while its model runs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "actors/engine_run.hpp"
#include "actors/model_key.hpp"
#include "actors/node/engine/device_memory.hpp"
#include "actors/node/engine/generation_loop.hpp"
#include "base/status.hpp"
#include "gpu/executor.hpp"
#include "model/model.hpp"

namespace ember::engine {

/// A generative model's loop spec from its model.json's generation section; invalid_argument for a
/// model without one ("not a generative model").
Result<GenerativeSpec> generative_spec(const gpu::Model& model);

/// One model's loop on this engine (for metrics; the counts since the loop was made).
struct GenerationModelStats {
  uint64_t streams = 0, tokens_generated = 0;
  uint64_t kv_blocks_in_use = 0, kv_blocks_swapped_bytes = 0, kv_device_bytes = 0;
  uint64_t preempted_swap = 0, preempted_recompute = 0, rejected = 0;
  uint64_t parked = 0, resumed = 0;  // streams set aside by evictions, taken back here
  KvPreemptionCosts costs;           // what its preemption choice weighs (set by a profile)
};

/// Totals over an engine's loops, and per model (for metrics).
struct GenerationsStats {
  uint64_t loops = 0, streams = 0, tokens_generated = 0;
  uint64_t kv_blocks_in_use = 0, kv_blocks_swapped_bytes = 0, kv_device_bytes = 0;
  uint64_t preempted_swap = 0, preempted_recompute = 0, rejected = 0;
  uint64_t parked = 0, resumed = 0;
  std::map<model_key, GenerationModelStats> models;
};

class Generations {
 public:
  Generations(gpu::Device& device, DeviceMemory& memory, GenerationLoopConfig config)
      : device_(device), memory_(memory), config_(std::move(config)) {}

  /// Joins the job `make` makes to resident `key`'s loop (created on first use from `model`; `ex`
  /// is its executor now). The error of a job that could not join (its request's fault: bad
  /// parameters, a prompt too long; or the model's: no generation section, an unreadable
  /// tokenizer; or a full queue): nothing was generated and its emit is never called.
  Status join(const model_key& key, const std::shared_ptr<const gpu::Model>& model, gpu::LayerExecutor& ex,
              const MakeGeneration& make, uint64_t now_us);
  /// Takes back streams `parked` of resident `key` (GenerationLoop::unpark) into its loop (created
  /// on first use, as for join). The model's error (not generative, an unreadable tokenizer): the
  /// streams stay in `parked`. How many joined.
  Result<size_t> resume(const model_key& key, const std::shared_ptr<const gpu::Model>& model, gpu::LayerExecutor& ex,
                        ParkedStreams& parked, uint64_t now_us);
  /// Resident `key`'s loop, attached to `ex` (created on first use): for a profile's request.
  Result<GenerationLoop*> loop(const model_key& key, const std::shared_ptr<const gpu::Model>& model,
                               gpu::LayerExecutor& ex);
  /// Ends request `id` of `key` at its next step (no more output). False when unknown.
  bool cancel(const model_key& key, const std::string& id);
  /// One step of each attached loop with work, in key order. True while any loop has work it can
  /// run (attached).
  bool step(uint64_t now_us);
  /// `key` leaves the device (see the header): its streams, parked; null when it had none.
  std::unique_ptr<ParkedStreams> evicting(const model_key& key);
  /// Every stream of every loop ends with `error` (`resumable`: given up, not refused).
  void fail_all(const Error& error, bool resumable = false);
  /// Requests with work left, over all loops.
  bool busy() const;
  GenerationsStats stats() const;

 private:
  gpu::Device& device_;
  DeviceMemory& memory_;
  const GenerationLoopConfig config_;
  std::map<model_key, std::unique_ptr<GenerationLoop>> loops_;
  std::map<model_key, std::pair<uint64_t, uint64_t>> parked_resumed_;  // streams, per model
};

}  // namespace ember::engine
