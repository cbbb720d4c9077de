// The routing table: which node_routers hold a warm replica of which model version, plus each
// model's state and manifest. The cluster_manager owns it and pushes changes to every gateway,
// which route the warm path from their copy without asking the manager.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "actors/model_messages.hpp"
#include "actors/node_router_interface.hpp"
#include "actors/pipeline_messages.hpp"

namespace ember {

/// A node holding a replica (or a member of the cluster). `router` is the node's handle, which
/// stays while its process lives (its supervisor): the manager's control and the gateways' watch
/// go there. Requests go to for_requests(): the router itself (node_report::requests), skipping
/// the supervisor's hop, unless the node takes faults.
struct replica_ref {
  uint64_t node_id = 0;
  std::string node;
  node_router_actor router;
  HostPort control;  // the node's node_report::control (set in routing_update::members)
  node_router_actor requests;  // the node's node_report::requests; null: requests go to `router`

  const node_router_actor& for_requests() const { return requests ? requests : router; }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, replica_ref& x) {
  return f(caf::meta::type_name("replica_ref"), x.node_id, x.node, x.router, x.control, x.requests);
}

struct routing_entry {
  model_state state;
  /// model.json of this version (gateways answer metadata requests from it).
  std::string manifest_json;
  std::vector<replica_ref> replicas;
  /// A partitioned cold start (Flashpoint): the stages of a pipeline serving the model while no
  /// full replica is ready; gateways send a stage_request to the first hop. Empty otherwise. When
  /// the members complete into full replicas, one update moves them into `replicas` and empties this.
  std::vector<pipeline_hop> pipeline;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, routing_entry& x) {
  return f(caf::meta::type_name("routing_entry"), x.state, x.manifest_json, x.replicas, x.pipeline);
}

/// A workflow of the repository (config/workflow_config.hpp): its name (its folder's), workflow.json
/// as read, and why it cannot run when the manager found it invalid (empty when it parsed).
struct workflow_entry {
  std::string name;
  std::string json;
  std::string error;

  friend bool operator==(const workflow_entry& a, const workflow_entry& b) {
    return a.name == b.name && a.json == b.json && a.error == b.error;
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, workflow_entry& x) {
  return f(caf::meta::type_name("workflow_entry"), x.name, x.json, x.error);
}

/// A change of the table. `full`: the entries are the whole table (replace everything); otherwise
/// they replace the entries of the same model key, and `removed` lists keys that are gone.
struct routing_update {
  uint64_t epoch = 0;
  bool full = false;
  std::vector<routing_entry> entries;
  std::vector<model_key> removed;
  /// Every node in the cluster now (gateways scrape their metrics), whether or not it holds replicas.
  std::vector<replica_ref> members;
  /// How often the manager wants each gateway's load_report (its autoscaler's tick); 0 = none
  /// (autoscaling is off). Set in every update.
  uint64_t report_interval_us = 0;
  /// Every workflow of the repository, replacing the gateway's, when `workflows_set` (always in a
  /// full update, and in a delta when a rescan changed them); ignored otherwise.
  bool workflows_set = false;
  std::vector<workflow_entry> workflows;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, routing_update& x) {
  return f(caf::meta::type_name("routing_update"), x.epoch, x.full, x.entries, x.removed, x.members,
           x.report_interval_us, x.workflows_set, x.workflows);
}

}  // namespace ember
