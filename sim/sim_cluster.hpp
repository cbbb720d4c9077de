// SimCluster: a cluster on a simulated clock whose manager decisions are the live manager's own
// classes (issue 36; docs/design/simulator.md). Each host of the Topology is a node (its GPUs its
// devices); the manager's ModelRegistry, Membership, LoadPlanner, ChainController,
// PartitionController, ScaleDriver and ReplicaDriver are built and called as the cluster_manager
// actor builds and calls them; what the actor would send happens here as simulated events:
//
//   a request     reaches the gateway at its trace time; with a ready replica it runs on the one
//                 that frees first (each replica runs its requests one at a time, in arrival order,
//                 for ModelCosts::exec_us(1)); with none it is held, the registry is asked for a
//                 replica (ModelRegistry::want, as the gateway's ensure) and the ReplicaDriver
//                 places one; the held request runs when the registry answers its waiter, or is
//                 lost after cold_start_timeout, as the live gateway gives up
//   a load        ReplicaActions::send_load: the bytes come from the load's first source over the
//                 FlowNetwork (the repository is cloud storage: Topology::from_cloud; a peer: the
//                 path between the two hosts; the node's own cache: no transfer), then into the
//                 device the node has bound least on (Topology::to_gpu: its PCIe link, when
//                 modelled), then ReplicaDriver::answered with the replica
//   a publish     the routing the simulated gateway reads is the registry's replicas: at once
//
//   a tick        with the autoscaler on, every autoscaler.interval: the simulated gateway's
//                 load_report (per model since the last tick: arrivals, completions and their
//                 execution time; requests in flight per node and held) goes to
//                 ScaleDriver::report, then ReplicaDriver::scale decides, places, publishes and
//                 settles; a drain's unbind happens at once (ScaleDriver::unbound). Ticks run until
//                 every request is answered or lost.
//
// Not simulated yet (refused or left out, never faked): chains (PlacementOptions::chain off: each
// receiver pulls from its source), partitioned cold starts (a pipeline order fails the run with
// unsupported), the nodes' own queue reports (requests queue at a replica and count as in flight),
// the console's drains, failures, decision time, batching.
//
// Errors: invalid_argument for a trace naming a model the cluster lacks, a model without weights,
// duplicate model names; a failed manager decision (no node has room) fails the requests held for
// it (counted lost), as the live gateway would. Single-threaded; deterministic: the same inputs
// give the same outcomes, event for event.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "config/autoscale_config.hpp"
#include "sim/model_costs.hpp"
#include "sim/request_trace.hpp"
#include "sim/topology.hpp"

namespace ember::sim {

struct SimOptions {
  /// Each GPU's memory, bytes (H100: 80 GB).
  uint64_t device_bytes = 80ull << 30;
  /// Each host's cache for model bytes, bytes.
  uint64_t cache_bytes = 512ull << 30;
  /// The autoscaler, as the `autoscale:` section configures the live manager's ScaleDriver
  /// (settings.enabled false: replicas come only from cold starts). Chains stay off
  /// (chain_scale_up is not simulated yet).
  AutoscaleConfig autoscale;
  AutoscalerSettings autoscaler{.enabled = false};
  /// A request held for a cold start longer than this is lost (gateway.cold_start_timeout).
  uint64_t cold_start_timeout_us = 30'000'000;
};

struct RequestOutcome {
  uint64_t arrival_us = 0, start_us = 0, end_us = 0;
  uint32_t model = 0;  // index into the trace's models
  bool cold = false;   // it waited for a replica
  bool lost = false;   // no replica could be placed for it
};

struct ColdStartRecord {
  std::string model;
  std::string node;
  std::string tier;  // "repository", "peer", "cache"
  uint64_t started_us = 0, ready_us = 0;
};

struct SimResult {
  std::vector<RequestOutcome> requests;  // in trace order
  std::vector<ColdStartRecord> cold_starts;
  uint64_t events = 0;
  uint64_t end_us = 0;  // the last request's answer (or arrival, when lost)
  /// Replicas bound (serving or draining) summed over the autoscaler's ticks, times the interval,
  /// from the start to the last request's answer (0 without the autoscaler).
  double replica_seconds = 0;
  uint32_t max_replicas = 0;  // the most bound at one tick
};

class SimCluster {
 public:
  /// A cluster of `topology`'s hosts serving `models` (names unique).
  static Result<std::unique_ptr<SimCluster>> create(const TopologySpec& topology, std::vector<ModelCosts> models,
                                                    SimOptions options = {});
  ~SimCluster();

  /// Replays `trace` to its end and until every request is answered or lost. Once per cluster.
  Result<SimResult> run(const RequestTrace& trace);

 private:
  struct Impl;
  explicit SimCluster(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember::sim
