// gpu_executor: one per device. Owns the device (through an ExecutorEngine), its memory and the
// models bound to it. Only the node_router of the same process sends to it. Handlers never block:
// device work runs on the engine's worker thread and finishes as a message to this actor, which
// then answers the request.
#pragma once

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <memory>
#include <string>
#include <vector>

#include "actors/atoms.hpp"
#include "actors/messages.hpp"
#include "actors/node_instruments.hpp"
#include "gpu/model.hpp"

namespace ember {

class ExecutorEngine;

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
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, executor_status& x) {
  return f(caf::meta::type_name("executor_status"), x.device, x.bound, x.queued);
}

/// The engine's answer to one job, sent by the engine's worker thread to the actor (local only).
struct executor_job_done {
  uint64_t job = 0;
  std::shared_ptr<void> result;  // the job's typed result; the actor knows its type from the job id
};

using gpu_executor_actor = caf::typed_actor<
    /// Uploads the model's weights; answers the device's name. Errors: out_of_memory, device_fault.
    caf::replies_to<bind_model>::with<std::string>,
    /// Frees a bound model's device memory (no-op when not bound).
    caf::replies_to<unload_atom, model_key>::with<bool>,
    /// Runs a request on a bound model. Errors: invalid_argument (bad inputs), unavailable
    /// (queue full, model not bound), device_fault.
    caf::replies_to<infer_request>::with<infer_reply>, caf::replies_to<status_atom>::with<executor_status>,
    caf::reacts_to<executor_job_done>>;

/// Spawns an executor over `engine`, which it owns from then on. `node` names the node in replies;
/// `instruments` (outliving the actor) receives queue and compute durations per model.
gpu_executor_actor spawn_gpu_executor(caf::actor_system& sys, std::unique_ptr<ExecutorEngine> engine, std::string node,
                                      NodeInstruments* instruments);

}  // namespace ember

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ember::bind_model)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ember::executor_job_done)
