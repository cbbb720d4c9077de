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
//   a chain       the loads of one multicast transfer (LoadPlanner's chains, when
//                 autoscaler.chain_scale_up) start together once the decision is made: each chain
//                 is one flow over the links of all its hops (cut-through: every hop forwards as it
//                 receives, so the chain moves at its slowest link's share; FlowNetwork), hop k ends
//                 k chunks after the flow (the chunk's time at the chain's mean rate), then goes
//                 into its GPU and answers; ChainController hears each hop done
//   a decision    with SimOptions::decision_clock, what a call into the manager's classes sends
//                 (loads, unbinds) starts after the call's measured time (Flashpoint's decision
//                 time); the registry's answers to held requests are not delayed
//   a pipeline    a partitioned cold start (PartitionController's orders, run by
//                 ReplicaDriver::run): each stage's layers from the repository into its node's GPU,
//                 then ReplicaDriver::stage_answered; while the version serves through the pipeline,
//                 a request runs each stage's layers (ModelCosts::exec_us(1, first, last), one at a
//                 time per stage) and its activation crosses to the next stage's host as a flow;
//                 each member's completion fetches the layers outside its stage at its pace
//                 (load.max_bytes_per_s), then ReplicaDriver::completion_answered
//   a failure     SimOptions::failures: the host's downloads stop, ReplicaDriver::node_lost, its
//                 requests (running or queued) are retried; no answer from it ever comes
//   a publish     the routing the simulated gateway reads is the registry's replicas: at once
//
//   a tick        with the autoscaler on, every autoscaler.interval: the simulated gateway's
//                 load_report (per model since the last tick: arrivals, completions and their
//                 execution time; requests in flight per node and held) goes to
//                 ScaleDriver::report, then ReplicaDriver::scale decides, places, publishes and
//                 settles; a drain's unbind happens at once (ScaleDriver::unbound). Ticks run until
//                 every request is answered or lost.
//
// Not simulated yet (left out, never faked): splices (a chain through a failed host keeps its flow
// and the hops after it their answers, as if spliced at no cost), the nodes' own queue reports
// (requests queue at a replica and count as in flight), the console's drains, a GPU failing alone,
// a node that goes silent (heartbeats), batching.
//
// Errors: invalid_argument for a trace naming a model the cluster lacks, a model without weights,
// duplicate model names, a failure of a host the topology lacks; a failed manager decision (no node has room) fails the requests held for
// it (counted lost), as the live gateway would. Single-threaded; deterministic: the same inputs
// give the same outcomes, event for event.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "config/autoscale_config.hpp"
#include "config/sim_config.hpp"
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
  /// (settings.enabled false: replicas come only from cold starts) and its LoadPlanner
  /// (chain_scale_up, peer_sources, placement: PlacementOptions::from).
  AutoscaleConfig autoscale;
  AutoscalerSettings autoscaler{.enabled = false};
  /// A request held for a cold start longer than this is lost (gateway.cold_start_timeout).
  uint64_t cold_start_timeout_us = 30'000'000;
  /// A chain hop forwards what it received in chunks of this size (the data plane's chunk_bytes,
  /// transport/server_options.hpp: 1 MiB).
  uint64_t chunk_bytes = 1u << 20;
  /// Replicas are sampled this often (the autoscaler's interval when it is on).
  uint64_t sample_interval_us = 1'000'000;
  /// Seeds the random placement (autoscaler.placement random).
  uint64_t seed = 1;
  /// Replicas of each model the trace asks for bound before the first request (placed by the live LoadPlanner, their
  /// loads instant and not counted as cold starts): a service already running, as Flashpoint's
  /// experiments begin. 0: every model starts cold.
  uint32_t warm_replicas = 0;
  /// At time 0 (after the warm replicas), each model the trace asks for is loaded explicitly with
  /// this many replicas, as the repository API's load (ReplicaDriver::load: a floor the autoscaler
  /// keeps): real cold starts, partitioned when PartitionController::start plans it. 0: none.
  uint32_t load_replicas = 0;
  /// A host whose process dies at a time. The manager hears at once, as the live manager hears a
  /// monitored node's down message (ReplicaDriver::node_lost: its replicas and loads leave, what
  /// changed is published, replacements placed when replace_on_failure); the requests running or
  /// queued on it are retried at once on another replica or held for one, as the live gateway
  /// retries a request failed as retryable; its downloads stop; answers from it never come.
  std::vector<SimHostFailure> failures;
  /// manager.replace_on_failure: a lost replica is placed again on a survivor.
  bool replace_on_failure = true;
  /// Decision time, as Flashpoint charges it: when set (microseconds of a monotonic clock), each
  /// call into the manager's classes (a placement, a load's answer, a tick) is timed, and the loads
  /// and unbinds it sent start that much later on the simulated clock. Unset: decisions take no
  /// time, and a run is a function of its inputs alone.
  std::function<uint64_t()> decision_clock;
};

struct RequestOutcome {
  uint64_t arrival_us = 0, start_us = 0, end_us = 0;
  uint32_t model = 0;  // index into the trace's models
  uint32_t host = 0;   // where it ran (when not lost)
  bool cold = false;   // it waited for a replica
  bool lost = false;   // no replica could be placed for it
  uint32_t retries = 0;  // times it was sent again because its host failed
};

struct ColdStartRecord {
  std::string model;
  std::string node;
  std::string tier;  // "repository", "peer", "cache"
  uint64_t started_us = 0, ready_us = 0;
  uint64_t bytes = 0;        // moved over the network (0 from the node's cache)
  uint64_t transfer_id = 0;  // the multicast chain it was a hop of (0: none)
};

/// The replicas bound (serving or draining) at one time, per model (in the order create() had them).
struct ReplicaSample {
  uint64_t at_us = 0;
  std::vector<uint32_t> replicas;  // serving or draining
  std::vector<uint32_t> draining;
};

struct SimResult {
  std::vector<RequestOutcome> requests;  // in trace order
  std::vector<ColdStartRecord> cold_starts;
  uint64_t events = 0;
  uint64_t end_us = 0;  // the last request's answer (or arrival, when lost)
  /// Replicas bound (serving or draining), sampled every interval (the autoscaler's, when on,
  /// else SimOptions::sample_interval_us) times the interval, from the start until every request
  /// is answered or lost.
  double replica_seconds = 0;
  uint32_t max_replicas = 0;  // the most bound at one sample
  std::vector<ReplicaSample> samples;
  uint32_t chains = 0;  // multicast transfers started
  uint64_t pipeline_requests = 0;  // requests that ran through a partitioned cold start's pipeline
  uint32_t failures = 0;           // hosts failed (SimOptions::failures within the run)
  /// Device bytes still reserved for loads at the end, over every node (0 unless a load was lost).
  uint64_t reserved_bytes_left = 0;
  /// With SimOptions::decision_clock: the decisions timed and their total time.
  uint64_t decisions = 0, decision_us = 0;
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
