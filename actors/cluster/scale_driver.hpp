// ScaleDriver: what the manager does with replica counts, as data: the autoscaler's ticks and their
// scale-downs, the drains that follow (a replica leaves the routing table, drains, is unbound), the
// console's node drains, and the host caches' embers. It owns the AutoscalerLoop (the decisions,
// from placement/autoscaler.hpp) and the ManagerInstruments (their metrics), and reads and changes
// the registry and the membership.
//
// Every tick (autoscale.interval) decide() asks the loop for every model; apply() makes each change:
// up sets the count the version wants and the actor places the rest (drains come back first:
// revive()); down retires the least busy replicas (scale_down's order: those on a node being
// drained, those a pipeline completed into, then the fewest requests in flight there, then the node
// with the most replicas) and starts their drains. A drain's life:
//
//   retired (out of the routing table, still bound) ──no request in flight on it in any gateway's
//   report made after it left (two report intervals), or drain_timeout──▶ unbinding (the actor
//   asks its node to unload it: its executor answers what was queued first, the bytes stay in the
//   host cache) ──the node answered──▶ unbound (memory free; bytes evicted too when the model keeps
//   none in the host cache, host_keep_alive 0)
//   retired ──the version wants more replicas again (revive)──▶ serving (back in the table)
//   retired | unbinding ──its node was lost──▶ gone
//
// The console's drain of a node (drain_node, then the actor's drain_step calling move_off for each
// replica there and finish for the node, again as loads answer and drains end): nothing is placed
// there any more; a replica whose model is served elsewhere too is retired and re-placed on another
// node; a model's only replica first gets a replacement. It is answered with the models moved once
// the node holds no replica and no unbind is out there, or with why not (no other node has room).
// embers_expired(): a model idle for its host_keep_alive, with no replica left, leaves the caches.
//
// Plain C++, no CAF: owned and called by the cluster_manager actor only (not thread-safe). Time is
// a parameter (microseconds of the actor clock). Nothing is sent from here: the actor sends the
// unloads and evictions returned, and places or publishes what apply() says. Node drains are
// answered through callbacks the actor makes from its response promises, each called once.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/cluster/autoscaler_loop.hpp"
#include "actors/cluster/load_planner.hpp"
#include "actors/cluster/manager_instruments.hpp"
#include "actors/cluster/membership.hpp"
#include "actors/cluster/model_registry.hpp"
#include "config/autoscale_config.hpp"

namespace ember {

class ScaleDriver {
 public:
  ScaleDriver(ModelRegistry& registry, Membership& members, const LoadPlanner& planner)
      : registry_(registry), members_(members), planner_(planner) {}

  /// The `autoscale:` section: every model's defaults and the loop's settings (without
  /// autoscale.enabled, no loop: replicas change only on load, scale from zero and node loss, and
  /// node drains are the only drains).
  void configure(const AutoscaleConfig& defaults, const AutoscalerSettings& settings);
  /// The loop, or null when autoscaling is off.
  AutoscalerLoop* autoscaler() { return loop_.get(); }
  const AutoscalerLoop* autoscaler() const { return loop_.get(); }
  ManagerInstruments& instruments() { return instruments_; }
  /// How long a drain waits at least: two report intervals, so that every gateway reported after
  /// the replica left its table.
  uint64_t settle_us() const { return 2 * interval_us_; }

  // -- what the loop hears --------------------------------------------------------------------
  /// A rescan's versions (`entries`: the model's now): removed ones are forgotten, new and changed
  /// ones (re)configured with their serving.autoscale and capacity.
  void scanned(const ModelRegistry::ScanChanges& changes, const std::vector<RepositoryEntry>& entries);
  /// An explicit load of `replicas` (0: unload) is a floor the loop keeps until the next.
  void set_floor(const model_key& key, uint32_t replicas);
  /// The console's `scale KEY MIN MAX` (MAX 0: the model's own). The version's state. Errors:
  /// unavailable (autoscaling is off), not_found, and the loop's invalid_argument.
  Result<model_state> set_bounds(const model_key& key, uint32_t min, uint32_t max);
  /// A gateway's (or a node's queue) report at now_us.
  void report(const load_report& report, int64_t now_us);
  /// A replica became ready, its bytes from `tier`, after `load_us`: counted, and the loop's
  /// cold-start estimate.
  void cold_start(SourceTier tier, uint64_t load_us);

  // -- ticks ----------------------------------------------------------------------------------
  /// The loop's changes at now_us (the caller has checked that the loop runs).
  std::vector<AutoscalerLoop::Change> decide(int64_t now_us);
  /// What the actor does after apply(): nothing, place the version (an up), or publish it (a down:
  /// replicas left the table).
  enum class Step { none, place, publish };
  /// Makes one change (logged and counted): an up sets the replicas wanted; a down retires `count`
  /// replicas in scale_down's order and starts their drains. A version unloaded on purpose meanwhile
  /// (the user's word) or gone: none.
  Step apply(const AutoscalerLoop::Change& change, int64_t now_us);
  /// The desired and current replica gauges of every model.
  void show_replicas();

  // -- drains ---------------------------------------------------------------------------------
  struct Unbind {
    uint64_t drain = 0;
    uint64_t node = 0;
    model_key key;
  };
  /// Drains that are over at now_us (no request in flight after settle_us, or drain_timeout):
  /// unbinding now; the actor asks each node to unload the replica and calls unbound().
  std::vector<Unbind> drains_over(int64_t now_us);
  struct Evict {
    uint64_t node = 0;
    model_key key;
  };
  /// Models idle for their host_keep_alive with no replica, load or drain left: the nodes whose
  /// caches hold their bytes (noted as not holding them any more), to be told to evict.
  std::vector<Evict> embers_expired(int64_t now_us);
  /// drains_over() then embers_expired(): the end of a tick.
  struct Settle {
    std::vector<Unbind> unbind;
    std::vector<Evict> evict;
  };
  Settle settle(int64_t now_us);
  /// Drain `drain`'s node answered its unload (ok) or failed at now_us: the memory is free (the
  /// drain's time observed). `known` false for a drain gone meanwhile (its node was lost); `evict`
  /// when the bytes go too (no host-cache tier for the model).
  struct Unbound {
    bool known = false;
    std::optional<Evict> evict;
  };
  Unbound unbound(uint64_t drain, bool ok, int64_t now_us);
  /// Drains of `key` not yet unbinding come back into the table while the version wants more
  /// replicas than it has (a replica still bound is the cheapest there is): true when one did (the
  /// actor publishes the version).
  bool revive(const model_key& key);
  /// Replicas placed twice (a node the manager gave up on came back with its replicas; a restarted
  /// manager placed a version again while a node still loaded it): without the autoscaler (which
  /// decides counts itself and scales such a version down by its own rules), a version holding more
  /// ready replicas than it wants retires the excess in scale_down's order, their drains as a
  /// scale-down's. Only where the count is known: wanted > 0 (asked for in this manager's life, or
  /// kept in its state folder); after a restart without one, what the nodes hold is all it knows.
  /// The number retired.
  uint32_t retire_excess(const model_key& key, int64_t now_us);
  /// The versions with a replica draining on `node` (reconcile: the manager's own, not news).
  std::set<model_key> draining_on(uint64_t node) const;
  size_t drains() const { return drains_.size(); }
  /// The replicas of `key` draining (still bound).
  uint32_t drains_of(const model_key& key) const;

  // -- the console's node drains ---------------------------------------------------------------
  using DrainReply = std::function<void(const Result<std::vector<model_key>>&)>;
  /// Starts (or joins) draining `node`: it gets no new replica; `reply` gets the models moved.
  void drain_node(uint64_t node, DrainReply reply);
  bool nodes_draining() const { return !node_drains_.empty(); }
  /// The nodes being drained, in id order.
  std::vector<uint64_t> drained_nodes() const;
  /// One replica of `key` on drained `node`: `moved` (served elsewhere too: retired here, the count
  /// it wanted restored; the actor publishes and places it back elsewhere; `check_later`: without a
  /// loop no tick ends the drain, so the actor calls drains_over() after settle_us), `replace` (its
  /// only replica: the version wants one more; the actor places it, then asks stuck()), or none.
  struct Move {
    enum class Kind { none, moved, replace } kind = Kind::none;
    bool check_later = false;
  };
  Move move_off(uint64_t node, const model_key& key, int64_t now_us);
  /// After a `replace`'s placement: unavailable when no load of `key` started (no room elsewhere).
  std::optional<Error> stuck(const model_key& key) const;
  /// The end of drain_step's pass over `node`: answers and forgets its drain when it is stuck or
  /// holds no replica and no unbind is out there. True when it did.
  bool finish(uint64_t node, const std::optional<Error>& stuck);
  /// Node `node` (named `name`) was lost: its drains go, its own drain fails.
  void node_lost(uint64_t node, const std::string& name);

 private:
  struct Drain {
    model_key key;
    uint64_t node = 0;
    std::string device;
    uint64_t bytes = 0;
    int64_t started_us = 0;
    bool unbinding = false;  // the unload was sent: it can no longer come back
  };
  struct NodeDrain {
    std::vector<model_key> moved;
    /// What a model wanted before its replacement was asked for (its count once the drain moved it).
    std::map<model_key, uint32_t> wanted_before;
    std::vector<DrainReply> waiters;
  };
  /// Retires `count` replicas of `key` in scale_down's order and starts their drains.
  void scale_down(const model_key& key, uint32_t count, int64_t now_us);
  /// The best tier a new replica of `v` would load from: a node's own cache (one that caches the
  /// bytes without serving them), else a peer's, else the repository.
  SourceTier best_tier(const ModelVersion& v) const;

  ModelRegistry& registry_;
  Membership& members_;
  const LoadPlanner& planner_;
  std::unique_ptr<AutoscalerLoop> loop_;
  ManagerInstruments instruments_;
  uint64_t interval_us_ = 1'000'000;
  uint64_t drain_timeout_us_ = 30'000'000;
  std::map<uint64_t, Drain> drains_;
  uint64_t next_drain_ = 1;
  std::map<uint64_t, NodeDrain> node_drains_;
};

}  // namespace ember
