// Spawning the cluster manager (its messages are in actors/cluster_manager_interface.hpp): the
// settings the manager process gives it, the initial repository scan it starts from, and the
// queue its later scans run on.
#pragma once

#include <caf/fwd.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/cluster/desired_state.hpp"
#include "actors/cluster/model_repository.hpp"
#include "actors/cluster_manager_interface.hpp"
#include "config/autoscale_config.hpp"
#include "placement/chain_plan.hpp"
#include "transport/ticket.hpp"

namespace ember {

class RepositoryIndex;
class WorkQueue;

struct ClusterManagerConfig {
  /// The repository directory (scanned by the manager; served to nodes by its blob server).
  std::string repository;
  /// Where the manager's blob server listens, as nodes should dial it.
  HostPort data;
  /// The cluster's ticket keys (security.ticket_key_file): every source the manager gives a node
  /// carries a ticket for that node (transport/ticket.hpp). Null: no tickets.
  std::shared_ptr<const transport::TicketKeys> tickets;
  /// Re-place the replicas of a lost node on the survivors.
  bool replace_on_failure = true;
  /// How often the chain controller looks for stalled hops while transfers run.
  std::chrono::milliseconds chain_check_interval{250};
  /// When a hop counts as stalled or slow (placement/chain_plan.hpp): transfer.stall_timeout,
  /// slow_fraction, lag and min_rate.
  placement::StallOptions stall;
  /// Autoscaling: every model's defaults (a model.json's serving.autoscale overrides them) and the
  /// loop's settings (off: replicas change only on load, scale from zero and node loss).
  AutoscaleConfig autoscale;
  AutoscalerSettings autoscaler;
  /// manager.recovery_window: after the manager starts, a gateway that holds a table from the
  /// manager's previous life gets its first table only once this passed (the nodes rejoin meanwhile).
  std::chrono::microseconds recovery_window{0};
  /// Actor-level heartbeats (manager.heartbeat, manager.node_timeout): every `heartbeat` each node's
  /// router is asked ping_atom; one that answered none for `node_timeout` is dropped as lost (a hang
  /// without a crash: its connection's own heartbeats go on) and taken back, with what it reports,
  /// once it answers again. Zero: off (the connection's heartbeats only).
  std::chrono::microseconds heartbeat{0};
  std::chrono::microseconds node_timeout{0};
  /// Where partition plan tables are built (the process's; outlives the actor). Null: none are
  /// precomputed, each partitioned start plans for its own queue.
  WorkQueue* plan_queue = nullptr;
  /// Spawns the console's admin actor (actors/console/admin.hpp) for the manager, which calls it
  /// once as it starts with its own handle and answers admin_atom with the result (the manager
  /// process gives make_admin_factory; the token settings are the admin actor's). Null: the manager
  /// has no admin interface (admin_atom answers unavailable).
  std::function<admin_actor(cluster_manager_actor)> admin;
  /// manager.state_dir, opened by the process (actors/cluster/desired_state.hpp): the decisions a
  /// person made, restored as the manager starts (loads placed, bounds and SLOs set) and each new
  /// one recorded before it is acknowledged. Null: kept in memory only.
  std::shared_ptr<DecisionLog> decisions;
};

/// Spawns the manager over an initial scan of the repository. `index` (shared with the manager's
/// blob server, which serves weights files by key) is kept in step with the registry. Rescans (load,
/// index) run on `scan_queue`, which must outlive the actor (the manager process owns it: one
/// thread; deterministic tests pass threads = 0); a full queue answers those requests unavailable.
/// `workflows`: the initial scan's (scan_workflows); whole rescans (index) read them again, and
/// gateways get them with the routing table.
cluster_manager_actor spawn_cluster_manager(caf::actor_system& sys, ClusterManagerConfig config,
                                            std::vector<RepositoryEntry> initial,
                                            std::shared_ptr<RepositoryIndex> index, WorkQueue& scan_queue,
                                            std::vector<workflow_entry> workflows = {});

}  // namespace ember
