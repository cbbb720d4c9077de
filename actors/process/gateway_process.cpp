#include "actors/process/gateway_process.hpp"

#include <spdlog/spdlog.h>

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <thread>

#include "actors/actor_system.hpp"
#include "actors/gateway/cluster_generations.hpp"
#include "actors/gateway/gateway.hpp"
#include "actors/gateway/gateway_client.hpp"
#include "actors/gateway/gateway_instruments.hpp"
#include "actors/gateway/grpc/grpc_frontend.hpp"
#include "actors/gateway/http/http_frontend.hpp"
#include "actors/gateway/http/tls_context.hpp"
#include "actors/gateway/routing_view.hpp"
#include "base/token_file.hpp"
#include "base/work_queue.hpp"

namespace ember {

namespace {

/// The API's bearer tokens and TLS context, every file read and checked.
Result<std::pair<std::vector<ApiToken>, std::shared_ptr<const TlsContext>>> load_credentials(
    const GatewayConfig& config) {
  std::vector<ApiToken> tokens;
  if (!config.api_tokens_file.empty()) {
    EMBER_ASSIGN_OR_RETURN(tokens, read_api_tokens(config.api_tokens_file, "gateway.api_tokens_file"));
  }
  std::shared_ptr<const TlsContext> tls;
  if (!config.tls_certificate.empty()) {
    EMBER_ASSIGN_OR_RETURN(tls, make_tls_context({config.tls_certificate, config.tls_key,
                                                  config.tls_key_passphrase_file, config.tls_client_ca},
                                                 "gateway"));
  }
  return std::make_pair(std::move(tokens), std::move(tls));
}

/// Whether `host` (an endpoint's) is reached from this host only.
bool loopback(const std::string& host) { return host.starts_with("127.") || host == "localhost" || host == "::1"; }

/// An open API on an address others reach is allowed, and said at start.
void warn_if_open(const GatewayConfig& config, const std::vector<ApiToken>& tokens) {
  if (!tokens.empty()) return;
  for (const auto& at : {std::optional<HostPort>(config.http), config.grpc}) {
    if (!at || loopback(at->host)) continue;
    spdlog::warn(
        "gateway: the API on {} has no tokens (gateway.api_tokens_file): whoever reaches it may infer and change "
        "what the cluster serves (load, unload, distribute, evict)",
        at->to_string());
  }
}

}  // namespace

Status GatewayProcess::preflight(const GatewayConfig& config) {
  auto loaded = load_credentials(config);
  if (!loaded.ok()) return loaded.error();
  return Status::OK();
}

Result<std::unique_ptr<GatewayProcess>> GatewayProcess::start(caf::actor_system& sys, const GatewayConfig& config,
                                                              const cluster_manager_actor& manager,
                                                              std::vector<LocalNode> local) {
  EMBER_ASSIGN_OR_RETURN(auto credentials, load_credentials(config));
  auto& [tokens, tls] = credentials;
  warn_if_open(config, tokens);
  std::unique_ptr<GatewayProcess> p(new GatewayProcess());
  p->sys_ = &sys;
  p->instruments_ = std::make_unique<GatewayInstruments>();
  if (!manager) p->instruments_->set_manager_connected(false);  // until serve_remote reaches it
  // One thread: scrapes are rare; a few may wait (Prometheus and a human), more are refused.
  p->metrics_queue_ = std::make_unique<WorkQueue>(WorkQueueOptions{.threads = 1, .capacity = 8});
  p->view_ = std::make_shared<RoutingView>();
  if (!manager) {
    // Standalone: dials the nodes directly, one at a time (a dial blocks up to CAF's connect timeout).
    p->dial_queue_ = std::make_unique<WorkQueue>(WorkQueueOptions{.threads = 1, .capacity = 4096});
  }
  p->gateway_ = spawn_gateway(sys, config, caf::actor_cast<caf::actor>(manager), p->view_, p->instruments_.get(),
                              *p->metrics_queue_, p->dial_queue_.get());
  p->client_ = std::make_shared<GatewayClient>(sys, config, p->gateway_, p->view_, p->instruments_.get(),
                                               std::move(local), std::move(tokens));
  ClusterGenerationsOptions generation;
  generation.cold_start_timeout = std::chrono::microseconds(config.cold_start_timeout_us);
  p->generations_ = std::make_shared<ClusterGenerations>(sys, p->view_, p->gateway_, p->instruments_.get(), generation);
  EMBER_ASSIGN_OR_RETURN(p->http_, HttpFrontend::start(p->client_, p->instruments_.get(), tls, p->generations_));
  if (config.grpc) {
    EMBER_ASSIGN_OR_RETURN(p->grpc_, GrpcFrontend::start(p->client_, tls, p->generations_));
  }
  if (config.metrics) {
    EMBER_ASSIGN_OR_RETURN(p->metrics_, MetricsEndpoint::start(p->client_, *config.metrics));
  }
  return p;
}

GatewayProcess::~GatewayProcess() {
  metrics_.reset();
  if (grpc_) grpc_->stop();
  if (http_) http_->stop();
  if (generations_) generations_->shutdown();  // its relays use instruments_
  if (gateway_) {
    caf::scoped_actor self{gateway_->home_system()};
    self->send_exit(gateway_, caf::exit_reason::user_shutdown);
    self->wait_for(gateway_);  // it uses instruments_
  }
}

uint16_t GatewayProcess::http_port() const { return http_->port(); }

uint16_t GatewayProcess::grpc_port() const { return grpc_ ? grpc_->port() : 0; }

uint16_t GatewayProcess::metrics_port() const { return metrics_ ? metrics_->port() : 0; }

void GatewayProcess::serve_remote(const GatewayConfig& config, const std::atomic<bool>& stop) {
  const auto interval = std::chrono::microseconds(config.reconnect_interval_us);
  // Several managers (manager.etcd): tried in turn; only the leader listens, so whichever answers leads.
  std::vector<HostPort> managers{*config.manager};
  managers.insert(managers.end(), config.standby_managers.begin(), config.standby_managers.end());
  size_t next = 0;
  bool said_unreachable = false;
  while (!stop) {
    const HostPort at = managers[next];
    auto found = connect_remote(*sys_, at.host, at.port);
    if (!found.ok()) {
      next = (next + 1) % managers.size();
      if (!said_unreachable && next == 0) {  // every one tried
        spdlog::warn("gateway: manager {} unreachable ({}); serving from the last routing table, retrying every {} ms",
                     at.to_string(), found.error().message(), config.reconnect_interval_us / 1000);
        said_unreachable = true;
      }
      if (next == 0) std::this_thread::sleep_for(interval);
      continue;
    }
    said_unreachable = false;
    auto manager = caf::actor_cast<cluster_manager_actor>(*found);
    spdlog::info("gateway: connected to the manager at {}", at.to_string());
    caf::anon_send(gateway_, manager_atom_v, *found);
    caf::scoped_actor self{*sys_};
    self->monitor(manager);
    bool lost = false;
    while (!stop && !lost) {
      self->receive([&](caf::down_msg&) { lost = true; },
                    caf::after(std::chrono::milliseconds(200)) >> [] { /* check `stop` */ });
    }
    if (lost) spdlog::warn("gateway: lost the manager at {}; reconnecting", at.to_string());
  }
}

}  // namespace ember
