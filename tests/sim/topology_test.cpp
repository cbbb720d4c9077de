// Topology (sim/topology.hpp): Flashpoint's cluster's links, the paths between hosts, from the cloud
// and into a GPU, and what sharing them gives: a download storm splits the cloud link, a leaf's
// uplink bounds what leaves it, a host receiving does not slow its sending.
#include "sim/topology.hpp"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace ember::sim {
namespace topology_test {

TEST(Topology, FlashpointsClusterHasItsLinks) {
  FlowNetwork net;
  auto t = Topology::build(net, TopologySpec::flashpoint());
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(t->leaves(), 10u);
  EXPECT_EQ(t->spec().hosts * t->spec().gpus_per_host, 1600u);
  // 200 hosts up and down, 10 leaves up and down to one spine, the cloud link; no PCIe links.
  auto last = net.add_link("probe", 1);
  EXPECT_EQ(*last, 200u * 2 + 10 * 2 + 1);
  EXPECT_TRUE(t->to_gpu(0, 7)->empty());
}

TEST(Topology, PathsWithinAHostALeafAndAcrossLeaves) {
  FlowNetwork net;
  TopologySpec spec;
  spec.hosts = 6;
  spec.hosts_per_leaf = 3;
  spec.gpus_per_host = 2;
  spec.pcie_bytes_per_s = 25e9;
  auto t = Topology::build(net, spec);
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_TRUE(t->between(1, 1)->empty());
  const auto same_leaf = *t->between(0, 2);
  ASSERT_EQ(same_leaf.size(), 2u);
  EXPECT_EQ(net.link_name(same_leaf[0]), "host0 up");
  EXPECT_EQ(net.link_name(same_leaf[1]), "host2 down");
  const auto across = *t->between(1, 4);
  ASSERT_EQ(across.size(), 4u);
  EXPECT_EQ(net.link_name(across[0]), "host1 up");
  EXPECT_EQ(net.link_name(across[1]), "leaf0-spine0 up");
  EXPECT_EQ(net.link_name(across[2]), "leaf1-spine0 down");
  EXPECT_EQ(net.link_name(across[3]), "host4 down");
  const auto cloud = *t->from_cloud(5);
  ASSERT_EQ(cloud.size(), 3u);
  EXPECT_EQ(net.link_name(cloud[0]), "cloud");
  EXPECT_EQ(net.link_name(cloud[1]), "leaf1-spine0 down");
  EXPECT_EQ(net.link_name(cloud[2]), "host5 down");
  const auto gpu = *t->to_gpu(3, 1);
  ASSERT_EQ(gpu.size(), 1u);
  EXPECT_EQ(net.link_name(gpu[0]), "host3 gpu1 pcie");
}

TEST(Topology, ManySpinesSpreadPairsAndEachPairKeepsItsSpine) {
  FlowNetwork net;
  TopologySpec spec;
  spec.hosts = 40;
  spec.spines = 4;
  auto t = Topology::build(net, spec);
  ASSERT_TRUE(t.ok());
  std::set<std::string> used;
  for (uint32_t b = 20; b < 40; ++b) {
    const auto p = *t->between(0, b);
    used.insert(net.link_name(p[1]));
    EXPECT_EQ(p, *t->between(0, b));
  }
  EXPECT_GT(used.size(), 1u);  // 20 pairs over 4 spines
}

TEST(Topology, ADownloadStormSharesTheCloudLink) {
  // 20 hosts of one leaf download at once: the cloud link (2,203 Mbit/s) is the bottleneck, split 20
  // ways; a copy between two hosts of another leaf meanwhile gets its whole 50 Gbit/s.
  FlowNetwork net;
  auto t = Topology::build(net, TopologySpec::flashpoint());
  ASSERT_TRUE(t.ok());
  std::vector<FlowId> downloads;
  for (uint32_t h = 0; h < 20; ++h) downloads.push_back(*net.start(*t->from_cloud(h), 499e6, 0));
  const FlowId peer = *net.start(*t->between(20, 21), 499e6, 0);
  for (FlowId d : downloads) EXPECT_DOUBLE_EQ(net.rate(d), 2203e6 / 8 / 20);
  EXPECT_DOUBLE_EQ(net.rate(peer), 50e9 / 8);
  // The peer copy ends first (499 MB at 6.25 GB/s: 79.84 ms); then CodeBERT's 499 MB to 20 hosts
  // over the cloud link, 20 x 499e6 B at 275.4 MB/s: 36.24 s, all at once.
  EXPECT_EQ(*net.next_completion_us(), 79'840u);
  EXPECT_EQ(*net.finished(79'840), std::vector<FlowId>{peer});
  const double storm_s = 20 * 499e6 / (2203e6 / 8);
  EXPECT_NEAR(static_cast<double>(*net.next_completion_us()) / 1e6, storm_s, 1e-6);
  EXPECT_EQ(net.finished(*net.next_completion_us())->size(), 20u);
}

TEST(Topology, ALeafsUplinkBoundsWhatLeavesItAndReceivingDoesNotSlowSending) {
  FlowNetwork net;
  auto t = Topology::build(net, TopologySpec::flashpoint());
  ASSERT_TRUE(t.ok());
  // Four hosts of leaf 0 send to four hosts of leaf 1: 4 x 50 Gbit/s over one 100 Gbit/s uplink.
  std::vector<FlowId> out;
  for (uint32_t h = 0; h < 4; ++h) out.push_back(*net.start(*t->between(h, 20 + h), 1e12, 0));
  for (FlowId f : out) EXPECT_DOUBLE_EQ(net.rate(f), 100e9 / 8 / 4);
  // Host 0 also receives from host 5 (same leaf): its downlink is not its uplink.
  const FlowId in = *net.start(*t->between(5, 0), 1e12, 0);
  EXPECT_DOUBLE_EQ(net.rate(in), 50e9 / 8);
  EXPECT_DOUBLE_EQ(net.rate(out[0]), 100e9 / 8 / 4);
}

TEST(Topology, RefusesASpecItCannotBuildAndHostsThatDoNotExist) {
  FlowNetwork net;
  for (auto [field, mutate] :
       std::vector<std::pair<std::string, void (*)(TopologySpec&)>>{
           {"hosts", [](TopologySpec& s) { s.hosts = 0; }},
           {"gpus_per_host", [](TopologySpec& s) { s.gpus_per_host = 0; }},
           {"hosts_per_leaf", [](TopologySpec& s) { s.hosts_per_leaf = 0; }},
           {"spines", [](TopologySpec& s) { s.spines = 0; }},
           {"host_link", [](TopologySpec& s) { s.host_link_bytes_per_s = 0; }},
           {"spine_link", [](TopologySpec& s) { s.spine_link_bytes_per_s = -1; }},
           {"cloud", [](TopologySpec& s) { s.cloud_bytes_per_s = 1.0 / 0.0; }},
           {"pcie", [](TopologySpec& s) { s.pcie_bytes_per_s = -5; }}}) {
    TopologySpec spec;
    mutate(spec);
    auto t = Topology::build(net, spec);
    ASSERT_FALSE(t.ok()) << field;
    EXPECT_EQ(t.error().code(), ErrorCode::invalid_argument) << field;
    EXPECT_NE(t.error().message().find(field), std::string::npos) << t.error().message();
  }
  TopologySpec small;
  small.hosts = 5;
  small.hosts_per_leaf = 2;  // leaves of 2, 2 and 1
  auto t = Topology::build(net, small);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->leaves(), 3u);
  EXPECT_EQ(t->between(0, 5).error().code(), ErrorCode::not_found);
  EXPECT_EQ(t->from_cloud(9).error().code(), ErrorCode::not_found);
  EXPECT_EQ(t->to_gpu(4, 8).error().code(), ErrorCode::not_found);
  EXPECT_EQ(t->between(4, 0)->size(), 4u);
}

}  // namespace topology_test
}  // namespace ember::sim
