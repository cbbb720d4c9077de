// SwapController: the node_router's late-binding brain (Torpor's controller, §5): which device
// serves each request, what it swaps from and what it evicts, over the pure policies of
// placement/ (swap_scheduler: Algorithm 1 or random; eviction: Torpor or LRU; rrc_queue: SLO-aware
// order and α). It tracks each device's state (executing, loading, resident, locked, free pool
// bytes) from what it dispatched and what the executors answered; it never talks to an actor.
//
// Owner: the node_router (one per node, called from that actor only). Plain C++: not thread-safe,
// never blocks, no clock (every time is a `now_us` from the router's monotonic clock).
//
// Models are named by their model_key here as everywhere on the node. placement/ knows them by a
// string (it cannot see model_key): the key's "<name>/<version>", made once per model the first
// time the controller sees it and kept both ways (a few bytes per model version ever served), so
// that no request builds one.
//
// Request lifecycle:  submit ──▶ queued (RRC order) ──dispatch──▶ running on one device ──finish──▶ done
//                                   ▲                                  │ fault: the device is down
//                                   └────────── requeued ◀─────────────┘ until device_up (restart)
// One request per device at a time (Torpor: one function per GPU), so a swap-in is pipelined with
// the very request it serves and "loading" means "executing a cold request". Where Ember departs
// from it (options.run_ahead > 0): a request of a model already resident on a busy device (not
// being copied in, not a fallback victim of the running swap) may queue behind the running one as
// a plain run, up to run_ahead deep (not for a model that batches: its waiting requests are better
// served as one batch when the device frees). The executor runs its jobs in order, so this changes nothing
// the policies decide (a swap, an eviction or a copy still waits for an idle device); it removes
// the round trip between one request's end and the next one's start.
//
// Concurrent runs (options.streams > 1; StreamBox's functions as streams, another departure from
// Algorithm 1, which assumes one request per device): while a device executes a request (its
// "primary", which Algorithm 1 placed), requests of other models resident there may run beside it,
// up to streams at once, each admitted by memory: the activation bytes its model's profile
// measured must fit in the device's workspace beside those of the runs already there. Only a
// device that is not loading takes them (a swap-in keeps the device to itself), and the policies
// still see a device as busy while its primary runs, as before. A device's runs answer in any
// order; runs ahead then queue only behind the primary's own model (the executor's strand of it).
//
// Invariant: a replica another device copies from (a lock) is never dropped while the copy runs.
// Planned victims leave the device's state at dispatch; fallback victims (dropped only if the pool
// turns out too fragmented) are hidden from every other decision until the swap answered, so no
// copy is ever started from a replica that the running swap might free and overwrite.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "actors/model_key.hpp"
#include "base/status.hpp"
#include "config/choices.hpp"
#include "placement/eviction.hpp"
#include "placement/rrc_queue.hpp"
#include "placement/swap_scheduler.hpp"

namespace ember {

struct SwapControllerOptions {
  /// Algorithm 1 (torpor) or the random ablation.
  SwapScheduler scheduler = SwapScheduler::torpor;
  placement::EvictionRule eviction = placement::EvictionRule::torpor;
  placement::RrcOptions queue;
  uint64_t seed = 1;
  /// Runs of a resident model dispatched to a device while it still executes, each behind the one
  /// before (binding.run_ahead): the executor starts the next the moment the last ends, instead of
  /// after its answer has gone to the router and the router's dispatch has come back. 0: Torpor's
  /// one request per device.
  uint32_t run_ahead = 0;
  /// Runs of different models a device executes at once (binding.streams; see the header). 1:
  /// one at a time.
  uint32_t streams = 1;
};

/// A model the node serves: its bytes live in host memory; device copies come and go.
struct SwapModel {
  model_key key;
  /// Pool bytes a device copy takes (the weights; the executor reports the exact footprint).
  uint64_t bytes = 0;
  placement::Heaviness heaviness = placement::Heaviness::light;
  /// SLO: a request meets it when answered within deadline_us (0 = best effort) ...
  uint64_t deadline_us = 0;
  /// ... for this share of requests.
  double percentile = 0.98;
  /// Dynamic batching (model.json serving): more than 1 lets a dispatch take more queued requests of
  /// the model (the router's `join` decides which and how many rows).
  uint32_t max_batch = 1;
  /// While fewer than this many requests wait (0: max_batch), a free device waits for more, up to
  /// max_queue_delay_us after the oldest arrived, and never past its deadline less warm_us.
  uint32_t preferred_batch = 0;
  uint64_t max_queue_delay_us = 0;
  /// The model's warm latency (its registration profile), microseconds; 0 before it is known.
  uint64_t warm_us = 0;
  /// Device bytes a run's activations take (its profile's liveness plan; 0 before it is known):
  /// what a run beside others needs free in the device's workspace.
  uint64_t activation_bytes = 0;
  /// Model-level scaling (AsyFunc's Algorithm 1, binding.bodies model_level): at most this many
  /// devices hold a copy at once (a request waits for one of them rather than start another); 0:
  /// any number (late binding's own: every idle device may take a copy).
  uint32_t max_devices = 0;
  /// Adaptive batching (AsyFunc's Algorithm 3, binding.adaptive_batching): the expected latency of a
  /// batch of k rows at index k - 1 (requests count as one row each). Set, it replaces
  /// preferred_batch and max_queue_delay_us: a free device waits for one more request while the
  /// oldest would still meet its deadline with it, and takes the batch the moment it would not.
  std::vector<double> batch_us;
};

/// One request to run now on one device.
struct SwapDispatch {
  uint64_t request = 0;
  model_key model;
  uint32_t device = 0;
  placement::SwapAction action = placement::SwapAction::run;
  /// swap_from_peer: the device copied from (locked until finish).
  std::optional<uint32_t> source;
  /// Evict these first (the policy's plan), then `fallback` in order if the pool still lacks room.
  std::vector<model_key> evict;
  std::vector<model_key> fallback;
  int64_t arrival_us = 0;
  std::string reason;
  /// Dynamic batching: more requests of the model that run with this one, oldest first.
  std::vector<placement::QueuedRequest> batch;
  /// The device's life it was dispatched in (a fault ends one): an answer from an earlier life
  /// changes nothing of the device's state.
  uint64_t life = 0;
  /// Runs beside the device's primary (options.streams > 1).
  bool beside = false;
  /// Workspace bytes the run holds on the device until it answers (counted: towards admission).
  uint64_t activation_bytes = 0;
  bool counted = false;
  /// The router's: the Shadow (ShadowPairs row) the run shares its rows with; 0: none.
  uint64_t shadow = 0;
};

/// What the executor answered for a dispatch.
struct SwapOutcome {
  /// The request produced an answer (right or a client error): it counts towards the SLO.
  bool answered = true;
  /// The device faulted: it is down until device_up; the request goes back to the queue.
  bool fault = false;
  /// The model is resident on the device afterwards, taking `footprint` pool bytes.
  bool resident = false;
  uint64_t footprint = 0;
  /// Models the executor dropped (the plan's and fallbacks actually used).
  std::vector<model_key> evicted;
  uint64_t pool_free = 0;
};

struct SwapCounters {
  uint64_t runs = 0, host_swaps = 0, peer_swaps = 0, evictions = 0, faults = 0, requeued = 0;
  /// Runs dispatched beside another on a busy device (options.streams > 1).
  uint64_t beside = 0;
};

class SwapController {
 public:
  /// `pool_bytes[d]`: device d's model pool capacity; one per topology device.
  SwapController(placement::NodeTopology topology, std::vector<uint64_t> pool_bytes, SwapControllerOptions options);
  /// Device memory outside device d's pool that runs' activations share (options.streams > 1:
  /// the admission of runs beside others). 0: not known, nothing runs beside.
  void set_workspace(uint32_t device, uint64_t bytes);

  /// Adds a model or updates its size, heaviness and SLO. invalid_argument when it fits in no
  /// device's pool, or for a bad SLO.
  Status add_model(const SwapModel& model);
  /// Forgets a model: returns its queued requests (to fail) and the devices holding a copy (for the
  /// router to free). A request of it still running finishes normally.
  std::pair<std::vector<uint64_t>, std::vector<uint32_t>> remove_model(const model_key& key);
  bool has_model(const model_key& key) const;
  std::optional<SwapModel> model(const model_key& key) const;
  /// A run of `name` took `bytes` of activations: its estimate (SwapModel::activation_bytes) grows
  /// to the largest seen (larger batches and inputs plan more).
  void note_activations(const model_key& key, uint64_t bytes);

  /// Queues a request. invalid_argument for an unknown model; unavailable when the queue is full.
  /// `prefer`: a device the request would rather run on (a workflow step whose inputs are kept
  /// there). Where Ember departs from Algorithm 1: when the request is dispatched and its model is
  /// resident and idle on that device, it runs there instead of where the policy chose; otherwise
  /// the policy's choice stands (moving a model costs more than bringing its inputs over).
  Status submit(uint64_t request, const model_key& model, int64_t now_us,
                std::optional<uint32_t> prefer = std::nullopt);
  /// Puts a request back at the end of its model's queue (after a fault), keeping its arrival.
  /// `alone`: it ran out of memory beside other runs; no request of its model runs beside others
  /// until it has been dispatched as a device's own request, and nothing is admitted beside it.
  Status requeue(uint64_t request, const model_key& model, int64_t arrival_us, bool alone = false);
  /// For a request about to be dispatched, which other queued requests (by id) may join it; an empty
  /// filter: none.
  using BatchJoin = std::function<placement::RrcQueue::RequestFilter(const placement::QueuedRequest& lead)>;
  /// Everything that can start now, in priority order, with the device state updated as if started.
  /// A model with max_batch > 1 takes up to max_batch − 1 more of its queued requests that `join`
  /// accepts into the dispatch; one still gathering (see SwapModel) is passed over for now.
  std::vector<SwapDispatch> dispatch(int64_t now_us, const BatchJoin& join = {});
  /// After dispatch: when the earliest model passed over while gathering a batch stops waiting
  /// (the router dispatches again then); nullopt when none is.
  std::optional<int64_t> gathering_until() const { return gathering_until_; }
  /// The executor's answer for `d`; `latency_us` is arrival to answer (the SLO's measure); each
  /// member of d.batch is recorded with its own (now_us minus its arrival).
  void finish(const SwapDispatch& d, const SwapOutcome& outcome, uint64_t latency_us, int64_t now_us);

  /// A request of `model` ran on `device` without a dispatch (an inline run: the device was idle and
  /// the model resident), answered `latency_us` after it arrived: recorded as a run there (its last
  /// use, for eviction) and as an outcome (the SLO). Nothing when the model or its copy there is gone.
  void ran_inline(const model_key& model, uint32_t device, uint64_t latency_us, int64_t now_us);

  /// The device faulted: nothing is resident there and nothing is dispatched to it until device_up.
  void device_down(uint32_t device);
  /// The device's executor restarted with an empty pool of `pool_bytes`.
  void device_up(uint32_t device, uint64_t pool_bytes);
  bool device_is_up(uint32_t device) const { return devices_.at(device).up; }
  /// A device lent to something other than requests (a Shadow, AsyFunc): nothing is dispatched to
  /// it while it is lent; its replicas stay.
  void set_lent(uint32_t device, bool lent);
  bool lent(uint32_t device) const { return devices_.at(device).lent; }
  /// Whether the device could take a request now: up, not lent, not executing or loading.
  bool idle(uint32_t device) const;
  /// The devices in the order Algorithm 1 would take them now for a request of a model resident on
  /// several (placement::run_order over idle()): what the router publishes to its inline runs.
  std::vector<uint32_t> run_order() const;
  /// Devices up and not lent holding a complete copy of `model` (a Body, AsyFunc's word).
  std::vector<uint32_t> holders(const model_key& model) const;
  uint64_t free_bytes(uint32_t device) const { return devices_.at(device).free; }
  /// Replaces a model's limits that scaling changes as it runs (SwapModel::max_devices, batch_us);
  /// nothing for an unknown model.
  void set_scaling(const model_key& model, uint32_t max_devices, std::vector<double> batch_us);
  /// Forgets `model`'s copy on `device` (model-level scaling in: the router frees it there); false
  /// when there is none, or it is in use (executing there, being copied in, or a copy's source).
  bool drop(const model_key& model, uint32_t device);

  /// Runs the RRC queue's periods; returns when the next is due.
  int64_t tick(int64_t now_us) { return queue_.tick(now_us); }

  const placement::RrcQueue& queue() const { return queue_; }
  /// Requests of `model` waiting in the queue.
  size_t queued(const model_key& model) const;
  const SwapCounters& counters() const { return counters_; }
  /// Models resident on `device`.
  std::vector<model_key> resident(uint32_t device) const;
  uint32_t device_count() const { return static_cast<uint32_t>(devices_.size()); }

 private:
  struct Replica {
    uint64_t bytes = 0;
    uint64_t last_use = 0;
    bool swapping_in = false;
  };
  struct Device {
    bool up = true;
    bool lent = false;  // set_lent
    bool executing = false;
    /// Runs dispatched behind the executing request (run_ahead), answered in dispatch order.
    uint32_t behind = 0;
    /// The executing request's model (runs ahead queue behind it), and whether it must run alone
    /// (nothing is admitted beside it).
    std::string primary;
    bool alone = false;
    /// Runs beside the primary, and the activation bytes of every counted run in flight, by model.
    uint32_t beside = 0;
    uint64_t workspace = 0;
    uint64_t activations = 0;
    std::multiset<std::string> running;
    /// Incremented by device_down.
    uint64_t life = 0;
    placement::DeviceLoad loading;
    uint64_t capacity = 0;
    uint64_t free = 0;
    std::map<std::string, Replica> replicas;
    std::map<std::string, uint32_t> locks;  // model -> copies reading it
    /// The running swap's fallback victims: the executor may drop any of them (when fragmentation
    /// leaves no room), so until it answered they are no copy to run on or copy from.
    std::set<std::string> may_evict;
  };
  struct Plan {
    placement::SwapDecision decision;
    std::vector<placement::EvictionVictim> evict;
    std::vector<std::string> fallback;
  };

  /// placement/'s name of `key` (see the header), and the key of one of its names.
  const std::string& name_of(const model_key& key) const;
  const model_key& key_of(const std::string& name) const;

  std::vector<placement::DeviceState> states() const;
  std::vector<placement::DeviceReplicaView> views() const;
  /// A plan for `model` given the device states `st` (a copy: devices that cannot make room are
  /// marked busy in it while trying), or nullopt when it has to wait.
  std::optional<Plan> plan_for(const std::string& model, std::vector<placement::DeviceState> st);
  SwapDispatch start(const placement::QueuedRequest& q, const Plan& plan);
  /// A plain run of resident `q` on busy `device` (beside or behind what runs there).
  SwapDispatch run_on_busy(const placement::QueuedRequest& q, uint32_t device, const char* reason);
  /// Whether `dev` takes a run of `m` beside what runs there now.
  bool admits_beside(const Device& dev, const SwapModel& m) const;
  /// Charges (dispatch) and releases (answer) a counted run's activations on its device.
  void count_run(Device& dev, SwapDispatch& d);
  void uncount_run(Device& dev, const SwapDispatch& d);

  placement::NodeTopology topology_;
  SwapControllerOptions options_;
  std::vector<Device> devices_;
  std::map<std::string, SwapModel> models_;         // by placement's name
  mutable std::map<model_key, std::string> names_;  // name_of's, never erased
  mutable std::map<std::string, model_key, std::less<>> keys_;
  placement::RrcQueue queue_;
  std::mt19937_64 rng_;
  uint64_t tick_ = 0;  // last-use stamps
  SwapCounters counters_;
  std::optional<int64_t> gathering_until_;
  std::map<uint64_t, uint32_t> prefer_;  // queued requests' preferred devices (submit)
  std::map<uint64_t, std::string> alone_;         // queued requests that must run alone, and their models
  std::map<std::string, uint32_t> alone_models_;  // of those, how many per model
};

}  // namespace ember
