// Topology: the simulated data centre's links in a FlowNetwork, and the path bytes take between two
// hosts, from cloud storage to a host, and from a host into one of its GPUs (issue 36;
// docs/design/simulator.md). Flashpoint's cluster is TopologySpec::flashpoint(): 200 hosts of 8
// GPUs, 20 hosts per leaf, 50 Gbit/s between a host and its leaf, 100 Gbit/s between a leaf and a
// spine, one cloud link of 2,203 Mbit/s that every download shares (its measured rate; the digest's
// §3). Flashpoint does not say how many spines; the default is one (every leaf's uplink is one
// 100 Gbit/s link), a choice the spec states.
//
// Links are one-way (a full-duplex cable is two links), so a host receiving does not slow its own
// sending. Paths: within a host, none (a copy in host memory); within a leaf, the sender's uplink
// and the receiver's downlink; across leaves, also the sender's leaf up to a spine and that spine
// down to the receiver's leaf, the spine chosen by hashing the two hosts (ECMP, deterministic);
// from the cloud, the cloud link (attached above the spines), a spine down to the host's leaf, the
// host's downlink; into a GPU, that GPU's PCIe link (host to device) when the spec gives one.
//
// Errors: invalid_argument for a spec with no host, no GPU per host, no host per leaf, no spine, or
// a rate not above 0 (the PCIe rate may be 0: no link), naming the field; not_found for a host
// or GPU that does not exist. Plain and single-threaded, like the network it fills.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.hpp"
#include "sim/flow_network.hpp"

namespace ember::sim {

struct TopologySpec {
  uint32_t hosts = 200;
  uint32_t gpus_per_host = 8;
  uint32_t hosts_per_leaf = 20;  // the last leaf may hold fewer
  uint32_t spines = 1;
  double host_link_bytes_per_s = 50e9 / 8;   // a host to its leaf, each way
  double spine_link_bytes_per_s = 100e9 / 8;  // a leaf to a spine, each way
  double cloud_bytes_per_s = 2203e6 / 8;     // cloud storage into the data centre
  double pcie_bytes_per_s = 0;               // host to one GPU; 0: no link (not modelled)

  /// Flashpoint's 1,600 GPUs (above).
  static TopologySpec flashpoint() { return {}; }
};

class Topology {
 public:
  /// Adds the spec's links to `net` (which must outlive the topology's paths' use).
  static Result<Topology> build(FlowNetwork& net, const TopologySpec& spec);

  const TopologySpec& spec() const { return spec_; }
  uint32_t leaves() const { return leaves_; }
  uint32_t leaf_of(uint32_t host) const { return host / spec_.hosts_per_leaf; }

  /// The links bytes cross from host `from` to host `to` (empty when they are the same host).
  Result<std::vector<LinkId>> between(uint32_t from, uint32_t to) const;
  /// The links a download from cloud storage crosses to `host`.
  Result<std::vector<LinkId>> from_cloud(uint32_t host) const;
  /// The link from `host`'s memory into its GPU `gpu` (empty when PCIe is not modelled).
  Result<std::vector<LinkId>> to_gpu(uint32_t host, uint32_t gpu) const;

 private:
  uint32_t spine_for(uint32_t a, uint32_t b) const;
  Status check_host(uint32_t host) const;

  TopologySpec spec_;
  uint32_t leaves_ = 0;
  std::vector<LinkId> host_up_, host_down_;      // by host
  std::vector<LinkId> leaf_up_, leaf_down_;      // by leaf * spines + spine
  std::vector<LinkId> pcie_;                     // by host * gpus_per_host + gpu
  LinkId cloud_ = 0;
};

}  // namespace ember::sim
