// Spawning a node_router (its messages are in actors/node_router_interface.hpp): the node's
// settings and, for late binding, the swap controller's.
//
// The router's files: node_router.cpp (its behaviour, replicas and reports), node_router_restore.cpp
// (executors restarted or replaced, pinned replicas bound again, a successor restored from the ledger),
// node_router_late.cpp (late binding's dispatch: requests to swap_requests and their answers back),
// node_router_models.cpp (late binding's models: registration, profile, SLO, burst scaling) and
// node_router_workflow.cpp (workflow requests over WorkflowRuns), node_router_generate.cpp (text
// generation: held, bound and cancelled by id over GenerationStreams), over node_router_state.hpp.
#pragma once

#include <caf/fwd.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/node/node_instruments.hpp"
#include "actors/node/shadow_pairs.hpp"
#include "actors/node/swap_controller.hpp"
#include "actors/node_router_interface.hpp"
#include "config/choices.hpp"
#include "placement/swap_scheduler.hpp"

namespace ember {

class ReplicaLedger;

class InlineRuns;

/// Late binding (Torpor): models live in host memory and are swapped onto a device per request.
struct LateBinding {
  SwapControllerOptions options;
  placement::NodeTopology topology;
  /// Each executor's model pool capacity, by device index.
  std::vector<uint64_t> pool_bytes;
  /// Each executor's workspace (device memory outside its pool: activations), by device index.
  std::vector<uint64_t> workspace_bytes;
  /// A model is heavy when its cold request takes more than heavy_factor times a warm one (both
  /// measured when the model is registered on this node).
  double heavy_factor = 1.3;
  /// SLO per model: deadline = slo_deadline_us if set, else slo_factor x its warm latency.
  double slo_factor = 2.0;
  uint64_t slo_deadline_us = 0;
  double slo_percentile = 0.98;
  /// An executor that has not answered a dispatch for this long is taken as faulted (its requests
  /// are retried, the device restarted), checked on the router's tick (about every second).
  uint64_t run_timeout_us = 300'000'000;
  /// Burst scaling (AsyFunc; actors/node/shadow_pairs.hpp): all off, late binding as it is.
  ShadowScalingOptions scaling;
};

struct NodeRouterConfig {
  std::string name;
  /// Where this node's blob server listens (reported to the manager for peer fetches).
  HostPort data;
  /// transfer.rack of the node's config.
  std::string rack;
  /// Set: late binding (binding.mode late). Unset: each replica is bound to one device at load.
  std::optional<LateBinding> late;
  /// Where the router keeps what a successor needs (actors/node/replica_ledger.hpp). A router
  /// spawned over a ledger with entries restores them. Null: nothing is kept (tests).
  std::shared_ptr<ReplicaLedger> ledger;
  /// The node's inline runs (actors/node/inline_runs.hpp): the late-binding router drains their
  /// records into its policies. Null: none happen on this node.
  std::shared_ptr<InlineRuns> inline_runs;
  /// The node's stage host (actors/node/stage_host.hpp), which serves the pipeline stages this
  /// router loads; the node's supervisor replaces it when it dies (stages_replaced). Null: the node
  /// takes no pipeline stage (load_stage answers unavailable).
  stage_host_actor stages;
  /// Requests come to this router itself (node_report::requests names it), not through the node's
  /// supervisor. False on a node that takes faults (--allow-faults), whose supervisor interposes.
  bool direct_requests = false;
};

/// `devices[i]` describes the device of `executors[i]`.
node_router_actor spawn_node_router(caf::actor_system& sys, NodeRouterConfig config,
                                    std::vector<gpu_executor_actor> executors, std::vector<device_report> devices,
                                    model_cache_actor cache, NodeInstruments* instruments);

}  // namespace ember
