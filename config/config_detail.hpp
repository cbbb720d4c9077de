// Internal to config/: what cluster_config.cpp, binding_config.cpp, generation_config.cpp and
// autoscale_config.cpp share.
// Not for other folders: everyone else reaches the config through parse_cluster_config and
// validate(const ClusterConfig&).
#pragma once

#include <cstdint>
#include <string>

#include "config/cluster_config.hpp"
#include "config/yaml_section.hpp"

namespace ember::config_detail {

/// Every duration of the file lies in 1ms..24h.
inline constexpr uint64_t kMinDurationUs = 1'000;
inline constexpr uint64_t kMaxDurationUs = 24ull * 3'600'000'000;

/// invalid_argument "<at>: <key>: ... is outside 1ms..24h" (or lo..hi) unless us is in range.
Status check_duration(const std::string& at, const std::string& key, uint64_t us, uint64_t lo_us = kMinDurationUs,
                      uint64_t hi_us = kMaxDurationUs);

/// The shortest text that reads back as `v` ("1.3", not "1.300000").
std::string show_number(double v);
/// invalid_argument "<at>: <key>: <v> is outside <lo>..<hi>" unless lo <= v <= hi (a NaN is outside);
/// with `above_lo`, v must exceed lo ("is outside (<lo>, <hi>]").
Status check_number(const std::string& at, const std::string& key, double v, double lo, double hi,
                    bool above_lo = false);

/// The `binding:` section (binding_config.cpp).
Status parse_binding(const config_yaml::YamlSection& s, BindingConfig& c);
Status validate_binding(const BindingConfig& b, const std::string& at);

/// The `generation:` section (generation_config.cpp).
Status parse_generation(const config_yaml::YamlSection& s, GenerationConfig& c);
Status validate_generation(const GenerationConfig& g, const std::string& at);

/// The `autoscale:` section (autoscale_config.cpp); check_autoscale_config validates it.
Status parse_autoscale(const config_yaml::YamlSection& s, AutoscaleConfig& c, AutoscalerSettings& loop);

}  // namespace ember::config_detail
