// The routing table: which node_routers hold a warm replica of which model version, plus each
// model's state and manifest. The cluster_manager owns it and pushes changes to every gateway,
// which route the warm path from their copy without asking the manager.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "actors/messages.hpp"
#include "actors/node_router_interface.hpp"

namespace ember {

struct replica_ref {
  uint64_t node_id = 0;
  std::string node;
  node_router_actor router;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, replica_ref& x) {
  return f(caf::meta::type_name("replica_ref"), x.node_id, x.node, x.router);
}

struct routing_entry {
  model_state state;
  /// model.json of this version (gateways answer metadata requests from it).
  std::string manifest_json;
  std::vector<replica_ref> replicas;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, routing_entry& x) {
  return f(caf::meta::type_name("routing_entry"), x.state, x.manifest_json, x.replicas);
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
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, routing_update& x) {
  return f(caf::meta::type_name("routing_update"), x.epoch, x.full, x.entries, x.removed, x.members,
           x.report_interval_us);
}

/// Requests in flight on one node (a load_report's model_load::in_flight).
struct node_count {
  uint64_t node_id = 0;
  uint32_t count = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_count& x) {
  return f(caf::meta::type_name("node_count"), x.node_id, x.count);
}

/// One model's counters in a load_report: what one gateway saw since its previous report (arrivals,
/// completions and their execution time) and what it holds now (in flight, held).
struct model_load {
  model_key model;
  uint64_t arrivals = 0;     // requests received
  uint64_t completions = 0;  // requests answered by a replica
  uint64_t busy_us = 0;      // their execution time on the device (infer_reply::compute_us), summed
  uint32_t ongoing = 0;      // sent to a replica and not answered yet, plus held
  uint32_t queued = 0;       // held at the gateway: no replica yet (a cold start runs)
  /// Of the requests in flight, how many on each node (only nonzero counts): the manager drains a
  /// replica it scales down until none is left there.
  std::vector<node_count> in_flight;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, model_load& x) {
  return f(caf::meta::type_name("model_load"), x.model, x.arrivals, x.completions, x.busy_us, x.ongoing, x.queued,
           x.in_flight);
}

/// A gateway's report to the manager every report_interval: the models it saw since the last one,
/// and those with requests still in flight (a model that went quiet is reported once with zeros).
/// The manager's autoscaler never sees individual requests.
struct load_report {
  std::string reporter;  // unique per gateway ("<host>:<pid>" or the test's name)
  std::vector<model_load> models;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, load_report& x) {
  return f(caf::meta::type_name("load_report"), x.reporter, x.models);
}

}  // namespace ember
