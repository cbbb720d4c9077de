// Generations: the generative models an engine serves token by token, one GenerationLoop each
// (generation_loop.hpp; the engine room: executor_engine.hpp; docs/design/generation.md). It makes a
// model's loop when its first request joins (its cache shape and tokenizer read from the model's
// generation section and the tokenizer bytes it carries), attaches the model's executor while the
// model is resident, and runs every attached loop's next step in turn.
//
// A loop's model leaving the device (evicting): its running sequences are preempted (their blocks
// swapped to host memory or dropped, to be recomputed: generation_batcher.hpp) and the loop waits,
// detached, until the model is resident again (the next join attaches it); nothing is dropped.
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

/// Totals over an engine's loops (for metrics).
struct GenerationsStats {
  uint64_t loops = 0, streams = 0, tokens_generated = 0;
  uint64_t kv_blocks_in_use = 0, kv_blocks_swapped_bytes = 0, kv_device_bytes = 0;
  uint64_t preempted_swap = 0, preempted_recompute = 0, rejected = 0;
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
  /// Ends request `id` of `key` at its next step (no more output). False when unknown.
  bool cancel(const model_key& key, const std::string& id);
  /// One step of each attached loop with work, in key order. True while any loop has work it can
  /// run (attached).
  bool step(uint64_t now_us);
  /// `key` leaves the device (see the header).
  void evicting(const model_key& key);
  /// Every stream of every loop ends with `error`.
  void fail_all(const Error& error);
  /// Requests with work left, over all loops.
  bool busy() const;
  GenerationsStats stats() const;

 private:
  gpu::Device& device_;
  DeviceMemory& memory_;
  const GenerationLoopConfig config_;
  std::map<model_key, std::unique_ptr<GenerationLoop>> loops_;
};

}  // namespace ember::engine
