// cluster_manager: one per cluster. Owns membership (nodes, their devices and caches), the model
// registry (the repository directory: every model version with its manifest and weights file),
// the replica table, and the routing table it pushes to gateways. Decides placement (which node
// gets a new replica, placement/replica_placement.hpp), sourcing (peers' caches before the
// repository) and re-placement after a node is lost. It is on the cold path only: the warm path
// (gateway -> node_router -> gpu_executor) never passes through it. Handlers never block: the
// repository is scanned on the manager process's scan queue (actors/offload.hpp), node work is
// requested asynchronously with timeouts. Time is the actor clock's.
//
// No message here carries a token: what reaches the manager was admitted by the control plane
// (mutual TLS, when configured), as a node's router admits its messages. The console's admin token
// is checked by the admin actor alone (actors/admin_interface.hpp), which then sends these; the
// console's own commands (drain, scale bounds, slo, log-level, transfers, fault) are taken from
// that actor only, permission_denied from any other sender.
//
// Node lifecycle:  joined ──(down_msg: process died, or heartbeats missed for node_timeout)──▶ lost
// A lost node's replicas leave the routing table at once; the models it held are re-placed on
// surviving nodes. A node that comes back joins again as a new member.
#pragma once

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/admin_interface.hpp"
#include "actors/atoms.hpp"
#include "actors/fault_messages.hpp"
#include "actors/gateway_interface.hpp"
#include "actors/load_report_messages.hpp"
#include "actors/loading_messages.hpp"
#include "actors/metrics_messages.hpp"
#include "actors/model_messages.hpp"
#include "actors/node_report_messages.hpp"
#include "actors/node_router_interface.hpp"
#include "actors/offload.hpp"
#include "actors/routing.hpp"
#include "actors/transfer_peer_interface.hpp"
#include "actors/transfer_progress_messages.hpp"

namespace ember {

using cluster_manager_actor = caf::typed_actor<
    /// A node joins (or rejoins); answers its node id. The manager monitors the router.
    caf::replies_to<join_atom, node_report, node_router_actor>::with<uint64_t>,
    /// A gateway subscribes; answers the full routing table, then pushes routing_update messages.
    caf::replies_to<subscribe_atom, gateway_actor>::with<routing_update>,
    /// A gateway that still holds a routing table (of `epoch`, from a manager that went away)
    /// subscribes again: answered as above, but not before manager.recovery_window has passed since
    /// this manager started, so that the nodes' rejoins rebuild the table first.
    caf::replies_to<subscribe_atom, gateway_actor, uint64_t>::with<routing_update>,
    /// Scale from zero: answers once the model (version 0: the latest) has a ready replica.
    /// Errors: not_found, invalid_argument (unloaded on purpose), corrupt (the model cannot load),
    /// unavailable (no node can take it).
    caf::replies_to<ensure_atom, model_key>::with<model_state>,
    /// The model-repository API: load (rescans the model's folder first), unload, index.
    caf::replies_to<load_atom, model_command>::with<model_state>,
    caf::replies_to<unload_atom, model_command>::with<model_state>,
    caf::replies_to<index_atom>::with<std::vector<model_state>>,
    /// Every node's report as it joined, with `cached` kept up to date and `replicas` the versions
    /// the manager knows ready on it now.
    caf::replies_to<nodes_atom>::with<std::vector<node_report>>,
    /// Fill the host caches of nodes with a model's bytes (chained multicast by default), or drop
    /// them. Errors: not_found (model or node), unavailable (no source, no receiver).
    caf::replies_to<distribute_atom, distribute_request>::with<distribute_result>,
    caf::replies_to<evict_atom, distribute_request>::with<distribute_result>,
    /// The chain controller (see transfer_peer_interface.hpp): hops report and ask here.
    caf::reacts_to<chain_progress>, caf::replies_to<chain_upstream_request>::with<blob_source>,
    /// A gateway's per-model counters, every autoscale.interval (actors/routing.hpp).
    caf::reacts_to<load_report>,
    /// The manager's own metrics (autoscaling), merged by gateways into /metrics.
    caf::replies_to<metrics_atom>::with<metrics_snapshot>,
    /// The console's admin interface (actors/admin_interface.hpp): the admin actor beside this
    /// manager, which checks the console's token and hands what passes to the messages below.
    /// Errors: unavailable (this manager has none).
    caf::replies_to<admin_atom>::with<admin_actor>,
    /// Drains node `name`: nothing is placed there any more, each of its replicas is re-placed
    /// elsewhere (a replacement first where it holds the model's only one) and then drained and
    /// unbound. Answered with the models moved once the node holds none (it may then be stopped).
    /// Errors: not_found (no such node), unavailable (no room elsewhere, or the node left).
    caf::replies_to<drain_atom, std::string>::with<std::vector<model_key>>,
    /// The autoscaler's bounds of a model: min_replicas and, unless 0, max_replicas (the console's
    /// `scale`). Answered with the model's state. Errors: unavailable (the autoscaler is off),
    /// not_found, invalid_argument.
    caf::replies_to<scale_atom, model_key, uint32_t, uint32_t>::with<model_state>,
    /// Sets or clears (deadline 0) a model's SLO at run time (slo_command), on every replica now
    /// (each node's router) and on those placed later; answers the versions changed. Not kept
    /// across a manager restart. Errors: not_found (no such model), invalid_argument (a percentile
    /// outside (0, 1), a deadline over an hour).
    caf::replies_to<slo_atom, slo_command>::with<std::vector<model_state>>,
    /// The log level of the manager's process and of every node's (trace, debug, info, warn, error,
    /// off); answered with the number of processes told. Errors: invalid_argument.
    caf::replies_to<log_level_atom, std::string>::with<uint32_t>,
    /// Every hop of the multicast chains in flight, with how far it got.
    caf::replies_to<transfers_atom>::with<std::vector<hop_progress>>,
    /// Injects a fault into node NAME (it must run with --allow-faults; fault_messages.hpp's
    /// fault_command); answers what the node did. Errors: not_found (no such node), and the node's:
    /// permission_denied, invalid_argument.
    caf::replies_to<fault_atom, std::string, fault_command>::with<std::string>,
    /// Internal: the chain controller's stall check; the autoscaler's tick.
    caf::reacts_to<tick_atom>, caf::reacts_to<scale_atom>,
    /// The heartbeat timer (self-sent): every node's router is asked ping_atom.
    caf::reacts_to<ping_atom>,
    /// Internal: a repository scan's continuation, back from the scan queue (actors/offload.hpp).
    caf::reacts_to<offload_done>>;

}  // namespace ember
