// The node_router's state, shared by its translation units (node_router.hpp lists them). Internal to
// the router. What the router does not decide itself it asks plain classes beside it: the
// SwapController (which device serves a request), ShadowPairs (burst scaling), HeldRequests (the
// requests between arrival and answer, and what an answer means), WorkflowRuns (workflow requests)
// and DeviceHealth (restarts and their backoff). Pipeline stages' traffic is the stage host's.
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
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/node/device_health.hpp"
#include "actors/node/generation_streams.hpp"
#include "actors/node/held_request.hpp"
#include "actors/node/key_format.hpp"
#include "actors/node/node_router.hpp"
#include "actors/node/request_batch.hpp"
#include "actors/node/swap_controller.hpp"
#include "actors/node/workflow_runs.hpp"
#include "actors/node_router_interface.hpp"
#include "model/model_profile.hpp"

namespace ember {

/// How long a fetch may take before the router gives up on it (a 1 GiB model over a slow link).
constexpr auto kFetchTimeout = std::chrono::minutes(10);
/// How long binding (uploading weights to a device) may take.
constexpr auto kBindTimeout = std::chrono::minutes(5);

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
    DeviceHealth health;       // late binding: its restarts
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
    /// A pipeline stage (load_stage; its replica is under stage->wire()): the whole model as fetched
    /// (the header and this range), handed to the stage host with the stage once ready. A stage is
    /// not a replica of a model: never reported, scaled or counted as one.
    std::optional<stage_key> stage;
    std::shared_ptr<const gpu::Model> whole;
    /// Dynamic batching of sequences of different lengths (model.json's dynamic_batching.pad), set
    /// when batching turns on at registration.
    BatchPadding padding;
  };

  NodeRouterConfig config;  // config.stages: the stage host now
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
  HeldRequests held;
  /// Text generation: which device runs each stream id, for cancel (either binding).
  GenerationStreams generations;
  std::optional<WorkflowRuns> workflows;
  /// Dynamic batching: when the pending wake-up (to dispatch a gathered batch) is due; 0 = none.
  int64_t gather_wake_us = 0;
  /// The actor clock's time when the router started: now_us() counts from it.
  caf::actor_clock::time_point epoch;

  /// Ready replicas of models (stages are not).
  size_t ready_count() const {
    size_t n = 0;
    for (const auto& [k, r] : replicas) n += r.ready && !r.stage;
    return n;
  }
};

using router_pointer = node_router_actor::stateful_pointer<router_state>;

/// Microseconds on the actor clock since the router started: the `now_us` of the SwapController
/// and its RRC queue (request arrivals, latencies, periods).
inline int64_t now_us(router_pointer self) {
  return std::chrono::duration_cast<std::chrono::microseconds>(self->clock().now() - self->state.epoch).count();
}

// node_router.cpp
/// Ends a load: answers its waiters; on error forgets the replica. A stage that is ready goes to
/// the stage host.
void finish_load(router_pointer self, const model_key& key, const caf::error& err);
/// Keeps a ready replica in the ledger, for a successor of this router; forget() drops it.
void remember(router_pointer self, const model_key& key, const router_state::Replica& r);
void forget(router_pointer self, const model_key& key);

// node_router_restore.cpp
/// A router spawned over a ledger with entries (its predecessor died): serves those replicas again.
void restore(router_pointer self);
/// The node's supervisor replaced an executor, the cache or the stage host.
void replace_executor(router_pointer self, executor_replaced& x);
void replace_cache(router_pointer self, cache_replaced& x);
void replace_stages(router_pointer self, stages_replaced& x);
/// Late binding: restarts a faulted executor; a failed restart is tried again later, backing off
/// (DeviceHealth). `why` says what happened to it, for the log ("faulted", "died: its supervisor
/// replaced it").
void restart_device(router_pointer self, uint32_t device, const char* why = "faulted");

// node_router_late.cpp
/// Starts the late-binding controller (and its tick) when config.late is set.
void late_start(router_pointer self);
caf::result<infer_reply> late_infer(router_pointer self, infer_request& req);
void late_tick(router_pointer self);
/// Submits a request of `key` as `held` (a client's, a step's, a profile, a warm-up): queued,
/// dispatched by late_pump. `prefer`: the device it would rather run on (SwapController::submit).
Status late_submit(router_pointer self, const model_key& key, Held held, std::optional<uint32_t> prefer = std::nullopt);
/// Dispatches what can start now.
void late_pump(router_pointer self);
/// Dispatch `d` (started) is answered with `r` from the router's next message, without an executor.
void late_answer_now(router_pointer self, const SwapDispatch& d, swap_reply r);
/// Fails a held request (a client's, or a workflow's step) with `e`.
void fail_held(router_pointer self, Held& held, const Error& e);

// node_router_models.cpp
/// A fetched model joins the node: profiled once on a device, then ready (a pipeline stage or
/// member: warmed up instead).
void late_register(router_pointer self, const model_key& key, std::shared_ptr<const gpu::Model> model);
/// What the registration profile measured, read from its executor's answer.
struct ProfileRun {
  std::optional<Error> error;
  uint64_t cold_us = 0, warm_us = 0;
  uint64_t plan_bytes = 0, footprint = 0;
};
/// The model's registration profile ended: heaviness and SLO from the cold and warm runs.
void late_profiled(router_pointer self, const model_key& key, const ProfileRun& run);
/// Forgets a model: fails its queued requests, frees its device copies.
void late_unload(router_pointer self, const model_key& key);
/// Burst scaling takes the model (again) with its profile and SLO as they are now; nothing when it
/// is off or the model has no profile.
void late_scale_model(router_pointer self, const model_key& key);
/// A request of `key` arrived at `now` (now_us): burst scaling counts it and may start Shadows.
void late_arrival(router_pointer self, const model_key& key, int64_t now);
/// What ran inline since the last call (actors/node/inline_runs.hpp) enters the policies.
void late_absorb_inline(router_pointer self, int64_t now);
/// Burst scaling's period (the router's tick): Shadows released, copies dropped.
void late_scale_period(router_pointer self, int64_t now);
/// A Shadow's Body took its rows back (the Shadow is gone or failing): the pair ends.
void shadow_lost(router_pointer self, uint64_t shadow, const std::string& why);
/// The share of a plain run of `rows` rows of `model` on `device` its Shadow takes, with the
/// Shadow's gate and row id, when it has a ready one.
struct ShadowShare {
  std::shared_ptr<EngineGate> gate;
  double share = 0;
  uint64_t row = 0;
};
std::optional<ShadowShare> shadow_share(router_pointer self, const model_key& model, uint32_t device, int64_t rows);

// node_router_workflow.cpp
/// A workflow request: its ready steps submitted at once; answered when the last step answered.
caf::result<infer_reply> workflow_take(router_pointer self, workflow_request& req);
/// A step answered (or failed: answer.error) on `device`.
void workflow_step_done(router_pointer self, const Held& held, WorkflowRuns::StepAnswer answer, uint32_t device);
/// A step cannot run (unloaded, refused, its inputs' device faulted).
void workflow_step_failed(router_pointer self, const Held& held, const Error& e);

// node_router_generate.cpp (text generation)
/// A generate_request with its sink: held and queued (late binding) or sent to the executor holding
/// the model (pinned); answers true once the stream joined a loop, or the error before any chunk.
caf::result<bool> generate(router_pointer self, generate_request& req, caf::actor& sink);
/// Stops generation `id`: queued -> answered as cancelled, never run; running -> its executor
/// cancels it. Unknown ids do nothing.
void cancel_generation(router_pointer self, const std::string& id);
/// A monitored sink went down: its streams are cancelled and forgotten.
void generation_sink_down(router_pointer self, const caf::down_msg& down);
/// launch(): a generation's or a resume's swap_request gets its order or parked streams; true when
/// the dispatch was answered here instead (cancelled while queued) and nothing is to be sent.
bool late_launch_generation(router_pointer self, const SwapDispatch& d, Held& held, swap_request& req);
/// The answer of a held request that ran by itself (a client's, a generation's join, a resume).
void late_answer(router_pointer self, Held held, swap_reply& r, uint32_t device);
/// A held generation or resume that cannot run (fail_held).
void fail_generation(router_pointer self, Held& held, const Error& e);
/// Streams an eviction on `device` set aside: each queued to resume, preferring `device`, once
/// `turn_us` has passed (how long the dispatch that evicted them took, its swap-in included): the
/// model that took the device keeps it at least that long before the set-aside one contends again,
/// so two generating models that cannot share a device spend at most about half of it swapping
/// instead of trading it after every step.
void late_parked(router_pointer self, uint32_t device,
                 std::vector<std::pair<model_key, std::shared_ptr<ParkedGenerations>>> parked, int64_t turn_us);

}  // namespace ember
