// gateway: one per process that serves HTTP. Routes inference requests to warm replicas from its
// copy of the routing table (never through the manager), holds requests for models without a warm
// replica until one is ready (scale from zero: one ensure per model, however many requests wait),
// retries a request once elsewhere when its node is lost, and answers /metrics by collecting every
// node's metrics and merging them with its own off the actor (on a queue its process owns).
// Handlers never block; time comes from the actor clock only.
#pragma once

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/atoms.hpp"
#include "actors/inference_messages.hpp"
#include "actors/model_messages.hpp"
#include "actors/offload.hpp"
#include "actors/routing.hpp"
#include "actors/workflow_messages.hpp"
#include "config/cluster_config.hpp"

namespace ember {

using gateway_actor = caf::typed_actor<
    /// Errors: not_found (unknown model or version), invalid_argument (model unloaded on purpose;
    /// bad inputs), unavailable (no replica came up within the cold-start timeout, node lost twice,
    /// queue full), deadline_exceeded.
    caf::replies_to<infer_request>::with<infer_reply>, caf::reacts_to<routing_update>,
    /// A whole workflow request for a node holding a ready replica of every step's model (the least
    /// loaded, watched: a node lost meanwhile answers unavailable). Errors: unavailable (no such
    /// node, or it declined: the caller runs the steps itself), the node's.
    caf::replies_to<workflow_request>::with<infer_reply>,
    /// Prometheus text of the gateway and every node.
    caf::replies_to<metrics_atom>::with<std::string>,
    /// Repository commands, forwarded to the manager.
    caf::replies_to<load_atom, model_command>::with<model_state>,
    caf::replies_to<unload_atom, model_command>::with<model_state>,
    caf::replies_to<index_atom>::with<std::vector<model_state>>,
    caf::replies_to<distribute_atom, distribute_request>::with<distribute_result>,
    caf::replies_to<evict_atom, distribute_request>::with<distribute_result>,
    /// Internal timers: expire a held request; ask the manager again for a replica (while requests
    /// are held; from another actor, such as a generation relay waiting for a cold model: always,
    /// one ensure at a time per model); send the manager this interval's load_report.
    caf::reacts_to<expire_atom, uint64_t>, caf::reacts_to<ensure_atom, model_key>, caf::reacts_to<scale_atom>,
    /// A standalone gateway's link (gateway_process.hpp) reached the manager (a cluster_manager_actor):
    /// the gateway monitors it and subscribes through it (again, after losing the previous one:
    /// meanwhile it serves warm requests from its last table).
    caf::reacts_to<manager_atom, caf::actor>,
    /// Internal: a merged metrics text comes back from the metrics queue (actors/offload.hpp).
    caf::reacts_to<offload_done>>;

}  // namespace ember
