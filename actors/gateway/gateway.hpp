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
gateway_actor spawn_gateway(caf::actor_system& sys, GatewayConfig config, caf::actor manager,
                            std::shared_ptr<RoutingView> view, GatewayInstruments* instruments,
                            WorkQueue& metrics_queue);

}  // namespace ember
