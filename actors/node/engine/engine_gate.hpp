// EngineGate and NodeEngines: the ways onto an engine for threads that do not own it (the engine
// room: executor_engine.hpp).
//
// EngineGate. A front-end thread runs a warm request itself through the gate of a device's engine
// (actors/node/inline_runs.hpp: run_here, run_workflow_here), in the engine queue's order when the
// device is idle: no thread is woken for it. Such a run only reads the resident models and runs
// one, as an infer job would; every change of residency stays a job of the engine's worker. Other
// engines of the node reach this one the same way: a value one of them kept here (KeptValues), a
// Shadow held here for a Body there (ShadowHost). The gate is shared with the engine without owning
// it; the engine's destructor closes it first, waiting for every call inside to return, and from
// then on every call is refused (nullopt, false, or an empty Entry). A call inside keeps the engine
// alive, so whoever enters must not wait for the engine's own destruction meanwhile.
//
// NodeEngines. The gates of one node's engines, by device ordinal (EngineOptions::node): a value
// kept for a workflow's next step that must make room moves to the least pressed of the others
// before host memory (StreamBox's rules 2 and 3). Each engine enters itself at creation; a
// restarted device's replacement takes the place of the engine before it.
//
// Thread-safe, both. Lock: each holds its own, never while calling an engine.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "actors/engine_run.hpp"
#include "actors/model_key.hpp"
#include "actors/node/engine/device_memory.hpp"
#include "actors/node/engine/device_workflow.hpp"
#include "actors/node/engine/generations.hpp"
#include "config/workflow_config.hpp"
#include "placement/workflow_plan.hpp"

namespace ember {

class ExecutorEngine;

/// What an inline run reads, asked for only once the run has the device's turn and the model is
/// there to run (so that a run that does not happen decodes nothing): the inputs, or nullptr when
/// they do not decode (the run declines; the router's way answers the error).
using InlineInputs = std::function<const std::vector<gpu::HostTensor>*()>;

class EngineGate {
 public:
  explicit EngineGate(ExecutorEngine* engine, std::string device) : engine_(engine), device_(std::move(device)) {}

  /// Inside the gate for as long as it lives: the engine cannot go meanwhile. Empty (false) when
  /// the gate is closed.
  class Entry {
   public:
    explicit Entry(EngineGate* gate);
    ~Entry();
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;
    explicit operator bool() const { return engine_ != nullptr; }
    ExecutorEngine* operator->() const { return engine_; }
    ExecutorEngine& operator*() const { return *engine_; }

   private:
    EngineGate* gate_;
    ExecutorEngine* engine_;
  };

  /// ExecutorEngine::run_here; nullopt too once the engine is going.
  std::optional<InferResult> run_here(const model_key& key, const InlineInputs& inputs);
  std::optional<InferResult> run_here(const model_key& key, const std::vector<gpu::HostTensor>& inputs) {
    return run_here(key, [&] { return &inputs; });
  }
  /// ExecutorEngine::run_workflow_here; nullopt too once the engine is going.
  std::optional<Result<std::vector<gpu::HostTensor>>> run_workflow_here(const WorkflowConfig& config,
                                                                        const WorkflowPlan& plan,
                                                                        const std::vector<model_key>& models,
                                                                        const InlineInputs& inputs,
                                                                        gpu::DeviceWorkflowStats* stats);
  /// ExecutorEngine::holds; false once the engine is going.
  bool holds(const model_key& key);
  /// ExecutorEngine::memory_use; nullopt once the engine is going.
  std::optional<EngineMemory> memory_use();
  /// ExecutorEngine::generation_stats (its worker's last copy); nullopt once the engine is going.
  std::optional<engine::GenerationsStats> generation_stats();
  bool open() const;
  const std::string& device() const { return device_; }

 private:
  friend class ExecutorEngine;
  /// Refuses every later call and waits for the calls inside to return.
  void close();
  /// The engine, kept alive until leave(); null once closed.
  ExecutorEngine* enter();
  void leave();

  mutable std::mutex mu_;
  std::condition_variable left_;
  ExecutorEngine* engine_;  // guarded by mu_: null once closed
  uint32_t inside_ = 0;     // guarded by mu_
  const std::string device_;
};

class NodeEngines {
 public:
  /// Device `ordinal`'s engine is behind `gate` from now on (replacing the one before).
  void attach(uint32_t ordinal, std::shared_ptr<EngineGate> gate);
  /// Every engine's gate but `self`, by ordinal.
  std::vector<std::shared_ptr<EngineGate>> others(const EngineGate* self) const;

 private:
  mutable std::mutex mu_;
  std::map<uint32_t, std::shared_ptr<EngineGate>> gates_;  // guarded by mu_
};

}  // namespace ember
