// The node_router's state, shared by its two translation units: node_router.cpp (replicas, the
// pinned binding, reports) and node_router_late.cpp (late binding). Internal to the router.
//
// Time: the router reads it only from its actor clock (`self->clock().now()`, through now_us() or
// directly), never from a system clock, so that CAF's deterministic test coordinator drives load
// durations, SLO latencies, the RRC queue's periods and the restart backoff.
#pragma once

#include <caf/actor_clock.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/node/node_router.hpp"
#include "actors/node/swap_controller.hpp"
#include "actors/node_router_interface.hpp"
#include "gpu/executor.hpp"
#include "model/model_profile.hpp"
#include "placement/workflow_plan.hpp"

namespace ember {

struct router_state {
  static inline const char* name = "ember.node_router";

  router_state() = default;
  router_state(const router_state&) = delete;
  router_state& operator=(const router_state&) = delete;
  /// A router that dies (killed by a fault, or stopped) answers every request it still holds as
  /// unavailable, so its callers retry at once (as actors/pending_answers.hpp does for executors).
  ~router_state();

  struct Device {
    gpu_executor_actor actor;
    std::string name;
    uint64_t capacity = 0;
    uint64_t bound_bytes = 0;  // weights this router bound there (the executor's own count is exact)
    uint32_t failed_restarts = 0;  // in a row; the next try waits 1 s x 2^failed_restarts, at most 60 s
    bool restarting = false;       // a restart_atom is out
  };
  struct Replica {
    bool ready = false;
    bool pinned = false;  // the cache was told to keep the bytes
    size_t device = 0;
    uint64_t weights_bytes = 0;
    std::string blob_key;
    replica_info info;
    caf::actor_clock::time_point started;  // the actor clock's, when the load began
    std::vector<caf::typed_response_promise<replica_info>> waiters;
    /// Late binding: the host copy every swap reads.
    std::shared_ptr<const gpu::Model> model;
    /// The SLO set at run time (load_replica::slo, the console's slo; deadline 0: none), and the
    /// one the replica has without it (model.json's, the node's, or derived from its warm latency
    /// at registration), which clearing the override restores.
    slo_setting slo;
    slo_setting own;
    /// profile.json as the repository holds it (load_replica::profile_json, checked against the
    /// model): what burst scaling decides from. Null: none.
    std::shared_ptr<const gpu::ModelProfile> profile;
  };
  /// Late binding: a request between arrival and answer.
  struct Held {
    /// Shared with the executor's swap_request; kept to retry the request after a fault.
    std::shared_ptr<const infer_request> request;
    caf::typed_response_promise<infer_reply> promise;
    bool profile = false;  // the registration profile of a model (no client)
    bool warmup = false;   // a pipeline member's first run, to swap it in (no client, no answer)
    bool ready_after = false;  // warmup: the replica is ready once it ran (a member's full model)
    /// Runs alone: a batch it was in failed, and each member is retried once by itself.
    bool solo = false;
    /// Runs alone: it ran out of device memory beside other runs, and is retried once as a device's
    /// only request.
    bool alone = false;
    /// A step of a workflow run here (node_router_workflow.cpp), by run id (0: a client's request):
    /// its answer goes to the run, not to `promise`.
    uint64_t workflow = 0;
    size_t step = 0;
    /// Its inputs that earlier steps kept on a device, named as the model's inputs, and the
    /// outputs it keeps on its device for later steps.
    struct DeviceInput {
      std::string name;
      gpu::KeptValue value;
      uint32_t device = 0;
    };
    std::vector<DeviceInput> device_inputs;
    std::vector<std::string> keep;
  };

  /// A workflow request running here: its steps are late-binding requests of their models
  /// (Held::workflow), its intermediates kept on the devices that computed them.
  struct WorkflowRun {
    WorkflowRun(std::shared_ptr<const ParsedWorkflow> p, std::vector<model_key> m)
        : parsed(std::move(p)),
          config(parsed->config),
          plan(parsed->plan),
          progress(plan),
          models(std::move(m)),
          slots(plan.slots()),
          submitted_us(plan.steps(), 0) {}
    WorkflowRun(const WorkflowRun&) = delete;
    WorkflowRun& operator=(const WorkflowRun&) = delete;

    std::shared_ptr<const ParsedWorkflow> parsed;  // shared with the cache and other runs
    const WorkflowConfig& config;
    const WorkflowPlan& plan;
    WorkflowProgress progress;       // reads plan: never moved (held by pointer)
    std::vector<model_key> models;   // per step
    std::string id;                  // the client's request id
    std::vector<std::string> asked;  // outputs asked (empty: all)
    caf::typed_response_promise<infer_reply> promise;
    /// A slot holds a host tensor (a request input, or an output the answer reads) and/or a value
    /// kept on device `device` (an output a later step reads).
    struct Slot {
      std::optional<tensor_msg> host;
      std::optional<gpu::KeptValue> kept;
      uint32_t device = 0;
    };
    std::vector<Slot> slots;
    size_t running = 0;                 // steps dispatched and not answered
    std::vector<int64_t> submitted_us;  // per step, when it was submitted (now_us)
    bool failed = false;
    uint64_t queue_us = 0, compute_us = 0;
  };

  /// A pipeline stage held here (its replica is under the stage key in `replicas`).
  struct Stage {
    struct Pending {
      stage_request request;
      caf::typed_response_promise<infer_reply> promise;
    };
    /// The whole model as this node holds it (header and this range only): its graph says which
    /// carried values later stages still read.
    std::shared_ptr<const gpu::Model> whole;
    gpu::LayerRange range;
    /// The stage model's inputs, by name: what the stage takes of the carried tensors.
    std::vector<std::string> inputs;
    bool busy = false;
    std::deque<Pending> pending;
    /// Requests the downstream stage may still take; sent ones it has not taken yet, by seq, with
    /// the key their handed-off tensors wait under in the blob store (empty: carried inline).
    uint32_t credits = 1;
    std::map<uint64_t, std::string> outstanding;
    uint64_t next_seq = 1;
  };

  /// A request a stage here handed to the next stage and whose answer it awaits: answered by
  /// that answer, or as retryable when the downstream router goes down first (its promises die
  /// with it, unanswered). Keyed by a router-wide id.
  struct HopWait {
    caf::actor_addr downstream;
    model_key stage;  // the stage here that sent it
    uint64_t seq = 0;
    std::string node;
    std::shared_ptr<Stage::Pending> pending;
    uint64_t own_us = 0;
    std::string handoff;  // the blob store key of the tensors handed over (empty: inline)
  };

  NodeRouterConfig config;
  std::map<model_key, Stage> stages;
  std::map<uint64_t, HopWait> hop_waits;
  uint64_t next_hop = 1;
  std::set<caf::actor_addr> monitored;  // downstream routers
  std::vector<Device> devices;
  model_cache_actor cache;
  NodeInstruments* instruments = nullptr;
  std::map<model_key, Replica> replicas;

  // -- late binding ------------------------------------------------------------------------------
  std::unique_ptr<SwapController> swap;
  /// Burst scaling (AsyFunc), when any of it is on: the Shadows' table, and each ready Shadow's
  /// engine gate by its row id.
  std::unique_ptr<ShadowPairs> shadows;
  std::map<uint64_t, std::shared_ptr<EngineGate>> shadow_gates;
  std::map<uint64_t, Held> held;
  /// Late binding: dispatches sent to an executor and not answered yet, by lead request id, with
  /// when they were sent (the router's clock, us). A request to an executor carries no CAF timeout:
  /// each would cost the actor clock's thread two wake-ups per request, the hottest path there is;
  /// late_tick takes an executor that has not answered one for late->run_timeout_us as faulted.
  std::map<uint64_t, std::pair<SwapDispatch, int64_t>> running;
  std::map<std::string, model_key> keys;  // SwapController's model names
  /// Workflow requests running here, by run id.
  std::map<uint64_t, std::shared_ptr<WorkflowRun>> workflows;
  /// Each workflow's text, parsed once (a request carries the text; most repeat it).
  WorkflowCache parsed_workflows;
  uint64_t next_workflow = 1;
  uint64_t next_request = 1;
  /// Dynamic batching: when the pending wake-up (to dispatch a gathered batch) is due; 0 = none.
  int64_t gather_wake_us = 0;
  /// The actor clock's time when the router started: now_us() counts from it.
  caf::actor_clock::time_point epoch;

  size_t ready_count() const {
    size_t n = 0;
    for (const auto& [k, r] : replicas) n += r.ready && !stages.count(k);  // a stage is not a replica
    return n;
  }
};

using router_pointer = node_router_actor::stateful_pointer<router_state>;

/// Microseconds on the actor clock since the router started: the `now_us` of the SwapController
/// and its RRC queue (request arrivals, latencies, periods).
inline int64_t now_us(router_pointer self) {
  return std::chrono::duration_cast<std::chrono::microseconds>(self->clock().now() - self->state.epoch).count();
}

/// Ends a load: answers its waiters; on error forgets the replica.
void finish_load(router_pointer self, const model_key& key, const caf::error& err);

// node_router_pipeline.cpp
/// Takes a request for a stage held here: queued, run when the stage is free and holds a credit.
caf::result<infer_reply> stage_take(router_pointer self, stage_request& req);
/// The downstream took request `seq` of `stage`: one more credit.
void stage_credit(router_pointer self, const model_key& stage, uint64_t seq);
/// A stage leaves the node: its queued requests fail as unavailable (retryable).
void stage_drop(router_pointer self, const model_key& stage);
/// A monitored downstream router went down: what it held fails as retryable.
void stage_downstream_down(router_pointer self, const caf::actor_addr& downstream);

// node_router_late.cpp
/// Starts the late-binding controller (and its tick) when config.late is set.
void late_start(router_pointer self);
/// A fetched model joins the node: profiled once on a device, then ready.
void late_register(router_pointer self, const model_key& key, std::shared_ptr<const gpu::Model> model);
caf::result<infer_reply> late_infer(router_pointer self, infer_request& req);
/// Forgets a model: fails its queued requests, frees its device copies.
void late_unload(router_pointer self, const model_key& key);
void late_tick(router_pointer self);
/// Fails a held request (a client's, or a workflow's step) with `e`.
void fail_held(router_pointer self, router_state::Held& held, const Error& e);
/// Submits a request of `key` as `held` (a client's or a step's): queued, dispatched by pump;
/// `prefer`: the device it would rather run on (SwapController::submit).
Status late_submit(router_pointer self, const model_key& key, router_state::Held held,
                   std::optional<uint32_t> prefer = std::nullopt);
/// Dispatches what can start now.
void late_pump(router_pointer self);
/// Burst scaling takes the model (again) with its profile and SLO as they are now; nothing when it
/// is off or the model has no profile.
void late_scale_model(router_pointer self, const model_key& key);

// node_router_workflow.cpp
/// A workflow request: its ready steps submitted at once; answered when the last step answered.
caf::result<infer_reply> workflow_take(router_pointer self, workflow_request& req);
/// A step answered (or failed: r.error, r.fault) on `device`.
void workflow_step_done(router_pointer self, router_state::Held& held, swap_reply& r, uint32_t device);
/// A step cannot run (unloaded, refused, its inputs' device faulted).
void workflow_step_failed(router_pointer self, router_state::Held& held, const Error& e);

/// Restarts a faulted executor; a failed restart is tried again later, backing off.
/// `why` says what happened to it, for the log ("faulted", "died: its supervisor replaced it").
void restart_device(router_pointer self, uint32_t device, const char* why = "faulted");

}  // namespace ember
