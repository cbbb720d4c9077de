// Spawning a node_router (its messages are in actors/node_router_interface.hpp): the node's
// settings and, for late binding, the swap controller's.
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
#include "transport/ticket.hpp"
#include "transport/tls_stream.hpp"

namespace ember {

class BlobStore;
class ReplicaLedger;
class WorkQueue;

/// Pipeline stages hand the tensors they carry to the next stage over the data plane: this node's
/// blob server serves them out of `store`, and `fetches` runs the fetches of those sent here
/// (blocking, `transport`'s fetch). Without it they ride in the actor message (tests).
struct StageHandoff {
  std::shared_ptr<BlobStore> store;
  TransportKind transport = TransportKind::tcp;
  WorkQueue* fetches = nullptr;
  /// The cluster's ticket keys (security.ticket_key_file): each handoff carries a ticket for the
  /// downstream's fetch. Null: none.
  std::shared_ptr<const transport::TicketKeys> tickets;
  /// The data plane's TLS (security.data_plane: tls); null: plain TCP.
  std::shared_ptr<const transport::DataTls> tls;
};

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
  std::optional<StageHandoff> handoff;
  /// Where the router keeps what a successor needs (actors/node/replica_ledger.hpp). A router
  /// spawned over a ledger with entries restores them. Null: nothing is kept (tests).
  std::shared_ptr<ReplicaLedger> ledger;
  /// The node's inline runs (actors/node/inline_runs.hpp): the late-binding router drains their
  /// records into its policies. Null: none happen on this node.
  std::shared_ptr<InlineRuns> inline_runs;
};

/// `devices[i]` describes the device of `executors[i]`.
node_router_actor spawn_node_router(caf::actor_system& sys, NodeRouterConfig config,
                                    std::vector<gpu_executor_actor> executors, std::vector<device_report> devices,
                                    model_cache_actor cache, NodeInstruments* instruments);

}  // namespace ember
