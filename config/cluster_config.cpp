#include "config/cluster_config.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <utility>
#include <vector>

#include "base/read_file.hpp"
#include "config/config_detail.hpp"
#include "base/units.hpp"
#include "config/yaml_section.hpp"

namespace ember {
namespace config_detail {

Status check_duration(const std::string& at, const std::string& key, uint64_t us, uint64_t lo_us, uint64_t hi_us) {
  if (lo_us <= us && us <= hi_us) return Status::OK();
  return invalid_argument(at + ": " + key + ": " + format_duration(us) + " is outside " +
                          (lo_us == 0 ? std::string("0") : format_duration(lo_us)) + ".." + format_duration(hi_us));
}

}  // namespace config_detail

namespace {

using config_detail::check_duration;

using config_yaml::YamlSection;

constexpr uint64_t kMaxConfigFileBytes = 1u << 20;

Status check_range(const std::string& at, const char* key, uint64_t v, uint64_t lo, uint64_t hi) {
  if (v < lo || v > hi) {
    return invalid_argument(at + ": " + key + ": " + std::to_string(v) + " is outside " + std::to_string(lo) +
                            ".." + std::to_string(hi));
  }
  return Status::OK();
}

bool same_host(const HostPort& a, const HostPort& b) {
  return a.host == b.host || a.host == "0.0.0.0" || b.host == "0.0.0.0";
}

Status parse_manager(const YamlSection& s, ManagerConfig& c) {
  EMBER_RETURN_IF_ERROR(s.check_unique_keys());
  EMBER_RETURN_IF_ERROR(s.check_keys({"listen", "data_listen", "repository", "node_timeout", "heartbeat",
                                      "replace_on_failure", "recovery_window", "admin_token_file", "open_reads",
                                      "state_dir", "etcd", "etcd_prefix", "lease_ttl"}));
  EMBER_RETURN_IF_ERROR(s.read("listen", c.listen, parse_host_port));
  EMBER_RETURN_IF_ERROR(s.read("data_listen", c.data_listen, parse_host_port));
  EMBER_RETURN_IF_ERROR(s.read_string("repository", c.repository));
  EMBER_RETURN_IF_ERROR(s.read("node_timeout", c.node_timeout_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read("heartbeat", c.heartbeat_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read_bool("replace_on_failure", c.replace_on_failure));
  EMBER_RETURN_IF_ERROR(s.read("recovery_window", c.recovery_window_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read_string("admin_token_file", c.admin_token_file));
  EMBER_RETURN_IF_ERROR(s.read_bool("open_reads", c.open_reads));
  EMBER_RETURN_IF_ERROR(s.read_string("state_dir", c.state_dir));
  if (s.has("etcd")) {
    EMBER_RETURN_IF_ERROR(s.read("etcd", c.etcd, parse_host_port_list));
    if (!c.state_dir.empty()) {
      return invalid_argument(s.where("etcd") + ": the decisions are kept in etcd or in state_dir, not both");
    }
  }
  EMBER_RETURN_IF_ERROR(s.read_string("etcd_prefix", c.etcd_prefix));
  if (c.etcd_prefix.empty() || c.etcd_prefix.back() == '/') {
    return invalid_argument(s.where("etcd_prefix") + ": '" + c.etcd_prefix + "' must be non-empty and not end with /");
  }
  EMBER_RETURN_IF_ERROR(s.read("lease_ttl", c.lease_ttl_us, parse_duration_us));
  if (c.lease_ttl_us < 2'000'000 || c.lease_ttl_us > 60'000'000) {
    return invalid_argument(s.where("lease_ttl") + ": must lie in 2s..60s");
  }
  return Status::OK();
}

Status parse_security(const YamlSection& s, SecurityConfig& c) {
  EMBER_RETURN_IF_ERROR(s.check_unique_keys());
  EMBER_RETURN_IF_ERROR(s.check_keys(
      {"tls_certificate", "tls_key", "tls_key_passphrase_file", "tls_ca", "ticket_key_file", "data_plane",
       "ticket_receiver"}));
  EMBER_RETURN_IF_ERROR(s.read_string("ticket_key_file", c.ticket_key_file));
  if (s.has("data_plane")) {
    std::string mode;
    EMBER_RETURN_IF_ERROR(s.read_string("data_plane", mode));
    if (mode != "tickets" && mode != "tls") {
      return invalid_argument(s.where("data_plane") + ": '" + mode + "' is neither tickets nor tls");
    }
    c.data_plane_tls = mode == "tls";
  }
  if (s.has("ticket_receiver")) {
    std::string receiver;
    EMBER_RETURN_IF_ERROR(s.read_string("ticket_receiver", receiver));
    if (receiver != "name" && receiver != "certificate") {
      return invalid_argument(s.where("ticket_receiver") + ": '" + receiver + "' is neither name nor certificate");
    }
    c.ticket_names_certificate = receiver == "certificate";
  }
  EMBER_RETURN_IF_ERROR(s.read_string("tls_certificate", c.tls_certificate));
  EMBER_RETURN_IF_ERROR(s.read_string("tls_key", c.tls_key));
  EMBER_RETURN_IF_ERROR(s.read_string("tls_key_passphrase_file", c.tls_key_passphrase_file));
  EMBER_RETURN_IF_ERROR(s.read_string("tls_ca", c.tls_ca));
  return Status::OK();
}

Status parse_gateway(const YamlSection& s, GatewayConfig& c) {
  EMBER_RETURN_IF_ERROR(s.check_unique_keys());
  EMBER_RETURN_IF_ERROR(
      s.check_keys({"http", "http_threads", "http_queue", "grpc", "grpc_threads", "max_body", "request_timeout",
                    "cold_start_timeout", "max_pending", "manager", "reconnect_interval", "api_tokens_file", "metrics",
                    "tls_certificate", "tls_key", "tls_key_passphrase_file", "tls_client_ca"}));
  EMBER_RETURN_IF_ERROR(s.read("http", c.http, parse_host_port));
  EMBER_RETURN_IF_ERROR(s.read_uint_as("http_threads", 1024, c.http_threads));
  EMBER_RETURN_IF_ERROR(s.read_uint_as("http_queue", 65536, c.http_queue));
  if (s.has("grpc")) {
    HostPort grpc;
    EMBER_RETURN_IF_ERROR(s.read("grpc", grpc, parse_host_port));
    c.grpc = grpc;
  }
  EMBER_RETURN_IF_ERROR(s.read_uint_as("grpc_threads", 4096, c.grpc_threads));
  EMBER_RETURN_IF_ERROR(s.read("max_body", c.max_body_bytes, parse_bytes));
  EMBER_RETURN_IF_ERROR(s.read("request_timeout", c.request_timeout_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read("cold_start_timeout", c.cold_start_timeout_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read_uint_as("max_pending", 1'000'000, c.max_pending));
  if (s.has("manager")) {
    std::vector<HostPort> managers;
    EMBER_RETURN_IF_ERROR(s.read("manager", managers, parse_host_port_list));
    c.manager = managers[0];
    c.standby_managers.assign(managers.begin() + 1, managers.end());
  }
  EMBER_RETURN_IF_ERROR(s.read("reconnect_interval", c.reconnect_interval_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read_string("api_tokens_file", c.api_tokens_file));
  EMBER_RETURN_IF_ERROR(s.read_string("tls_certificate", c.tls_certificate));
  EMBER_RETURN_IF_ERROR(s.read_string("tls_key", c.tls_key));
  EMBER_RETURN_IF_ERROR(s.read_string("tls_key_passphrase_file", c.tls_key_passphrase_file));
  EMBER_RETURN_IF_ERROR(s.read_string("tls_client_ca", c.tls_client_ca));
  if (s.has("metrics")) {
    HostPort metrics;
    EMBER_RETURN_IF_ERROR(s.read("metrics", metrics, parse_host_port));
    c.metrics = metrics;
  }
  return Status::OK();
}

Status parse_node(const YamlSection& s, NodeConfig& c) {
  EMBER_RETURN_IF_ERROR(s.check_unique_keys());
  EMBER_RETURN_IF_ERROR(
      s.check_keys({"manager", "listen", "data_listen", "name", "cache", "repository", "rejoin_interval", "max_queue",
                    "max_queued_per_model", "max_queued_total", "allow_faults"}));
  if (s.has("manager")) {
    std::vector<HostPort> managers;
    EMBER_RETURN_IF_ERROR(s.read("manager", managers, parse_host_port_list));
    c.manager = managers[0];
    c.standby_managers.assign(managers.begin() + 1, managers.end());
  }
  EMBER_RETURN_IF_ERROR(s.read("listen", c.listen, parse_host_port));
  EMBER_RETURN_IF_ERROR(s.read("data_listen", c.data_listen, parse_host_port));
  EMBER_RETURN_IF_ERROR(s.read_string("name", c.name));
  EMBER_RETURN_IF_ERROR(s.read("cache", c.cache_bytes, parse_bytes));
  EMBER_RETURN_IF_ERROR(s.read_string("repository", c.repository));
  EMBER_RETURN_IF_ERROR(s.read("rejoin_interval", c.rejoin_interval_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read_uint_as("max_queue", 1'000'000, c.max_queue));
  EMBER_RETURN_IF_ERROR(s.read_uint_as("max_queued_per_model", 1'000'000, c.max_queued_per_model));
  EMBER_RETURN_IF_ERROR(s.read_uint_as("max_queued_total", 1'000'000, c.max_queued_total));
  EMBER_RETURN_IF_ERROR(s.read_bool("allow_faults", c.allow_faults));
  return Status::OK();
}

Result<double> parse_fraction(std::string_view text) {
  const std::string t(text);
  try {
    size_t used = 0;
    const double v = std::stod(t, &used);
    if (used == t.size() && v >= 0 && v < 1) return v;
  } catch (const std::exception&) {
  }
  return invalid_argument("'" + t + "' is not a number in [0, 1)");
}

Status parse_transfer(const YamlSection& s, TransferConfig& c) {
  EMBER_RETURN_IF_ERROR(s.check_unique_keys());
  EMBER_RETURN_IF_ERROR(s.check_keys({"transport", "chunk", "socket_buffer", "progress_interval", "idle_timeout",
                                      "stall_timeout", "slow_fraction", "min_rate", "lag", "max_attempts", "rack"}));
  EMBER_RETURN_IF_ERROR(s.read_word("transport", c.transport, parse_transport_kind));
  EMBER_RETURN_IF_ERROR(s.read("chunk", c.chunk_bytes, parse_bytes));
  EMBER_RETURN_IF_ERROR(s.read("socket_buffer", c.socket_buffer_bytes, parse_bytes));
  EMBER_RETURN_IF_ERROR(s.read("progress_interval", c.progress_interval_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read("idle_timeout", c.idle_timeout_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read("stall_timeout", c.stall_timeout_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read("slow_fraction", c.slow_fraction, parse_fraction));
  EMBER_RETURN_IF_ERROR(s.read("min_rate", c.min_rate_bytes_per_s, parse_bandwidth));
  EMBER_RETURN_IF_ERROR(s.read("lag", c.lag_bytes, parse_bytes));
  EMBER_RETURN_IF_ERROR(s.read_uint_as("max_attempts", 1000, c.max_attempts));
  EMBER_RETURN_IF_ERROR(s.read_string("rack", c.rack));
  return Status::OK();
}

Status validate_transfer(const TransferConfig& t, const std::string& at) {
  if (t.chunk_bytes < (64u << 10) || t.chunk_bytes > (64u << 20)) {
    return invalid_argument(at + ": transfer.chunk: " + format_bytes(t.chunk_bytes) + " is outside 64 KiB..64 MiB");
  }
  if (t.socket_buffer_bytes < (64u << 10) || t.socket_buffer_bytes > (256u << 20)) {
    return invalid_argument(at + ": transfer.socket_buffer: " + format_bytes(t.socket_buffer_bytes) +
                            " is outside 64 KiB..256 MiB");
  }
  EMBER_RETURN_IF_ERROR(check_duration(at, "transfer.progress_interval", t.progress_interval_us));
  EMBER_RETURN_IF_ERROR(check_duration(at, "transfer.idle_timeout", t.idle_timeout_us));
  EMBER_RETURN_IF_ERROR(check_duration(at, "transfer.stall_timeout", t.stall_timeout_us));
  if (t.progress_interval_us >= t.stall_timeout_us) {
    return invalid_argument(at + ": transfer.progress_interval must be shorter than transfer.stall_timeout");
  }
  if (t.lag_bytes < t.chunk_bytes) {
    return invalid_argument(at + ": transfer.lag: must be at least transfer.chunk (" + format_bytes(t.chunk_bytes) + ")");
  }
  EMBER_RETURN_IF_ERROR(check_range(at, "transfer.max_attempts", t.max_attempts, 1, 1000));
  if (t.rack.size() > 255) return invalid_argument(at + ": transfer.rack: longer than 255 characters");
  return Status::OK();
}

}  // namespace

std::string_view to_string(ProcessRole role) {
  switch (role) {
    case ProcessRole::manager: return "manager";
    case ProcessRole::gateway: return "gateway";
    case ProcessRole::node: return "node";
  }
  return "?";
}

Status validate(const ClusterConfig& c, std::string_view source) {
  const std::string at(source);
  EMBER_RETURN_IF_ERROR(validate_transfer(c.transfer, at));
  EMBER_RETURN_IF_ERROR(config_detail::validate_binding(c.binding, at));
  EMBER_RETURN_IF_ERROR(config_detail::validate_generation(c.generation, at));
  EMBER_RETURN_IF_ERROR(check_autoscale_config(c.autoscale, at, "autoscale"));
  EMBER_RETURN_IF_ERROR(check_autoscaler_settings(c.autoscaler, at, "autoscale"));

  const ManagerConfig& m = c.manager;
  EMBER_RETURN_IF_ERROR(check_duration(at, "manager.node_timeout", m.node_timeout_us));
  EMBER_RETURN_IF_ERROR(check_duration(at, "manager.heartbeat", m.heartbeat_us));
  EMBER_RETURN_IF_ERROR(check_duration(at, "manager.recovery_window", m.recovery_window_us, 0, 60'000'000));
  if (m.heartbeat_us >= m.node_timeout_us) {
    return invalid_argument(at + ": manager.heartbeat (" + format_duration(m.heartbeat_us) +
                            ") must be shorter than manager.node_timeout (" + format_duration(m.node_timeout_us) +
                            ")");
  }

  const GatewayConfig& g = c.gateway;
  EMBER_RETURN_IF_ERROR(check_range(at, "gateway.http_threads", g.http_threads, 1, 1024));
  EMBER_RETURN_IF_ERROR(check_range(at, "gateway.http_queue", g.http_queue, 1, 65536));
  EMBER_RETURN_IF_ERROR(check_range(at, "gateway.grpc_threads", g.grpc_threads, 1, 4096));
  if (g.max_body_bytes < (1u << 10) || g.max_body_bytes > (1u << 30)) {
    return invalid_argument(at + ": gateway.max_body: " + format_bytes(g.max_body_bytes) +
                            " is outside 1 KiB..1 GiB");
  }
  EMBER_RETURN_IF_ERROR(check_duration(at, "gateway.request_timeout", g.request_timeout_us));
  EMBER_RETURN_IF_ERROR(check_duration(at, "gateway.cold_start_timeout", g.cold_start_timeout_us));
  if (g.cold_start_timeout_us > g.request_timeout_us) {
    return invalid_argument(at + ": gateway.cold_start_timeout (" + format_duration(g.cold_start_timeout_us) +
                            ") must not exceed gateway.request_timeout (" + format_duration(g.request_timeout_us) +
                            "): a held request would time out before its cold start does");
  }
  EMBER_RETURN_IF_ERROR(check_range(at, "gateway.max_pending", g.max_pending, 1, 1'000'000));
  EMBER_RETURN_IF_ERROR(check_duration(at, "gateway.reconnect_interval", g.reconnect_interval_us, 10'000, 60'000'000));
  if (g.tls_certificate.empty() != g.tls_key.empty()) {
    return invalid_argument(at + ": gateway.tls_certificate and gateway.tls_key go together: set both or neither");
  }
  if (g.tls_certificate.empty() && (!g.tls_client_ca.empty() || !g.tls_key_passphrase_file.empty())) {
    return invalid_argument(at + ": gateway." +
                            (g.tls_client_ca.empty() ? "tls_key_passphrase_file" : "tls_client_ca") +
                            " needs TLS: set gateway.tls_certificate and gateway.tls_key");
  }

  const SecurityConfig& sec = c.security;
  const bool some = !sec.tls_certificate.empty() || !sec.tls_key.empty() || !sec.tls_ca.empty();
  if (some && (sec.tls_certificate.empty() || sec.tls_key.empty() || sec.tls_ca.empty())) {
    return invalid_argument(at +
                            ": security.tls_certificate, security.tls_key and security.tls_ca go together: set all "
                            "three or none (a certificate without the CA would accept anonymous peers)");
  }
  if (sec.data_plane_tls && !some) {
    return invalid_argument(at + ": security.data_plane: tls needs the certificates of security.tls_*");
  }
  if (sec.data_plane_tls && c.transfer.transport != TransportKind::tcp) {
    return invalid_argument(at + ": security.data_plane: tls needs transfer.transport: tcp (UCX carries no TLS here)");
  }
  if (!some && !sec.ticket_key_file.empty()) {
    return invalid_argument(at +
                            ": security.ticket_key_file needs the control plane's TLS (security.tls_*): tickets "
                            "travel in its messages");
  }
  if (sec.ticket_names_certificate && (sec.ticket_key_file.empty() || !sec.data_plane_tls)) {
    return invalid_argument(at +
                            ": security.ticket_receiver: certificate needs security.ticket_key_file and "
                            "security.data_plane: tls (the receiver's name comes from its TLS certificate)");
  }
  if (!some && !sec.tls_key_passphrase_file.empty()) {
    return invalid_argument(at +
                            ": security.tls_key_passphrase_file needs security.tls_certificate, tls_key and tls_ca");
  }

  const NodeConfig& n = c.node;
  if (n.manager) {
    if (n.manager->port == 0) {
      return invalid_argument(at + ": node.manager: '" + n.manager->to_string() +
                              "' has port 0; a node must be given the manager's real port");
    }
    if (*n.manager == n.data_listen) {
      return invalid_argument(at + ": node.data_listen (" + n.data_listen.to_string() +
                              ") is the same endpoint as node.manager");
    }
  }
  if (!n.name.empty()) {
    if (n.name.size() > 255) return invalid_argument(at + ": node.name: longer than 255 characters");
    for (char ch : n.name) {
      if (ch <= ' ' || ch > '~') {
        return invalid_argument(at + ": node.name: '" + n.name +
                                "' must be printable ASCII without spaces");
      }
    }
  }
  if (n.cache_bytes < (1u << 20)) {
    return invalid_argument(at + ": node.cache: " + format_bytes(n.cache_bytes) + " is below the 1 MiB minimum");
  }
  EMBER_RETURN_IF_ERROR(check_duration(at, "node.rejoin_interval", n.rejoin_interval_us));
  EMBER_RETURN_IF_ERROR(check_range(at, "node.max_queue", n.max_queue, 1, 1'000'000));
  EMBER_RETURN_IF_ERROR(check_range(at, "node.max_queued_per_model", n.max_queued_per_model, 1, 1'000'000));
  EMBER_RETURN_IF_ERROR(check_range(at, "node.max_queued_total", n.max_queued_total, 1, 1'000'000));
  if (n.max_queued_per_model > n.max_queued_total) {
    return invalid_argument(at + ": node.max_queued_per_model (" + std::to_string(n.max_queued_per_model) +
                            ") exceeds node.max_queued_total (" + std::to_string(n.max_queued_total) +
                            "): one model could never queue that many");
  }

  // Fixed listening ports must not collide: one file may configure several processes of one host.
  struct Listener {
    const char* key;
    const HostPort* at;
    bool present;
  };
  const Listener listeners[] = {{"manager.listen", &m.listen, c.has_manager},
                                {"manager.data_listen", &m.data_listen, c.has_manager},
                                {"gateway.http", &g.http, c.has_gateway},
                                {"gateway.grpc", g.grpc ? &*g.grpc : &g.http, c.has_gateway && g.grpc.has_value()},
                                {"node.listen", &n.listen, c.has_node},
                                {"node.data_listen", &n.data_listen, c.has_node}};
  for (size_t i = 0; i < std::size(listeners); ++i) {
    for (size_t j = i + 1; j < std::size(listeners); ++j) {
      if (!listeners[i].present || !listeners[j].present) continue;
      const HostPort& a = *listeners[i].at;
      const HostPort& b = *listeners[j].at;
      if (a.port != 0 && a.port == b.port && same_host(a, b)) {
        return invalid_argument(at + ": " + listeners[j].key + " (" + b.to_string() + ") collides with " +
                                listeners[i].key + " (" + a.to_string() + ")");
      }
    }
  }

  return validate(c.devices, source);
}

Status check_role(const ClusterConfig& c, ProcessRole role, std::string_view source) {
  const std::string at(source);
  switch (role) {
    case ProcessRole::manager:
      if (c.manager.repository.empty()) {
        return invalid_argument(at + ": manager.repository: required for a manager (the model repository directory)");
      }
      break;
    case ProcessRole::node:
      if (!c.node.manager) {
        return invalid_argument(at + ": node.manager: required for a node (host:port of the manager to join)");
      }
      break;
    case ProcessRole::gateway:
      if (!c.gateway.manager) {
        return invalid_argument(at + ": gateway.manager: required for a standalone gateway (host:port of the manager)");
      }
      break;
  }
  return Status::OK();
}

Result<ClusterConfig> parse_cluster_config(std::string_view yaml, std::string_view source) {
  EMBER_ASSIGN_OR_RETURN(YAML::Node root, config_yaml::load_document(yaml, source));
  ClusterConfig config;
  const YamlSection top = YamlSection::root(root, source);
  EMBER_RETURN_IF_ERROR(top.check_unique_keys());
  EMBER_RETURN_IF_ERROR(
      top.check_keys({"manager", "gateway", "node", "devices", "binding", "generation", "transfer", "autoscale", "security"},
                     config_yaml::Values::anything));
  config.has_manager = top.has("manager");
  config.has_gateway = top.has("gateway");
  config.has_node = top.has("node");

  EMBER_ASSIGN_OR_RETURN(auto manager, YamlSection::open(root, "manager", source));
  EMBER_RETURN_IF_ERROR(parse_manager(manager, config.manager));
  EMBER_ASSIGN_OR_RETURN(auto gateway, YamlSection::open(root, "gateway", source));
  EMBER_RETURN_IF_ERROR(parse_gateway(gateway, config.gateway));
  EMBER_ASSIGN_OR_RETURN(auto node, YamlSection::open(root, "node", source));
  EMBER_RETURN_IF_ERROR(parse_node(node, config.node));
  EMBER_ASSIGN_OR_RETURN(auto security, YamlSection::open(root, "security", source));
  EMBER_RETURN_IF_ERROR(parse_security(security, config.security));
  EMBER_ASSIGN_OR_RETURN(auto transfer, YamlSection::open(root, "transfer", source));
  EMBER_RETURN_IF_ERROR(parse_transfer(transfer, config.transfer));
  EMBER_ASSIGN_OR_RETURN(auto binding, YamlSection::open(root, "binding", source));
  EMBER_RETURN_IF_ERROR(config_detail::parse_binding(binding, config.binding));
  EMBER_ASSIGN_OR_RETURN(auto generation, YamlSection::open(root, "generation", source));
  EMBER_RETURN_IF_ERROR(config_detail::parse_generation(generation, config.generation));
  EMBER_ASSIGN_OR_RETURN(auto autoscale, YamlSection::open(root, "autoscale", source));
  EMBER_RETURN_IF_ERROR(config_detail::parse_autoscale(autoscale, config.autoscale, config.autoscaler));
  // The devices parser of `ember run` does not reject repeated keys; this one does, like the others.
  EMBER_ASSIGN_OR_RETURN(auto devices, YamlSection::open(root, "devices", source));
  EMBER_RETURN_IF_ERROR(devices.check_unique_keys());
  EMBER_ASSIGN_OR_RETURN(config.devices, parse_devices_section(root, source));

  EMBER_RETURN_IF_ERROR(validate(config, source));
  return config;
}

Result<ClusterConfig> load_cluster_config(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(std::string text, read_file(path, kMaxConfigFileBytes, "a config file"));
  return parse_cluster_config(text, path);
}

std::string default_node_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') std::strcpy(host, "localhost");
  return std::string(host) + ":" + std::to_string(::getpid());
}

}  // namespace ember
