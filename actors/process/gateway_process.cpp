#include "actors/process/gateway_process.hpp"

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/gateway/gateway.hpp"
#include "actors/gateway/gateway_instruments.hpp"
#include "actors/gateway/http/http_frontend.hpp"
#include "actors/gateway/routing_view.hpp"
#include "base/work_queue.hpp"

namespace ember {

GatewayProcess::GatewayProcess() = default;

Result<std::unique_ptr<GatewayProcess>> GatewayProcess::start(caf::actor_system& sys, const GatewayConfig& config,
                                                              const cluster_manager_actor& manager) {
  std::unique_ptr<GatewayProcess> p(new GatewayProcess());
  p->instruments_ = std::make_unique<GatewayInstruments>();
  // One thread: scrapes are rare; a few may wait (Prometheus and a human), more are refused.
  p->metrics_queue_ = std::make_unique<WorkQueue>(WorkQueueOptions{.threads = 1, .capacity = 8});
  p->view_ = std::make_shared<RoutingView>();
  p->gateway_ = spawn_gateway(sys, config, caf::actor_cast<caf::actor>(manager), p->view_, p->instruments_.get(),
                              *p->metrics_queue_);
  EMBER_ASSIGN_OR_RETURN(p->http_, HttpFrontend::start(sys, config, p->gateway_, p->view_, p->instruments_.get()));
  return p;
}

GatewayProcess::~GatewayProcess() {
  if (http_) http_->stop();
  if (gateway_) {
    caf::scoped_actor self{gateway_->home_system()};
    self->send_exit(gateway_, caf::exit_reason::user_shutdown);
    self->wait_for(gateway_);  // it uses instruments_
  }
}

uint16_t GatewayProcess::http_port() const { return http_->port(); }

}  // namespace ember
