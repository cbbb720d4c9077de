#include "sim/topology.hpp"

#include <cmath>
#include <string>

namespace ember::sim {

namespace {

Status check_rate(const char* field, double v, bool zero_ok) {
  if ((zero_ok && v == 0) || (v > 0 && !std::isinf(v))) return Status::OK();
  return invalid_argument(std::string("topology: ") + field + " must be a finite rate above 0 bytes/s" +
                          (zero_ok ? " (or 0: not modelled)" : ""));
}

}  // namespace

Result<Topology> Topology::build(FlowNetwork& net, const TopologySpec& spec) {
  for (auto [field, v] : {std::pair{"hosts", spec.hosts}, std::pair{"gpus_per_host", spec.gpus_per_host},
                          std::pair{"hosts_per_leaf", spec.hosts_per_leaf}, std::pair{"spines", spec.spines}}) {
    if (v == 0) return invalid_argument(std::string("topology: ") + field + " must be at least 1");
  }
  EMBER_RETURN_IF_ERROR(check_rate("host_link", spec.host_link_bytes_per_s, false));
  EMBER_RETURN_IF_ERROR(check_rate("spine_link", spec.spine_link_bytes_per_s, false));
  EMBER_RETURN_IF_ERROR(check_rate("cloud", spec.cloud_bytes_per_s, false));
  EMBER_RETURN_IF_ERROR(check_rate("pcie", spec.pcie_bytes_per_s, true));
  Topology t;
  t.spec_ = spec;
  t.leaves_ = (spec.hosts + spec.hosts_per_leaf - 1) / spec.hosts_per_leaf;
  auto add = [&](const std::string& name, double rate) -> Result<LinkId> { return net.add_link(name, rate); };
  for (uint32_t h = 0; h < spec.hosts; ++h) {
    const std::string host = "host" + std::to_string(h);
    EMBER_ASSIGN_OR_RETURN(LinkId up, add(host + " up", spec.host_link_bytes_per_s));
    EMBER_ASSIGN_OR_RETURN(LinkId down, add(host + " down", spec.host_link_bytes_per_s));
    t.host_up_.push_back(up);
    t.host_down_.push_back(down);
  }
  for (uint32_t l = 0; l < t.leaves_; ++l) {
    for (uint32_t s = 0; s < spec.spines; ++s) {
      const std::string name = "leaf" + std::to_string(l) + "-spine" + std::to_string(s);
      EMBER_ASSIGN_OR_RETURN(LinkId up, add(name + " up", spec.spine_link_bytes_per_s));
      EMBER_ASSIGN_OR_RETURN(LinkId down, add(name + " down", spec.spine_link_bytes_per_s));
      t.leaf_up_.push_back(up);
      t.leaf_down_.push_back(down);
    }
  }
  EMBER_ASSIGN_OR_RETURN(t.cloud_, add("cloud", spec.cloud_bytes_per_s));
  if (spec.pcie_bytes_per_s > 0) {
    for (uint32_t h = 0; h < spec.hosts; ++h) {
      for (uint32_t g = 0; g < spec.gpus_per_host; ++g) {
        EMBER_ASSIGN_OR_RETURN(LinkId pcie, add("host" + std::to_string(h) + " gpu" + std::to_string(g) + " pcie",
                                                spec.pcie_bytes_per_s));
        t.pcie_.push_back(pcie);
      }
    }
  }
  return t;
}

Status Topology::check_host(uint32_t host) const {
  if (host < spec_.hosts) return Status::OK();
  return not_found("topology: host " + std::to_string(host) + " does not exist (" + std::to_string(spec_.hosts) +
                      " hosts)");
}

uint32_t Topology::spine_for(uint32_t a, uint32_t b) const {
  // A fixed mix of the two hosts (splitmix64's finaliser): the same pair always takes the same spine.
  uint64_t x = (static_cast<uint64_t>(a) << 32) | b;
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<uint32_t>(x % spec_.spines);
}

Result<std::vector<LinkId>> Topology::between(uint32_t from, uint32_t to) const {
  EMBER_RETURN_IF_ERROR(check_host(from));
  EMBER_RETURN_IF_ERROR(check_host(to));
  if (from == to) return std::vector<LinkId>{};
  const uint32_t a = leaf_of(from), b = leaf_of(to);
  if (a == b) return std::vector<LinkId>{host_up_[from], host_down_[to]};
  const uint32_t s = spine_for(from, to);
  return std::vector<LinkId>{host_up_[from], leaf_up_[a * spec_.spines + s], leaf_down_[b * spec_.spines + s],
                             host_down_[to]};
}

Result<std::vector<LinkId>> Topology::from_cloud(uint32_t host) const {
  EMBER_RETURN_IF_ERROR(check_host(host));
  const uint32_t s = spine_for(spec_.hosts, host);  // the cloud as one more endpoint
  return std::vector<LinkId>{cloud_, leaf_down_[leaf_of(host) * spec_.spines + s], host_down_[host]};
}

Result<std::vector<LinkId>> Topology::to_gpu(uint32_t host, uint32_t gpu) const {
  EMBER_RETURN_IF_ERROR(check_host(host));
  if (gpu >= spec_.gpus_per_host) {
    return not_found("topology: host " + std::to_string(host) + " has no GPU " + std::to_string(gpu) + " (" +
                        std::to_string(spec_.gpus_per_host) + " per host)");
  }
  if (pcie_.empty()) return std::vector<LinkId>{};
  return std::vector<LinkId>{pcie_[host * spec_.gpus_per_host + gpu]};
}

}  // namespace ember::sim
