// Spawning a gateway (its messages are in actors/gateway_interface.hpp).
#pragma once

#include <caf/fwd.hpp>
#include <memory>

#include "actors/gateway_interface.hpp"
#include "config/cluster_config.hpp"

namespace ember {

class RoutingView;
class GatewayInstruments;
class WorkQueue;

/// Spawns a gateway that subscribes to `manager` (a cluster_manager_actor) and publishes routing
/// snapshots into `view` (read by the HTTP threads). Uses config's request_timeout,
/// cold_start_timeout and max_pending. The gateway reads time only from its actor clock.
/// `metrics_queue` merges and renders the /metrics text off the actor (threads = 0 in
/// deterministic tests); a scrape it refuses is answered unavailable. `instruments` (may be null)
/// and `metrics_queue` must outlive the gateway, and `instruments` the queue's jobs.
///
/// A standalone gateway (`ember gateway`) passes a null `manager` (its link hands one over with
/// manager_atom) and a `dial_queue`: on it the gateway connects to every member node's published
/// router directly (node_report::control), so that its requests reach the nodes without passing
/// through the manager's process and go on while the manager is away. CAF routes by node: the
/// requests to a node's router (replica_ref::for_requests, learned from the manager) take that
/// connection too, though only the node's handle was dialed.
gateway_actor spawn_gateway(caf::actor_system& sys, GatewayConfig config, caf::actor manager,
                            std::shared_ptr<RoutingView> view, GatewayInstruments* instruments,
                            WorkQueue& metrics_queue, WorkQueue* dial_queue = nullptr);

}  // namespace ember
