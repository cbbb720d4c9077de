// LoadPlanner: the cluster manager's placement decisions, as data. Which nodes get the replicas a
// model version lacks (placement/replica_placement.hpp's choose_node over Membership's views), and
// where each receiver pulls the bytes from: a chained multicast when two or more need them
// (placement/chain_builder.hpp, the transfer registered with the ChainController), else the
// holders in locality order (choose_sources), the repository last. The actor sends one
// load_replica per LoadPlan and nothing else decides placement.
//
// This is the shape every placement concern takes: a pure policy in placement/ and a plain class
// here that feeds it the registry's and the membership's facts and returns plans. An autoscaler or
// partition plans will be siblings of this class, called by the actor the same way.
//
// Plain C++, no CAF: owned and called by the cluster_manager actor only (not thread-safe). It reads
// the registry and the membership (which must outlive it) and starts transfers in the chain
// controller; time is a parameter (milliseconds of the actor clock).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "actors/cluster/chain_controller.hpp"
#include "actors/cluster/distribution_tracker.hpp"
#include "actors/cluster/membership.hpp"
#include "actors/cluster/model_registry.hpp"
#include "actors/loading_messages.hpp"
#include "actors/model_messages.hpp"
#include "base/host_port.hpp"
#include "base/status.hpp"
#include "config/autoscale_config.hpp"

namespace ember {

/// The name chains and load_replica sources give the manager's repository.
inline constexpr const char* kRepositoryName = "manager";

/// One node's load: where it pulls from (in order), the multicast transfer it is a hop of (0: none;
/// else sources[0] is its upstream), and whether it only fills the cache (a distribution).
struct LoadPlan {
  uint64_t node = 0;
  std::vector<blob_source> sources;
  uint64_t transfer_id = 0;
  bool cache_only = false;
};

struct LoadPlans {
  std::vector<LoadPlan> loads;
  /// Each chain as "source -> a -> b", for logs and the distribute API's answer.
  std::vector<std::string> chains;
};

/// A distribute or evict call as planned: its answer as far as it is known before any node acts,
/// the nodes it waits for, and (distribute) the loads that fill their caches.
struct Distribution {
  distribute_result result;  // model, mode (automatic resolved), evicted, blob_bytes, chains
  std::map<uint64_t, DistributionHop> pending;
  std::vector<LoadPlan> loads;
};

/// How place() chooses nodes and sources (autoscale.chain_scale_up, peer_sources, placement).
struct PlacementOptions {
  bool chain = true;
  bool peers = true;
  bool random = false;
  uint64_t seed = 1;  // of the random placement

  /// As the `autoscale:` section sets them (chain_scale_up, peer_sources, placement).
  static PlacementOptions from(const AutoscalerSettings& s, uint64_t seed = 1) {
    return {s.chain_scale_up, s.peer_sources, s.placement == PlacementPolicy::random, seed};
  }
};

class LoadPlanner {
 public:
  LoadPlanner(const ModelRegistry& registry, const Membership& members, ChainController& chains)
      : registry_(registry), members_(members), chains_(chains) {}
  /// Where the manager's blob server serves the repository (set once, before any plan).
  void set_repository(HostPort data) { repository_data_ = std::move(data); }
  void set_options(const PlacementOptions& options) {
    options_ = options;
    random_.seed(options.seed);
  }

  /// The loads that bring `v` to the replicas it wants (at least one), on the best nodes outside
  /// v.failed_on; several nodes that lack the bytes get them along chains. unavailable, saying why,
  /// when no node can take one.
  Result<LoadPlans> place(const ModelVersion& v, int64_t now_ms);
  /// How many more replicas of `v` the nodes have room for now (one per node without one).
  uint32_t room(const ModelVersion& v) const;
  /// At most `max` nodes that could take a whole replica of `v` now, best first (placement's order,
  /// outside v.failed_on): a partitioned cold start's members, each of which completes into one.
  std::vector<uint64_t> candidates(const ModelVersion& v, uint32_t max) const;
  /// The loads that fill the caches of `receivers` with v's bytes: chains from the holders (or the
  /// repository) when `chain`, else each from the holders directly.
  /// `peers` false: from the repository only.
  Result<LoadPlans> fill(const ModelVersion& v, const std::vector<uint64_t>& receivers, bool chain, int64_t now_ms,
                         bool peers = true);

  /// The distribute API: fills the caches of the named nodes (all when none is named) that lack
  /// the model's bytes, in req.mode (automatic: chain for two or more receivers, else unicast).
  /// Nothing pending when every node holds them. not_found for an unknown model or node name;
  /// invalid_argument when the model's files are invalid.
  Result<Distribution> distribute(const distribute_request& req, int64_t now_ms);
  /// The evict API: every named node (all when none is named) is asked to drop the bytes.
  Result<Distribution> evict(const distribute_request& req) const;

  /// The nodes of `nodes` that hold neither a replica of `v` nor its bytes.
  std::vector<uint64_t> lacking(const ModelVersion& v, const std::vector<uint64_t>& nodes) const;
  bool holds(const ModelVersion& v, uint64_t node) const;
  /// The data-plane endpoint of a chain member: a node's blob server, or the repository's.
  std::optional<blob_source> source_named(const std::string& name) const;

 private:
  std::vector<placement::NodeView> views(const ModelVersion& v) const;

  const ModelRegistry& registry_;
  const Membership& members_;
  ChainController& chains_;
  HostPort repository_data_;
  PlacementOptions options_;
  std::mt19937_64 random_{1};
};

/// The load_replica of one plan. A chain hop's `controller` is left for the actor to fill in.
load_replica load_request(const ModelVersion& v, const LoadPlan& plan);

}  // namespace ember
