#include "config/device_config.hpp"

#include "config/units.hpp"
#include "config/yaml_section.hpp"

namespace ember {

std::string_view to_string(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::automatic: return "auto";
    case DeviceKind::sim: return "sim";
    case DeviceKind::cuda: return "cuda";
  }
  return "?";
}

Result<DeviceKind> parse_device_kind(std::string_view text) {
  if (text == "auto") return DeviceKind::automatic;
  if (text == "sim") return DeviceKind::sim;
  if (text == "cuda") return DeviceKind::cuda;
  return invalid_argument("unknown device kind '" + std::string(text) + "' (expected auto, sim or cuda)");
}

Status validate(const DevicesConfig& c, std::string_view source) {
  std::string at(source);
  if (c.count < 1 || c.count > 64) {
    return invalid_argument(at + ": devices.count: " + std::to_string(c.count) + " is outside 1..64");
  }
  if (c.sim.memory_bytes < (1u << 20)) {
    return invalid_argument(at + ": devices.memory: " + format_bytes(c.sim.memory_bytes) +
                            " is below the 1 MiB minimum");
  }
  if (c.sim.pcie_bytes_per_s < 0) {
    return invalid_argument(at + ": devices.pcie_bandwidth: must not be negative");
  }
  if (c.sim.compute_threads > 1024) {
    return invalid_argument(at + ": devices.compute_threads: " + std::to_string(c.sim.compute_threads) +
                            " is outside 0..1024");
  }
  return Status::OK();
}

Result<DevicesConfig> parse_devices_config(std::string_view yaml_text, std::string_view source) {
  EMBER_ASSIGN_OR_RETURN(YAML::Node root, config_yaml::load_document(yaml_text, source));
  return parse_devices_section(root, source);
}

Result<DevicesConfig> parse_devices_section(const YAML::Node& document, std::string_view source) {
  DevicesConfig config;
  EMBER_ASSIGN_OR_RETURN(auto devices, config_yaml::YamlSection::open(document, "devices", source));
  if (!devices.present()) return config;
  EMBER_RETURN_IF_ERROR(devices.check_keys({"kind", "count", "memory", "pcie_bandwidth", "compute_threads"}));
  EMBER_RETURN_IF_ERROR(devices.read("kind", config.kind, parse_device_kind));
  EMBER_RETURN_IF_ERROR(devices.read_uint_as("count", 64, config.count));
  EMBER_RETURN_IF_ERROR(devices.read("memory", config.sim.memory_bytes, parse_bytes));
  EMBER_RETURN_IF_ERROR(devices.read("pcie_bandwidth", config.sim.pcie_bytes_per_s, parse_bandwidth));
  EMBER_RETURN_IF_ERROR(devices.read_uint_as("compute_threads", 1024, config.sim.compute_threads));
  EMBER_RETURN_IF_ERROR(validate(config, source));
  return config;
}

}  // namespace ember
