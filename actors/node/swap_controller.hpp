// SwapController: the node_router's late-binding brain (Torpor's controller, §5): which device
// serves each request, what it swaps from and what it evicts, over the pure policies of
// placement/ (swap_scheduler: Algorithm 1 or random; eviction: Torpor or LRU; rrc_queue: SLO-aware
// order and α). It tracks each device's state (executing, loading, resident, locked, free pool
// bytes) from what it dispatched and what the executors answered; it never talks to an actor.
//
// Owner: the node_router (one per node, called from that actor only). Plain C++: not thread-safe,
// never blocks, no clock (every time is a `now_us` from the router's monotonic clock).
//
// Request lifecycle:  submit ──▶ queued (RRC order) ──dispatch──▶ running on one device ──finish──▶ done
//                                   ▲                                  │ fault: the device is down
//                                   └────────── requeued ◀─────────────┘ until device_up (restart)
// One request per device at a time (Torpor: one function per GPU), so a swap-in is pipelined with
// the very request it serves and "loading" means "executing a cold request".
//
// Invariant: a replica another device copies from (a lock) is never dropped while the copy runs.
// Planned victims leave the device's state at dispatch; fallback victims (dropped only if the pool
// turns out too fragmented) are hidden from every other decision until the swap answered, so no
// copy is ever started from a replica that the running swap might free and overwrite.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

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
};

/// A model the node serves: its bytes live in host memory; device copies come and go.
struct SwapModel {
  std::string name;
  /// Pool bytes a device copy takes (the weights; the executor reports the exact footprint).
  uint64_t bytes = 0;
  placement::Heaviness heaviness = placement::Heaviness::light;
  /// SLO: a request meets it when answered within deadline_us (0 = best effort) ...
  uint64_t deadline_us = 0;
  /// ... for this share of requests.
  double percentile = 0.98;
};

/// One request to run now on one device.
struct SwapDispatch {
  uint64_t request = 0;
  std::string model;
  uint32_t device = 0;
  placement::SwapAction action = placement::SwapAction::run;
  /// swap_from_peer: the device copied from (locked until finish).
  std::optional<uint32_t> source;
  /// Evict these first (the policy's plan), then `fallback` in order if the pool still lacks room.
  std::vector<std::string> evict;
  std::vector<std::string> fallback;
  int64_t arrival_us = 0;
  std::string reason;
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
  std::vector<std::string> evicted;
  uint64_t pool_free = 0;
};

struct SwapCounters {
  uint64_t runs = 0, host_swaps = 0, peer_swaps = 0, evictions = 0, faults = 0, requeued = 0;
};

class SwapController {
 public:
  /// `pool_bytes[d]`: device d's model pool capacity; one per topology device.
  SwapController(placement::NodeTopology topology, std::vector<uint64_t> pool_bytes, SwapControllerOptions options);

  /// Adds a model or updates its size, heaviness and SLO. invalid_argument when it fits in no
  /// device's pool, or for a bad SLO.
  Status add_model(const SwapModel& model);
  /// Forgets a model: returns its queued requests (to fail) and the devices holding a copy (for the
  /// router to free). A request of it still running finishes normally.
  std::pair<std::vector<uint64_t>, std::vector<uint32_t>> remove_model(const std::string& name);
  bool has_model(const std::string& name) const { return models_.count(name) > 0; }
  std::optional<SwapModel> model(const std::string& name) const;

  /// Queues a request. invalid_argument for an unknown model; unavailable when the queue is full.
  Status submit(uint64_t request, const std::string& model, int64_t now_us);
  /// Puts a request back at the end of its model's queue (after a fault), keeping its arrival.
  Status requeue(uint64_t request, const std::string& model, int64_t arrival_us);
  /// Everything that can start now, in priority order, with the device state updated as if started.
  std::vector<SwapDispatch> dispatch(int64_t now_us);
  /// The executor's answer for `d`; `latency_us` is arrival to answer (the SLO's measure).
  void finish(const SwapDispatch& d, const SwapOutcome& outcome, uint64_t latency_us, int64_t now_us);

  /// The device faulted: nothing is resident there and nothing is dispatched to it until device_up.
  void device_down(uint32_t device);
  /// The device's executor restarted with an empty pool of `pool_bytes`.
  void device_up(uint32_t device, uint64_t pool_bytes);
  bool device_is_up(uint32_t device) const { return devices_.at(device).up; }

  /// Runs the RRC queue's periods; returns when the next is due.
  int64_t tick(int64_t now_us) { return queue_.tick(now_us); }

  const placement::RrcQueue& queue() const { return queue_; }
  const SwapCounters& counters() const { return counters_; }
  /// Models resident on `device`, by name.
  std::vector<std::string> resident(uint32_t device) const;
  uint32_t device_count() const { return static_cast<uint32_t>(devices_.size()); }

 private:
  struct Replica {
    uint64_t bytes = 0;
    uint64_t last_use = 0;
    bool swapping_in = false;
  };
  struct Device {
    bool up = true;
    bool executing = false;
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

  std::vector<placement::DeviceState> states() const;
  std::vector<placement::DeviceReplicaView> views() const;
  /// A plan for `model` given the device states `st` (a copy: devices that cannot make room are
  /// marked busy in it while trying), or nullopt when it has to wait.
  std::optional<Plan> plan_for(const std::string& model, std::vector<placement::DeviceState> st);
  SwapDispatch start(const placement::QueuedRequest& q, const Plan& plan);

  placement::NodeTopology topology_;
  SwapControllerOptions options_;
  std::vector<Device> devices_;
  std::map<std::string, SwapModel> models_;
  placement::RrcQueue queue_;
  std::mt19937_64 rng_;
  uint64_t tick_ = 0;  // last-use stamps
  SwapCounters counters_;
};

}  // namespace ember
