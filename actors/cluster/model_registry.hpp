// ModelRegistry: the cluster manager's table of model versions: what the repository holds (one
// RepositoryEntry per version, from the latest scan), where each version has a replica and where
// one is loading, how many replicas it should keep, and who waits for it to become ready. It owns
// the readiness lifecycle (actors/cluster/model_readiness.hpp): every change of model_state::state
// goes through next_readiness(), fired by the method that records what happened.
//
// Plain C++, no CAF: owned and called by the cluster_manager actor only (not thread-safe). It
// chooses no node (LoadPlanner does) and sends nothing: waiters are callbacks the actor makes from
// its response promises, called here when the registry answers or fails them. It logs the
// lifecycle events it records (a replica ready, a load failed, a cold start).
//
// Invariants (check() verifies them; the unit tests call it after each flow):
//  - A version whose files are invalid (entry.error) is failed, with the error as its reason, and
//    fires no event but `repaired`: its replicas and loads are still recorded, never placed.
//  - A valid version is ready exactly when it has a replica, loading exactly when it has none but
//    a load in flight, and unloaded or failed when it has neither.
//  - state.replicas == replicas.size(); an attempt id names one load and is never reused.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/cluster/model_readiness.hpp"
#include "actors/cluster/model_repository.hpp"
#include "actors/loading_messages.hpp"
#include "actors/model_messages.hpp"
#include "base/status.hpp"

namespace ember {

/// One stage of the pipeline a version serves through while a partitioned cold start completes
/// (PartitionController): the member node and the stage's key there. The routing table names the
/// node's router (RoutingPublisher::entry_of).
struct PipelineStage {
  uint64_t node = 0;
  model_key stage;
};

/// Someone waiting for a version to become ready: called once with its state or an error.
using ModelWaiter = std::function<void(const Result<model_state>&)>;

struct ModelVersion {
  RepositoryEntry entry;
  /// The key, readiness, reason and replica count, as gateways see them.
  model_state state;
  std::map<uint64_t, std::string> replicas;  // node id -> device, of every ready replica
  std::map<uint64_t, uint64_t> loading_on;   // node id -> attempt id of the load in flight
  std::set<uint64_t> failed_on;              // nodes whose load failed this placement round
  uint32_t wanted = 0;                       // replicas to keep (raised by load and re-placement)
  /// Placement rounds in a row that found no node while the version was short of `wanted`
  /// (cleared by a replica ready or a node joining), and whether the round they asked for is still
  /// to come: ReplicaDriver::place's back-off.
  uint32_t rounds_unplaced = 0;
  bool round_asked = false;
  std::vector<ModelWaiter> waiters;
  /// A partitioned cold start's stages while they serve (the routing entry's pipeline); the
  /// member nodes' loads stay in loading_on until they complete into replicas.
  std::vector<PipelineStage> pipeline;
  /// Nodes whose replica a pipeline member completed into: placed in haste (wherever a stage had
  /// room), they are the first a scale-down removes.
  std::set<uint64_t> partitioned;

  const model_key& key() const { return state.model; }
  bool valid() const { return entry.error.empty(); }
  /// Neither a replica nor a load in flight.
  bool idle() const { return replicas.empty() && loading_on.empty(); }
  /// Has a replica, and as many as it wants.
  bool satisfied() const { return !replicas.empty() && replicas.size() >= wanted; }
  /// No load in flight and fewer replicas than it wants (at least one): a placement round is due.
  bool wants_more() const { return loading_on.empty() && replicas.size() < std::max<uint32_t>(1, wanted); }
  /// The nodes that hold a replica of it or load one.
  std::set<uint64_t> nodes() const {
    std::set<uint64_t> out;
    for (const auto& [node, device] : replicas) out.insert(node);
    for (const auto& [node, attempt] : loading_on) out.insert(node);
    return out;
  }
};

/// One version an unload dropped, with the replicas the actor must release on their nodes.
struct UnloadedVersion {
  model_state state;
  std::map<uint64_t, std::string> replicas;  // node id -> device
  uint64_t weights_bytes = 0;
};

class ModelRegistry {
 public:
  struct ScanChanges {
    std::set<model_key> changed;
    std::vector<model_key> removed;
  };

  /// Replaces the versions of `model` ("" = every model) with a scan's entries. A version the scan
  /// no longer lists is removed (its waiters fail with not_found) unless it has a replica or a
  /// load; an entry's files found invalid fire found_invalid, found valid again fire repaired.
  ScanChanges apply_scan(const std::string& model, std::vector<RepositoryEntry> entries);
  /// The entries of `model` ("" = all), for the repository index.
  std::vector<RepositoryEntry> entries(const std::string& model) const;

  /// The version `key` names; version 0 means the highest. nullptr when there is none.
  ModelVersion* find(const model_key& key);
  const ModelVersion* find(const model_key& key) const;
  /// A request for a replica of `key`: scale from zero (ensure), or an explicit load of at least
  /// `replicas` (0: one) after its rescan, which also lifts an unload. `waiter` is answered at once
  /// with an error (not_found for an unknown version; invalid_argument for invalid files or, unless
  /// explicit, a model unloaded on purpose) or with the state when it has enough replicas; else it
  /// waits and the version's key is returned for the caller to place.
  std::optional<model_key> want(const model_key& key, uint32_t replicas, bool explicit_load, ModelWaiter waiter);
  const std::map<model_key, ModelVersion>& versions() const { return versions_; }
  std::vector<model_state> states() const;
  /// Sets (slo.deadline_us > 0) or clears (0: back to what model.json declares) the SLO set at run
  /// time of `key` (version 0: every version of the name). Returns the versions changed. Errors:
  /// invalid_argument (a percentile outside (0, 1), a deadline over an hour), not_found (no version
  /// matched).
  Result<std::vector<model_key>> set_slo(const model_key& key, const slo_setting& slo);

  /// The version `key` when a placement round should start for it now: files valid, no load in
  /// flight, fewer replicas than it wants (at least one). One that has enough answers its waiters.
  ModelVersion* to_place(const model_key& key);
  /// No node could take `v`: its waiters fail with `why`; the next round tries every node again.
  void placement_failed(ModelVersion& v, const Error& why);
  /// A load of `v` on `node` starts: returns its attempt id. Fires load_started.
  uint64_t load_started(ModelVersion& v, uint64_t node);
  /// The load `attempt` answered with a replica on info.device: the version, or nullptr when stale
  /// (the load was dropped: its node was lost, the model unloaded or removed). Fires replica_ready.
  ModelVersion* replica_ready(const model_key& key, uint64_t node, uint64_t attempt, const replica_info& info);
  /// The load `attempt` on `node` is called off by the manager (a partitioned cold start given up
  /// for a plain placement): forgotten without counting against the node. False when stale.
  bool load_cancelled(const model_key& key, uint64_t node, uint64_t attempt);
  enum class LoadFailure { stale, retry_elsewhere, model_is_bad };
  /// The load `attempt` failed with `e`. Bytes that are bad (corrupt, invalid_argument, unsupported)
  /// fail the waiters; otherwise the node joins failed_on and the caller places again. Fires
  /// found_invalid or load_failed when no replica and no other load is left.
  LoadFailure load_failed(const model_key& key, uint64_t node, uint64_t attempt, const Error& e,
                          const std::string& node_name = {});
  /// A joining node brings a replica of `key` (its device unknown). False for an unknown version.
  bool adopt(const model_key& key, uint64_t node);
  /// adopt() for each of `keys`; returns the versions adopted.
  std::set<model_key> adopt(const std::vector<model_key>& keys, uint64_t node);
  /// The node left: its replicas and loads are gone. Returns the versions that changed.
  std::set<model_key> node_lost(uint64_t node);
  /// The replica of `key` on `node` is gone (the node's report lacks it: lost to a fault there),
  /// as node_lost for that one version; false when the registry had none there.
  bool replica_lost(const model_key& key, uint64_t node);
  /// The changed versions that should get a replacement replica (not unloaded on purpose, files
  /// valid): each now wants one more replica than it has.
  std::vector<model_key> want_replacements(const std::set<model_key>& changed);
  /// After a node joined: every valid version without a load gets a fresh placement round
  /// (failed_on cleared); returns those with waiters or fewer replicas than wanted.
  std::vector<model_key> wanting_placement();
  /// The autoscaler retires the replica of `key` on `node` (it leaves the routing table; the caller
  /// drains and unbinds it): the version keeps wanting at most the replicas left. The last one
  /// fires scaled_to_zero (ready -> unloaded, not on purpose: the next request places one again).
  /// The retired replica's device, or nullopt when `node` holds none.
  std::optional<std::string> retire(const model_key& key, uint64_t node);
  /// A retired replica still draining on `node` serves again (a scale-up or a request came before
  /// it was unbound): back in the table, on `device`. False for an unknown version.
  bool reinstate(const model_key& key, uint64_t node, const std::string& device);
  /// The replica of `key` on `node` is one a pipeline member completed into (ModelVersion::partitioned);
  /// nothing when there is none.
  void mark_partitioned(const model_key& key, uint64_t node);
  /// The autoscaler's target for `key`: it wants `replicas` (a scale-up then places the rest).
  void set_wanted(const model_key& key, uint32_t replicas);
  /// Unloads `which` (version 0: every version of the name): replicas and loads dropped, waiters
  /// failed with invalid_argument, unload_requested fired. Empty when no version matches.
  std::vector<UnloadedVersion> unload(const model_key& which);

  /// Answers every waiter of `v` with its state.
  void answer_waiters(ModelVersion& v);
  void fail_waiters(ModelVersion& v, const Error& e);

  /// Ready replicas per node, over every version (placement's load-spreading input).
  std::map<uint64_t, uint32_t> replicas_per_node() const;
  /// The versions with a ready replica on `node`.
  std::vector<model_key> replicas_on(uint64_t node) const;

  /// Illegal readiness moves attempted so far (each also logged): 0 unless the registry has a bug.
  uint64_t illegal_moves() const { return illegal_moves_; }
  /// The invariants of the header; the first one broken, as an internal error.
  Status check() const;

 private:
  void move(ModelVersion& v, ReadinessEvent event, std::string reason = {});
  /// After a replica (or a load) of `v` went: its count and readiness.
  void lost(ModelVersion& v, bool had_replica);

  std::map<model_key, ModelVersion> versions_;
  uint64_t next_attempt_ = 1;
  uint64_t illegal_moves_ = 0;
};

/// Errors a load returns when the model itself is at fault (no node would do better).
bool model_is_bad(const Error& e);

}  // namespace ember
