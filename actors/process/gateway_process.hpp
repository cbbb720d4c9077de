// The gateway process: the gateway actor and its KServe v2 HTTP front end; `ember gateway`-less
// deployments run it inside `ember manager` or `ember serve`. Construction binds the HTTP port on
// the caller's thread; destruction stops HTTP first, then the actor. Not thread-safe.
#pragma once

#include <memory>

#include "actors/cluster_manager_interface.hpp"
#include "actors/gateway_interface.hpp"
#include "base/status.hpp"
#include "config/cluster_config.hpp"

namespace caf {
class actor_system;
}

namespace ember {

class GatewayInstruments;
class HttpFrontend;
class RoutingView;
class WorkQueue;

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
  /// Merges and renders /metrics for the gateway actor; joined before instruments_ goes (its jobs
  /// read them) and after the actor is gone.
  std::unique_ptr<WorkQueue> metrics_queue_;
  std::shared_ptr<RoutingView> view_;
  gateway_actor gateway_;
  std::unique_ptr<HttpFrontend> http_;
};

}  // namespace ember
