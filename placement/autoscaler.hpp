// The autoscaling policy: from one tick's view of a model's load, how many replicas it should have
// and what to do now (up by k, keep, down by k), with the reason (Flashpoint §4.2.6 and §8.4, digest
// §1.5, §2.5, §5.1 points 6, 7 and 10; the knobs are Ray Serve's, config/autoscale_config.hpp).
//
// Pure: anyone, any thread; no clock (now_us is the caller's monotonic time, microseconds), no I/O.
// The caller (the manager's autoscaler loop) keeps one ScalerState per model and passes it to every
// decide(); the same inputs and state always give the same decision. Placing, draining and unbinding
// the replicas is the caller's.
//
// 1. The need. Each policy turns the load into a replica need, a real number ≥ 0 (s = the measured
//    execution time of one request on one replica, λ = arrival rate, q = requests queued):
//      ongoing_requests     need = ongoing / target_ongoing_requests   (Ray Serve's and Knative's)
//      arrival_rate (ATL)   need = λ · s · headroom
//      queue_latency (TSK)  need = s · (λ + E / target_queue_latency), where E = q + max(0, λ − μ) · C
//                           is the backlog expected when a new replica is ready (Flashpoint's E(x)):
//                           μ = (ready + pending) / s is the rate the replicas serve by then (the
//                           pending ones started earlier), C the expected cold start (the caller's
//                           measured time for the best source tier it has)
//      requests_per_minute  need = λ · 60 / target_requests_per_minute
//      model_level (MLS)    need = λ · headroom / R, R one replica's capacity within the SLO (AsyFunc's
//                           Eq. 1: the most rows a second at a batch that meets it, from the model's
//                           profile; batching is what sets it apart from arrival_rate's 1 / s). Its
//                           α is 1 / headroom (0.8 at the default 1.25) and its β, under which a
//                           replica goes, α / (1 + downscale_tolerance): the paper's 0.6 takes a
//                           tolerance of 1/3 (model.json or the cluster's autoscale section). As
//                           for every policy (point 2), a replica goes when the rate is under β of
//                           what the others carry without it, not of what all carry (the paper's
//                           test, which would scale in and straight out again)
//    Every need but model_level's is at least λ · s, the replicas the arrivals alone keep busy (a
//    replica runs one request at a time; model_level counts the batches a replica runs). A policy that needs s while
//    none is measured yet (no replica has run) falls back to ongoing_requests, and so does model_level while R is not
//    known (no profile, or no SLO declared in model.json).
// 2. The classification: Eq. 4.12 corrected. As printed, its up and down conditions overlap and its
//    down condition is under-provisioning (digest §2.5). Ember's, with supply = ready + pending
//    replicas and the capacity and demand both in replicas:
//      up    if ceil(need) > supply                         (the capacity falls short of the demand)
//      down  if ceil(need · (1 + downscale_tolerance)) < supply   (it exceeds the demand by at least
//                                                            one replica plus the tolerance)
//      keep  otherwise
//    The bands never overlap, so a constant need never turns back: after an up to ceil(need) the
//    down test fails, and a down never goes below ceil(need · (1 + tol)), where the up test fails.
//    An up goes to the target at once; a down for load removes half the surplus (rounded up) per
//    action, each after its own downscale_delay. The need of a closed loop (ongoing requests, queue
//    latency) is measured at the current supply and rises steeply as the supply nears saturation,
//    so a down straight to it would overshoot into an up; halving approaches it from above.
// 3. Clamps and delays. The count is clamped to [lower, max_replicas], where lower is min_replicas,
//    raised to 1 while a model with replicas has been busy within idle_timeout: only idleness takes a
//    model to zero. An up must hold for upscale_delay and a down for downscale_delay (each timer
//    restarts when its condition lapses, and when it fires); scaling from zero (a request waits),
//    up to min_replicas and down to max_replicas act at once, and so does the drop to min_replicas
//    of a model idle for idle_timeout (that timeout is its delay).
// 4. Pending replicas count as supply (a replica being placed is not asked for twice), and no
//    scale-down for load is made while any is pending (a starting replica is never cancelled, and
//    what an up just asked for is not undone before it could serve); the clamps' and idleness's
//    downs remove at most the ready ones.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "config/autoscale_config.hpp"

namespace ember::placement {

/// One tick's view of one model, summed over the gateways and nodes.
struct ModelLoad {
  double arrival_rate = 0;       // requests per second over the caller's window
  uint32_t ongoing = 0;          // requests in flight or queued, at gateways and on nodes
  uint32_t queued = 0;           // of those, the ones not executing yet
  uint64_t service_time_us = 0;  // mean execution time of one request on one replica; 0 = not measured
  uint64_t cold_start_us = 0;    // expected time until a new replica serves; 0 = unknown (taken as 0)
  uint32_t ready = 0;            // replicas serving
  uint32_t pending = 0;          // replicas being placed or loaded
  double capacity_rps = 0;       // model_level: one replica's rows a second within the SLO; 0 = not known
};

enum class ScaleAction : uint8_t { keep, up, down };

/// Why a decision is what it is (a metric label and the log line's reason).
enum class ScaleReason : uint8_t {
  steady,        // keep: the supply matches the need
  load,          // the policy's need, past its delay
  delayed,       // keep for now: a change is wanted but its delay has not passed
  from_zero,     // up at once: requests wait and no replica exists
  min_replicas,  // up at once to min_replicas
  max_replicas,  // down at once to max_replicas (the knob was lowered)
  idle,          // down at once to min_replicas after idle_timeout without a request
};

struct ScaleDecision {
  ScaleAction action = ScaleAction::keep;
  uint32_t count = 0;    // replicas to add (up) or remove (down)
  uint32_t desired = 0;  // the replica count the model should reach (shown while delayed too)
  double need = 0;       // the policy's raw need, before rounding, clamps and hysteresis
  ScaleReason reason = ScaleReason::steady;
};

/// What decide() remembers of a model between ticks.
struct ScalerState {
  std::optional<int64_t> up_since_us;    // the up condition holds since
  std::optional<int64_t> down_since_us;  // the down condition holds since
  std::optional<int64_t> idle_since_us;  // no arrivals and nothing ongoing since
};

/// The policy's need (point 1 above).
double replica_need(const AutoscaleConfig& config, const ModelLoad& load);

/// E = q + max(0, λ − μ) · C: the requests waiting when a new replica is ready (point 1; Flashpoint's
/// E(x), the queue a partitioned cold start is planned for). μ = (ready + pending) / s; with no
/// replica μ is 0, with replicas but no measured s it is taken as keeping up.
double expected_backlog(const ModelLoad& load);

/// One tick for one model: the decision, and `state` updated. A now_us earlier than a timer's start
/// counts as no time passed.
ScaleDecision decide(const AutoscaleConfig& config, const ModelLoad& load, ScalerState& state, int64_t now_us);

std::string_view to_string(ScaleAction action);
std::string_view to_string(ScaleReason reason);

/// The log line of a decision: "up by 2 to 5 (load): ongoing_requests need 4.50 with 3 ready, 0 pending".
std::string describe(const ScaleDecision& decision, const AutoscaleConfig& config, const ModelLoad& load);

}  // namespace ember::placement
