// The manager process: the repository scan, the blob server that serves the repository, the
// cluster_manager (published for remote nodes and consoles when asked) and, beside it, the console's
// admin actor (actors/console/admin.hpp), which the manager spawns through the factory given here; `ember manager` and `ember serve` run
// one. Construction scans the repository and binds ports on the caller's thread. It owns the scan
// queue (one thread) the manager's later rescans run on; destruction stops the manager and waits
// for it before the queue joins. The actor system must outlive it. Not thread-safe.
#pragma once

#include <memory>

#include "actors/cluster/desired_state.hpp"
#include "actors/cluster_manager_interface.hpp"
#include "base/status.hpp"
#include "config/cluster_config.hpp"

namespace caf {
class actor_system;
}
namespace ember::transport {
class DataServer;
}

namespace ember {

class RepositoryIndex;
class WorkQueue;

class ManagerProcess {
 public:
  /// Scans the repository, starts the blob server that serves it and spawns the manager. With
  /// `publish`, also makes the manager reachable for remote nodes at config.listen. `autoscale` and
  /// `autoscaler` are the `autoscale:` section (the models' defaults, the loop's settings);
  /// `security` gives its blob server tickets and TLS (security.ticket_key_file, data_plane).
  /// `decisions`: where the decisions are kept when not in manager.state_dir (etcd, opened by
  /// ManagerLeadership::win); null: state_dir's, if set.
  static Result<std::unique_ptr<ManagerProcess>> start(caf::actor_system& sys, const ManagerConfig& config,
                                                       const TransferConfig& transfer, const AutoscaleConfig& autoscale,
                                                       const AutoscalerSettings& autoscaler, bool publish,
                                                       const SecurityConfig& security = {},
                                                       std::unique_ptr<DecisionLog> decisions = nullptr);
  ~ManagerProcess();

  const cluster_manager_actor& manager() const { return manager_; }
  /// The console's admin actor beside the manager (what admin_atom answers).
  const admin_actor& admin() const { return admin_; }
  uint16_t listen_port() const { return listen_port_; }

 private:
  explicit ManagerProcess(caf::actor_system& sys);
  caf::actor_system& sys_;
  std::shared_ptr<RepositoryIndex> index_;
  /// Repository rescans, one at a time (bounded: a full queue answers load/index unavailable).
  std::unique_ptr<WorkQueue> scan_queue_;
  /// Partition plan tables, built one version at a time in the background.
  std::unique_ptr<WorkQueue> plan_queue_;
  std::unique_ptr<transport::DataServer> blob_server_;
  cluster_manager_actor manager_;
  admin_actor admin_;
  uint16_t listen_port_ = 0;
};

}  // namespace ember
