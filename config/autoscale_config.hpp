// The autoscaler's knobs for one model, with Ray Serve's names where it has one. The cluster YAML's
// `autoscale:` section holds the defaults; a model.json's serving.autoscale may override them key by
// key. What the knobs drive is placement/autoscaler.hpp (the policy and its classification).
//
// Pure data and one check; anyone, any thread; never throws. Durations are held in microseconds
// (`_us`) and written as everywhere in the config ("250ms", "30s"); deploy/ember.yaml lists every key.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/status.hpp"
#include "config/choices.hpp"

namespace ember {

struct AutoscaleConfig {
  /// Which signal sets the replica need (config/choices.hpp). Default ongoing_requests.
  ScalingPolicy policy = ScalingPolicy::ongoing_requests;
  /// Fewest replicas on devices. 0 lets an idle model scale to zero after idle_timeout (its bytes
  /// stay in a node's host memory for host_keep_alive, so the next cold start is cheap). Default 0.
  uint32_t min_replicas = 0;
  /// Most replicas, at least 1 and at least min_replicas; at most kMaxReplicas. Default 8.
  uint32_t max_replicas = 8;
  /// ongoing_requests: the requests in flight or queued per replica the policy aims at (Ray Serve's
  /// target_ongoing_requests, default 2 as there). Lower buys latency with replicas. > 0, <= 10000.
  double target_ongoing_requests = 2;
  /// arrival_rate: replicas = arrival rate x execution time x headroom. Default 1.25 (a replica
  /// busy 80% of the time); 1..10. model_level: replicas = arrival rate x headroom / one replica's
  /// capacity within the SLO (AsyFunc's α is 1 / headroom: 0.8 by default).
  double headroom = 1.25;
  /// queue_latency: the queueing delay the policy aims at, counting the backlog that builds while
  /// new replicas start. Default 100ms (TorchServe on Kubernetes uses 7 s for cold starts of tens of
  /// seconds; Ember's are far shorter). 1ms..1h.
  uint64_t target_queue_latency_us = 100'000;
  /// requests_per_minute: the requests each replica should serve per minute (SageMaker's
  /// invocations per instance). Default 1000; > 0, <= 1e9.
  double target_requests_per_minute = 1000;
  /// A scale-up must be wanted this long before it is made (a burst shorter than this is absorbed
  /// by the queues). Scaling from zero and up to min_replicas never waits. Default 1s (Ray Serve's
  /// is 30 s, set for cold starts of minutes); 0..1h.
  uint64_t upscale_delay_us = 1'000'000;
  /// A scale-down must be wanted this long before it is made. Default 30s; 0..24h.
  uint64_t downscale_delay_us = 30'000'000;
  /// A model that received no request and has none in flight for this long drops to min_replicas
  /// (to zero when that is 0), without further delay. Default 60s; 1s..24h.
  uint64_t idle_timeout_us = 60'000'000;
  /// How long a node keeps a model's bytes in host memory after its last replica left the devices
  /// (the warm "ember" a later cold start is served from; memory pressure may drop them sooner).
  /// Default 10min; 0..7 days (0 = drop them with the last replica). Scaling to zero is cheap only
  /// while this outlasts the idle gaps of the model's traffic.
  uint64_t host_keep_alive_us = 600'000'000;
  /// Hysteresis of scale-down: replicas go only when the need, grown by this fraction, fits in one
  /// replica fewer (so a need hovering at a boundary never flaps). Default 0.1; 0..1.
  double downscale_tolerance = 0.1;

  static constexpr uint32_t kMaxReplicas = 4096;
};

/// A model's own autoscaling keys (model.json's serving.autoscale): each one set replaces the
/// cluster's default for that model. Same names, units and ranges as AutoscaleConfig.
/// The autoscaler loop's own settings: cluster-wide, in the `autoscale:` section beside the model
/// defaults (a model.json cannot set them).
struct AutoscalerSettings {
  /// Whether the manager scales replicas with the load. false: the behaviour without an autoscaler:
  /// replicas come from `load`, scale from zero and re-placement only, and none is ever dropped.
  /// Default true.
  bool enabled = true;
  /// How often gateways report each model's counters and the manager decides (every model, each
  /// tick). Default 1s; 10ms..1min. Shorter reacts sooner, at one small message per gateway and a
  /// pass over every model per tick (about 35 ms per second for 10,000 models at 10ms).
  uint64_t interval_us = 1'000'000;
  /// The window the arrival rate and execution time are averaged over (Ray Serve's
  /// look_back_period). Default 10s; interval..1h. Longer is steadier and slower to follow a burst.
  uint64_t look_back_us = 10'000'000;
  /// A replica being scaled down leaves the routing table at once, then serves what was already
  /// sent to it; it is unbound when the gateways report none in flight, or after this. Default
  /// 30s; 100ms..1h (requests still there at the end are answered by the executor's queue before
  /// the unbind, or retried on another replica by the gateway).
  uint64_t drain_timeout_us = 30'000'000;
  /// A scale-up that needs the bytes on two or more nodes sends them along one chained multicast
  /// from a node that holds them (or the repository). false: each node fetches on its own (a
  /// baseline). Default true.
  bool chain_scale_up = true;
  /// New replicas may fetch the bytes from peers' host caches (false: always from the repository,
  /// as a registry pull; a baseline). Default true.
  bool peer_sources = true;
  /// Where new replicas go (config/choices.hpp): locality (default) or random.
  PlacementPolicy placement = PlacementPolicy::locality;
  /// Partitioned cold starts (Flashpoint): a scale-up to several replicas of a model no node holds
  /// (and that has a profile.json) may cut it into at most this many pipeline stages loaded in
  /// parallel on as many nodes, serving through the pipeline until each node completes into a full
  /// replica. 1 = never. Default 4; 1..64. The plan decides the stage count (often fewer).
  uint32_t partition_stages = 4;
  /// The bandwidth a stage's bytes and the activations between stages are planned with (the
  /// nodes' links). Default 1Gbit/s.
  double partition_bandwidth = 125e6;
  /// How fast a pipeline's members fetch the rest of the model in the background (bytes per second;
  /// 0 = as fast as the link), so that completions leave the links to cold starts. Default 0.
  double completion_rate = 0;
};

struct AutoscaleOverrides {
  std::optional<ScalingPolicy> policy;
  std::optional<uint32_t> min_replicas, max_replicas;
  std::optional<double> target_ongoing_requests, headroom, target_requests_per_minute, downscale_tolerance;
  std::optional<uint64_t> target_queue_latency_us, upscale_delay_us, downscale_delay_us, idle_timeout_us,
      host_keep_alive_us;

  bool operator==(const AutoscaleOverrides&) const = default;
};

/// `defaults` with every key set in `overrides` in its place, then checked as a whole
/// (check_autoscale_config: a model's min_replicas above the cluster's max_replicas is refused here).
Result<AutoscaleConfig> with_overrides(const AutoscaleConfig& defaults, const AutoscaleOverrides& overrides,
                                       const std::string& at, const std::string& section);

/// invalid_argument "<at>: <section>.<key>: ..." for a value out of its range or a broken cross-key
/// rule, e.g. "ember.yaml: autoscale.max_replicas: 1 is below autoscale.min_replicas (2)"; `at` is
/// the file, `section` where the knobs are in it ("autoscale", "serving.autoscale").
Status check_autoscale_config(const AutoscaleConfig& config, const std::string& at, const std::string& section);
/// The ranges of AutoscalerSettings, naming `section`.key in errors.
Status check_autoscaler_settings(const AutoscalerSettings& settings, const std::string& at, const std::string& section);

}  // namespace ember
