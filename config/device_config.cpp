#include "config/device_config.hpp"

#include <yaml-cpp/yaml.h>

#include <set>

#include "config/units.hpp"

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
  const std::string at(source);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return invalid_argument(at + ": not valid YAML: " + e.what());
  }
  DevicesConfig config;
  if (!root || root.IsNull()) return config;
  if (!root.IsMap()) return invalid_argument(at + ": the document must be a mapping");
  YAML::Node devices = root["devices"];
  if (!devices || devices.IsNull()) return config;
  if (!devices.IsMap()) return invalid_argument(at + ": devices: must be a mapping");

  static const std::set<std::string> kKeys = {"kind", "count", "memory", "pcie_bandwidth", "compute_threads"};
  for (const auto& kv : devices) {
    auto key = kv.first.as<std::string>("");
    if (!kKeys.count(key)) {
      return invalid_argument(at + ": devices." + key + ": unknown key (known: kind, count, memory, "
                              "pcie_bandwidth, compute_threads)");
    }
    if (!kv.second.IsScalar()) return invalid_argument(at + ": devices." + key + ": must be a scalar");
  }
  auto scalar = [&](const char* key) { return devices[key].as<std::string>(); };
  auto fail = [&](const char* key, const Error& e) { return e.with_context(at + ": devices." + key); };
  auto read_uint = [&](const char* key, uint64_t max, uint64_t& out) -> Status {
    const std::string text = scalar(key);
    try {
      size_t used = 0;
      long long v = std::stoll(text, &used);
      if (used != text.size() || v < 0 || static_cast<uint64_t>(v) > max) throw std::out_of_range("");
      out = static_cast<uint64_t>(v);
    } catch (const std::exception&) {
      return invalid_argument(at + ": devices." + key + ": '" + text + "' is not an integer in 0.." +
                              std::to_string(max));
    }
    return Status::OK();
  };

  if (devices["kind"]) {
    auto kind = parse_device_kind(scalar("kind"));
    if (!kind.ok()) return fail("kind", kind.error());
    config.kind = *kind;
  }
  if (devices["count"]) {
    uint64_t v = 0;
    EMBER_RETURN_IF_ERROR(read_uint("count", 64, v));
    config.count = static_cast<uint32_t>(v);
  }
  if (devices["memory"]) {
    auto bytes = parse_bytes(scalar("memory"));
    if (!bytes.ok()) return fail("memory", bytes.error());
    config.sim.memory_bytes = *bytes;
  }
  if (devices["pcie_bandwidth"]) {
    auto bw = parse_bandwidth(scalar("pcie_bandwidth"));
    if (!bw.ok()) return fail("pcie_bandwidth", bw.error());
    config.sim.pcie_bytes_per_s = *bw;
  }
  if (devices["compute_threads"]) {
    uint64_t v = 0;
    EMBER_RETURN_IF_ERROR(read_uint("compute_threads", 1024, v));
    config.sim.compute_threads = static_cast<uint32_t>(v);
  }
  EMBER_RETURN_IF_ERROR(validate(config, source));
  return config;
}

}  // namespace ember
