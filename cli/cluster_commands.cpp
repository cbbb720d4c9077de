// `ember serve`, `ember manager`, `ember gateway` and `ember node`: the processes of a cluster.
#include <spdlog/spdlog.h>

#include <atomic>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

#include "actors/actor_system.hpp"
#include "actors/errors.hpp"
#include "actors/process/gateway_process.hpp"
#include "actors/process/manager_leadership.hpp"
#include "actors/process/manager_process.hpp"
#include "actors/process/node_process.hpp"
#include "base/host_port.hpp"
#include "base/service_notify.hpp"
#include "base/units.hpp"
#include "cli/commands.hpp"
#include "config/cluster_config.hpp"

namespace ember::cli {

namespace {

std::atomic<bool> g_stop{false};

void on_signal(int) { g_stop = true; }

void install_signal_handlers() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);
}

void wait_for_signal() {
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  spdlog::info("shutting down");
  (void)notify_service_manager("STOPPING=1");
}

/// Tells a service manager (systemd, Type=notify: deploy/systemd/) that this process serves.
void notify_ready(const std::string& status) {
  if (Status s = notify_service_manager("READY=1\nSTATUS=" + status); !s.ok()) {
    spdlog::warn("cannot tell the service manager that this process is ready: {}", s.error().message());
  }
}

/// Options every cluster command shares; empty strings mean "keep the config file's value".
struct ClusterOptions {
  std::string config;
  std::string listen;         // manager.listen
  std::string data_listen;    // manager.data_listen or node.data_listen
  std::string repository;     // manager.repository (node.repository for `ember node`)
  std::string http;           // gateway.http
  std::string grpc;           // gateway.grpc
  uint32_t grpc_threads = 0;  // gateway.grpc_threads
  std::string manager;        // node.manager
  std::string name;           // node.name
  std::string cache;          // node.cache
  uint32_t devices = 0;       // devices.count
  std::string device_kind;    // devices.kind
  std::string device_memory;  // devices.memory
  std::string pcie;           // devices.pcie_bandwidth
  uint32_t threads = 0;       // devices.compute_threads
  uint32_t http_threads = 0;
  std::string cold_start_timeout;
  std::string node_timeout;
  std::vector<std::string> load;  // models to load at start (serve / manager)
  std::string transport;          // transfer.transport
  std::string rack;               // transfer.rack
  uint64_t fault_corrupt_frame = 0;
  std::string fault_receive_rate;
  bool allow_faults = false;
  std::string api_tokens_file;  // gateway.api_tokens_file
  std::string metrics;          // gateway.metrics
  std::string tls_certificate;  // gateway.tls_*
  std::string tls_key;
  std::string tls_client_ca;
};

/// Applies one override: `field = parse(text)` unless text is empty; errors name the option.
template <class T, class Parse>
Status override_with(const std::string& text, const char* option, T& field, Parse parse) {
  if (text.empty()) return Status::OK();
  auto v = parse(text);
  if (!v.ok()) return v.error().with_context(option);
  field = *v;
  return Status::OK();
}

Result<ClusterConfig> cluster_config(const ClusterOptions& o, ProcessRole role) {
  ClusterConfig c;
  if (!o.config.empty()) {
    EMBER_ASSIGN_OR_RETURN(c, load_cluster_config(o.config));
  }
  EMBER_RETURN_IF_ERROR(override_with(o.listen, "--listen",
                                      role == ProcessRole::node ? c.node.listen : c.manager.listen, parse_host_port));
  if (role == ProcessRole::node) {
    EMBER_RETURN_IF_ERROR(override_with(o.data_listen, "--data-listen", c.node.data_listen, parse_host_port));
    if (!o.repository.empty()) c.node.repository = o.repository;
  } else {
    EMBER_RETURN_IF_ERROR(override_with(o.data_listen, "--data-listen", c.manager.data_listen, parse_host_port));
    if (!o.repository.empty()) c.manager.repository = o.repository;
  }
  EMBER_RETURN_IF_ERROR(override_with(o.http, "--http", c.gateway.http, parse_host_port));
  if (!o.grpc.empty()) {
    auto hp = parse_host_port(o.grpc);
    if (!hp.ok()) return hp.error().with_context("--grpc");
    c.gateway.grpc = *hp;
  }
  if (o.grpc_threads) c.gateway.grpc_threads = o.grpc_threads;
  if (!o.api_tokens_file.empty()) c.gateway.api_tokens_file = o.api_tokens_file;
  if (!o.tls_certificate.empty()) c.gateway.tls_certificate = o.tls_certificate;
  if (!o.tls_key.empty()) c.gateway.tls_key = o.tls_key;
  if (!o.tls_client_ca.empty()) c.gateway.tls_client_ca = o.tls_client_ca;
  if (!o.metrics.empty()) {
    auto hp = parse_host_port(o.metrics);
    if (!hp.ok()) return hp.error().with_context("--metrics");
    c.gateway.metrics = *hp;
  }
  if (!o.manager.empty()) {
    auto list = parse_host_port_list(o.manager);
    if (!list.ok()) return list.error().with_context("--manager");
    (role == ProcessRole::gateway ? c.gateway.manager : c.node.manager) = (*list)[0];
    (role == ProcessRole::gateway ? c.gateway.standby_managers : c.node.standby_managers)
        .assign(list->begin() + 1, list->end());
  }
  if (!o.name.empty()) c.node.name = o.name;
  EMBER_RETURN_IF_ERROR(override_with(o.cache, "--cache", c.node.cache_bytes, parse_bytes));
  if (o.devices) c.devices.count = o.devices;
  EMBER_RETURN_IF_ERROR(override_with(o.device_kind, "--device", c.devices.kind, parse_device_kind));
  EMBER_RETURN_IF_ERROR(override_with(o.device_memory, "--device-memory", c.devices.sim.memory_bytes, parse_bytes));
  EMBER_RETURN_IF_ERROR(override_with(o.pcie, "--pcie-bandwidth", c.devices.sim.pcie_bytes_per_s, parse_bandwidth));
  if (o.threads) c.devices.sim.compute_threads = o.threads;
  if (o.http_threads) c.gateway.http_threads = o.http_threads;
  EMBER_RETURN_IF_ERROR(
      override_with(o.cold_start_timeout, "--cold-start-timeout", c.gateway.cold_start_timeout_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(override_with(o.node_timeout, "--node-timeout", c.manager.node_timeout_us, parse_duration_us));
  if (c.manager.heartbeat_us >= c.manager.node_timeout_us) c.manager.heartbeat_us = c.manager.node_timeout_us / 4;
  EMBER_RETURN_IF_ERROR(override_with(o.transport, "--transport", c.transfer.transport, parse_transport_kind));
  if (!o.rack.empty()) c.transfer.rack = o.rack;
  c.transfer.fault_corrupt_frame = o.fault_corrupt_frame;
  if (o.allow_faults) c.node.allow_faults = true;
  EMBER_RETURN_IF_ERROR(
      override_with(o.fault_receive_rate, "--fault-receive-rate", c.transfer.fault_receive_bytes_per_s, parse_bandwidth));
  const std::string source = o.config.empty() ? "command line" : o.config + " and the command line";
  EMBER_RETURN_IF_ERROR(validate(c, source));
  if (role == ProcessRole::manager) EMBER_RETURN_IF_ERROR(check_role(c, ProcessRole::manager, source));
  if (role == ProcessRole::node) EMBER_RETURN_IF_ERROR(check_role(c, ProcessRole::node, source));
  if (role == ProcessRole::gateway) EMBER_RETURN_IF_ERROR(check_role(c, ProcessRole::gateway, source));
  return c;
}

/// The actor system's settings; with security.tls_*, its files checked (an error names the file).
Result<ActorSystemOptions> system_options(const ClusterConfig& c) {
  ActorSystemOptions o;
  o.heartbeat_us = c.manager.heartbeat_us;
  o.connection_timeout_us = c.manager.node_timeout_us;
  if (c.security.tls()) {
    EMBER_ASSIGN_OR_RETURN(o.tls, check_control_tls({c.security.tls_certificate, c.security.tls_key,
                                                     c.security.tls_key_passphrase_file, c.security.tls_ca},
                                                    "security"));
  }
  return o;
}

/// Asks the manager to load each model at start; failures are logged, not fatal.
void preload(caf::actor_system& sys, const cluster_manager_actor& manager, const std::vector<std::string>& models) {
  caf::scoped_actor self{sys};
  for (const auto& name : models) {
    self->request(manager, std::chrono::minutes(10), load_atom_v, model_command{{name, 0}})
        .receive([&](model_state& s) { spdlog::info("loaded {} ({})", s.model.to_string(), to_string(s.state)); },
                 [&](caf::error& e) { spdlog::error("cannot load {}: {}", name, from_caf(e).message()); });
  }
}

int run_serve(const ClusterOptions& o) {
  auto config = cluster_config(o, ProcessRole::manager);
  if (!config.ok()) return report(config.error());
  install_signal_handlers();
  auto options = system_options(*config);
  if (!options.ok()) return report(options.error());
  caf::actor_system_config cfg;
  configure_actor_system(cfg, *options);
  if (Status s = GatewayProcess::preflight(config->gateway); !s.ok()) return report(s.error());
  caf::actor_system sys{cfg};
  {
    // Remote nodes may join too when --listen is given.
    auto manager = ManagerProcess::start(sys, config->manager, config->transfer, config->autoscale, config->autoscaler,
                                         !o.listen.empty(), config->security);
    if (!manager.ok()) return report(manager.error());
    NodeConfig node = config->node;
    if (node.repository.empty()) node.repository = config->manager.repository;  // read bytes from disk directly
    if (node.name.empty()) node.name = "local";
    auto local = NodeProcess::start(sys, node, config->devices, config->transfer, config->binding, config->security,
                                    config->generation);
    if (!local.ok()) return report(local.error());
    auto joined = (*local)->join_local((*manager)->manager());
    if (!joined.ok()) return report(joined.error());
    std::vector<LocalNode> inline_nodes;
    if (auto runner = (*local)->inline_runner()) inline_nodes.push_back({(*local)->router().id(), std::move(runner)});
    auto gateway = GatewayProcess::start(sys, config->gateway, (*manager)->manager(), std::move(inline_nodes));
    if (!gateway.ok()) return report(gateway.error());
    preload(sys, (*manager)->manager(), o.load);
    spdlog::info("ember serve: ready on http://{}:{} (repository {})", config->gateway.http.host,
                 (*gateway)->http_port(), config->manager.repository);
    notify_ready("serving on http://" + config->gateway.http.host + ":" + std::to_string((*gateway)->http_port()));
    wait_for_signal();
  }
  return 0;
}

int run_manager(const ClusterOptions& o) {
  auto config = cluster_config(o, ProcessRole::manager);
  if (!config.ok()) return report(config.error());
  install_signal_handlers();
  auto options = system_options(*config);
  if (!options.ok()) return report(options.error());
  caf::actor_system_config cfg;
  configure_actor_system(cfg, *options);
  caf::actor_system sys{cfg};
  {
    if (!o.http.empty() || !o.grpc.empty()) {
      if (Status s = GatewayProcess::preflight(config->gateway); !s.ok()) return report(s.error());
    }
    // Several managers sharing etcd: stand by until this one leads; it exits as soon as it no longer does.
    std::unique_ptr<ManagerLeadership> leadership;
    if (!config->manager.etcd.empty()) {
      auto won = ManagerLeadership::win(config->manager, g_stop);
      if (!won.ok()) return g_stop ? 0 : report(won.error());
      leadership = std::move(*won);
    }
    auto manager = ManagerProcess::start(sys, config->manager, config->transfer, config->autoscale, config->autoscaler,
                                         true, config->security, leadership ? leadership->take_decisions() : nullptr);
    if (!manager.ok()) return report(manager.error());
    if (leadership) {
      leadership->keep([](const std::string& why) {
        spdlog::error("manager: lost the lead ({}); exiting at once so that only the leader acts (started again, "
                      "it stands by)",
                      why);
        std::fflush(nullptr);
        std::_Exit(75);  // EX_TEMPFAIL: systemd's Restart=on-failure starts it again as a standby
      });
    }
    std::unique_ptr<GatewayProcess> gateway;
    if (!o.http.empty() || !o.grpc.empty()) {
      auto g = GatewayProcess::start(sys, config->gateway, (*manager)->manager());
      if (!g.ok()) return report(g.error());
      gateway = std::move(*g);
    }
    notify_ready(gateway ? "managing; serving on http://" + config->gateway.http.host + ":" +
                               std::to_string(gateway->http_port())
                         : std::string("managing"));
    std::thread loader([&] { preload(sys, (*manager)->manager(), o.load); });
    wait_for_signal();
    loader.join();
  }
  return 0;
}

int run_gateway(const ClusterOptions& o) {
  auto config = cluster_config(o, ProcessRole::gateway);
  if (!config.ok()) return report(config.error());
  install_signal_handlers();
  auto options = system_options(*config);
  if (!options.ok()) return report(options.error());
  caf::actor_system_config cfg;
  configure_actor_system(cfg, *options);
  caf::actor_system sys{cfg};
  {
    auto gateway = GatewayProcess::start(sys, config->gateway, cluster_manager_actor{});
    if (!gateway.ok()) return report(gateway.error());
    spdlog::info("ember gateway: ready on http://{}:{} (manager {})", config->gateway.http.host,
                 (*gateway)->http_port(), config->gateway.manager->to_string());
    notify_ready("serving on http://" + config->gateway.http.host + ":" + std::to_string((*gateway)->http_port()));
    (*gateway)->serve_remote(config->gateway, g_stop);
    (void)notify_service_manager("STOPPING=1");
  }
  return 0;
}

int run_node(const ClusterOptions& o) {
  auto config = cluster_config(o, ProcessRole::node);
  if (!config.ok()) return report(config.error());
  install_signal_handlers();
  auto options = system_options(*config);
  if (!options.ok()) return report(options.error());
  caf::actor_system_config cfg;
  configure_actor_system(cfg, *options);
  caf::actor_system sys{cfg};
  {
    auto node =
        NodeProcess::start(sys, config->node, config->devices, config->transfer, config->binding, config->security,
                           config->generation);
    if (!node.ok()) return report(node.error());
    notify_ready("node " + (*node)->name() + " started; joining " + config->node.manager->to_string());
    (*node)->serve_remote(config->node, g_stop);
    (void)notify_service_manager("STOPPING=1");
  }
  return 0;
}

void add_common(CLI::App* cmd, ClusterOptions& o) {
  cmd->add_option("--config", o.config, "Cluster YAML config (deploy/ember.yaml documents every key)");
}

void add_device_flags(CLI::App* cmd, ClusterOptions& o) {
  cmd->add_option("--devices", o.devices, "Devices to serve with (devices.count)");
  cmd->add_option("--device", o.device_kind, "auto, sim or cuda (devices.kind)");
  cmd->add_option("--device-memory", o.device_memory, "Simulated device memory, e.g. 8GiB (devices.memory)");
  cmd->add_option("--pcie-bandwidth", o.pcie, "Simulated host<->device bandwidth, e.g. 16GB/s");
  cmd->add_option("--threads", o.threads, "Compute threads of each simulated device");
  cmd->add_option("--cache", o.cache, "Host-memory cap of the model cache, e.g. 16GiB (node.cache)");
}

void add_transfer_flags(CLI::App* cmd, ClusterOptions& o) {
  cmd->add_option("--transport", o.transport, "Data plane for model bytes: tcp or ucx (transfer.transport)");
}

/// Fault seams for tests and drills (group "Fault injection"): never set in production.
void add_fault_flags(CLI::App* cmd, ClusterOptions& o) {
  cmd->add_option("--fault-corrupt-frame", o.fault_corrupt_frame,
                  "Corrupt the Nth data frame this node's blob server sends (receivers must re-fetch it)")
      ->group("Fault injection");
  cmd->add_option("--fault-receive-rate", o.fault_receive_rate,
                  "Receive multicast chains at most this fast, e.g. 20MB/s (a slow peer)")
      ->group("Fault injection");
  cmd->add_flag("--allow-faults", o.allow_faults,
                "Take fault commands from the console and tests: kill actors, drop/delay/duplicate messages, "
                "fail allocations, fault kernels (node.allow_faults)")
      ->group("Fault injection");
}

void add_api_security_flags(CLI::App* cmd, ClusterOptions& o) {
  cmd->add_option("--api-tokens-file", o.api_tokens_file,
                  "Bearer tokens, one per line, that every API call but the health checks must carry "
                  "(gateway.api_tokens_file)");
  cmd->add_option("--tls-certificate", o.tls_certificate,
                  "Serve HTTP and gRPC over TLS with this PEM certificate chain (gateway.tls_certificate)");
  cmd->add_option("--tls-key", o.tls_key, "The certificate's PEM private key (gateway.tls_key)");
  cmd->add_option("--tls-client-ca", o.tls_client_ca,
                  "Require client certificates signed by this PEM CA: mutual TLS (gateway.tls_client_ca)");
  cmd->add_option("--metrics", o.metrics,
                  "Also serve /metrics alone here, without tokens, e.g. 0.0.0.0:8002 (gateway.metrics)");
}

void add_gateway_flags(CLI::App* cmd, ClusterOptions& o) {
  cmd->add_option("--http-threads", o.http_threads, "HTTP server threads (gateway.http_threads)");
  cmd->add_option("--grpc", o.grpc, "Also serve KServe v2 over gRPC here, e.g. 127.0.0.1:8001 (gateway.grpc)");
  cmd->add_option("--grpc-threads", o.grpc_threads, "gRPC server threads (gateway.grpc_threads)");
  add_api_security_flags(cmd, o);
  cmd->add_option("--cold-start-timeout", o.cold_start_timeout,
                  "How long requests for a cold model are held, e.g. 30s (gateway.cold_start_timeout)");
  cmd->add_option("--load", o.load, "Models to load at start (comma-separated names)")->delimiter(',');
}

}  // namespace

void add_cluster_commands(CLI::App& app, Runner& runner) {
  auto serve = std::make_shared<ClusterOptions>();
  auto* s = app.add_subcommand("serve", "Manager, one node and the HTTP gateway in one process");
  add_common(s, *serve);
  s->add_option("--http", serve->http, "HTTP address of the KServe v2 API (default 127.0.0.1:8000)");
  s->add_option("--repository", serve->repository, "Model repository directory");
  s->add_option("--listen", serve->listen, "Also accept remote nodes on this address (manager.listen)");
  s->add_option("--data-listen", serve->data_listen, "Address of the repository's blob server");
  s->add_option("--node-timeout", serve->node_timeout, "Drop remote nodes silent for this long, e.g. 2s");
  add_device_flags(s, *serve);
  add_gateway_flags(s, *serve);
  add_transfer_flags(s, *serve);
  s->callback([serve, &runner] { runner = [serve] { return run_serve(*serve); }; });

  auto manager = std::make_shared<ClusterOptions>();
  auto* m = app.add_subcommand("manager", "The cluster manager (and, with --http, a gateway)");
  add_common(m, *manager);
  m->add_option("--listen", manager->listen, "Where nodes join (manager.listen, default 127.0.0.1:7070)");
  m->add_option("--repository", manager->repository, "Model repository directory (manager.repository)");
  m->add_option("--data-listen", manager->data_listen, "Address of the repository's blob server");
  m->add_option("--http", manager->http, "Also serve the KServe v2 API here");
  m->add_option("--node-timeout", manager->node_timeout, "Drop nodes silent for this long, e.g. 2s");
  add_gateway_flags(m, *manager);
  add_transfer_flags(m, *manager);
  m->callback([manager, &runner] { runner = [manager] { return run_manager(*manager); }; });

  auto gateway = std::make_shared<ClusterOptions>();
  auto* g = app.add_subcommand("gateway",
                               "A standalone HTTP gateway of a cluster: serves warm requests from its routing table "
                               "even while the manager is away");
  add_common(g, *gateway);
  g->add_option("--manager", gateway->manager, "The manager to subscribe to, HOST:PORT (gateway.manager)");
  g->add_option("--http", gateway->http, "HTTP address of the KServe v2 API (gateway.http, default 127.0.0.1:8000)");
  g->add_option("--http-threads", gateway->http_threads, "HTTP server threads (gateway.http_threads)");
  g->add_option("--grpc", gateway->grpc, "Also serve KServe v2 over gRPC here, e.g. 127.0.0.1:8001 (gateway.grpc)");
  g->add_option("--grpc-threads", gateway->grpc_threads, "gRPC server threads (gateway.grpc_threads)");
  g->add_option("--cold-start-timeout", gateway->cold_start_timeout,
                "How long requests for a cold model are held, e.g. 30s (gateway.cold_start_timeout)");
  g->add_option("--node-timeout", gateway->node_timeout, "Drop a silent manager or node after this long, e.g. 2s");
  add_api_security_flags(g, *gateway);
  g->callback([gateway, &runner] { runner = [gateway] { return run_gateway(*gateway); }; });

  auto node = std::make_shared<ClusterOptions>();
  auto* n = app.add_subcommand("node", "A node: one executor per device, a model cache, a router");
  add_common(n, *node);
  n->add_option("--manager", node->manager, "The manager to join, HOST:PORT (node.manager)");
  n->add_option("--name", node->name, "This node's name (default hostname:pid)");
  n->add_option("--listen", node->listen, "Where gateways connect to this node directly (node.listen)");
  n->add_option("--data-listen", node->data_listen, "Address of this node's blob server (node.data_listen)");
  n->add_option("--repository", node->repository, "A local model repository read before the network");
  n->add_option("--node-timeout", node->node_timeout, "Give up on a silent manager after this long");
  add_device_flags(n, *node);
  add_transfer_flags(n, *node);
  n->add_option("--rack", node->rack, "This node's rack, for chain order (transfer.rack)");
  add_fault_flags(n, *node);
  n->callback([node, &runner] { runner = [node] { return run_node(*node); }; });
}

}  // namespace ember::cli
