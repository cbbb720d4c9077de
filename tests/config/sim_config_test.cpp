// `ember sim`'s two files (config/sim_config.hpp): the cluster (topology:, sim:, and the live
// autoscale: section through the live parser) and the models; --set overrides; every refusal names
// the file and the key. deploy/sim/'s example files are parsed here so they cannot drift.
#include "config/sim_config.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace ember {
namespace sim_config_test {

void expect_refused(const Result<SimClusterConfig>& c, const std::string& key) {
  ASSERT_FALSE(c.ok()) << "accepted; expected a refusal naming " << key;
  EXPECT_EQ(c.error().code(), ErrorCode::invalid_argument);
  EXPECT_TRUE(c.error().message().starts_with("c.yaml: ")) << c.error().message();
  EXPECT_NE(c.error().message().find(key), std::string::npos) << c.error().message();
}

TEST(SimConfig, AnEmptyFileIsFlashpointsCluster) {
  for (const char* yaml : {"", "topology:\n", "sim: {}\n"}) {
    auto c = parse_sim_cluster(yaml, "c.yaml");
    ASSERT_TRUE(c.ok()) << c.error().message();
    EXPECT_EQ(c->topology.hosts, 200u);
    EXPECT_EQ(c->topology.gpus_per_host, 8u);
    EXPECT_EQ(c->topology.hosts_per_leaf, 20u);
    EXPECT_EQ(c->topology.spines, 1u);
    EXPECT_DOUBLE_EQ(c->topology.host_link_bytes_per_s, 50e9 / 8);
    EXPECT_DOUBLE_EQ(c->topology.spine_link_bytes_per_s, 100e9 / 8);
    EXPECT_DOUBLE_EQ(c->topology.cloud_bytes_per_s, 2203e6 / 8);
    EXPECT_DOUBLE_EQ(c->topology.pcie_bytes_per_s, 0);
    EXPECT_EQ(c->sim.cold_start_timeout_us, 30'000'000u);
    EXPECT_EQ(c->sim.slo_us, 1'000'000u);
    EXPECT_TRUE(c->autoscaler.enabled);  // as the live manager's default
  }
}

TEST(SimConfig, ReadsEveryKeyAndTheLiveAutoscaleSection) {
  auto c = parse_sim_cluster(
      "topology:\n  hosts: 4\n  gpus_per_host: 1\n  hosts_per_leaf: 4\n  spines: 2\n  host_link: 1Gbit/s\n"
      "  spine_link: 10Gbit/s\n  cloud_link: 100MB/s\n  pcie: 2GB/s\n  device_memory: 4GiB\n  host_cache: 1GiB\n"
      "sim:\n  cold_start_timeout: 60s\n  sample_interval: 250ms\n  chunk: 4MiB\n  slo: 500ms\n  seed: 7\n"
      "  warm_replicas: 2\n"
      "  load_replicas: 3\n"
      "  failures: host3@10min, host0@90s\n"
      "autoscale:\n  interval: 250ms\n  policy: queue_latency\n  chain_scale_up: false\n  placement: random\n"
      "  host_keep_alive: 0s\n",
      "c.yaml");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->topology.hosts, 4u);
  EXPECT_EQ(c->topology.spines, 2u);
  EXPECT_DOUBLE_EQ(c->topology.host_link_bytes_per_s, 125e6);
  EXPECT_DOUBLE_EQ(c->topology.cloud_bytes_per_s, 100e6);
  EXPECT_DOUBLE_EQ(c->topology.pcie_bytes_per_s, 2e9);
  EXPECT_EQ(c->topology.device_memory, 4ull << 30);
  EXPECT_EQ(c->topology.host_cache, 1ull << 30);
  EXPECT_EQ(c->sim.cold_start_timeout_us, 60'000'000u);
  EXPECT_EQ(c->sim.sample_interval_us, 250'000u);
  EXPECT_EQ(c->sim.chunk_bytes, 4u << 20);
  EXPECT_EQ(c->sim.slo_us, 500'000u);
  EXPECT_EQ(c->sim.seed, 7u);
  EXPECT_EQ(c->sim.warm_replicas, 2u);
  EXPECT_EQ(c->sim.load_replicas, 3u);
  ASSERT_EQ(c->sim.failures.size(), 2u);
  EXPECT_EQ(c->sim.failures[0].host, 3u);
  EXPECT_EQ(c->sim.failures[0].at_us, 600'000'000u);
  EXPECT_EQ(c->sim.failures[1].host, 0u);
  EXPECT_EQ(c->sim.failures[1].at_us, 90'000'000u);
  EXPECT_EQ(c->autoscaler.interval_us, 250'000u);
  EXPECT_EQ(c->autoscale.policy, ScalingPolicy::queue_latency);
  EXPECT_FALSE(c->autoscaler.chain_scale_up);
  EXPECT_EQ(c->autoscaler.placement, PlacementPolicy::random);
  EXPECT_EQ(c->autoscale.host_keep_alive_us, 0u);
}

TEST(SimConfig, SetReplacesOrAddsKeysBeforeTheChecks) {
  auto c = parse_sim_cluster("topology:\n  hosts: 4\n", "c.yaml",
                             {{"topology.hosts", "8"}, {"autoscale.policy", "arrival_rate"}, {"sim.seed", "3"}});
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->topology.hosts, 8u);
  EXPECT_EQ(c->autoscale.policy, ScalingPolicy::arrival_rate);
  EXPECT_EQ(c->sim.seed, 3u);
  auto from_nothing = parse_sim_cluster("", "c.yaml", {{"topology.cloud_link", "1Gbit/s"}});
  ASSERT_TRUE(from_nothing.ok()) << from_nothing.error().message();
  EXPECT_DOUBLE_EQ(from_nothing->topology.cloud_bytes_per_s, 125e6);
  expect_refused(parse_sim_cluster("", "c.yaml", {{"autoscale.policy", "sometimes"}}), "autoscale.policy");
  expect_refused(parse_sim_cluster("", "c.yaml", {{"topology.hostz", "3"}}), "hostz");
  auto no_dot = parse_sim_cluster("", "c.yaml", {{"hosts", "3"}});
  ASSERT_FALSE(no_dot.ok());
  EXPECT_NE(no_dot.error().message().find("section.key=value"), std::string::npos) << no_dot.error().message();
}

TEST(SimConfig, RefusalsNameTheFileAndKey) {
  const std::pair<const char*, const char*> cases[] = {
      {"topology:\n  hosts: 0\n", "topology.hosts"},
      {"topology:\n  gpus_per_host: 0\n", "topology.gpus_per_host"},
      {"topology:\n  hosts_per_leaf: -1\n", "topology.hosts_per_leaf"},
      {"topology:\n  spines: 0\n", "topology.spines"},
      {"topology:\n  host_link: 0\n", "topology.host_link"},
      {"topology:\n  cloud_link: fast\n", "topology.cloud_link"},
      {"topology:\n  device_memory: 0\n", "topology.device_memory"},
      {"topology:\n  gpus: 8\n", "gpus"},
      {"topology:\n  hosts: 2\n  hosts: 3\n", "hosts"},
      {"topology: 3\n", "topology"},
      {"sim:\n  slo: 0s\n", "sim.slo"},
      {"sim:\n  cold_start_timeout: 1y\n", "sim.cold_start_timeout"},
      {"sim:\n  chunk: 0\n", "sim.chunk"},
      {"sim:\n  warm_replicas: 5000\n", "sim.warm_replicas"},
      {"sim:\n  load_replicas: -1\n", "sim.load_replicas"},
      {"sim:\n  failures: host1\n", "sim.failures: 'host1': expected HOST@TIME"},
      {"sim:\n  failures: node1@5s\n", "sim.failures: 'node1@5s'"},
      {"sim:\n  failures: host1@soon\n", "sim.failures: 'host1@soon'"},
      {"sim:\n  failures: host200@5s\n", "sim.failures: host200: the topology has hosts host0 .. host199"},
      {"autoscale:\n  max_replicas: 0\n", "autoscale"},
      {"nodes: 3\n", "nodes"},
  };
  for (const auto& [yaml, key] : cases) {
    SCOPED_TRACE(yaml);
    expect_refused(parse_sim_cluster(yaml, "c.yaml"), key);
  }
}

TEST(SimConfig, Models) {
  auto m = parse_sim_models(
      "models:\n  - name: small\n    profile: p.json\n  - name: t5\n    profile: /abs/p.json\n    weights: 11408MB\n"
      "    speedup: 53.15\n    slo: 5s\n",
      "m.yaml");
  ASSERT_TRUE(m.ok()) << m.error().message();
  ASSERT_EQ(m->size(), 2u);
  EXPECT_EQ((*m)[0].name, "small");
  EXPECT_EQ((*m)[0].profile, "p.json");
  EXPECT_EQ((*m)[0].weights, 0u);
  EXPECT_DOUBLE_EQ((*m)[0].speedup, 1);
  EXPECT_EQ((*m)[0].slo_us, 0u);
  EXPECT_EQ((*m)[1].weights, 11'408'000'000u);
  EXPECT_DOUBLE_EQ((*m)[1].speedup, 53.15);
  EXPECT_EQ((*m)[1].slo_us, 5'000'000u);
  const std::pair<const char*, const char*> bad[] = {
      {"", "models"},
      {"models: []\n", "models"},
      {"models: 3\n", "models"},
      {"models:\n  - 3\n", "models[0]"},
      {"models:\n  - profile: p.json\n", "models[0].name"},
      {"models:\n  - name: a\n", "models[0].profile"},
      {"models:\n  - name: a\n    profile: p\n    weights: 0\n", "models[0].weights"},
      {"models:\n  - name: a\n    profile: p\n    speedup: 0\n", "models[0].speedup"},
      {"models:\n  - name: a\n    profile: p\n    slo: 0s\n", "models[0].slo"},
      {"models:\n  - name: a\n    profile: p\n    size: 3\n", "size"},
      {"models:\n  - name: a\n    profile: p\n  - name: a\n    profile: q\n", "models[1].name"},
      {"models:\n  - name: a\n    profile: p\nextra: 1\n", "extra"},
  };
  for (const auto& [yaml, key] : bad) {
    SCOPED_TRACE(yaml);
    auto r = parse_sim_models(yaml, "m.yaml");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), ErrorCode::invalid_argument);
    EXPECT_TRUE(r.error().message().starts_with("m.yaml: ")) << r.error().message();
    EXPECT_NE(r.error().message().find(key), std::string::npos) << r.error().message();
  }
}

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(SimConfig, TheExampleFilesParse) {
  const std::string dir = std::string(EMBER_SOURCE_DIR) + "/deploy/sim/";
  for (const char* name : {"flashpoint.yaml", "netns.yaml"}) {
    SCOPED_TRACE(name);
    const std::string text = read(dir + name);
    ASSERT_FALSE(text.empty());
    auto c = parse_sim_cluster(text, name);
    ASSERT_TRUE(c.ok()) << c.error().message();
  }
  auto flashpoint = parse_sim_cluster(read(dir + "flashpoint.yaml"), "flashpoint.yaml");
  EXPECT_EQ(flashpoint->topology.hosts * flashpoint->topology.gpus_per_host, 1600u);
  auto m = parse_sim_models(read(dir + "flashpoint-models.yaml"), "flashpoint-models.yaml");
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m->size(), 6u);
}

}  // namespace sim_config_test
}  // namespace ember
