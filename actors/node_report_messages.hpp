// What a node reports about itself: its router sends a node_report (its devices as device_report,
// its cache, its replicas, where its data plane, its control port and its stage host are) to the
// manager when it joins, rejoins and whenever the manager asks, and answers the manager's heartbeat
// with replicas_fingerprint so the manager knows when to ask. The manager answers nodes_atom with
// the reports it holds (draining set) to the console, through the admin actor.
//
// Pure data with CAF `inspect`, registered in actors/type_ids.hpp; anyone may build and read them on
// any thread.
#pragma once

#include <caf/actor.hpp>
#include <caf/meta/type_name.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/wire_inspect.hpp"

namespace ember {

/// One device of a node, as the manager sees it.
struct device_report {
  std::string name;
  uint64_t memory_bytes = 0;
  uint64_t used_bytes = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, device_report& x) {
  return f(caf::meta::type_name("device_report"), x.name, x.memory_bytes, x.used_bytes);
}

/// A fingerprint of a node's ready replicas (order-independent) and of the actor its requests go to
/// (node_report::requests, by actor id; 0 for none), which its router answers the manager's
/// heartbeat with: when it differs from what the manager last saw, the manager asks for a fresh
/// node_report (a load that ended while the manager was away, a replica lost to a fault, a router
/// restarted by its supervisor).
uint64_t replicas_fingerprint(const std::vector<model_key>& replicas, uint64_t requests_id = 0);

struct node_report;
/// The fingerprint of what `report` lists (its replicas and its requests actor).
uint64_t report_fingerprint(const node_report& report);

/// What a node tells the manager when it joins (and rejoins).
struct node_report {
  std::string name;
  /// Where this node's blob server listens (peers fetch cached models from it).
  HostPort data;
  std::vector<device_report> devices;
  uint64_t cache_capacity = 0;
  uint64_t cache_used = 0;
  /// Models whose bytes are in the cache, and models bound to a device (replicas).
  std::vector<model_key> cached;
  std::vector<model_key> replicas;
  /// The node's rack ("" = unknown): multicast chains visit a rack's nodes together.
  std::string rack;
  /// Where the node's router is published (node.listen) for direct connections: gateways dial it
  /// so that their requests do not ride through the manager's process. Port 0: not published.
  HostPort control;
  /// Set by the manager in its answers (nodes_atom): the console drained the node, nothing is
  /// placed there any more.
  bool draining = false;
  /// The node's stage host (a stage_host_actor, actors/stage_host_interface.hpp): what pipelines
  /// address the stages bound on this node through (pipeline_hop::router). Null: none.
  caf::actor stages;
  /// Where requests (infer_request, workflow_request) go: the node's router itself (a
  /// node_router_actor), so that they skip its supervisor's hop; it changes when the supervisor
  /// restarts the router. Null when the node takes faults (--allow-faults): its supervisor's
  /// interposer must see every message, so requests go to the node's handle (the supervisor).
  caf::actor requests;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_report& x) {
  return f(caf::meta::type_name("node_report"), x.name, x.data, x.devices, x.cache_capacity, x.cache_used, x.cached,
           x.replicas, x.rack, x.control, x.draining, x.stages, x.requests);
}

/// A member node and where its handle is published (node_report::control): the manager tells every
/// member the others' (peers_atom), and each node dials them (actors/peer_dials.hpp) so that what
/// nodes send each other (a pipeline's hand-offs and credits) takes their own connection.
struct peer_endpoint {
  std::string node;
  HostPort control;
  friend bool operator==(const peer_endpoint& a, const peer_endpoint& b) {
    return a.node == b.node && a.control == b.control;
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, peer_endpoint& x) {
  return f(caf::meta::type_name("peer_endpoint"), x.node, x.control);
}

}  // namespace ember
