#include "actors/process/manager_process.hpp"

#include <spdlog/spdlog.h>

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/actor_system.hpp"
#include "actors/cluster/cluster_manager.hpp"
#include "actors/cluster/model_repository.hpp"
#include "actors/cluster/repository_index.hpp"
#include "actors/console/admin.hpp"
#include "actors/errors.hpp"
#include "actors/process/data_server_options.hpp"
#include "base/token_file.hpp"
#include "base/work_queue.hpp"
#include "transport/data_plane.hpp"

namespace ember {

namespace {
/// Rescans waiting at most (load and index requests); beyond it they are answered unavailable.
constexpr size_t kScanQueueCapacity = 64;
}  // namespace

ManagerProcess::ManagerProcess(caf::actor_system& sys) : sys_(sys) {}

Result<std::unique_ptr<ManagerProcess>> ManagerProcess::start(caf::actor_system& sys, const ManagerConfig& config,
                                                              const TransferConfig& transfer,
                                                              const AutoscaleConfig& autoscale,
                                                              const AutoscalerSettings& autoscaler, bool publish,
                                                              const SecurityConfig& security,
                                                              std::unique_ptr<DecisionLog> decisions) {
  std::unique_ptr<ManagerProcess> p(new ManagerProcess(sys));
  auto entries = scan_repository(config.repository);
  for (const auto& e : entries) {
    if (!e.error.empty()) spdlog::warn("manager: {} cannot load: {}", e.key.to_string(), e.error);
  }
  auto workflows = scan_workflows(config.repository);
  for (const auto& w : workflows) {
    if (!w.error.empty()) spdlog::warn("manager: workflow {} cannot run: {}", w.name, w.error);
  }
  p->index_ = std::make_shared<RepositoryIndex>();
  p->index_->replace(entries);
  EMBER_ASSIGN_OR_RETURN(transport::BlobServerOptions server, data_server_options(transfer, security));
  server.listen = config.data_listen;
  const TransportKind kind = transfer.transport;
  EMBER_ASSIGN_OR_RETURN(p->blob_server_, transport::start_data_server(kind, server, p->index_->lookup()));
  ClusterManagerConfig mc;
  mc.repository = config.repository;
  mc.data = {config.data_listen.host, p->blob_server_->port()};
  mc.tickets = server.tickets;
  mc.replace_on_failure = config.replace_on_failure;
  mc.recovery_window = std::chrono::microseconds(config.recovery_window_us);
  mc.heartbeat = std::chrono::microseconds(config.heartbeat_us);
  mc.node_timeout = std::chrono::microseconds(config.node_timeout_us);
  AdminSettings admin;
  admin.open_reads = config.open_reads;
  if (!config.admin_token_file.empty()) {
    EMBER_ASSIGN_OR_RETURN(admin.token, read_token_file(config.admin_token_file, "manager.admin_token_file"));
  }
  mc.admin = make_admin_factory(sys, std::move(admin));
  if (decisions) {
    mc.decisions = std::move(decisions);
  } else if (!config.state_dir.empty()) {
    auto decisions = DecisionLog::open(config.state_dir);
    if (!decisions.ok()) {
      return Error(decisions.error().code(), "manager.state_dir: " + decisions.error().message());
    }
    mc.decisions = std::move(*decisions);
  }
  mc.chain_check_interval = std::chrono::milliseconds(transfer.progress_interval_us / 1000);
  mc.stall.stall_ms = static_cast<int64_t>(transfer.stall_timeout_us / 1000);
  mc.stall.slow_fraction = transfer.slow_fraction;
  mc.stall.lag_bytes = transfer.lag_bytes;
  mc.stall.min_bytes_per_s = transfer.min_rate_bytes_per_s;
  mc.autoscale = autoscale;
  mc.autoscaler = autoscaler;
  p->scan_queue_ = std::make_unique<WorkQueue>(WorkQueueOptions{.threads = 1, .capacity = kScanQueueCapacity});
  p->plan_queue_ = std::make_unique<WorkQueue>(WorkQueueOptions{.threads = 1, .capacity = 1});
  mc.plan_queue = p->plan_queue_.get();
  p->manager_ = spawn_cluster_manager(sys, mc, std::move(entries), p->index_, *p->scan_queue_, std::move(workflows));
  {
    caf::scoped_actor self{sys};
    Status got = internal_error("the manager did not answer admin_atom");
    self->request(p->manager_, std::chrono::seconds(10), admin_atom_v)
        .receive(
            [&](admin_actor& a) {
              p->admin_ = std::move(a);
              got = Status::OK();
            },
                 [&](caf::error& e) { got = from_caf(e); });
    EMBER_RETURN_IF_ERROR(got);
  }
  if (publish) {
    auto port = publish_remote(sys, caf::actor_cast<caf::actor>(p->manager_), config.listen);
    if (!port.ok()) return io_error("manager: cannot listen for nodes: " + port.error().message());
    p->listen_port_ = *port;
    spdlog::info("manager: listening for nodes on {}:{}{}, repository served on {}:{}", config.listen.host, *port,
                 sys.has_openssl_manager() ? " (mutual TLS)" : "", mc.data.host, mc.data.port);
  }
  return p;
}

ManagerProcess::~ManagerProcess() {
  if (blob_server_) blob_server_->stop();
  if (manager_) {
    caf::scoped_actor self{sys_};
    self->send_exit(manager_, caf::exit_reason::user_shutdown);
    self->wait_for(manager_);  // it posts to scan_queue_
  }
}

}  // namespace ember
