// node_supervisor: one per node, beside its router. It is the node's handle: what the node joins
// the cluster with and publishes on node.listen, what the manager monitors, pings and controls
// through and what gateways watch. It passes every message it gets on to the router (CAF
// delegation: the router answers the sender directly), so the router behind it can die and be
// replaced without the handle changing.
//
// Requests do not take that hop: the router reports itself as the node's requests actor
// (node_report::requests), and gateways and front ends send infer and workflow requests to it
// directly. A router that dies and is restarted reports the new one; the manager learns it from the
// next heartbeat (report_fingerprint covers it) and publishes it; meanwhile gateways that saw the
// old one go down route around the node and re-send what was in flight there. Only a node started
// with --allow-faults keeps its requests on this actor (node_report::requests is null): its
// interposer must see every message to drop, delay or duplicate it.
//
// Supervision (one_for_one): it monitors the router and the executors, which end with it. A router that dies is
// spawned again over the same executors and cache, and restores its replicas from the node's
// ReplicaLedger (actors/node/replica_ledger.hpp); an executor that dies is replaced by a fresh one,
// which the router restarts (reopening the device) and fills again from host memory. Requests the
// dead actor held are answered as unavailable (retryable) by its state's destructor; requests that
// reach it while it is dead bounce as receiver-down (retryable too). A child that dies more than
// kMaxRestarts times in kRestartWindow is left dead and logged: the node refuses its work.
//
// Fault injection (only when the node was started with --allow-faults; fault_command,
// actors/fault_messages.hpp): kill the router or an executor; drop, delay or duplicate the messages to the
// router for a duration (an interposer here, drawing from a seeded generator so that a failing run
// replays); arm an executor to fail its next allocations or its next kernel; corrupt the next data
// frames the node's blob server sends; throttle or stall the node's multicast hops for a while. Each fault is logged
// with its parameters and counted (ember_faults_injected_total{kind}).
//
// The model cache is supervised too: a new one adopts the bytes its predecessor left in the node's
// store and the router pins its replicas' again; its fetches in flight fail as unavailable (the
// manager retries the loads) and its multicast hops end with it (their chains splice around them).
// So is the stage host (actors/stage_host_interface.hpp), which pipelines address directly, not
// through this supervisor: a new one starts empty, the router drops the stages it had handed over
// and reports the new host from its next report on. Not supervised on their own: the hops (a hop
// that dies fails its transfer on this node).
#pragma once

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/fwd.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "actors/gpu_executor_interface.hpp"
#include "actors/model_cache_interface.hpp"
#include "actors/node/joined_manager.hpp"
#include "actors/node_router_interface.hpp"
#include "actors/transfer/transfer_peer.hpp"

namespace ember {

class InlineRuns;
class NodeInstruments;
class WorkQueue;

/// The actors a supervisor holds now (answer to roster_atom; local only): what the node process
/// stops at shutdown.
struct node_roster {
  node_router_actor router;
  std::vector<gpu_executor_actor> executors;
  model_cache_actor cache;
  stage_host_actor stages;
};

struct SupervisorConfig {
  std::string node;
  bool allow_faults = false;
  /// A router over these executors, cache and stage host (it restores from the node's ledger).
  std::function<node_router_actor(const std::vector<gpu_executor_actor>&, const model_cache_actor&,
                                  const stage_host_actor&)>
      spawn_router;
  /// A replacement for executor `device`, without an engine (see spawn_replacement_executor).
  std::function<gpu_executor_actor(uint32_t device)> spawn_executor;
  /// A model cache over the node's store (it adopts the blobs there).
  std::function<model_cache_actor()> spawn_cache;
  /// An empty stage host. Null: the node's stage host is not supervised (none, or tests).
  std::function<stage_host_actor()> spawn_stages;
  NodeInstruments* instruments = nullptr;
  /// The node's data-plane and hop fault knobs (corrupt-chunk; throttle, stall). May be null.
  std::shared_ptr<std::atomic<uint64_t>> corrupt_next;
  std::shared_ptr<HopFault> hop_fault;
  /// The node's inline runs, suspended while an interposer drops, delays or duplicates the router's
  /// messages (a request run inline would pass it by). May be null.
  std::shared_ptr<InlineRuns> inline_runs;
  /// The manager the node joined: a fault is taken only from it (joined_manager.hpp). Null: from
  /// anyone (tests of the supervisor alone).
  std::shared_ptr<const JoinedManager> manager;
  /// Where the node dials the other members the manager names (peers_atom; actors/peer_dials.hpp),
  /// and how long after a failed dial it tries again. Null: no dials (a node inside `ember serve`).
  WorkQueue* dial_queue = nullptr;
  std::chrono::microseconds dial_retry{std::chrono::seconds(1)};
};

/// The supervisor, typed as the router it stands for. It answers roster_atom with a node_roster.
node_router_actor spawn_node_supervisor(caf::actor_system& sys, SupervisorConfig config, node_router_actor router,
                                        std::vector<gpu_executor_actor> executors, model_cache_actor cache,
                                        stage_host_actor stages = {});

}  // namespace ember

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ember::node_roster)
