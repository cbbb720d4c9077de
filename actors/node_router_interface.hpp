// node_router: one per node (host). The node's face to the cluster: it answers inference requests
// from gateways by handing them to the gpu_executor that holds the model, makes and drops replicas
// when the cluster_manager says so (bytes from the model_cache, then a bind on the device with the
// most free memory), and reports the node's state and metrics. Handlers never block.
//
// With late binding (NodeRouterConfig::late), a replica is the model in host memory: loading
// fetches the bytes and profiles the model once (a cold and a warm run: heaviness and SLO), and
// each request is queued in SLO order and bound to a device by the SwapController, which swaps the
// model in (from host or a peer device) and evicts under pressure. An executor that faults has its
// request retried elsewhere and is restarted; its models come back from host memory on demand.
//
// Replica lifecycle on a node:  absent ──load_replica──▶ fetching ──▶ binding ──▶ ready
//                                  ▲                          └──── error ────┘    │
//                                  └──────────────────── unload ◀─────────────────┘
// Concurrent load_replica for one model share one load. A pipeline stage (load_stage) is a replica
// too, bound like any model under its stage key; once ready the router hands it to the node's
// stage host (actors/stage_host_interface.hpp), which serves the pipeline's requests and runs the
// stage's own part here, as an infer_request of the stage key.
#pragma once

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <optional>
#include <string>
#include <vector>

#include "actors/atoms.hpp"
#include "actors/fault_messages.hpp"
#include "actors/generation_messages.hpp"
#include "actors/gpu_executor_interface.hpp"
#include "actors/inference_messages.hpp"
#include "actors/load_report_messages.hpp"
#include "actors/loading_messages.hpp"
#include "actors/metrics_messages.hpp"
#include "actors/model_cache_interface.hpp"
#include "actors/node_report_messages.hpp"
#include "actors/offload.hpp"
#include "actors/stage_host_interface.hpp"
#include "actors/workflow_messages.hpp"

namespace ember {

/// From the node's supervisor: executor `device` died and `actor` replaces it, without an engine
/// yet (the router restarts it and binds its replicas again from host memory). Local only.
struct executor_replaced {
  uint32_t device = 0;
  gpu_executor_actor actor;
};

/// From the node's supervisor: the model cache died and `cache` replaces it, holding the same bytes
/// unpinned (the router pins its replicas' again). Local only.
struct cache_replaced {
  model_cache_actor cache;
};

/// From the node's supervisor: the stage host died and `host` replaces it, empty (the router drops
/// the stage replicas it had handed over: their flow died with it). Local only.
struct stages_replaced {
  stage_host_actor host;
};

using node_router_actor = caf::typed_actor<
    /// The warm path. Errors: unavailable (no replica here: the caller's routing is stale; or the
    /// queue is full), invalid_argument (bad inputs), device_fault.
    caf::replies_to<infer_request>::with<infer_reply>,
    /// Errors: as model_cache fetch_blob, plus invalid_argument/corrupt (the bytes are not a valid
    /// model) and out_of_memory (no device can hold it).
    caf::replies_to<load_replica>::with<replica_info>, caf::replies_to<unload_atom, model_key>::with<bool>,
    /// A pipeline stage (Flashpoint): fetches the header and the stage's layers only, each checked
    /// against its digest, binds stage_key{model, first, last} under its wire() key like any model,
    /// and hands it to the node's stage host, which serves the pipeline's requests (stage_request
    /// goes there, node_report::stages). Errors as load_replica; unavailable when the node has no
    /// stage host.
    caf::replies_to<load_stage>::with<replica_info>,
    /// A workflow request (late binding): its steps run here, each as a request of its model, the
    /// intermediates handed on the device (node_router_workflow.cpp). Errors: unavailable (a step's
    /// model has no ready replica here, or the node binds models pinned: the caller runs the steps
    /// itself), invalid_argument (the workflow or the request), a step's error prefixed with it.
    caf::replies_to<workflow_request>::with<infer_reply>,
    /// Text generation (actors/generation_messages.hpp): generate `request` on a replica here, its
    /// generate_chunks sent to the actor given, in order, the last one final (a final chunk whose
    /// error has `resume` set: the node gave the stream up unfinished; the sender continues it
    /// elsewhere). The answer (true) comes once the stream joined a generation loop: chunks may
    /// arrive before it. Errors, before any chunk: unavailable (no ready replica here, queue full),
    /// not_found (no such model here), invalid_argument (a model that does not generate, a prompt
    /// over its context window, token ids outside its vocabulary, a tokenizer-less model asked for
    /// text).
    caf::replies_to<generate_request, caf::actor>::with<bool>,
    /// Stops generation `request id` at its next step and frees its KV blocks (its chunks stop; no
    /// final chunk need follow). Unknown ids do nothing.
    caf::reacts_to<cancel_atom, std::string>,
    /// Drops the model's bytes from the host cache unless a replica here uses them.
    caf::replies_to<evict_atom, model_key>::with<bool>, caf::replies_to<report_atom>::with<node_report>,
    caf::replies_to<metrics_atom>::with<metrics_snapshot>,
    /// The autoscaler's tick (the manager asks every node): per ready replica, the requests queued
    /// here and not executing yet (late binding's queue; 0 with pinned binding, whose executor
    /// queues are per device). Only `queued` is set: the gateways count what is in flight.
    caf::replies_to<scale_atom>::with<load_report>,
    /// The manager's heartbeat at actor level: answered by the router itself, so a router that hangs
    /// (its process and connection alive) stops answering and the manager drops the node.
    /// Answers report_fingerprint of the report it would send (report_atom): its ready replicas and
    /// the actor its requests go to.
    caf::replies_to<ping_atom>::with<uint64_t>,
    /// The manager: the SLO of `model` set at run time (deadline 0 clears it: model.json's, else
    /// the node's, else the one derived at registration). Late binding orders its queue by it
    /// from now on. False when no replica of it is here (the manager also sends it with each
    /// later load_replica).
    caf::replies_to<slo_atom, model_key, slo_setting>::with<bool>,
    /// Late binding: the RRC queue's periods (self-sent).
    caf::reacts_to<tick_atom>,
    /// Late binding: another try at restarting a faulted executor, by device index (self-sent).
    caf::reacts_to<restart_atom, uint32_t>,
    /// The node process's log level (trace, debug, info, warn, error, off), from the console through
    /// the manager. Errors: invalid_argument (no such level).
    caf::replies_to<log_level_atom, std::string>::with<bool>,
    /// Fault injection (nodes started with --allow-faults): kinds and targets in fault_messages.hpp's
    /// fault_command. Taken by the node's supervisor (actors/node/node_supervisor.hpp), which
    /// stands in front of the router; answers what was done. Errors: permission_denied (the node
    /// does not allow faults), invalid_argument (a target the kind does not take, an executor the
    /// node lacks, a missing option; unknown kinds and targets are refused where the command enters).
    caf::replies_to<fault_atom, fault_command>::with<std::string>,
    /// The manager: every member's published endpoint. Taken by the node's supervisor, which dials
    /// the others (actors/peer_dials.hpp) so that the node's messages to them go direct.
    caf::reacts_to<peers_atom, std::vector<peer_endpoint>>, caf::reacts_to<replace_atom, executor_replaced>,
    caf::reacts_to<replace_atom, cache_replaced>, caf::reacts_to<replace_atom, stages_replaced>,
    /// Self-sent continuations (actors/offload.hpp): the wake-up of a dispatch gathering a batch.
    caf::reacts_to<offload_done>>;

}  // namespace ember

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ember::executor_replaced)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ember::cache_replaced)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ember::stages_replaced)
