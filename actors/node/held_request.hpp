// Held requests: the late-binding router's record of each request between its arrival and its
// answer (node_router_late.cpp): what kind of request it is, whether and how it is being retried,
// the dispatches in flight to executors, and the one decision each executor's answer comes down to
// (classify_answer, a pure function of the answer, its dispatch and the request it led).
//
// Owner: the node_router, on its actor only (not thread-safe). No actor and no clock in here: times
// are the router's now_us, passed in. A Held carries the CAF promise its client waits on; only the
// router delivers it.
//
// A held request:  held (queued in the SwapController) ──dispatch: started──▶ running ──answer──▶
//   classified: answered or failed (taken) / retried (held again, queued again: its retry says how).
// A generation's dispatch that faults is queued again like a request (nothing was generated: the
// executor answers a join only once the stream joined or was refused).
// A dispatch the run watchdog finds overdue is answered as a fault; its real answer, should it
// still come, finds it no longer running (finished() false) and is dropped.
#pragma once

#include <caf/typed_response_promise.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/gpu_executor_interface.hpp"
#include "actors/inference_messages.hpp"
#include "actors/node/swap_controller.hpp"
#include "actors/node/workflow_runs.hpp"

namespace ember {

/// What a held request is for.
enum class HeldKind : uint8_t {
  client,         // a client's request: answered to its promise
  profile,        // the registration profile of a model: a cold and a warm run (no client)
  stage_warmup,   // one tiny run that swaps a pipeline stage in (no client, no answer)
  member_warmup,  // ... a pipeline member's full model, which is ready once it ran
  workflow_step,  // a step of a workflow run here (WorkflowRuns): its answer goes to the run
  generation,     // a text generation (Held::generation): its join answers Held::joined; never batched
  resume,         // generation streams set aside by an eviction (Held::parked), to join the model again
};

/// Whether a request of `kind` is traffic: a client's request or a workflow's step, counted in the
/// SLO and the executions, seen by burst scaling, and shared with a Shadow.
constexpr bool is_traffic(HeldKind kind) { return kind == HeldKind::client || kind == HeldKind::workflow_step; }

/// How a request runs again after an answer that was no answer. Each retry is taken once.
enum class HeldRetry : uint8_t {
  none,
  solo,            // a batch it was in failed: it runs by itself from now on (no batch takes it)
  alone,           // it ran out of device memory beside other runs: it ran again as a device's only request
  solo_and_alone,  // both, in either order
};
constexpr bool runs_solo(HeldRetry r) { return r == HeldRetry::solo || r == HeldRetry::solo_and_alone; }
constexpr bool retried_alone(HeldRetry r) { return r == HeldRetry::alone || r == HeldRetry::solo_and_alone; }
constexpr HeldRetry with_solo(HeldRetry r) { return retried_alone(r) ? HeldRetry::solo_and_alone : HeldRetry::solo; }
constexpr HeldRetry with_alone(HeldRetry r) { return runs_solo(r) ? HeldRetry::solo_and_alone : HeldRetry::alone; }

/// A request between its arrival and its answer.
struct Held {
  /// Shared with the executor's swap_request; kept to retry the request after a fault.
  std::shared_ptr<const infer_request> request;
  /// The client's (kind client; the others have none).
  caf::typed_response_promise<infer_reply> promise;
  HeldKind kind = HeldKind::client;
  HeldRetry retry = HeldRetry::none;
  /// workflow_step: the run and the step (WorkflowRuns), its inputs that earlier steps kept on a
  /// device, and the outputs it keeps on its device for later steps.
  uint64_t workflow = 0;
  size_t step = 0;
  std::vector<WorkflowRuns::KeptInput> device_inputs;
  std::vector<std::string> keep;
  /// generation: the request and its sink (`request` then names only the model), and the gateway's
  /// promise, answered true once the stream joined a loop or with why it did not. `cancelled`: the
  /// client cancelled it while it was queued (its promise answered already): dispatched, it is
  /// answered without running.
  std::shared_ptr<const generation_order> generation;
  caf::typed_response_promise<bool> joined;
  bool cancelled = false;
  /// resume: the streams to take back (failed resumable when the model cannot bind again).
  std::shared_ptr<ParkedGenerations> parked;
};

/// Whether `h` may lead or join a batch: a client's request not running solo.
constexpr bool batchable(const Held& h) { return h.kind == HeldKind::client && !runs_solo(h.retry); }

/// What an executor's answer to a dispatch means, for the request that led it.
enum class AnswerOutcome : uint8_t {
  fault,          // the executor faulted or fell silent: the dispatch's requests are queued again, the device restarts
  retry_alone,    // out of device memory beside other runs, the first time: it runs again as a device's only request
  retry_members,  // a batch failed short of a fault: each member runs again by itself
  batch,          // a batch answered: its reply is split among the members
  workflow_step,  // a workflow's step answered or failed: to its run
  warmed,         // a warm-up ran (member_warmup: the replica is ready now)
  profiled,       // the registration profile ran: heaviness and SLO from it, or the load fails
  answered,       // a client's answer
  failed,         // a client's error
};

/// Classifies `r`, the answer to dispatch `d` whose lead request is `lead`. Pure: anyone.
AnswerOutcome classify_answer(const swap_reply& r, const SwapDispatch& d, const Held& lead);
/// Whether the outcome answers the dispatch's requests (SwapOutcome::answered: the SLO counts it):
/// all but a fault and the retries.
constexpr bool answers(AnswerOutcome o) {
  return o != AnswerOutcome::fault && o != AnswerOutcome::retry_alone && o != AnswerOutcome::retry_members;
}

/// The held requests of a router, by request id, and the dispatches in flight.
class HeldRequests {
 public:
  /// A fresh request id (the SwapController queues it under this id; hold() it once queued).
  uint64_t next_id() { return next_id_++; }
  /// The id next_id() gives next.
  uint64_t peek_id() const { return next_id_; }
  void hold(uint64_t id, Held held) { held_.emplace(id, std::move(held)); }
  Held* find(uint64_t id) {
    auto it = held_.find(id);
    return it == held_.end() ? nullptr : &it->second;
  }
  /// Removes request `id` for its answer; nullopt when it is not held.
  std::optional<Held> take(uint64_t id);
  /// Every held request (to answer them all when the router dies).
  std::map<uint64_t, Held>& all() { return held_; }

  /// Dispatch `d` leaves for its executor at `now_us`. A request to an executor carries no CAF
  /// timeout (each would cost the actor clock's thread two wake-ups per request, the hottest path
  /// there is); the router's tick asks overdue() instead.
  void started(const SwapDispatch& d, int64_t now_us) { running_[d.request] = {d, now_us}; }
  /// The answer to the dispatch led by `request` came: when it started, or nullopt when it was taken
  /// as faulted already (the answer is stale and changes nothing).
  std::optional<int64_t> finished(uint64_t request) {
    auto it = running_.find(request);
    if (it == running_.end()) return std::nullopt;
    const int64_t started = it->second.second;
    running_.erase(it);
    return started;
  }
  bool running(uint64_t request) const { return running_.count(request) > 0; }
  /// Dispatches started `limit_us` or more before `now_us` and not answered.
  std::vector<SwapDispatch> overdue(int64_t now_us, int64_t limit_us) const;

 private:
  std::map<uint64_t, Held> held_;
  std::map<uint64_t, std::pair<SwapDispatch, int64_t>> running_;  // by lead request id: when started
  uint64_t next_id_ = 1;
};

}  // namespace ember
