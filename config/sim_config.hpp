// The two files `ember sim` reads (issue 36; docs/design/simulator.md): the simulated cluster and the
// models it serves. The cluster file's `autoscale:` section is the live config's own (same keys,
// same parser, same checks: config/autoscale_config.hpp), so an arm of the network-namespace replay
// and its simulation read the same words.
//
//   CLUSTER.yaml
//     topology:   hosts, gpus_per_host, hosts_per_leaf, spines (counts);
//                 host_link, spine_link, cloud_link, pcie (bandwidths, "50Gbit/s"; pcie 0: not
//                 modelled); device_memory, host_cache (sizes, per GPU and per host)
//     sim:        cold_start_timeout (a request held longer is lost, as gateway.cold_start_timeout),
//                 sample_interval (replicas sampled this often without the autoscaler), chunk
//                 (a chain hop's forwarding unit), slo (the default latency target), seed (random
//                 placement), warm_replicas (replicas of each model the trace asks for, bound before the
//                 first request), load_replicas (each such model loaded explicitly with this many
//                 replicas at time 0, as the repository API's load: real cold starts, partitioned
//                 when the manager plans it), failures (hosts whose process dies, and when:
//                 "host3@10min, host7@25min"; host names are host0 .. host<hosts-1>)
//     autoscale:  as the live manager's
//
//   MODELS.yaml
//     models:     a list; each: name, profile (a profile.json, relative to MODELS.yaml's folder),
//                 weights (optional: a size the profile is scaled to, every layer's bytes and
//                 times in proportion: compute taken to grow with the parameters), speedup
//                 (the modelled GPU against the device that measured the profile; default 1),
//                 slo (optional: replaces sim.slo for this model)
//
// Defaults: Flashpoint's cluster (200 hosts of 8 GPUs, 20 per leaf, one spine, 50 and 100 Gbit/s,
// 2,203 Mbit/s to the cloud, 80 GB GPUs, 512 GiB host caches). Pure data and parsers: anyone, any
// thread; never throws. Errors: invalid_argument "<file>: <section>.<key>: <what>", or for a model
// "<file>: models[i].<key>: <what>".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.hpp"
#include "config/autoscale_config.hpp"

namespace ember {

struct SimTopologyConfig {
  uint32_t hosts = 200;
  uint32_t gpus_per_host = 8;
  uint32_t hosts_per_leaf = 20;
  uint32_t spines = 1;
  double host_link_bytes_per_s = 50e9 / 8;
  double spine_link_bytes_per_s = 100e9 / 8;
  double cloud_bytes_per_s = 2203e6 / 8;
  double pcie_bytes_per_s = 0;
  uint64_t device_memory = 80'000'000'000;
  uint64_t host_cache = 512ull << 30;
};

/// A host whose process dies (sim.failures), and when.
struct SimHostFailure {
  uint32_t host = 0;  // host0 .. host<hosts-1>
  uint64_t at_us = 0;
};

struct SimRunConfig {
  uint64_t cold_start_timeout_us = 30'000'000;
  uint64_t sample_interval_us = 1'000'000;
  uint64_t chunk_bytes = 1u << 20;
  uint64_t slo_us = 1'000'000;
  uint64_t seed = 1;
  uint32_t warm_replicas = 0;
  uint32_t load_replicas = 0;
  std::vector<SimHostFailure> failures;
};

struct SimClusterConfig {
  SimTopologyConfig topology;
  SimRunConfig sim;
  AutoscaleConfig autoscale;
  AutoscalerSettings autoscaler;
};

struct SimModelConfig {
  std::string name;
  std::string profile;  // as written (relative to the models file's folder unless absolute)
  uint64_t weights = 0;  // 0: the profile's own
  double speedup = 1;
  uint64_t slo_us = 0;  // 0: sim.slo
};

/// `overrides` ("section.key", "value"), as `ember sim --set` gives them, replace or add those keys
/// before the file is read (a section that is absent is added); the same checks apply.
Result<SimClusterConfig> parse_sim_cluster(std::string_view yaml, std::string_view source,
                                           const std::vector<std::pair<std::string, std::string>>& overrides = {});
/// At least one model; names unique and non-empty.
Result<std::vector<SimModelConfig>> parse_sim_models(std::string_view yaml, std::string_view source);

}  // namespace ember
