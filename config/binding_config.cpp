// The `binding:` section of the config file: parse_binding reads it, validate_binding checks its
// ranges (declared in config/config_detail.hpp). BindingConfig and the meaning of each key are in
// config/cluster_config.hpp. Only cluster_config.cpp calls these two (from parse_cluster_config and
// validate()); everyone else reaches them through parse_cluster_config and validate().
#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <system_error>

#include "config/choices.hpp"
#include "config/cluster_config.hpp"
#include "config/config_detail.hpp"
#include "base/units.hpp"
#include "config/yaml_section.hpp"

namespace ember::config_detail {
namespace {

using config_yaml::YamlSection;

constexpr uint64_t kMinGroupBytes = 64ull << 10;
constexpr uint64_t kMaxGroupBytes = 1ull << 30;
constexpr uint64_t kMaxStagingBytes = 1ull << 30;

// "auto" or a byte size ("auto" and 0 both mean: measure the elbow at executor start).
Result<uint64_t> parse_group(std::string_view text) {
  if (text == "auto") return uint64_t{0};
  auto bytes = parse_bytes(text);
  if (!bytes.ok()) {
    return invalid_argument("'" + std::string(text) +
                            "' is neither auto nor a byte size in 64 KiB..1 GiB (examples: auto, 2MiB)");
  }
  return bytes;
}

// Any uint64_t. read_uint goes through a signed stoll and so stops at 2^63 - 1.
Result<uint64_t> parse_seed(std::string_view text) {
  uint64_t v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size()) {
    return invalid_argument("'" + std::string(text) + "' is not an integer in 0.." +
                            std::to_string(std::numeric_limits<uint64_t>::max()));
  }
  return v;
}

}  // namespace

std::string show_number(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

// `!(lo <= v && v <= hi)` rather than `v < lo || v > hi`, so that a NaN set in code is refused too.
Status check_number(const std::string& at, const std::string& key, double v, double lo, double hi, bool above_lo) {
  if (above_lo ? (lo < v && v <= hi) : (lo <= v && v <= hi)) return Status::OK();
  const std::string range = above_lo ? "(" + show_number(lo) + ", " + show_number(hi) + "]"
                                     : show_number(lo) + ".." + show_number(hi);
  return invalid_argument(at + ": " + key + ": " + show_number(v) + " is outside " + range);
}

Status parse_binding(const YamlSection& s, BindingConfig& c) {
  EMBER_RETURN_IF_ERROR(s.check_unique_keys());
  EMBER_RETURN_IF_ERROR(s.check_keys(
      {"mode",         "scheduler",      "eviction",          "group",        "heavy_factor",  "slo_factor",
       "slo_deadline", "slo_percentile", "workspace",         "window",       "repartition",   "alpha_period",
       "seed",         "run_ahead",      "streams",           "io_batch",     "staging",       "inline",
       "bodies",       "shadows",        "adaptive_batching", "burst_window", "scaling_period"}));
  EMBER_RETURN_IF_ERROR(s.read_word("mode", c.mode, parse_binding_mode));
  EMBER_RETURN_IF_ERROR(s.read_word("scheduler", c.scheduler, parse_swap_scheduler));
  EMBER_RETURN_IF_ERROR(s.read_word("eviction", c.eviction, parse_eviction_rule));
  EMBER_RETURN_IF_ERROR(s.read("group", c.group_bytes, parse_group));
  EMBER_RETURN_IF_ERROR(s.read("heavy_factor", c.heavy_factor, parse_number));
  EMBER_RETURN_IF_ERROR(s.read("slo_factor", c.slo_factor, parse_number));
  EMBER_RETURN_IF_ERROR(s.read("slo_deadline", c.slo_deadline_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read("slo_percentile", c.slo_percentile, parse_number));
  EMBER_RETURN_IF_ERROR(s.read("workspace", c.workspace_bytes, parse_bytes));
  EMBER_RETURN_IF_ERROR(s.read("window", c.window_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read("repartition", c.repartition_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read("alpha_period", c.alpha_period_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read("seed", c.seed, parse_seed));
  EMBER_RETURN_IF_ERROR(s.read_uint_as("run_ahead", 16, c.run_ahead));
  EMBER_RETURN_IF_ERROR(s.read_uint_as("streams", 32, c.streams));
  EMBER_RETURN_IF_ERROR(s.read_uint_as("io_batch", 64, c.io_batch));
  EMBER_RETURN_IF_ERROR(s.read("staging", c.staging_bytes, parse_bytes));
  EMBER_RETURN_IF_ERROR(s.read_bool("inline", c.inline_runs));
  EMBER_RETURN_IF_ERROR(s.read_word("bodies", c.bodies, parse_body_scaling));
  EMBER_RETURN_IF_ERROR(s.read_bool("shadows", c.shadows));
  EMBER_RETURN_IF_ERROR(s.read_bool("adaptive_batching", c.adaptive_batching));
  EMBER_RETURN_IF_ERROR(s.read("burst_window", c.burst_window_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read("scaling_period", c.scaling_period_us, parse_duration_us));
  return Status::OK();
}

Status validate_binding(const BindingConfig& b, const std::string& at) {
  if (b.group_bytes != 0 && (b.group_bytes < kMinGroupBytes || b.group_bytes > kMaxGroupBytes)) {
    return invalid_argument(at + ": binding.group: " + format_bytes(b.group_bytes) +
                            " is outside 64 KiB..1 GiB (0 or auto: measured)");
  }
  EMBER_RETURN_IF_ERROR(check_number(at, "binding.heavy_factor", b.heavy_factor, 1, 100));
  EMBER_RETURN_IF_ERROR(check_number(at, "binding.slo_factor", b.slo_factor, 1, 1000));
  if (b.slo_deadline_us != 0) {
    EMBER_RETURN_IF_ERROR(check_duration(at, "binding.slo_deadline", b.slo_deadline_us));
  }
  if (!(b.slo_percentile > 0 && b.slo_percentile < 1)) {
    return invalid_argument(at + ": binding.slo_percentile: " + show_number(b.slo_percentile) +
                            " is not strictly between 0 and 1");
  }
  EMBER_RETURN_IF_ERROR(check_duration(at, "binding.window", b.window_us));
  EMBER_RETURN_IF_ERROR(check_duration(at, "binding.repartition", b.repartition_us));
  EMBER_RETURN_IF_ERROR(check_duration(at, "binding.alpha_period", b.alpha_period_us));
  if (b.mode == BindingMode::pinned && (b.shadows || b.adaptive_batching || b.bodies != BodyScalingMode::free)) {
    return invalid_argument(at + ": binding." +
                            (b.shadows             ? "shadows"
                             : b.adaptive_batching ? "adaptive_batching"
                                                   : "bodies") +
                            " scales what late binding places: it needs binding.mode late, not pinned");
  }
  EMBER_RETURN_IF_ERROR(check_duration(at, "binding.burst_window", b.burst_window_us));
  EMBER_RETURN_IF_ERROR(check_duration(at, "binding.scaling_period", b.scaling_period_us));
  if (b.streams == 0) return invalid_argument(at + ": binding.streams: 0 is outside 1..32");
  if (b.staging_bytes > kMaxStagingBytes) {
    return invalid_argument(at + ": binding.staging: " + format_bytes(b.staging_bytes) + " is outside 0..1 GiB");
  }
  if (b.repartition_us > b.window_us) {
    return invalid_argument(at + ": binding.repartition (" + format_duration(b.repartition_us) +
                            ") must not exceed binding.window (" + format_duration(b.window_us) + ")");
  }
  return Status::OK();
}

}  // namespace ember::config_detail
