#include "config/sim_config.hpp"

#include <set>

#include "base/units.hpp"
#include "config/config_detail.hpp"
#include "config/yaml_section.hpp"

namespace ember {
namespace {

using config_yaml::YamlSection;

constexpr uint32_t kMaxHosts = 1'000'000, kMaxGpus = 1024;

Status parse_topology(const YamlSection& s, SimTopologyConfig& t) {
  EMBER_RETURN_IF_ERROR(s.check_unique_keys());
  EMBER_RETURN_IF_ERROR(s.check_keys({"hosts", "gpus_per_host", "hosts_per_leaf", "spines", "host_link", "spine_link",
                                      "cloud_link", "pcie", "device_memory", "host_cache"}));
  EMBER_RETURN_IF_ERROR(s.read_uint_as("hosts", kMaxHosts, t.hosts));
  EMBER_RETURN_IF_ERROR(s.read_uint_as("gpus_per_host", kMaxGpus, t.gpus_per_host));
  EMBER_RETURN_IF_ERROR(s.read_uint_as("hosts_per_leaf", kMaxHosts, t.hosts_per_leaf));
  EMBER_RETURN_IF_ERROR(s.read_uint_as("spines", kMaxHosts, t.spines));
  EMBER_RETURN_IF_ERROR(s.read("host_link", t.host_link_bytes_per_s, parse_bandwidth));
  EMBER_RETURN_IF_ERROR(s.read("spine_link", t.spine_link_bytes_per_s, parse_bandwidth));
  EMBER_RETURN_IF_ERROR(s.read("cloud_link", t.cloud_bytes_per_s, parse_bandwidth));
  EMBER_RETURN_IF_ERROR(s.read("pcie", t.pcie_bytes_per_s, parse_bandwidth));
  EMBER_RETURN_IF_ERROR(s.read("device_memory", t.device_memory, parse_bytes));
  EMBER_RETURN_IF_ERROR(s.read("host_cache", t.host_cache, parse_bytes));
  for (auto [key, v] : {std::pair{"hosts", t.hosts}, {"gpus_per_host", t.gpus_per_host},
                        {"hosts_per_leaf", t.hosts_per_leaf}, {"spines", t.spines}}) {
    if (v == 0) return invalid_argument(s.where(key) + ": must be at least 1");
  }
  // parse_bandwidth reads "0" as unlimited; only the PCIe link may be left out.
  for (auto [key, v] : {std::pair{"host_link", t.host_link_bytes_per_s}, {"spine_link", t.spine_link_bytes_per_s},
                        {"cloud_link", t.cloud_bytes_per_s}}) {
    if (!(v > 0)) return invalid_argument(s.where(key) + ": must be a bandwidth above 0, such as 50Gbit/s");
  }
  if (t.device_memory == 0) return invalid_argument(s.where("device_memory") + ": must be above 0");
  return Status::OK();
}

Status parse_run(const YamlSection& s, SimRunConfig& r, const std::string& at) {
  EMBER_RETURN_IF_ERROR(s.check_unique_keys());
  EMBER_RETURN_IF_ERROR(s.check_keys({"cold_start_timeout", "sample_interval", "chunk", "slo", "seed", "warm_replicas",
                                         "load_replicas", "failures"}));
  EMBER_RETURN_IF_ERROR(s.read("cold_start_timeout", r.cold_start_timeout_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read("sample_interval", r.sample_interval_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read("chunk", r.chunk_bytes, parse_bytes));
  EMBER_RETURN_IF_ERROR(s.read("slo", r.slo_us, parse_duration_us));
  EMBER_RETURN_IF_ERROR(s.read_uint("seed", UINT64_MAX >> 1, r.seed));
  EMBER_RETURN_IF_ERROR(s.read_uint_as("warm_replicas", AutoscaleConfig::kMaxReplicas, r.warm_replicas));
  EMBER_RETURN_IF_ERROR(s.read_uint_as("load_replicas", AutoscaleConfig::kMaxReplicas, r.load_replicas));
  EMBER_RETURN_IF_ERROR(config_detail::check_duration(at, "sim.cold_start_timeout", r.cold_start_timeout_us));
  EMBER_RETURN_IF_ERROR(config_detail::check_duration(at, "sim.sample_interval", r.sample_interval_us));
  EMBER_RETURN_IF_ERROR(config_detail::check_duration(at, "sim.slo", r.slo_us));
  if (r.chunk_bytes == 0) return invalid_argument(s.where("chunk") + ": must be above 0");
  std::string failures;
  EMBER_RETURN_IF_ERROR(s.read_string("failures", failures));
  for (std::string_view rest = failures; !rest.empty();) {
    const size_t comma = rest.find(',');
    std::string one(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    one.erase(0, one.find_first_not_of(' '));
    one.erase(one.find_last_not_of(' ') + 1);
    const size_t at_sign = one.find('@');
    const std::string bad = s.where("failures") + ": '" + one + "': expected HOST@TIME, such as host3@10min";
    if (at_sign == std::string::npos || one.rfind("host", 0) != 0) return invalid_argument(bad);
    const std::string number = one.substr(4, at_sign - 4);
    if (number.empty() || number.size() > 7 || number.find_first_not_of("0123456789") != std::string::npos) {
      return invalid_argument(bad);
    }
    auto when = parse_duration_us(one.substr(at_sign + 1));
    if (!when.ok()) return invalid_argument(bad + " (" + when.error().message() + ")");
    r.failures.push_back({static_cast<uint32_t>(std::stoul(number)), *when});
  }
  return Status::OK();
}

}  // namespace

Result<SimClusterConfig> parse_sim_cluster(std::string_view yaml, std::string_view source,
                                           const std::vector<std::pair<std::string, std::string>>& overrides) {
  EMBER_ASSIGN_OR_RETURN(YAML::Node root, config_yaml::load_document(yaml, source));
  for (const auto& [path, value] : overrides) {
    const auto dot = path.find('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == path.size()) {
      return invalid_argument("--set " + path + "=" + value + ": expected section.key=value (autoscale.policy=queue_latency)");
    }
    if (!root || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
    const std::string section = path.substr(0, dot);
    YAML::Node node = root[section];
    if (!node || node.IsNull()) {
      root[section] = YAML::Node(YAML::NodeType::Map);
    } else if (!node.IsMap()) {
      return invalid_argument(std::string(source) + ": " + section + ": must be a mapping");
    }
    root[section][path.substr(dot + 1)] = value;
  }
  SimClusterConfig c;
  const YamlSection top = YamlSection::root(root, source);
  EMBER_RETURN_IF_ERROR(top.check_unique_keys());
  EMBER_RETURN_IF_ERROR(top.check_keys({"topology", "sim", "autoscale"}, config_yaml::Values::anything));
  EMBER_ASSIGN_OR_RETURN(auto topology, YamlSection::open(root, "topology", source));
  EMBER_RETURN_IF_ERROR(parse_topology(topology, c.topology));
  EMBER_ASSIGN_OR_RETURN(auto sim, YamlSection::open(root, "sim", source));
  EMBER_RETURN_IF_ERROR(parse_run(sim, c.sim, std::string(source)));
  EMBER_ASSIGN_OR_RETURN(auto autoscale, YamlSection::open(root, "autoscale", source));
  EMBER_RETURN_IF_ERROR(config_detail::parse_autoscale(autoscale, c.autoscale, c.autoscaler));
  const std::string at(source);
  EMBER_RETURN_IF_ERROR(check_autoscale_config(c.autoscale, at, "autoscale"));
  EMBER_RETURN_IF_ERROR(check_autoscaler_settings(c.autoscaler, at, "autoscale"));
  for (const auto& f : c.sim.failures) {
    if (f.host >= c.topology.hosts) {
      return invalid_argument(at + ": sim.failures: host" + std::to_string(f.host) + ": the topology has hosts host0 .. host" +
                              std::to_string(c.topology.hosts - 1));
    }
  }
  return c;
}

Result<std::vector<SimModelConfig>> parse_sim_models(std::string_view yaml, std::string_view source) {
  EMBER_ASSIGN_OR_RETURN(YAML::Node root, config_yaml::load_document(yaml, source));
  const YamlSection top = YamlSection::root(root, source);
  EMBER_RETURN_IF_ERROR(top.check_unique_keys());
  EMBER_RETURN_IF_ERROR(top.check_keys({"models"}, config_yaml::Values::anything));
  const YAML::Node list = top.value("models");
  const std::string at(source);
  if (!list || !list.IsSequence() || list.size() == 0) {
    return invalid_argument(at + ": models: must be a list of at least one model");
  }
  std::vector<SimModelConfig> out;
  std::set<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string name = "models[" + std::to_string(i) + "]";
    YAML::Node wrapper(YAML::NodeType::Map);
    wrapper[name] = list[i];
    EMBER_ASSIGN_OR_RETURN(auto s, YamlSection::open(wrapper, name, source));
    if (!s.present()) return invalid_argument(at + ": " + name + ": must be a mapping");
    EMBER_RETURN_IF_ERROR(s.check_unique_keys());
    EMBER_RETURN_IF_ERROR(s.check_keys({"name", "profile", "weights", "speedup", "slo"}));
    SimModelConfig m;
    EMBER_RETURN_IF_ERROR(s.read_string("name", m.name));
    EMBER_RETURN_IF_ERROR(s.read_string("profile", m.profile));
    EMBER_RETURN_IF_ERROR(s.read("weights", m.weights, parse_bytes));
    EMBER_RETURN_IF_ERROR(s.read("speedup", m.speedup, parse_number));
    EMBER_RETURN_IF_ERROR(s.read("slo", m.slo_us, parse_duration_us));
    if (m.name.empty()) return invalid_argument(s.where("name") + ": is required");
    if (m.profile.empty()) return invalid_argument(s.where("profile") + ": is required (a profile.json)");
    if (s.has("weights") && m.weights == 0) return invalid_argument(s.where("weights") + ": must be above 0");
    if (!(m.speedup > 0)) return invalid_argument(s.where("speedup") + ": must be above 0");
    if (s.has("slo")) EMBER_RETURN_IF_ERROR(config_detail::check_duration(at, name + ".slo", m.slo_us));
    if (!names.insert(m.name).second) return invalid_argument(s.where("name") + ": '" + m.name + "' is given twice");
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace ember
