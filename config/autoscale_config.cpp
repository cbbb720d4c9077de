// check_autoscale_config, and the `autoscale:` section of the config file (parse_autoscale,
// config/config_detail.hpp). AutoscaleConfig and the meaning of each key are in autoscale_config.hpp.
#include "config/autoscale_config.hpp"

#include <cmath>

#include "base/units.hpp"
#include "config/config_detail.hpp"
#include "config/yaml_section.hpp"

namespace ember {
namespace {

constexpr uint64_t kMs = 1000, kHour = 3'600'000'000, kDay = 24 * kHour;

}  // namespace

Status check_autoscale_config(const AutoscaleConfig& c, const std::string& at, const std::string& section) {
  using config_detail::check_duration;
  using config_detail::check_number;
  const std::string k = section + ".";
  if (c.max_replicas < 1 || c.max_replicas > AutoscaleConfig::kMaxReplicas)
    return invalid_argument(at + ": " + k + "max_replicas: " + std::to_string(c.max_replicas) + " is outside 1.." +
                            std::to_string(AutoscaleConfig::kMaxReplicas));
  if (c.min_replicas > c.max_replicas)
    return invalid_argument(at + ": " + k + "max_replicas: " + std::to_string(c.max_replicas) + " is below " + k +
                            "min_replicas (" + std::to_string(c.min_replicas) + ")");
  EMBER_RETURN_IF_ERROR(check_number(at, k + "target_ongoing_requests", c.target_ongoing_requests, 0, 10000, true));
  EMBER_RETURN_IF_ERROR(check_number(at, k + "target_requests_per_minute", c.target_requests_per_minute, 0, 1e9, true));
  EMBER_RETURN_IF_ERROR(check_number(at, k + "headroom", c.headroom, 1, 10));
  EMBER_RETURN_IF_ERROR(check_number(at, k + "downscale_tolerance", c.downscale_tolerance, 0, 1));
  EMBER_RETURN_IF_ERROR(check_duration(at, k + "target_queue_latency", c.target_queue_latency_us, kMs, kHour));
  EMBER_RETURN_IF_ERROR(check_duration(at, k + "upscale_delay", c.upscale_delay_us, 0, kHour));
  EMBER_RETURN_IF_ERROR(check_duration(at, k + "downscale_delay", c.downscale_delay_us, 0, kDay));
  EMBER_RETURN_IF_ERROR(check_duration(at, k + "idle_timeout", c.idle_timeout_us, 1000 * kMs, kDay));
  EMBER_RETURN_IF_ERROR(check_duration(at, k + "host_keep_alive", c.host_keep_alive_us, 0, 7 * kDay));
  return Status::OK();
}

Status check_autoscaler_settings(const AutoscalerSettings& s, const std::string& at, const std::string& section) {
  using config_detail::check_duration;
  const std::string k = section + ".";
  EMBER_RETURN_IF_ERROR(check_duration(at, k + "interval", s.interval_us, 10 * kMs, 60'000 * kMs));
  EMBER_RETURN_IF_ERROR(check_duration(at, k + "look_back", s.look_back_us, s.interval_us, kHour));
  EMBER_RETURN_IF_ERROR(check_duration(at, k + "drain_timeout", s.drain_timeout_us, 100 * kMs, kHour));
  if (s.partition_stages < 1 || s.partition_stages > 64) {
    return invalid_argument(at + ": " + k + "partition_stages: " + std::to_string(s.partition_stages) +
                            " is outside 1..64");
  }
  if (!(s.partition_bandwidth > 0) || !std::isfinite(s.partition_bandwidth)) {
    return invalid_argument(at + ": " + k + "partition_bandwidth: must be a positive bandwidth such as 1Gbit/s");
  }
  if (!(s.completion_rate >= 0) || !std::isfinite(s.completion_rate)) {
    return invalid_argument(at + ": " + k + "completion_rate: must be a bandwidth such as 100MB/s, or 0");
  }
  return Status::OK();
}

Result<AutoscaleConfig> with_overrides(const AutoscaleConfig& defaults, const AutoscaleOverrides& o,
                                       const std::string& at, const std::string& section) {
  AutoscaleConfig c = defaults;
  const auto put = [](auto& field, const auto& value) {
    if (value) field = *value;
  };
  put(c.policy, o.policy);
  put(c.min_replicas, o.min_replicas);
  put(c.max_replicas, o.max_replicas);
  put(c.target_ongoing_requests, o.target_ongoing_requests);
  put(c.headroom, o.headroom);
  put(c.target_requests_per_minute, o.target_requests_per_minute);
  put(c.downscale_tolerance, o.downscale_tolerance);
  put(c.target_queue_latency_us, o.target_queue_latency_us);
  put(c.upscale_delay_us, o.upscale_delay_us);
  put(c.downscale_delay_us, o.downscale_delay_us);
  put(c.idle_timeout_us, o.idle_timeout_us);
  put(c.host_keep_alive_us, o.host_keep_alive_us);
  EMBER_RETURN_IF_ERROR(check_autoscale_config(c, at, section));
  return c;
}

namespace config_detail {

Status parse_autoscale(const config_yaml::YamlSection& s, AutoscaleConfig& c, AutoscalerSettings& loop) {
  EMBER_RETURN_IF_ERROR(s.check_unique_keys());
  EMBER_RETURN_IF_ERROR(s.check_keys({"enabled",
                                      "interval",
                                      "look_back",
                                      "drain_timeout",
                                      "chain_scale_up",
                                      "peer_sources",
                                      "placement",
                                      "partition_stages",
                                      "partition_bandwidth",
                                      "completion_rate",
                                      "policy",
                                      "min_replicas",
                                      "max_replicas",
                                      "target_ongoing_requests",
                                      "headroom",
                                      "target_queue_latency",
                                      "target_requests_per_minute",
                                      "upscale_delay",
                                      "downscale_delay",
                                      "idle_timeout",
                                      "host_keep_alive",
                                      "downscale_tolerance"}));
  EMBER_RETURN_IF_ERROR(s.read_bool("enabled", loop.enabled));
  EMBER_RETURN_IF_ERROR(s.read("interval", loop.interval_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read("look_back", loop.look_back_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read("drain_timeout", loop.drain_timeout_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read_bool("chain_scale_up", loop.chain_scale_up));
  EMBER_RETURN_IF_ERROR(s.read_bool("peer_sources", loop.peer_sources));
  EMBER_RETURN_IF_ERROR(s.read_word("placement", loop.placement, parse_placement_policy));
  EMBER_RETURN_IF_ERROR(s.read_uint_as("partition_stages", 64, loop.partition_stages));
  EMBER_RETURN_IF_ERROR(s.read("partition_bandwidth", loop.partition_bandwidth, parse_bandwidth));
  EMBER_RETURN_IF_ERROR(s.read("completion_rate", loop.completion_rate, parse_bandwidth));
  EMBER_RETURN_IF_ERROR(s.read_word("policy", c.policy, parse_scaling_policy));
  EMBER_RETURN_IF_ERROR(s.read_uint_as("min_replicas", AutoscaleConfig::kMaxReplicas, c.min_replicas));
  EMBER_RETURN_IF_ERROR(s.read_uint_as("max_replicas", AutoscaleConfig::kMaxReplicas, c.max_replicas));
  EMBER_RETURN_IF_ERROR(s.read("target_ongoing_requests", c.target_ongoing_requests, parse_number));
  EMBER_RETURN_IF_ERROR(s.read("headroom", c.headroom, parse_number));
  EMBER_RETURN_IF_ERROR(s.read("target_queue_latency", c.target_queue_latency_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read("target_requests_per_minute", c.target_requests_per_minute, parse_number));
  EMBER_RETURN_IF_ERROR(s.read("upscale_delay", c.upscale_delay_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read("downscale_delay", c.downscale_delay_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read("idle_timeout", c.idle_timeout_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read("host_keep_alive", c.host_keep_alive_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read("downscale_tolerance", c.downscale_tolerance, parse_number));
  return Status::OK();
}

}  // namespace config_detail
}  // namespace ember
