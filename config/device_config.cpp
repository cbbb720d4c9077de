#include "config/device_config.hpp"

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "base/units.hpp"
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

namespace {

std::string cell(size_t i, size_t j) { return "devices.links[" + std::to_string(i) + "][" + std::to_string(j) + "]"; }

std::string gbps(double bytes_per_s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%gGB/s", bytes_per_s / 1e9);
  return buf;
}

// The link matrix is count x count, symmetric, with a zero diagonal and finite non-negative cells.
Status validate_links(const DevicesConfig& c, const std::string& at) {
  const auto& m = c.link_bytes_per_s;
  if (m.empty()) return Status::OK();
  if (m.size() != c.count) {
    return invalid_argument(at + ": devices.links: has " + std::to_string(m.size()) + " rows but devices.count is " +
                            std::to_string(c.count) + " (a count x count matrix)");
  }
  for (size_t i = 0; i < m.size(); ++i) {
    if (m[i].size() != c.count) {
      return invalid_argument(at + ": devices.links[" + std::to_string(i) + "]: has " + std::to_string(m[i].size()) +
                              " entries but devices.count is " + std::to_string(c.count));
    }
  }
  for (size_t i = 0; i < m.size(); ++i) {
    for (size_t j = 0; j < m.size(); ++j) {
      if (!(m[i][j] >= 0) || std::isinf(m[i][j])) {
        return invalid_argument(at + ": " + cell(i, j) + ": must be a finite bandwidth, not negative");
      }
      if (i == j && m[i][j] != 0) {
        return invalid_argument(at + ": " + cell(i, j) + ": is " + gbps(m[i][j]) +
                                " but a device has no link to itself (the diagonal must be 0)");
      }
      if (j > i && m[i][j] != m[j][i]) {
        return invalid_argument(at + ": " + cell(i, j) + ": is " + gbps(m[i][j]) + " but " + cell(j, i) + " is " +
                                gbps(m[j][i]) + " (links are symmetric)");
      }
    }
  }
  return Status::OK();
}

// `devices.pcie_switch`: a YAML list of switch ids (non-negative integers).
Status read_switches(const config_yaml::YamlSection& devices, std::vector<uint32_t>& out) {
  if (!devices.has("pcie_switch")) return Status::OK();
  const YAML::Node list = devices.value("pcie_switch");
  const std::string at = devices.where("pcie_switch");
  if (!list.IsSequence()) return invalid_argument(at + ": must be a list of switch ids, one per device ([0, 0, 1, 1])");
  out.clear();
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string text = list[i].IsScalar() ? list[i].as<std::string>("") : "";
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = text.empty() || text[0] == '-' ? 0 : std::strtoull(text.c_str(), &end, 10);
    if (!end || *end != '\0' || errno || v > UINT32_MAX) {
      return invalid_argument(at + "[" + std::to_string(i) + "]: '" + text + "' is not an integer in 0..4294967295");
    }
    out.push_back(static_cast<uint32_t>(v));
  }
  return Status::OK();
}

// `devices.links`: a YAML list of rows, each a list of bandwidths (parse_bandwidth).
Status read_links(const config_yaml::YamlSection& devices, std::vector<std::vector<double>>& out) {
  if (!devices.has("links")) return Status::OK();
  const YAML::Node rows = devices.value("links");
  const std::string at = devices.where("links");
  if (!rows.IsSequence()) return invalid_argument(at + ": must be a list of rows, each a list of bandwidths");
  out.assign(rows.size(), {});
  for (size_t i = 0; i < rows.size(); ++i) {
    const YAML::Node row = rows[i];
    if (!row.IsSequence()) {
      return invalid_argument(at + "[" + std::to_string(i) + "]: must be a list of bandwidths ([0, 50GB/s])");
    }
    for (size_t j = 0; j < row.size(); ++j) {
      const std::string text = row[j].IsScalar() ? row[j].as<std::string>("") : "";
      auto rate = parse_bandwidth(text);
      if (!rate.ok()) return rate.error().with_context(at + "[" + std::to_string(i) + "][" + std::to_string(j) + "]");
      out[i].push_back(*rate);
    }
  }
  return Status::OK();
}

}  // namespace

Status validate(const DevicesConfig& c, std::string_view source) {
  std::string at(source);
  if (c.count < 1 || c.count > 64) {
    return invalid_argument(at + ": devices.count: " + std::to_string(c.count) + " is outside 1..64");
  }
  if (c.sim.memory_bytes < (1u << 20)) {
    return invalid_argument(at + ": devices.memory: " + format_bytes(c.sim.memory_bytes) +
                            " is below the 1 MiB minimum");
  }
  for (auto [key, rate] : {std::pair{"pcie_bandwidth", c.sim.pcie_bytes_per_s},
                           std::pair{"pageable_bandwidth", c.sim.pageable_bytes_per_s},
                           std::pair{"switch_bandwidth", c.switch_bytes_per_s}}) {
    if (!(rate >= 0) || std::isinf(rate)) {
      return invalid_argument(at + ": devices." + key + ": must be a finite bandwidth, not negative");
    }
  }
  if (c.sim.compute_threads > 1024) {
    return invalid_argument(at + ": devices.compute_threads: " + std::to_string(c.sim.compute_threads) +
                            " is outside 0..1024");
  }
  if (!(c.sim.compute_dilation == 0 || (c.sim.compute_dilation >= 1 && c.sim.compute_dilation <= 1000))) {
    return invalid_argument(at + ": devices.compute_dilation: must be 0 (off) or between 1 and 1000");
  }
  if (!c.pcie_switch.empty() && c.pcie_switch.size() != c.count) {
    return invalid_argument(at + ": devices.pcie_switch: has " + std::to_string(c.pcie_switch.size()) +
                            " entries but devices.count is " + std::to_string(c.count) + " (one switch id per device)");
  }
  return validate_links(c, at);
}

Result<DevicesConfig> parse_devices_config(std::string_view yaml_text, std::string_view source) {
  EMBER_ASSIGN_OR_RETURN(YAML::Node root, config_yaml::load_document(yaml_text, source));
  return parse_devices_section(root, source);
}

Result<DevicesConfig> parse_devices_section(const YAML::Node& document, std::string_view source) {
  DevicesConfig config;
  EMBER_ASSIGN_OR_RETURN(auto devices, config_yaml::YamlSection::open(document, "devices", source));
  if (!devices.present()) return config;
  EMBER_RETURN_IF_ERROR(devices.check_keys({"kind", "count", "memory", "pcie_bandwidth", "pageable_bandwidth",
                                            "compute_threads", "compute_dilation", "pcie_switch", "links", "switch_bandwidth"},
                                           config_yaml::Values::anything));
  EMBER_RETURN_IF_ERROR(devices.check_scalars(
      {"kind", "count", "memory", "pcie_bandwidth", "pageable_bandwidth", "compute_threads", "compute_dilation",
       "switch_bandwidth"}));
  EMBER_RETURN_IF_ERROR(devices.read("kind", config.kind, parse_device_kind));
  EMBER_RETURN_IF_ERROR(devices.read_uint_as("count", 64, config.count));
  EMBER_RETURN_IF_ERROR(devices.read("memory", config.sim.memory_bytes, parse_bytes));
  EMBER_RETURN_IF_ERROR(devices.read("pcie_bandwidth", config.sim.pcie_bytes_per_s, parse_bandwidth));
  EMBER_RETURN_IF_ERROR(devices.read("pageable_bandwidth", config.sim.pageable_bytes_per_s, parse_bandwidth));
  EMBER_RETURN_IF_ERROR(devices.read_uint_as("compute_threads", 1024, config.sim.compute_threads));
  EMBER_RETURN_IF_ERROR(devices.read("compute_dilation", config.sim.compute_dilation, parse_number));
  EMBER_RETURN_IF_ERROR(read_switches(devices, config.pcie_switch));
  EMBER_RETURN_IF_ERROR(read_links(devices, config.link_bytes_per_s));
  EMBER_RETURN_IF_ERROR(devices.read("switch_bandwidth", config.switch_bytes_per_s, parse_bandwidth));
  EMBER_RETURN_IF_ERROR(validate(config, source));
  return config;
}

}  // namespace ember
