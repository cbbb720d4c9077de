// InlineRuns: one node's InlineRunner (actors/inline_runner.hpp). A front-end thread of a gateway
// in the same process runs a warm request on a device of this node itself, through the device's
// EngineGate (actors/node/engine/engine_gate.hpp), when the model is resident there and the device
// is idle: the engine's queue hands the calling thread its turn (WorkQueue::run_here), so the run
// keeps the device's order and no thread is woken for it. Otherwise, or on a device fault, it
// declines and the request takes the router's way, which queues, swaps, batches and restarts as ever.
//
// One device policy: the devices are tried in the order the router's Algorithm 1 would take them
// (prefer(): SwapController::run_order, published after each dispatch round: the available devices
// by id, then the busy ones), so an inline run lands where the router's own dispatch would; until
// the router publishes one (or without late binding), by index. A request's inputs are decoded only
// once a device has given the run its turn (EngineGate's InlineInputs), and at most once: a request
// that finds every holder busy goes to the router undecoded, and the executor decodes it there.
//
// What the router does not see happen it learns afterwards: each run is recorded (model, device,
// latency) for the late-binding router to drain (node_router_models.cpp), which updates the model's
// last use on that device (eviction order), its SLO outcomes (the RRC queue) and the SLO metrics.
// Records are kept only while a router asks for them, at most kMaxRecords between drains (beyond,
// the run is counted in dropped() and not recorded). The node's metrics count each run where the
// executor counts its own (ember_swap_dispatches_total{kind="inline"}, execution and run durations).
//
// Who calls what: executors attach each engine they adopt (a restart brings a new one; a destroyed
// engine's gate refuses); the supervisor suspends inline runs while it interposes faults on the
// router's messages, so that an injected drop or delay is not bypassed; front-end threads run.
// Thread-safe; run() blocks for the run and never holds this object's lock while running.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "actors/inference_messages.hpp"
#include "actors/inline_runner.hpp"
#include "actors/workflow_messages.hpp"
#include "placement/workflow_plan.hpp"

namespace ember {

class EngineGate;
class NodeInstruments;

/// One inline run, for the router.
struct InlineRecord {
  model_key model;
  uint32_t device = 0;
  /// From the request reaching the node to its answer (what the SLO measures).
  uint64_t latency_us = 0;
};

class InlineRuns final : public InlineRunner {
 public:
  static constexpr size_t kMaxRecords = 65536;

  /// `node` names the node in answers; `instruments` (may be null) outlives this object.
  InlineRuns(std::string node, NodeInstruments* instruments) : node_(std::move(node)), instruments_(instruments) {}

  /// Device `device`'s engine is behind `gate` from now on (replacing the one before).
  void attach(uint32_t device, std::shared_ptr<EngineGate> gate);
  /// No inline runs while suspended (fault injection on the router's messages).
  void suspend(bool on);
  /// The router's device order from now on (see the header); devices it leaves out come last.
  void prefer(std::vector<uint32_t> order);
  /// Keeps a record of each run from now on, until called with false (the records kept go).
  void keep_records(bool on);
  /// The records since the last drain, oldest first.
  std::vector<InlineRecord> drain();
  /// Runs not recorded because kMaxRecords were waiting.
  uint64_t dropped() const;

  std::optional<Result<infer_reply>> run(const infer_request& req) override;
  std::optional<Result<infer_reply>> run_workflow(const workflow_request& req) override;

 private:
  const std::string node_;
  NodeInstruments* const instruments_;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<EngineGate>> gates_;  // guarded by mu_: by device index
  std::vector<uint32_t> order_;                     // guarded by mu_: the router's (prefer)
  bool suspended_ = false;                          // guarded by mu_
  bool keep_ = false;                               // guarded by mu_
  std::vector<InlineRecord> records_;               // guarded by mu_
  uint64_t dropped_ = 0;                            // guarded by mu_
  WorkflowCache parsed_;                            // guarded by mu_
  /// Records a run of `model` on `device`, `latency` after it arrived (requires mu_).
  void record(const model_key& model, uint32_t device, std::chrono::microseconds latency);
  /// The devices to try with their gates, in the router's order (requires mu_).
  std::vector<std::pair<uint32_t, std::shared_ptr<EngineGate>>> ordered_gates() const;
};

}  // namespace ember
