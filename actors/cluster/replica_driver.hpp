// ReplicaDriver: what the manager does to bring a model version to the replicas it wants, and with
// each load's answer, as data (issue 36: the decisions the cluster manager actor made inline, moved
// into a plain class so that the simulator runs the same code; docs/design/simulator.md).
//
// place(key) decides in order: nothing while a partitioned cold start builds (the pipeline owns the
// version); a drain still serving comes back first (ScaleDriver::revive, then publish); the version
// the registry says needs placing (ModelRegistry::to_place), if any, is started as a pipeline when
// one pays (PartitionController::start), else as whole replicas where LoadPlanner::place says, each
// load registered (ModelRegistry::load_started) with its device memory reserved (Membership) until
// it answers; no node with room fails the waiters (ModelRegistry::placement_failed).
// answered(...) takes a load's answer: the reservation goes; a replica is bound (Membership), its
// bytes noted as cached, the model may be partitioned again, the cold start fed to the autoscaler
// (not a pipeline's completion), then the routing is published before the waiters are answered (a
// gateway relays the answer; the update travels first, so it routes to the replica before its client
// hears "ready"); a version still short of replicas is placed again; node drains take a step. A
// failed load is published and placed elsewhere when the registry says so. scale(now) is the
// autoscaler's tick: ScaleDriver decides and applies each change (an up placed as above, a down
// published), then settles (drains over are unbound, idle models' bytes evicted). A version short
// of replicas whose round found no node is placed again after a back-off (kept in ModelVersion).
//
// What leaves the manager goes through ReplicaActions, called in the order the decisions are made
// (as the actor did inline: a routing update before the waiters hear, a load's send before the
// routing update that shows it loading): the actor's send loads, stages and unloads and publish;
// the simulator's schedule simulated events. A partitioned cold start's orders (PartitionController)
// are done here too, so that the simulator runs the pipeline's life as the actor does. Waiters are answered through the registry (they are
// the callers' callbacks). The classes it drives are the actor's, shared with its other handlers
// (all must outlive it).
//
// Plain C++, no CAF: owned and called by the cluster_manager actor only (not thread-safe), or by
// the simulator in its place. Time is a parameter (milliseconds of the actor clock). Re-entrant
// through its actions (a pipeline's orders may answer loads, which may place again), as the actor
// was: it keeps no state of its own (the back-off lives in the version).
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>

#include "actors/cluster/desired_state.hpp"
#include "actors/cluster/load_planner.hpp"
#include "actors/cluster/membership.hpp"
#include "actors/cluster/model_registry.hpp"
#include "actors/cluster/partition_controller.hpp"
#include "actors/cluster/scale_driver.hpp"
#include "actors/loading_messages.hpp"
#include "base/status.hpp"

namespace ember {

/// What the driver's decisions make the manager do (every function must be set).
struct ReplicaActions {
  /// Send load `attempt` of `key` to `node` (a chain hop's transfer_id is set: the actor adds its
  /// controller); its answer goes to ReplicaDriver::answered(key, node, attempt, ...).
  std::function<void(const model_key& key, uint64_t node, uint64_t attempt, load_replica load)> send_load;
  /// Send stage `stage` of a partitioned cold start of `key` to `node` (load `attempt`); its answer
  /// goes to ReplicaDriver::stage_answered(key, node, attempt, ...).
  std::function<void(const model_key& key, uint64_t node, uint64_t attempt, load_stage stage)> send_stage;
  /// Send a pipeline member's completion (the whole model; `load.reuse` names the layers its stage
  /// holds already, `load.max_bytes_per_s` its pace); its answer goes to
  /// ReplicaDriver::completion_answered(key, node, attempt, ...).
  std::function<void(const model_key& key, uint64_t node, uint64_t attempt, load_replica load)> send_completion;
  /// Tell `node` to drop pipeline stage `stage`, `delay_us` from now (0: now); no answer wanted.
  std::function<void(uint64_t node, const model_key& stage, int64_t delay_us)> unload_stage;
  /// One routing update of `keys` to every gateway.
  std::function<void(const std::set<model_key>& keys)> publish;
  /// Arm the chain stall check (transfers may have started).
  std::function<void()> chain_timer;
  /// One pass of the console's node drains.
  std::function<void()> drain_step;
  /// Without the autoscaler's ticks: look for drains that are over once gateways had time to move
  /// on (ScaleDriver::settle_us), and unbind them.
  std::function<void()> check_drains;
  /// A drain is over: ask its node to unbind the replica, then ScaleDriver::unbound.
  std::function<void(const ScaleDriver::Unbind& unbind)> unbind;
  /// A model's bytes leave a node's host cache.
  std::function<void(const ScaleDriver::Evict& evict)> evict;
  /// Call ReplicaDriver::place_again(key, ...) `delay_ms` from now.
  std::function<void(const model_key& key, int64_t delay_ms)> place_later;
};

class ReplicaDriver {
 public:
  ReplicaDriver(ModelRegistry& registry, Membership& members, LoadPlanner& planner, PartitionController& partitions,
                ScaleDriver& scaler)
      : registry_(registry), members_(members), planner_(planner), partitions_(partitions), scaler_(scaler) {}

  /// A request for `key` found no replica (the gateway's ensure): `waiter` hears when one serves
  /// (or why none will); the version is placed when the registry says so (ModelRegistry::want).
  void ensure(const model_key& key, ModelWaiter waiter, int64_t now_ms, const ReplicaActions& act);
  /// An explicit load of `replicas` (0: at least one; the repository API's load): a floor the
  /// autoscaler keeps until the next load or unload (ScaleDriver::set_floor), then placed.
  void load(const model_key& key, uint32_t replicas, ModelWaiter waiter, int64_t now_ms, const ReplicaActions& act);
  /// The decisions a person made, kept across a restart (manager.state_dir), acted on again as the
  /// manager starts: each SLO set (ModelRegistry::set_slo), the console's bounds set
  /// (ScaleDriver::set_bounds), each explicit load made (its replicas placed as nodes join). One
  /// that no longer applies (the model left the repository) is logged and skipped.
  void restore(const DesiredState& kept, int64_t now_ms, const ReplicaActions& act);
  /// Starts the replicas `key` lacks (at least one) unless loads are in flight (the header). A
  /// round that finds no node while the version is still short of the replicas it wants (every
  /// node with room failed its load this round, or none has room now) asks for another after a
  /// back-off (place_again_delay_ms; act.place_later), one at a time per version: loads that
  /// failed for a passing cause (a chain's source lost with a manager) succeed then, and a node
  /// that frees memory is used without waiting for a join or a request.
  void place(const model_key& key, int64_t now_ms, const ReplicaActions& act);
  /// The round a failed one asked for (act.place_later): place(key) again.
  void place_again(const model_key& key, int64_t now_ms, const ReplicaActions& act);
  /// The back-off after `rounds` rounds in a row found no node: 1 s, doubling, at most 30 s.
  static int64_t place_again_delay_ms(uint32_t rounds);
  /// Load `attempt` of `key` on `node` answered `r`. `announce` false: the caller publishes and
  /// places afterwards (a pipeline's members completing together, in one routing update);
  /// `completion`: a pipeline member's load of the rest of the model, not a cold start.
  void answered(const model_key& key, uint64_t node, uint64_t attempt, const Result<replica_info>& r, bool announce,
                bool completion, int64_t now_ms, const ReplicaActions& act);
  /// A partitioned cold start's orders (PartitionController), done one after the other: stage
  /// loads, completions and stage unloads through the actions; a load's answer as answered() takes
  /// it (then ModelRegistry::mark_partitioned when the order says so); a publish; the waiters of the
  /// version (still the one ordered) answered; the version placed (place_if_short: when it wants
  /// more replicas and nothing loads).
  void run(const PipelineOrders& orders, int64_t now_ms, const ReplicaActions& act);
  /// A stage load answered (PartitionController::stage_loaded), its orders run.
  void stage_answered(const model_key& key, uint64_t node, uint64_t attempt, const Result<replica_info>& r,
                      int64_t now_ms, const ReplicaActions& act);
  /// A member's completion answered (PartitionController::member_completed), its orders run.
  void completion_answered(const model_key& key, uint64_t node, uint64_t attempt, const Result<replica_info>& r,
                           int64_t now_ms, const ReplicaActions& act);
  /// Node `node` (`name`) left the cluster (its process died, it stopped, or it went silent), after
  /// Membership::leave: its drains end (ScaleDriver::node_lost), its pipeline builds are given up
  /// or dissolved (PartitionController::member_lost, their orders run), its replicas and loads leave
  /// the registry and one routing update goes out (what changed, and the members without the node,
  /// even when no version changed); with `replace`
  /// (manager.replace_on_failure), each changed version that should is placed again on a survivor
  /// (ModelRegistry::want_replacements). Returns the versions changed.
  std::set<model_key> node_lost(uint64_t node, const std::string& name, bool replace, int64_t now_ms,
                                const ReplicaActions& act);
  /// Versions in `keys` holding more ready replicas than they want (ScaleDriver::retire_excess):
  /// the excess leaves the routing table (published) and drains, ended by act.check_drains.
  void trim(const std::set<model_key>& keys, int64_t now_ms, const ReplicaActions& act);
  /// The autoscaler's tick at now_us (the caller checked that the loop runs and has given it the
  /// reports): each change the loop decides is applied, an up placed and a down published; then
  /// the drains that are over are unbound and the expired host-cache copies evicted.
  void scale(int64_t now_us, const ReplicaActions& act);

 private:
  ModelRegistry& registry_;
  Membership& members_;
  LoadPlanner& planner_;
  PartitionController& partitions_;
  ScaleDriver& scaler_;
};

}  // namespace ember
