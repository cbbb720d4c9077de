// RoutingView: a read-only snapshot of the gateway's routing table for the front-end threads (HTTP
// and gRPC), which answer metadata and readiness from it without a message to any actor, and send a
// warm request straight to a replica's node (gateway_client.hpp). The gateway actor publishes a
// new snapshot after each routing update and when it loses a node; readers take a shared_ptr and
// keep it for the duration of one request. Thread-safe; never blocks beyond a short mutex.
//
// DirectTraffic: what those threads sent straight to replicas, so that the gateway's load reports
// (the autoscaler's input) still see every request. The choice of a replica, and the in-flight
// count per node it reads, are the ReplicaChooser's (replica_chooser.hpp), which the view also
// holds: one for the gateway actor and the front ends' threads together.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/gateway/replica_chooser.hpp"
#include "actors/model_messages.hpp"
#include "actors/routing.hpp"
#include "placement/workflow_plan.hpp"

namespace ember {

struct ModelSignature;
namespace gpu {
struct GenerationSpec;
}

struct ModelView {
  model_state state;
  /// The KServe v2 model metadata body ({"name", "versions", "platform", "inputs", "outputs"}),
  /// shared with the gateway's ModelCatalog and every later snapshot until it changes.
  std::shared_ptr<const std::string> metadata_json;
  /// Its inputs and outputs as model.json declares them (empty when it does not parse), for the
  /// gRPC metadata answer; shared the same way.
  std::shared_ptr<const ModelSignature> signature;
  /// model.json's "generation" section (model/generation_spec.hpp) when the version generates text;
  /// null otherwise (or when it does not parse). Shared the same way.
  std::shared_ptr<const gpu::GenerationSpec> generation;
  bool ready = false;
  /// The ready replicas (full models; a pipeline serving a cold start is not here).
  std::vector<replica_ref> replicas;
};

/// A workflow as the gateway serves it: parsed once when its workflow.json arrives or changes, and
/// shared by every snapshot until then.
struct WorkflowView {
  workflow_entry entry;
  /// Set when the workflow parsed (entry.error empty).
  std::optional<WorkflowConfig> config;
  std::optional<WorkflowPlan> plan;

  /// Parses `e` (its error, when the manager found one, is kept as is).
  static std::shared_ptr<const WorkflowView> of(workflow_entry e);
};

struct RoutingSnapshot {
  /// model name -> version -> view.
  std::map<std::string, std::map<uint32_t, ModelView>> models;
  /// workflow name -> view.
  std::map<std::string, std::shared_ptr<const WorkflowView>> workflows;
  /// The gateway has received the manager's table at least once.
  bool subscribed = false;

  /// The version a request means (0: the highest), or nullptr.
  const ModelView* find(const std::string& name, uint32_t version) const {
    auto m = models.find(name);
    if (m == models.end() || m->second.empty()) return nullptr;
    if (version == 0) return &m->second.rbegin()->second;
    auto v = m->second.find(version);
    return v == m->second.end() ? nullptr : &v->second;
  }
};

class DirectTraffic {
 public:
  struct Counts {
    uint64_t arrivals = 0, completions = 0, busy_us = 0;
  };
  /// A request of `model` went to node `node_id`.
  void started(const model_key& model, uint64_t node_id) {
    std::lock_guard lock(mu_);
    ++counts_[model].arrivals;
    ++in_flight_[{model, node_id}];
  }
  /// It came back (answered after `busy_us` of compute when `answered`). `handed_on`: the node
  /// could not take it and the gateway's way counts it instead (its arrival is taken back).
  void finished(const model_key& model, uint64_t node_id, bool answered, uint64_t busy_us, bool handed_on = false) {
    std::lock_guard lock(mu_);
    if (handed_on) {
      if (auto c = counts_.find(model); c != counts_.end() && c->second.arrivals > 0) --c->second.arrivals;
    }
    if (answered) {
      auto& c = counts_[model];
      ++c.completions;
      c.busy_us += busy_us;
    }
    if (auto it = in_flight_.find({model, node_id}); it != in_flight_.end() && --it->second == 0) in_flight_.erase(it);
  }
  /// The counts since the last call (reset), and what is in flight now, per (model, node).
  std::pair<std::map<model_key, Counts>, std::map<std::pair<model_key, uint64_t>, uint32_t>> drain() {
    std::lock_guard lock(mu_);
    return {std::exchange(counts_, {}), in_flight_};
  }

 private:
  mutable std::mutex mu_;
  std::map<model_key, Counts> counts_;                            // guarded by mu_
  std::map<std::pair<model_key, uint64_t>, uint32_t> in_flight_;  // guarded by mu_
};

class RoutingView {
 public:
  std::shared_ptr<const RoutingSnapshot> snapshot() const {
    std::lock_guard lock(mu_);
    return current_;
  }
  void publish(std::shared_ptr<const RoutingSnapshot> next) {
    std::lock_guard lock(mu_);
    current_ = std::move(next);
  }
  DirectTraffic& direct() { return direct_; }
  /// The process's one replica choice and in-flight count per node (gateway actor and threads).
  ReplicaChooser& chooser() { return chooser_; }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const RoutingSnapshot> current_ = std::make_shared<RoutingSnapshot>();  // guarded by mu_
  DirectTraffic direct_;
  ReplicaChooser chooser_;
};

}  // namespace ember
