#include "config/cluster_config.hpp"
#include "tests/config/bad_case.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace ember {
namespace cluster_config_test {

void expect_defaults(const ClusterConfig& c) {
  EXPECT_EQ(c.manager.listen, (HostPort{"127.0.0.1", 7070}));
  EXPECT_EQ(c.manager.data_listen, (HostPort{"127.0.0.1", 0}));
  EXPECT_EQ(c.manager.repository, "");
  EXPECT_EQ(c.manager.node_timeout_us, 2'000'000u);
  EXPECT_EQ(c.manager.heartbeat_us, 250'000u);
  EXPECT_TRUE(c.manager.replace_on_failure);
  EXPECT_EQ(c.manager.recovery_window_us, 3'000'000u);
  EXPECT_EQ(c.manager.admin_token_file, "");
  EXPECT_TRUE(c.manager.open_reads);

  EXPECT_EQ(c.gateway.http, (HostPort{"127.0.0.1", 8000}));
  EXPECT_EQ(c.gateway.http_threads, 8u);
  EXPECT_EQ(c.gateway.http_queue, 256u);
  EXPECT_EQ(c.gateway.max_body_bytes, 64ull << 20);
  EXPECT_EQ(c.gateway.request_timeout_us, 60'000'000u);
  EXPECT_EQ(c.gateway.cold_start_timeout_us, 30'000'000u);
  EXPECT_EQ(c.gateway.max_pending, 1024u);
  EXPECT_FALSE(c.gateway.manager.has_value());
  EXPECT_EQ(c.gateway.reconnect_interval_us, 1'000'000u);
  EXPECT_EQ(c.gateway.api_tokens_file, "");

  EXPECT_FALSE(c.node.manager.has_value());
  EXPECT_EQ(c.node.listen, (HostPort{"127.0.0.1", 0}));
  EXPECT_EQ(c.node.data_listen, (HostPort{"127.0.0.1", 0}));
  EXPECT_EQ(c.node.name, "");
  EXPECT_EQ(c.node.cache_bytes, 16ull << 30);
  EXPECT_EQ(c.node.repository, "");
  EXPECT_EQ(c.node.rejoin_interval_us, 1'000'000u);
  EXPECT_EQ(c.node.max_queue, 1024u);
  EXPECT_EQ(c.generation.max_num_seqs, 256u);
  EXPECT_EQ(c.generation.max_num_batched_tokens, 2048u);
  EXPECT_EQ(c.generation.max_waiting, 1024u);
  EXPECT_DOUBLE_EQ(c.generation.kv_cache_fraction, 0.5);
  EXPECT_EQ(c.generation.kv_cache_bytes, 0u);
  EXPECT_EQ(c.generation.kv_swap_space, 4ull << 30);
  EXPECT_EQ(c.node.max_queued_per_model, 256u);
  EXPECT_EQ(c.node.max_queued_total, 4096u);
  EXPECT_FALSE(c.node.allow_faults);

  EXPECT_EQ(c.devices.kind, DeviceKind::automatic);
  EXPECT_EQ(c.devices.count, 1u);
  EXPECT_EQ(c.devices.sim.memory_bytes, 8ull << 30);

  EXPECT_EQ(c.transfer.transport, TransportKind::tcp);
  EXPECT_EQ(c.transfer.chunk_bytes, 1ull << 20);
  EXPECT_EQ(c.transfer.socket_buffer_bytes, 4ull << 20);
  EXPECT_EQ(c.transfer.progress_interval_us, 250'000u);
  EXPECT_EQ(c.transfer.idle_timeout_us, 5'000'000u);
  EXPECT_EQ(c.transfer.stall_timeout_us, 2'000'000u);
  EXPECT_DOUBLE_EQ(c.transfer.slow_fraction, 0.25);
  EXPECT_EQ(c.transfer.lag_bytes, 64ull << 20);
  EXPECT_EQ(c.transfer.max_attempts, 16u);
  EXPECT_EQ(c.transfer.rack, "");

  EXPECT_EQ(c.binding.mode, BindingMode::late);
  EXPECT_EQ(c.binding.scheduler, SwapScheduler::torpor);
  EXPECT_EQ(c.binding.eviction, EvictionRule::torpor);
  EXPECT_EQ(c.binding.group_bytes, 0u);
  EXPECT_DOUBLE_EQ(c.binding.heavy_factor, 1.3);
  EXPECT_DOUBLE_EQ(c.binding.slo_factor, 2.0);
  EXPECT_EQ(c.binding.slo_deadline_us, 0u);
  EXPECT_DOUBLE_EQ(c.binding.slo_percentile, 0.98);
  EXPECT_EQ(c.binding.workspace_bytes, 0u);
  EXPECT_EQ(c.binding.window_us, 10'000'000u);
  EXPECT_EQ(c.binding.repartition_us, 1'000'000u);
  EXPECT_EQ(c.binding.alpha_period_us, 10'000'000u);
  EXPECT_EQ(c.binding.seed, 1u);
}

TEST(ClusterConfig, ReadsTheTransferSection) {
  auto c = parse_cluster_config(R"(
transfer:
  transport: ucx
  chunk: 1MiB
  socket_buffer: 8MiB
  progress_interval: 100ms
  idle_timeout: 3s
  stall_timeout: 1s
  slow_fraction: 0.5
  lag: 16MiB
  max_attempts: 4
  rack: rack-a
)",
                                "ember.yaml");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->transfer.transport, TransportKind::ucx);
  EXPECT_EQ(c->transfer.chunk_bytes, 1ull << 20);
  EXPECT_EQ(c->transfer.socket_buffer_bytes, 8ull << 20);
  EXPECT_EQ(c->transfer.progress_interval_us, 100'000u);
  EXPECT_EQ(c->transfer.idle_timeout_us, 3'000'000u);
  EXPECT_EQ(c->transfer.stall_timeout_us, 1'000'000u);
  EXPECT_DOUBLE_EQ(c->transfer.slow_fraction, 0.5);
  EXPECT_EQ(c->transfer.lag_bytes, 16ull << 20);
  EXPECT_EQ(c->transfer.max_attempts, 4u);
  EXPECT_EQ(c->transfer.rack, "rack-a");
}

// Several managers (issue 37): etcd's endpoints for them, every manager for nodes and gateways.
TEST(ClusterConfig, ReadsSeveralManagersSharingEtcd) {
  auto c = parse_cluster_config(R"(
manager:
  etcd: 10.0.0.5:2379, 10.0.0.6:2379
  etcd_prefix: /ember/prod
  lease_ttl: 3s
node:
  manager: 10.0.0.1:7070,10.0.0.2:7070
gateway:
  manager: 10.0.0.1:7070,10.0.0.2:7070,10.0.0.3:7070
)",
                                "ember.yaml");
  ASSERT_TRUE(c.ok()) << c.error().message();
  ASSERT_EQ(c->manager.etcd.size(), 2u);
  EXPECT_EQ(c->manager.etcd[1].to_string(), "10.0.0.6:2379");
  EXPECT_EQ(c->manager.etcd_prefix, "/ember/prod");
  EXPECT_EQ(c->manager.lease_ttl_us, 3'000'000u);
  EXPECT_EQ(c->node.manager->to_string(), "10.0.0.1:7070");
  ASSERT_EQ(c->node.standby_managers.size(), 1u);
  EXPECT_EQ(c->node.standby_managers[0].to_string(), "10.0.0.2:7070");
  EXPECT_EQ(c->gateway.standby_managers.size(), 2u);
}

TEST(ClusterConfig, EmptyDocumentsGiveDefaults) {
  for (const char* yaml : {"", "# nothing here\n", "---\n", "manager:\ngateway:\nnode:\ndevices:\n",
                           "manager: {}\ngateway: {}\nnode: {}\ndevices: {}\n", "manager: ~\n"}) {
    auto c = parse_cluster_config(yaml, "ember.yaml");
    ASSERT_TRUE(c.ok()) << yaml << ": " << c.error().message();
    expect_defaults(*c);
  }
  auto empty = parse_cluster_config("", "ember.yaml");
  EXPECT_FALSE(empty->has_manager || empty->has_gateway || empty->has_node);
  auto headers = parse_cluster_config("manager:\ngateway:\nnode:\n", "ember.yaml");
  EXPECT_TRUE(headers->has_manager && headers->has_gateway && headers->has_node);
  EXPECT_TRUE(validate(ClusterConfig{}, "defaults").ok());
}

TEST(ClusterConfig, ReadsTheAutoscaleDefaults) {
  auto c = parse_cluster_config(R"(
autoscale:
  enabled: false
  interval: 500ms
  look_back: 20s
  drain_timeout: 5s
  chain_scale_up: false
  peer_sources: false
  placement: random
  policy: queue_latency
  min_replicas: 1
  max_replicas: 32
  target_ongoing_requests: 1.5
  headroom: 2
  target_queue_latency: 250ms
  target_requests_per_minute: 600
  upscale_delay: 0
  downscale_delay: 2min
  idle_timeout: 5min
  host_keep_alive: 1h
  downscale_tolerance: 0.2
)",
                                "ember.yaml");
  ASSERT_TRUE(c.ok()) << c.error().message();
  const AutoscaleConfig& a = c->autoscale;
  EXPECT_EQ(a.policy, ScalingPolicy::queue_latency);
  EXPECT_EQ(a.min_replicas, 1u);
  EXPECT_EQ(a.max_replicas, 32u);
  EXPECT_DOUBLE_EQ(a.target_ongoing_requests, 1.5);
  EXPECT_DOUBLE_EQ(a.headroom, 2);
  EXPECT_EQ(a.target_queue_latency_us, 250'000u);
  EXPECT_DOUBLE_EQ(a.target_requests_per_minute, 600);
  EXPECT_EQ(a.upscale_delay_us, 0u);
  EXPECT_EQ(a.downscale_delay_us, 120'000'000u);
  EXPECT_EQ(a.idle_timeout_us, 300'000'000u);
  EXPECT_EQ(a.host_keep_alive_us, 3'600'000'000u);
  EXPECT_DOUBLE_EQ(a.downscale_tolerance, 0.2);
  EXPECT_FALSE(c->autoscaler.enabled);
  EXPECT_EQ(c->autoscaler.interval_us, 500'000u);
  EXPECT_EQ(c->autoscaler.look_back_us, 20'000'000u);
  EXPECT_EQ(c->autoscaler.drain_timeout_us, 5'000'000u);
  EXPECT_FALSE(c->autoscaler.chain_scale_up);
  EXPECT_FALSE(c->autoscaler.peer_sources);
  EXPECT_EQ(c->autoscaler.placement, PlacementPolicy::random);
}

TEST(ClusterConfig, ReadsEveryKey) {
  auto c = parse_cluster_config(R"(
manager:
  listen: 10.0.0.1:7100
  data_listen: 10.0.0.1:7101
  repository: /srv/models
  node_timeout: 5s
  heartbeat: 500ms
  replace_on_failure: false
  recovery_window: 5s
  admin_token_file: /etc/ember/admin.token
  open_reads: false
  state_dir: /var/lib/ember/manager
gateway:
  http: 0.0.0.0:8080
  http_threads: 16
  http_queue: 64
  max_body: 128MiB
  request_timeout: 2min
  cold_start_timeout: 45s
  max_pending: 10
  manager: manager.internal:7100
  reconnect_interval: 500ms
  api_tokens_file: /etc/ember/api.tokens
  metrics: 0.0.0.0:8002
  tls_certificate: /etc/ember/tls/gw.crt
  tls_key: /etc/ember/tls/gw.key
  tls_key_passphrase_file: /etc/ember/tls/gw.pass
  tls_client_ca: /etc/ember/tls/ca.crt
node:
  manager: manager.internal:7100
  listen: 0.0.0.0:7201
  data_listen: 0.0.0.0:7200
  name: gpu-03
  cache: 32GiB
  repository: /mnt/local-models
  rejoin_interval: 250ms
  max_queue: 64
  max_queued_per_model: 32
  max_queued_total: 512
  allow_faults: true
devices:
  kind: sim
  count: 2
  memory: 1GiB
  pcie_bandwidth: 16GB/s
  compute_threads: 4
security:
  tls_certificate: /etc/ember/tls/gpu-03.crt
  tls_key: /etc/ember/tls/gpu-03.key
  tls_key_passphrase_file: /etc/ember/tls/gpu-03.pass
  tls_ca: /etc/ember/tls/ca.crt
  ticket_key_file: /etc/ember/tickets.key
  data_plane: tls
  ticket_receiver: certificate
)",
                                "ember.yaml");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->manager.listen, (HostPort{"10.0.0.1", 7100}));
  EXPECT_EQ(c->manager.data_listen, (HostPort{"10.0.0.1", 7101}));
  EXPECT_EQ(c->manager.repository, "/srv/models");
  EXPECT_EQ(c->manager.node_timeout_us, 5'000'000u);
  EXPECT_EQ(c->manager.heartbeat_us, 500'000u);
  EXPECT_FALSE(c->manager.replace_on_failure);

  EXPECT_EQ(c->gateway.http, (HostPort{"0.0.0.0", 8080}));
  EXPECT_EQ(c->gateway.http_threads, 16u);
  EXPECT_EQ(c->gateway.http_queue, 64u);
  EXPECT_EQ(c->gateway.max_body_bytes, 128ull << 20);
  EXPECT_EQ(c->gateway.request_timeout_us, 120'000'000u);
  EXPECT_EQ(c->gateway.cold_start_timeout_us, 45'000'000u);
  EXPECT_EQ(c->gateway.max_pending, 10u);
  ASSERT_TRUE(c->gateway.manager.has_value());
  EXPECT_EQ(*c->gateway.manager, (HostPort{"manager.internal", 7100}));
  EXPECT_EQ(c->gateway.reconnect_interval_us, 500'000u);
  EXPECT_EQ(c->gateway.api_tokens_file, "/etc/ember/api.tokens");
  EXPECT_EQ(c->gateway.metrics, (HostPort{"0.0.0.0", 8002}));
  EXPECT_EQ(c->gateway.tls_certificate, "/etc/ember/tls/gw.crt");
  EXPECT_EQ(c->gateway.tls_key, "/etc/ember/tls/gw.key");
  EXPECT_EQ(c->gateway.tls_key_passphrase_file, "/etc/ember/tls/gw.pass");
  EXPECT_EQ(c->gateway.tls_client_ca, "/etc/ember/tls/ca.crt");
  EXPECT_TRUE(c->security.tls());
  EXPECT_EQ(c->security.tls_certificate, "/etc/ember/tls/gpu-03.crt");
  EXPECT_EQ(c->security.tls_key, "/etc/ember/tls/gpu-03.key");
  EXPECT_EQ(c->security.tls_key_passphrase_file, "/etc/ember/tls/gpu-03.pass");
  EXPECT_EQ(c->security.tls_ca, "/etc/ember/tls/ca.crt");
  EXPECT_EQ(c->security.ticket_key_file, "/etc/ember/tickets.key");
  EXPECT_TRUE(c->security.data_plane_tls);
  EXPECT_TRUE(c->security.ticket_names_certificate);
  EXPECT_EQ(c->manager.recovery_window_us, 5'000'000u);
  EXPECT_EQ(c->manager.admin_token_file, "/etc/ember/admin.token");
  EXPECT_FALSE(c->manager.open_reads);
  EXPECT_EQ(c->manager.state_dir, "/var/lib/ember/manager");

  ASSERT_TRUE(c->node.manager.has_value());
  EXPECT_EQ(*c->node.manager, (HostPort{"manager.internal", 7100}));
  EXPECT_EQ(c->node.listen, (HostPort{"0.0.0.0", 7201}));
  EXPECT_EQ(c->node.data_listen, (HostPort{"0.0.0.0", 7200}));
  EXPECT_EQ(c->node.name, "gpu-03");
  EXPECT_EQ(c->node.cache_bytes, 32ull << 30);
  EXPECT_EQ(c->node.repository, "/mnt/local-models");
  EXPECT_EQ(c->node.rejoin_interval_us, 250'000u);
  EXPECT_EQ(c->node.max_queue, 64u);
  EXPECT_EQ(c->node.max_queued_per_model, 32u);
  EXPECT_EQ(c->node.max_queued_total, 512u);
  EXPECT_TRUE(c->node.allow_faults);

  EXPECT_EQ(c->devices.kind, DeviceKind::sim);
  EXPECT_EQ(c->devices.count, 2u);
  EXPECT_EQ(c->devices.sim.memory_bytes, 1ull << 30);
  EXPECT_DOUBLE_EQ(c->devices.sim.pcie_bytes_per_s, 16e9);
  EXPECT_EQ(c->devices.sim.compute_threads, 4u);

  EXPECT_TRUE(c->has_manager && c->has_gateway && c->has_node);

  EXPECT_TRUE(check_role(*c, ProcessRole::manager, "ember.yaml").ok());
  EXPECT_TRUE(check_role(*c, ProcessRole::gateway, "ember.yaml").ok());
  EXPECT_TRUE(check_role(*c, ProcessRole::node, "ember.yaml").ok());
}

TEST(ClusterConfig, BooleanSpellings) {
  for (const char* yes : {"true", "True", "yes", "on"}) {
    auto c = parse_cluster_config(std::string("manager:\n  replace_on_failure: ") + yes + "\n", "e.yaml");
    ASSERT_TRUE(c.ok()) << yes;
    EXPECT_TRUE(c->manager.replace_on_failure) << yes;
  }
  for (const char* no : {"false", "no", "off"}) {
    auto c = parse_cluster_config(std::string("manager:\n  replace_on_failure: ") + no + "\n", "e.yaml");
    ASSERT_TRUE(c.ok()) << no;
    EXPECT_FALSE(c->manager.replace_on_failure) << no;
  }
}

TEST(ClusterConfig, SectionsAreIndependentOfOrder) {
  auto a = parse_cluster_config("devices:\n  count: 3\nnode:\n  max_queue: 5\n", "e.yaml");
  auto b = parse_cluster_config("node:\n  max_queue: 5\ndevices:\n  count: 3\n", "e.yaml");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->devices.count, 3u);
  EXPECT_EQ(b->devices.count, 3u);
  EXPECT_EQ(a->node.max_queue, 5u);
  EXPECT_EQ(b->node.max_queue, 5u);
}

TEST(ClusterConfig, StandaloneDevicesParserStillReadsTheSameFile) {
  const char* yaml = "manager:\n  heartbeat: 100ms\ndevices:\n  kind: sim\n  count: 3\n";
  auto devices = parse_devices_config(yaml, "ember.yaml");
  ASSERT_TRUE(devices.ok()) << devices.error().message();
  EXPECT_EQ(devices->count, 3u);
  auto cluster = parse_cluster_config(yaml, "ember.yaml");
  ASSERT_TRUE(cluster.ok()) << cluster.error().message();
  EXPECT_EQ(cluster->devices.count, devices->count);
  EXPECT_EQ(cluster->devices.kind, devices->kind);
}

using testing::BadCase;

class ClusterConfigErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(ClusterConfigErrors, NameTheFileAndKey) { testing::expect_refused_naming_file_and_key(GetParam()); }

INSTANTIATE_TEST_SUITE_P(
    BadValues, ClusterConfigErrors,
    ::testing::Values(
        // autoscale
        BadCase{"autoscale:\n  policy: fast\n",
                "autoscale.policy: 'fast' is not one of ongoing_requests, arrival_rate, queue_latency, "
                "requests_per_minute, model_level"},
        BadCase{"autoscale:\n  max_replicas: 0\n", "ember.yaml: autoscale.max_replicas: 0 is outside 1..4096"},
        BadCase{"autoscale:\n  max_replicas: 5000\n", "autoscale.max_replicas: '5000' is not an integer in 0..4096"},
        BadCase{"autoscale:\n  min_replicas: 3\n  max_replicas: 2\n",
                "autoscale.max_replicas: 2 is below autoscale.min_replicas (3)"},
        BadCase{"autoscale:\n  target_ongoing_requests: 0\n",
                "autoscale.target_ongoing_requests: 0 is outside (0, 10000]"},
        BadCase{"autoscale:\n  headroom: 0.5\n", "autoscale.headroom: 0.5 is outside 1..10"},
        BadCase{"autoscale:\n  target_requests_per_minute: -1\n", "autoscale.target_requests_per_minute: -1"},
        BadCase{"autoscale:\n  downscale_tolerance: 2\n", "autoscale.downscale_tolerance: 2 is outside 0..1"},
        BadCase{"autoscale:\n  target_queue_latency: 0\n", "autoscale.target_queue_latency: 0us is outside 1ms..1h"},
        BadCase{"autoscale:\n  upscale_delay: 2h\n", "autoscale.upscale_delay: 2h is outside 0..1h"},
        BadCase{"autoscale:\n  idle_timeout: 10ms\n", "autoscale.idle_timeout: 10ms is outside 1s..24h"},
        BadCase{"autoscale:\n  host_keep_alive: soon\n", "autoscale.host_keep_alive: cannot read 'soon'"},
        BadCase{"autoscale:\n  scale: 2\n", "autoscale.scale: unknown key"},
        BadCase{"autoscale:\n  enabled: maybe\n", "autoscale.enabled"},
        BadCase{"autoscale:\n  interval: 1ms\n", "autoscale.interval: 1ms is outside 10ms..1min"},
        BadCase{"autoscale:\n  interval: 2s\n  look_back: 1s\n", "autoscale.look_back: 1s is outside 2s..1h"},
        BadCase{"autoscale:\n  placement: packed\n", "autoscale.placement: 'packed' is neither locality nor random"},
        BadCase{"autoscale:\n  drain_timeout: 2h\n", "autoscale.drain_timeout: 2h is outside 100ms..1h"},
        // manager
        BadCase{"manager:\n  listen: nowhere\n", "manager.listen: 'nowhere'"},
        BadCase{"manager:\n  listen: host:99999\n", "manager.listen: 'host:99999'"},
        BadCase{"manager:\n  data_listen: 1.2.3:4\n", "manager.data_listen: '1.2.3:4'"},
        BadCase{"manager:\n  repository: ''\n", "manager.repository: must not be empty"},
        BadCase{"manager:\n  repository: [a, b]\n", "manager.repository: must be a scalar"},
        BadCase{"manager:\n  node_timeout: soon\n", "manager.node_timeout: cannot read 'soon'"},
        BadCase{"manager:\n  node_timeout: 0\n", "manager.node_timeout: 0us is outside 1ms..24h"},
        BadCase{"manager:\n  node_timeout: 25h\n", "manager.node_timeout: 25h"},
        BadCase{"manager:\n  heartbeat: -1s\n", "manager.heartbeat: cannot read '-1s'"},
        BadCase{"manager:\n  heartbeat: 500us\n", "manager.heartbeat: 500us is outside 1ms..24h"},
        BadCase{"manager:\n  replace_on_failure: maybe\n", "manager.replace_on_failure: 'maybe'"},
        BadCase{"manager:\n  replace_on_failure: 1\n", "manager.replace_on_failure: '1'"},
        BadCase{"manager:\n  heartbeat:\n", "manager.heartbeat: must be a scalar"},
        // gateway
        BadCase{"gateway:\n  http: 8000\n", "gateway.http: '8000'"},
        BadCase{"gateway:\n  http_threads: 0\n", "gateway.http_threads: 0 is outside 1..1024"},
        BadCase{"gateway:\n  http_threads: 1025\n", "gateway.http_threads: '1025' is not an integer in 0..1024"},
        BadCase{"gateway:\n  http_threads: eight\n", "gateway.http_threads: 'eight'"},
        BadCase{"gateway:\n  http_threads: 2.5\n", "gateway.http_threads: '2.5'"},
        BadCase{"gateway:\n  http_queue: 0\n", "gateway.http_queue: 0 is outside 1..65536"},
        BadCase{"gateway:\n  http_queue: 65537\n", "gateway.http_queue: '65537' is not an integer in 0..65536"},
        BadCase{"gateway:\n  http_queue: many\n", "gateway.http_queue: 'many'"},
        BadCase{"gateway:\n  http_queue: [1]\n", "gateway.http_queue: must be a scalar"},
        BadCase{"gateway:\n  max_body: huge\n", "gateway.max_body: cannot read 'huge'"},
        BadCase{"gateway:\n  max_body: 100\n", "gateway.max_body: 100 B is outside 1 KiB..1 GiB"},
        BadCase{"gateway:\n  max_body: 2GiB\n", "gateway.max_body: 2.00 GiB is outside"},
        BadCase{"gateway:\n  request_timeout: forever\n", "gateway.request_timeout: cannot read 'forever'"},
        BadCase{"gateway:\n  cold_start_timeout: 0ms\n", "gateway.cold_start_timeout: 0us is outside"},
        BadCase{"gateway:\n  max_pending: 0\n", "gateway.max_pending: 0 is outside 1..1000000"},
        BadCase{"gateway:\n  max_pending: -5\n", "gateway.max_pending: '-5'"},
        BadCase{"gateway:\n  max_pending: {a: 1}\n", "gateway.max_pending: must be a scalar"},
        BadCase{"manager:\n  etcd: 10.0.0.5\n", "manager.etcd: '10.0.0.5' is not host:port"},
        BadCase{"manager:\n  etcd: a:2379,b\n", "manager.etcd: item 2 of the list: 'b' is not host:port"},
        BadCase{"manager:\n  state_dir: /s\n  etcd: a:2379\n", "manager.etcd: the decisions are kept in etcd or"},
        BadCase{"manager:\n  lease_ttl: 1s\n", "manager.lease_ttl: must lie in 2s..60s"},
        BadCase{"manager:\n  etcd_prefix: /ember/\n", "manager.etcd_prefix: '/ember/' must be non-empty"},
        // node
        BadCase{"node:\n  manager: manager\n", "node.manager: 'manager' is not host:port"},
        BadCase{"node:\n  manager: 'a:7070,'\n", "node.manager: item 2 of the list"},
        BadCase{"node:\n  manager: 10.0.0.1:0\n", "node.manager: '10.0.0.1:0' has port 0"},
        BadCase{"node:\n  data_listen: ':7200'\n", "node.data_listen: ':7200'"},
        BadCase{"node:\n  name: ''\n", "node.name: must not be empty"},
        BadCase{"node:\n  name: gpu 3\n", "node.name: 'gpu 3' must be printable ASCII"},
        BadCase{"node:\n  name: \"gpu\\t3\"\n", "node.name:"},
        BadCase{"node:\n  cache: plenty\n", "node.cache: cannot read 'plenty'"},
        BadCase{"node:\n  cache: 1KiB\n", "node.cache: 1.00 KiB is below the 1 MiB minimum"},
        BadCase{"node:\n  repository: ''\n", "node.repository: must not be empty"},
        BadCase{"node:\n  rejoin_interval: 0\n", "node.rejoin_interval: 0us is outside"},
        BadCase{"node:\n  rejoin_interval: often\n", "node.rejoin_interval: cannot read 'often'"},
        BadCase{"node:\n  max_queue: 0\n", "node.max_queue: 0 is outside 1..1000000"},
        BadCase{"node:\n  max_queue: 1000001\n", "node.max_queue: '1000001' is not an integer"},
        BadCase{"node:\n  max_queued_per_model: 0\n", "node.max_queued_per_model: 0 is outside 1..1000000"},
        BadCase{"node:\n  max_queued_per_model: many\n", "node.max_queued_per_model: 'many' is not an integer"},
        BadCase{"node:\n  max_queued_total: 0\n", "node.max_queued_total: 0 is outside 1..1000000"},
        BadCase{"node:\n  allow_faults: sometimes\n", "node.allow_faults"},
        BadCase{"node:\n  max_queued_total: 1000001\n", "node.max_queued_total: '1000001' is not an integer"},
        BadCase{"node:\n  max_queued_per_model: 100\n  max_queued_total: 50\n",
                "node.max_queued_per_model (100) exceeds node.max_queued_total (50)"},
        // devices, through the cluster parser
        BadCase{"devices:\n  kind: tpu\n", "devices.kind"}, BadCase{"devices:\n  count: 0\n", "devices.count"},
        BadCase{"devices:\n  memory: 1KiB\n", "devices.memory"}));

INSTANTIATE_TEST_SUITE_P(
    UnknownKeysAndShapes, ClusterConfigErrors,
    ::testing::Values(
        BadCase{"managr:\n  listen: a:1\n",
                "ember.yaml: managr: unknown key (known: manager, gateway, node, devices, binding, generation, "
                "transfer, autoscale, security)"},
        BadCase{"transport: tcp\n", "ember.yaml: transport: unknown key"},
        BadCase{"manager:\n  heartbeats: 1s\n", "manager.heartbeats: unknown key (known: listen, data_listen,"},
        BadCase{"gateway:\n  threads: 4\n", "gateway.threads: unknown key"},
        BadCase{"node:\n  cache_size: 1GiB\n", "node.cache_size: unknown key"},
        BadCase{"devices:\n  memroy: 1GiB\n", "devices.memroy: unknown key"},
        BadCase{"manager: 3\n", "ember.yaml: manager: must be a mapping"},
        BadCase{"gateway: [a]\n", "ember.yaml: gateway: must be a mapping"},
        BadCase{"node: text\n", "ember.yaml: node: must be a mapping"},
        BadCase{"devices: 3\n", "ember.yaml: devices: must be a mapping"}, BadCase{"- a\n- b\n", "must be a mapping"},
        BadCase{"manager: [\n", "not valid YAML"},
        BadCase{"manager:\n  heartbeat: 1s\n  heartbeat: 2s\n", "manager.heartbeat: appears twice"},
        BadCase{"gateway:\n  http_threads: 1\n  http_threads: 2\n", "gateway.http_threads: appears twice"},
        BadCase{"node:\n  name: a\n  name: b\n", "node.name: appears twice"},
        BadCase{"devices:\n  count: 1\n  count: 2\n", "devices.count: appears twice"},
        BadCase{"node: {}\nnode: {}\n", "ember.yaml: node: appears twice"}));

INSTANTIATE_TEST_SUITE_P(
    CrossField, ClusterConfigErrors,
    ::testing::Values(
        BadCase{"manager:\n  heartbeat: 2s\n", "manager.heartbeat (2s) must be shorter than manager.node_timeout (2s)"},
        BadCase{"manager:\n  heartbeat: 3s\n  node_timeout: 1s\n",
                "manager.heartbeat (3s) must be shorter than manager.node_timeout (1s)"},
        BadCase{"manager:\n  node_timeout: 200ms\n",
                "manager.heartbeat (250ms) must be shorter than manager.node_timeout (200ms)"},
        BadCase{"gateway:\n  cold_start_timeout: 90s\n",
                "gateway.cold_start_timeout (90s) must not exceed gateway.request_timeout (1min)"},
        BadCase{"gateway:\n  request_timeout: 10s\n",
                "gateway.cold_start_timeout (30s) must not exceed gateway.request_timeout (10s)"},
        BadCase{"gateway:\n  tls_certificate: a.crt\n",
                "gateway.tls_certificate and gateway.tls_key go together: set both or neither"},
        BadCase{"gateway:\n  tls_key: a.key\n", "gateway.tls_certificate and gateway.tls_key go together"},
        BadCase{"gateway:\n  tls_client_ca: ca.crt\n",
                "gateway.tls_client_ca needs TLS: set gateway.tls_certificate and gateway.tls_key"},
        BadCase{"gateway:\n  tls_key_passphrase_file: p.txt\n", "gateway.tls_key_passphrase_file needs TLS"},
        BadCase{"security:\n  tls_certificate: a.crt\n  tls_key: a.key\n",
                "security.tls_certificate, security.tls_key and security.tls_ca go together"},
        BadCase{"security:\n  tls_ca: ca.crt\n", "security.tls_certificate, security.tls_key and security.tls_ca go"},
        BadCase{"security:\n  tls_key_passphrase_file: p.txt\n", "security.tls_key_passphrase_file needs"},
        BadCase{"security:\n  data_plane: encrypted\n", "security.data_plane: 'encrypted' is neither tickets nor tls"},
        BadCase{"security:\n  data_plane: tls\n", "security.data_plane: tls needs the certificates of security.tls_*"},
        BadCase{"security:\n  tls_certificate: a.crt\n  tls_key: a.key\n  tls_ca: ca.crt\n  data_plane: tls\n"
                "transfer:\n  transport: ucx\n",
                "security.data_plane: tls needs transfer.transport: tcp"},
        BadCase{"security:\n  ticket_key_file: t.key\n",
                "security.ticket_key_file needs the control plane's TLS (security.tls_*)"},
        BadCase{"security:\n  ticket_receiver: cert\n", "security.ticket_receiver: 'cert' is neither name nor certificate"},
        BadCase{"security:\n  tls_certificate: a.crt\n  tls_key: a.key\n  tls_ca: ca.crt\n  ticket_key_file: t.key\n"
                "  ticket_receiver: certificate\n",
                "security.ticket_receiver: certificate needs security.ticket_key_file and security.data_plane: tls"},
        BadCase{"security:\n  tls_certificate: a.crt\n  tls_key: a.key\n  tls_ca: ca.crt\n  data_plane: tls\n"
                "  ticket_receiver: certificate\n",
                "security.ticket_receiver: certificate needs security.ticket_key_file"},
        BadCase{"security:\n  tls_cert: a.crt\n", "security.tls_cert: unknown key"},
        BadCase{"node:\n  manager: 127.0.0.1:7300\n  data_listen: 127.0.0.1:7300\n",
                "node.data_listen (127.0.0.1:7300) is the same endpoint as node.manager"},
        BadCase{"manager:\n  data_listen: 127.0.0.1:7070\n",
                "manager.data_listen (127.0.0.1:7070) collides with manager.listen (127.0.0.1:7070)"},
        BadCase{"manager:\ngateway:\n  http: 0.0.0.0:7070\n",
                "gateway.http (0.0.0.0:7070) collides with manager.listen"},
        BadCase{"gateway: {}\nnode:\n  data_listen: 127.0.0.1:8000\n",
                "node.data_listen (127.0.0.1:8000) collides with gateway.http"},
        BadCase{"transfer:\n  transport: rdma\n", "transfer.transport: 'rdma' is neither tcp nor ucx"},
        BadCase{"transfer:\n  chunk: 1KiB\n", "transfer.chunk"},
        BadCase{"transfer:\n  socket_buffer: 1GiB\n", "transfer.socket_buffer"},
        BadCase{"transfer:\n  slow_fraction: 1.5\n", "transfer.slow_fraction"},
        BadCase{"transfer:\n  slow_fraction: lots\n", "transfer.slow_fraction"},
        BadCase{"transfer:\n  progress_interval: 3s\n", "transfer.progress_interval must be shorter"},
        BadCase{"transfer:\n  lag: 512KiB\n", "transfer.lag"},
        BadCase{"transfer:\n  max_attempts: 0\n", "transfer.max_attempts"},
        BadCase{"transfer:\n  chunks: 4MiB\n", "transfer.chunks"}));

TEST(ClusterConfig, CrossFieldBoundariesThatPass) {
  EXPECT_TRUE(parse_cluster_config("manager:\n  heartbeat: 1999ms\n", "e.yaml").ok());
  EXPECT_TRUE(parse_cluster_config("gateway:\n  cold_start_timeout: 60s\n", "e.yaml").ok());
  // Port 0 never collides; different hosts with the same port do not either.
  EXPECT_TRUE(parse_cluster_config("manager:\n  data_listen: 127.0.0.1:0\nnode:\n  data_listen: 127.0.0.1:0\n",
                                   "e.yaml").ok());
  EXPECT_TRUE(parse_cluster_config("manager:\ngateway:\n  http: 10.0.0.2:7070\n", "e.yaml").ok());
  // Only sections present in the file are compared: a node-only file may reuse the manager's default
  // port, since the manager runs elsewhere. Built in code, every section counts.
  auto node_only = parse_cluster_config("node:\n  data_listen: 0.0.0.0:7070\n", "e.yaml");
  ASSERT_TRUE(node_only.ok()) << node_only.error().message();
  EXPECT_FALSE(node_only->has_manager);
  EXPECT_FALSE(node_only->has_gateway);
  EXPECT_TRUE(node_only->has_node);
  ClusterConfig in_code;
  in_code.node.data_listen = {"0.0.0.0", 7070};
  EXPECT_FALSE(validate(in_code, "code").ok());
  in_code.has_manager = false;
  EXPECT_TRUE(validate(in_code, "code").ok());
  EXPECT_TRUE(parse_cluster_config("node:\n  manager: 10.0.0.1:7070\n  data_listen: 10.0.0.2:7070\n", "e.yaml").ok());
}

TEST(ClusterConfig, ValidateChecksStructsBuiltInCode) {
  ClusterConfig c;
  c.manager.heartbeat_us = c.manager.node_timeout_us;
  auto s = validate(c, "code");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("code: manager.heartbeat"), std::string::npos) << s.error().message();

  c = ClusterConfig{};
  c.devices.count = 0;
  s = validate(c, "code");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("devices.count"), std::string::npos) << s.error().message();

  c = ClusterConfig{};
  c.node.name = std::string(256, 'n');
  EXPECT_FALSE(validate(c, "code").ok());
}

TEST(ClusterConfig, RolesRequireTheirKeys) {
  auto c = parse_cluster_config("", "ember.yaml");
  ASSERT_TRUE(c.ok());
  auto m = check_role(*c, ProcessRole::manager, "ember.yaml");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(m.error().message().find("ember.yaml: manager.repository: required"), std::string::npos);
  auto n = check_role(*c, ProcessRole::node, "ember.yaml");
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.error().message().find("ember.yaml: node.manager: required"), std::string::npos);
  auto g = check_role(*c, ProcessRole::gateway, "ember.yaml");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message().find("ember.yaml: gateway.manager: required"), std::string::npos);
  EXPECT_EQ(to_string(ProcessRole::node), "node");
}

class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    path_ = (std::filesystem::temp_directory_path() /
             ("ember_cluster_config_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++) + ".yaml"))
                .string();
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

TEST(LoadClusterConfig, ReadsAFileAndNamesItInErrors) {
  TempFile good("node:\n  max_queue: 7\n");
  auto c = load_cluster_config(good.path());
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->node.max_queue, 7u);

  TempFile bad("node:\n  max_queue: lots\n");
  auto b = load_cluster_config(bad.path());
  ASSERT_FALSE(b.ok());
  EXPECT_TRUE(b.error().message().starts_with(bad.path() + ": node.max_queue")) << b.error().message();
}

TEST(LoadClusterConfig, MissingUnreadableAndOversizedFiles) {
  auto missing = load_cluster_config("/nonexistent/ember.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), ErrorCode::not_found);
  EXPECT_NE(missing.error().message().find("/nonexistent/ember.yaml"), std::string::npos);

  auto dir = load_cluster_config(std::filesystem::temp_directory_path().string());
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.error().code(), ErrorCode::io_error);

  TempFile big("# " + std::string(2 << 20, 'x') + "\n");
  auto b = load_cluster_config(big.path());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(b.error().message().find("not a config file"), std::string::npos) << b.error().message();
}

// deploy/ember.yaml documents every key with its default: it must parse, and apart from the three
// keys that have no default (given example values there) it must be exactly the defaults.
TEST(LoadClusterConfig, TheExampleFileIsTheDefaults) {
  auto c = load_cluster_config(std::string(EMBER_SOURCE_DIR) + "/deploy/ember.yaml");
  ASSERT_TRUE(c.ok()) << c.error().message();
  ClusterConfig expected = *c;
  EXPECT_FALSE(expected.manager.repository.empty());
  ASSERT_TRUE(expected.node.manager.has_value());
  EXPECT_EQ(*expected.node.manager, c->manager.listen);
  ASSERT_TRUE(expected.gateway.manager.has_value());
  EXPECT_EQ(*expected.gateway.manager, c->manager.listen);
  expected.manager.repository.clear();
  expected.node.manager.reset();
  expected.gateway.manager.reset();
  expect_defaults(expected);
  EXPECT_TRUE(check_role(*c, ProcessRole::manager, "ember.yaml").ok());
  EXPECT_TRUE(check_role(*c, ProcessRole::gateway, "ember.yaml").ok());
  EXPECT_TRUE(check_role(*c, ProcessRole::node, "ember.yaml").ok());
}

TEST(DefaultNodeName, IsHostnameColonPid) {
  const std::string name = default_node_name();
  EXPECT_TRUE(name.ends_with(std::string(":") + std::to_string(::getpid()))) << name;
  EXPECT_GT(name.size(), std::to_string(::getpid()).size() + 1);
  ClusterConfig c;
  c.node.name = name;
  EXPECT_TRUE(validate(c, "code").ok()) << name;
}

}  // namespace cluster_config_test
}  // namespace ember
