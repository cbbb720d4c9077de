// gpu_executor: one per device. Owns the device (through an ExecutorEngine), its memory and the
// models bound to it. Only the node_router of the same process sends to it. Handlers never block:
// device work runs on the engine's worker thread (or a lane), restarts on the node's maintenance
// queue, and each finishes as an offload_done (actors/offload.hpp) to this actor, which then answers
// the request. A request's tensors are decoded and its answer encoded on the engine's thread too,
// never on this actor's.
#pragma once

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/atoms.hpp"
#include "actors/engine_run.hpp"
#include "actors/fault_messages.hpp"
#include "actors/generation_messages.hpp"
#include "actors/inference_messages.hpp"
#include "actors/node_report_messages.hpp"
#include "actors/offload.hpp"
#include "base/status.hpp"
#include "gpu/executor.hpp"
#include "model/model.hpp"

namespace ember {

class ExecutorEngine;
class EngineGate;

/// Bind a model to this device (local only: carries the host copy of the model).
struct bind_model {
  model_key key;
  std::shared_ptr<const gpu::Model> model;
};

/// What an executor holds.
struct executor_status {
  device_report device;
  std::vector<model_key> bound;
  uint64_t queued = 0;
  /// The model pool: bytes managed and free, and the swap-in group size in use.
  uint64_t pool_capacity = 0;
  uint64_t pool_free = 0;
  uint64_t group_bytes = 0;
  /// Values kept on the device for later workflow steps, and their bytes.
  uint64_t kept_values = 0;
  uint64_t kept_bytes = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, executor_status& x) {
  return f(caf::meta::type_name("executor_status"), x.device, x.bound, x.queued, x.pool_capacity, x.pool_free,
           x.group_bytes, x.kept_values, x.kept_bytes);
}

/// A generation the router hands an executor (swap_request::generation): the request and the
/// actor its chunks go to (actors/node/generation_runs.hpp makes the engine's job of it).
struct generation_order {
  generate_request request;
  caf::actor sink;
};

/// Late binding: run a request on a model that may have to be swapped in first (local only).
struct swap_request {
  /// Shared with the router, which keeps it to retry the request elsewhere after a fault.
  std::shared_ptr<const infer_request> request;
  /// What the engine runs (actors/engine_run.hpp). The router fills the host copy, the copy source
  /// (`peer`, locked by the router: see ExecutorEngine::weights_of), the evictions, `profile`, the
  /// device hand-off (`device_inputs` kept on this executor's device, `keep`, `peer_inputs` from a
  /// value_lease) and the Shadow (shadow_ready::gate); the executor fills `key`, `make_inputs` (which
  /// decodes `request`'s inputs on the engine's thread when the job starts) and `wanted` from
  /// `request`, whose `outputs` are what comes back.
  SwapRun run;
  /// A generation (text generation, issue 35): `request` then names only the model; the executor
  /// fills run.generate from it (the job made on the engine's thread) instead of make_inputs, and
  /// the reply (no outputs) says the stream joined its model's loop. run.resume (the router's) is
  /// passed on as it is.
  std::shared_ptr<const generation_order> generation;
};

/// The answer to a swap_request: always delivered (errors included), since the device changed.
struct swap_reply {
  /// The client's answer, or why it failed.
  std::optional<infer_reply> reply;
  std::optional<Error> error;
  /// What the run did (actors/engine_run.hpp): swapped, evicted, footprint, the fault, the values
  /// kept, the Shadow's rows. `result.run` keeps the run's times; its outputs are `reply`'s (encoded)
  /// and are left empty here (a failed run's error stays: it is `error` too). Inputs that do not
  /// decode answer with `error` and a `result` that only says inputs_failed: nothing changed on the
  /// device.
  SwapRunResult result;
};

/// AsyFunc (issue 19): hold layers [first_layer, last_layer) of a model on this device as a Shadow,
/// its weights copied from the host copy into the model pool (local only: carries the host copy).
struct load_shadow {
  model_key key;
  std::shared_ptr<const gpu::Model> model;
  uint32_t first_layer = 0;
  uint32_t last_layer = 0;
};

/// A Shadow held: its weights' bytes, the time it took to start, and the gate of the engine that
/// holds it, which a Body's executor on this node runs the Shadow's rows through (local only).
struct shadow_ready {
  uint64_t bytes = 0;
  uint64_t start_us = 0;
  std::shared_ptr<EngineGate> gate;
};

/// Where values kept on this device live, for another device of the node to copy them from (the
/// router keeps them kept until that copy answered).
struct value_lease {
  std::vector<gpu::PeerValue> values;
};

/// Where a model's device copy lives (nullopt: not resident).
struct weights_lease {
  std::optional<gpu::PeerWeights> weights;
};

using gpu_executor_actor = caf::typed_actor<
    /// Uploads the model's weights; answers the device's name. Errors: out_of_memory, device_fault.
    caf::replies_to<bind_model>::with<std::string>,
    /// Frees a bound model's device memory (no-op when not bound).
    caf::replies_to<unload_atom, model_key>::with<bool>,
    /// Runs a request on a bound model. Errors: invalid_argument (bad inputs), unavailable
    /// (queue full, model not bound), device_fault.
    caf::replies_to<infer_request>::with<infer_reply>, caf::replies_to<status_atom>::with<executor_status>,
    /// Late binding; see swap_request. Errors only when the request was not taken (queue full).
    caf::replies_to<swap_request>::with<swap_reply>, caf::replies_to<weights_atom, model_key>::with<weights_lease>,
    /// Replaces the engine by a fresh one over a reopened device (its models are gone); answers the
    /// new device's report. Errors: as reopening the device.
    caf::replies_to<restart_atom>::with<device_report>,
    /// Drops values kept on the device for later steps (after the jobs queued before).
    caf::reacts_to<release_atom, std::vector<uint64_t>>,
    /// Where kept values are (a step that runs on another device copies them from there).
    /// Errors: not_found (released, or gone with a restart), unavailable.
    caf::replies_to<lend_atom, std::vector<uint64_t>>::with<value_lease>,
    /// Unbinds every model (a router that restarted and no longer knows what is resident).
    caf::replies_to<forget_atom>::with<bool>,
    /// Shadows (AsyFunc): hold a range of a model; drop the one held for a model (false: none).
    /// Errors: out_of_memory, invalid_argument (a range outside the model), unavailable.
    caf::replies_to<load_shadow>::with<shadow_ready>, caf::replies_to<shadow_atom, model_key>::with<bool>,
    /// Fault injection, checked by the node's supervisor: fail-alloc (the next `count` allocations)
    /// or fault-kernel (the next run). Answers what it armed. Errors: invalid_argument, unavailable.
    caf::replies_to<fault_atom, fault_command>::with<std::string>,
    /// Stops generation `id` of model `key` at its next step (ExecutorEngine::cancel_generation);
    /// unknown ids do nothing.
    caf::reacts_to<cancel_atom, model_key, std::string>,
    /// The continuation of an engine job or a restart (self-sent, local only).
    caf::reacts_to<offload_done>>;

}  // namespace ember

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ember::bind_model)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ember::swap_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ember::swap_reply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ember::weights_lease)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ember::value_lease)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ember::load_shadow)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ember::shadow_ready)
