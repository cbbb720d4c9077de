// The actors of one Ember process, built and wired: a node (executors, cache, blob server, router),
// a manager (repository, blob server, cluster_manager) and a gateway (gateway actor, HTTP API).
// `ember node`, `ember manager` and `ember serve` (all three in one process) compose these.
//
// Construction does the blocking work of startup (opening devices, binding ports, scanning the
// repository) on the caller's thread, before any actor depends on it. Destruction stops the
// servers' threads and then the actors. The actor system must outlive them. Not thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "actors/cluster_manager_interface.hpp"
#include "actors/gateway_interface.hpp"
#include "actors/node_router_interface.hpp"
#include "config/cluster_config.hpp"
#include "config/status.hpp"

namespace caf {
class actor_system;
}
namespace ember::transport {
class BlobServer;
class DataServer;
}

namespace ember {

class BlobStore;
class GatewayInstruments;
class HttpFrontend;
class NodeInstruments;
class RepositoryIndex;
class RoutingView;

class NodeProcess {
 public:
  static Result<std::unique_ptr<NodeProcess>> start(caf::actor_system& sys, const NodeConfig& node,
                                                    const DevicesConfig& devices, const TransferConfig& transfer = {},
                                                    const BindingConfig& binding = {});
  ~NodeProcess();

  const node_router_actor& router() const { return router_; }
  const std::string& name() const { return name_; }

  /// Joins the manager at `config.manager` over the network and stays joined: rejoins every
  /// rejoin_interval after losing it, until `stop` becomes true. Blocks the calling thread.
  void serve_remote(const NodeConfig& config, const std::atomic<bool>& stop);
  /// Joins a manager in this process. Returns the node id.
  Result<uint64_t> join_local(const cluster_manager_actor& manager);

 private:
  explicit NodeProcess(caf::actor_system& sys);
  caf::actor_system& sys_;
  std::string name_;
  std::unique_ptr<NodeInstruments> instruments_;
  std::shared_ptr<BlobStore> store_;
  std::unique_ptr<transport::DataServer> blob_server_;
  std::vector<gpu_executor_actor> executors_;
  model_cache_actor cache_;
  node_router_actor router_;
};

class ManagerProcess {
 public:
  /// Scans the repository, starts the blob server that serves it and spawns the manager. With
  /// `publish`, also makes the manager reachable for remote nodes at config.listen.
  static Result<std::unique_ptr<ManagerProcess>> start(caf::actor_system& sys, const ManagerConfig& config,
                                                       const TransferConfig& transfer, bool publish);
  ~ManagerProcess();

  const cluster_manager_actor& manager() const { return manager_; }
  uint16_t listen_port() const { return listen_port_; }

 private:
  explicit ManagerProcess(caf::actor_system& sys);
  caf::actor_system& sys_;
  std::shared_ptr<RepositoryIndex> index_;
  std::unique_ptr<transport::DataServer> blob_server_;
  cluster_manager_actor manager_;
  uint16_t listen_port_ = 0;
};

class GatewayProcess {
 public:
  static Result<std::unique_ptr<GatewayProcess>> start(caf::actor_system& sys, const GatewayConfig& config,
                                                       const cluster_manager_actor& manager);
  ~GatewayProcess();

  const gateway_actor& gateway() const { return gateway_; }
  uint16_t http_port() const;

 private:
  GatewayProcess();
  std::unique_ptr<GatewayInstruments> instruments_;
  std::shared_ptr<RoutingView> view_;
  gateway_actor gateway_;
  std::unique_ptr<HttpFrontend> http_;
};

}  // namespace ember
