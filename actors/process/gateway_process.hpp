// The gateway process: the gateway actor and its KServe v2 front ends (HTTP, and gRPC when
// gateway.grpc is set), with text generation over the cluster on the HTTP front end (OpenAI's API and
// KServe's generate extension, served by ClusterGenerations); `ember gateway`-less
// deployments run it inside `ember manager` or `ember serve`. Construction binds the ports on the
// caller's thread; destruction stops the front ends first, then the actor. Not thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "actors/cluster_manager_interface.hpp"
#include "actors/gateway/gateway_client.hpp"
#include "actors/gateway_interface.hpp"
#include "base/status.hpp"
#include "config/cluster_config.hpp"

namespace caf {
class actor_system;
}

namespace ember {

class ClusterGenerations;
class GatewayInstruments;
class GrpcFrontend;
class HttpFrontend;
class MetricsEndpoint;
class RoutingView;
class WorkQueue;

class GatewayProcess {
 public:
  /// A gateway of `manager` (in this process). A standalone gateway (`ember gateway`) passes a null
  /// handle and then runs serve_remote(). `local`: nodes in this process that run warm requests on
  /// the front ends' threads (`ember serve`); each must outlive this gateway process.
  static Result<std::unique_ptr<GatewayProcess>> start(caf::actor_system& sys, const GatewayConfig& config,
                                                       const cluster_manager_actor& manager,
                                                       std::vector<LocalNode> local = {});
  /// Reads and checks the files the gateway will need (api_tokens_file, tls_*), as start() does:
  /// for a process that starts other parts first (`ember serve`, `ember manager --http`), so that a
  /// bad file stops it before anything else starts.
  static Status preflight(const GatewayConfig& config);
  /// A standalone gateway's link to its manager (config.manager): connects, hands the manager to
  /// the gateway actor (which subscribes and monitors it), and after losing it tries again every
  /// config.reconnect_interval while the gateway serves warm requests from its last table; until
  /// `stop` becomes true. Blocks the calling thread.
  void serve_remote(const GatewayConfig& config, const std::atomic<bool>& stop);
  ~GatewayProcess();

  const gateway_actor& gateway() const { return gateway_; }
  uint16_t http_port() const;
  /// The gRPC port, 0 when gateway.grpc is off.
  uint16_t grpc_port() const;
  /// The token-free /metrics port, 0 when gateway.metrics is off.
  uint16_t metrics_port() const;
  /// The routing table the gateway routes by now (its front ends read the same).
  const RoutingView& view() const { return *view_; }

 private:
  GatewayProcess() = default;
  caf::actor_system* sys_ = nullptr;
  std::unique_ptr<GatewayInstruments> instruments_;
  /// Merges and renders /metrics for the gateway actor; joined before instruments_ goes (its jobs
  /// read them) and after the actor is gone.
  std::unique_ptr<WorkQueue> metrics_queue_;
  /// A standalone gateway's direct connections to the nodes (null inside a manager's process).
  std::unique_ptr<WorkQueue> dial_queue_;
  std::shared_ptr<RoutingView> view_;
  gateway_actor gateway_;
  std::shared_ptr<GatewayClient> client_;
  /// Text generation over the cluster for the HTTP front end; shut down after it stops (its relays
  /// use instruments_ and the actor system).
  std::shared_ptr<ClusterGenerations> generations_;
  std::unique_ptr<HttpFrontend> http_;
  std::unique_ptr<GrpcFrontend> grpc_;  // null when gateway.grpc is off
  std::unique_ptr<MetricsEndpoint> metrics_;  // null when gateway.metrics is off
};

}  // namespace ember
