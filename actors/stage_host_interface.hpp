// stage_host: one per node, beside its router. It serves the pipeline stages bound on the node
// (Flashpoint's partitioned cold start, issue 14): each stage_request is queued at its stage, run
// when the stage is free and holds a credit of its downstream, its carried tensors trimmed to what
// later stages read and handed to the next stage's host, and answered with the last stage's reply,
// exactly once. Pipelines address it from the node's report (node_report::stages), so stage traffic
// (requests, credits, hand-off fetches, downstream hosts going down) never queues behind late
// binding in the router's mailbox; only a stage's own run goes to the router.
//
// Who owns what: the router loads a stage (load_stage) and keeps its replica, bound on the node's
// devices like any model (late binding schedules its runs beside every other model's, which is why
// the executors stay the router's alone); once the replica is ready it hands the stage over
// (stage_ready) and runs it on the host's requests (an infer_request of the stage's wire key). The
// host owns each stage's flow: its queue, its credits (actors/node/stage_credits.hpp), the requests
// it handed downstream and their hand-offs. An unloaded stage is dropped by the router (unload).
//
// Supervised by the node supervisor, like the router: a host that dies is spawned again, empty; the
// router then drops its stage replicas (their flow died) and a pipeline through them fails as
// retryable until the manager completes or rebuilds it. A router that restarts drops the stages too
// (stage_router): its ledger does not restore them. Handlers never block: hand-offs are fetched on
// the node's hand-off queue (actors/offload.hpp).
#pragma once

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <memory>
#include <string>
#include <vector>

#include "actors/atoms.hpp"
#include "actors/inference_messages.hpp"
#include "actors/offload.hpp"
#include "actors/pipeline_messages.hpp"
#include "model/model.hpp"

namespace ember {

/// From the node's router (local only): stage `key` is bound on the node and serves from now on,
/// under `key.wire()`, the key its requests name.
struct stage_ready {
  stage_key key;
  /// The whole model as the node holds it (its header and this range's layers only): its graph
  /// says which carried values later stages still read.
  std::shared_ptr<const gpu::Model> whole;
  /// The stage model's inputs, by name: what the stage takes of the carried tensors.
  std::vector<std::string> inputs;
};

/// From the node's router when it starts (local only): the router (a node_router_actor) that runs
/// the stages' requests from now on. Every stage handed over before is dropped, its requests failed
/// as retryable: a restarted router does not restore stages.
struct stage_router {
  caf::actor router;
};

using stage_host_actor = caf::typed_actor<
    /// A request through a pipeline (see stage_request). Errors: unavailable (no such stage here,
    /// or a stage further down failed or died: retryable), invalid_argument (the request or its
    /// hand-off), the errors of infer_request.
    caf::replies_to<stage_request>::with<infer_reply>,
    /// From the next stage's host: it took request `seq` of this node's stage (wire key) `stage`.
    caf::reacts_to<credit_atom, model_key, uint64_t>,
    /// From the router: see stage_ready, stage_router; unload: the stage (wire key) leaves the node,
    /// its queued requests fail as retryable.
    caf::reacts_to<stage_ready>, caf::reacts_to<stage_router>, caf::reacts_to<unload_atom, model_key>,
    /// Offloaded work's continuation (actors/offload.hpp): a hand-off's fetch.
    caf::reacts_to<offload_done>>;

}  // namespace ember

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ember::stage_ready)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ember::stage_router)
