// SimCluster (sim/sim_cluster.hpp): the cluster manager's own classes on the simulated clock. Cold
// starts whose times the network gives by hand, requests held and run in order, downloads sharing
// the cloud link, a model no node can hold, and the same run twice.
#include "sim/sim_cluster.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace ember::sim {
namespace sim_cluster_test {

ModelCosts model(const std::string& name, uint64_t bytes, double exec_us) {
  gpu::ModelProfile p;
  p.model = name;
  p.weights_bytes = bytes;
  p.batches = {1};
  gpu::LayerCost l;
  l.name = "all";
  l.bytes = bytes;
  l.exec_us = {exec_us};
  l.out_bytes = {64};
  p.layers.push_back(l);
  return *ModelCosts::from_profile(p);
}

/// Two hosts of one GPU on one leaf; a 100 MB/s cloud link, 1 GB/s host links, no PCIe modelled.
TopologySpec small() {
  TopologySpec t;
  t.hosts = 2;
  t.gpus_per_host = 1;
  t.hosts_per_leaf = 2;
  t.cloud_bytes_per_s = 100e6;
  t.host_link_bytes_per_s = 1e9;
  t.spine_link_bytes_per_s = 1e9;
  return t;
}

RequestTrace trace(const std::string& csv) {
  auto t = parse_request_trace("time_s,model\n" + csv, "trace.csv");
  EXPECT_TRUE(t.ok()) << t.error().message();
  return *t;
}

TEST(SimCluster, AColdStartWaitsForTheDownloadAndHeldRequestsRunInOrder) {
  auto c = SimCluster::create(small(), {model("m", 100'000'000, 10'000)});
  ASSERT_TRUE(c.ok()) << c.error().message();
  auto r = (*c)->run(trace("0,m\n0,m\n2,m\n"));
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->requests.size(), 3u);
  // 100 MB over the 100 MB/s cloud link: ready at 1 s; the two held requests run one after the other.
  EXPECT_TRUE(r->requests[0].cold);
  EXPECT_EQ(r->requests[0].start_us, 1'000'000u);
  EXPECT_EQ(r->requests[0].end_us, 1'010'000u);
  EXPECT_TRUE(r->requests[1].cold);
  EXPECT_EQ(r->requests[1].start_us, 1'010'000u);
  EXPECT_EQ(r->requests[1].end_us, 1'020'000u);
  // Warm at 2 s.
  EXPECT_FALSE(r->requests[2].cold);
  EXPECT_EQ(r->requests[2].start_us, 2'000'000u);
  EXPECT_EQ(r->requests[2].end_us, 2'010'000u);
  ASSERT_EQ(r->cold_starts.size(), 1u);
  EXPECT_EQ(r->cold_starts[0].tier, "repository");
  EXPECT_EQ(r->cold_starts[0].ready_us, 1'000'000u);
  for (const auto& q : r->requests) EXPECT_FALSE(q.lost);
  EXPECT_EQ(r->end_us, 2'010'000u);
  EXPECT_GT(r->events, 3u);
}

TEST(SimCluster, TwoColdStartsShareTheCloudLink) {
  auto c = SimCluster::create(small(), {model("a", 100'000'000, 1'000), model("b", 100'000'000, 1'000)});
  ASSERT_TRUE(c.ok());
  auto r = (*c)->run(trace("0,a\n0,b\n"));
  ASSERT_TRUE(r.ok()) << r.error().message();
  // Both downloads at once: 50 MB/s each, both ready at 2 s.
  ASSERT_EQ(r->cold_starts.size(), 2u);
  for (const auto& cs : r->cold_starts) EXPECT_EQ(cs.ready_us, 2'000'000u) << cs.model;
  EXPECT_EQ(r->requests[0].end_us, 2'001'000u);
  EXPECT_EQ(r->requests[1].end_us, 2'001'000u);
}

TEST(SimCluster, AModelNoNodeCanHoldLosesItsRequests) {
  SimOptions o;
  o.device_bytes = 50'000'000;
  auto c = SimCluster::create(small(), {model("big", 100'000'000, 1'000)}, o);
  ASSERT_TRUE(c.ok());
  auto r = (*c)->run(trace("0,big\n1,big\n"));
  ASSERT_TRUE(r.ok()) << r.error().message();
  for (const auto& q : r->requests) {
    EXPECT_TRUE(q.lost);
    EXPECT_TRUE(q.cold);
  }
  EXPECT_TRUE(r->cold_starts.empty());
}

TEST(SimCluster, TheSameInputsGiveTheSameRun) {
  auto once = [] {
    auto c = SimCluster::create(small(), {model("a", 30'000'000, 2'500), model("b", 70'000'000, 800)});
    std::string csv;
    for (int i = 0; i < 200; ++i) csv += std::to_string(i * 0.037) + "," + (i % 3 ? "a" : "b") + "\n";
    auto r = (*c)->run(trace(csv));
    EXPECT_TRUE(r.ok());
    std::vector<uint64_t> out;
    for (const auto& q : r->requests) {
      out.push_back(q.start_us);
      out.push_back(q.end_us);
      EXPECT_FALSE(q.lost);
      EXPECT_GE(q.start_us, q.arrival_us);
    }
    return out;
  };
  EXPECT_EQ(once(), once());
}

TEST(SimCluster, TheAutoscalerAddsReplicasFromAPeersCacheUnderABurst) {
  // One replica runs 10 requests a second; 20 a second for 30 s arrive. The live manager's
  // autoscaler (ongoing_requests, its defaults but chain_scale_up off) adds replicas on the other
  // hosts, whose bytes come from host0's cache over the 1 GB/s host links, not the 100 MB/s cloud
  // link.
  TopologySpec t = small();
  t.hosts = 4;
  t.hosts_per_leaf = 4;
  SimOptions o;
  o.autoscaler.enabled = true;
  o.autoscaler.chain_scale_up = false;
  std::string csv;
  for (int i = 0; i < 600; ++i) csv += std::to_string(i * 0.05) + ",m\n";
  auto run = [&] {
    auto c = SimCluster::create(t, {model("m", 100'000'000, 100'000)}, o);
    EXPECT_TRUE(c.ok());
    auto r = (*c)->run(trace(csv));
    EXPECT_TRUE(r.ok()) << r.error().message();
    return std::move(*r);
  };
  const SimResult r = run();
  ASSERT_GE(r.cold_starts.size(), 2u);
  EXPECT_EQ(r.cold_starts[0].tier, "repository");
  for (size_t i = 1; i < r.cold_starts.size(); ++i) {
    EXPECT_EQ(r.cold_starts[i].tier, "peer") << i;
    // 100 MB from host0's cache; when three pull at once they share its 1 GB/s uplink (no chains):
    // 0.3 s each, against 1 s from the cloud.
    EXPECT_LE(r.cold_starts[i].ready_us - r.cold_starts[i].started_us, 300'000u) << i;
  }
  EXPECT_GE(r.max_replicas, 2u);
  EXPECT_GT(r.replica_seconds, 30.0);
  uint64_t late = 0;
  for (const auto& q : r.requests) {
    EXPECT_FALSE(q.lost);
    EXPECT_GE(q.start_us, q.arrival_us);
    late += q.end_us - q.arrival_us > 5'000'000;
  }
  // One replica alone would end 30 s behind; with the others the queue drains.
  EXPECT_LT(r.end_us, 45'000'000u);
  const SimResult again = run();
  ASSERT_EQ(again.requests.size(), r.requests.size());
  for (size_t i = 0; i < r.requests.size(); ++i) EXPECT_EQ(again.requests[i].end_us, r.requests[i].end_us) << i;
  EXPECT_EQ(again.replica_seconds, r.replica_seconds);
  EXPECT_EQ(again.events, r.events);
  std::printf("  %zu cold starts, at most %u replicas, %.0f replica-s, %llu of 600 over 5 s, done at %.1f s\n",
              r.cold_starts.size(), r.max_replicas, r.replica_seconds, static_cast<unsigned long long>(late),
              r.end_us / 1e6);
}

/// Three hosts, autoscaler on with a floor of three replicas: the first tick places all three.
SimOptions three_at_once(bool chain) {
  SimOptions o;
  o.autoscaler.enabled = true;
  o.autoscaler.chain_scale_up = chain;
  o.autoscale.min_replicas = 3;
  o.autoscale.max_replicas = 3;
  return o;
}

/// small() with three hosts: a model of 100 MB placed on all three at the first tick, one request.
Result<SimResult> three_at_once_run(bool chain) {
  TopologySpec t = small();
  t.hosts = 3;
  t.hosts_per_leaf = 3;
  auto c = SimCluster::create(t, {model("m", 100'000'000, 1'000)}, three_at_once(chain));
  if (!c.ok()) return c.error();
  return (*c)->run(trace("5,m\n"));
}

TEST(SimCluster, AChainCarriesOneDownloadToEveryHopCutThrough) {
  auto r = three_at_once_run(true);
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->cold_starts.size(), 3u);
  EXPECT_EQ(r->chains, 1u);
  // One flow over the cloud link and every hop's links: 100 MB at the cloud's 100 MB/s, 1 s; hop k
  // ends k chunks (1 MiB at the chain's 100 MB/s: 10,486 us) after the first.
  const uint64_t started = r->cold_starts[0].started_us;
  std::vector<std::string> tiers;
  for (size_t k = 0; k < 3; ++k) {
    const auto& cs = r->cold_starts[k];
    EXPECT_EQ(cs.started_us, started);
    EXPECT_NE(cs.transfer_id, 0u);
    EXPECT_EQ(cs.transfer_id, r->cold_starts[0].transfer_id);
    EXPECT_NEAR(static_cast<double>(cs.ready_us - started), 1e6 + 10'486 * static_cast<double>(k), 2) << k;
    tiers.push_back(cs.tier);
  }
  EXPECT_EQ(tiers, (std::vector<std::string>{"repository", "peer", "peer"}));
  EXPECT_EQ(r->reserved_bytes_left, 0u);
  EXPECT_FALSE(r->requests[0].lost);
  EXPECT_FALSE(r->requests[0].cold);
}

TEST(SimCluster, WithoutChainsTheSameThreeDownloadsSplitTheCloudLink) {
  auto r = three_at_once_run(false);
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->cold_starts.size(), 3u);
  EXPECT_EQ(r->chains, 0u);
  for (const auto& cs : r->cold_starts) {
    EXPECT_EQ(cs.tier, "repository");
    EXPECT_EQ(cs.transfer_id, 0u);
    EXPECT_EQ(cs.ready_us - cs.started_us, 3'000'000u);  // 33 MB/s each
  }
}

TEST(SimCluster, ASmallTraceKeepsTheInvariants) {
  // Eight hosts of two GPUs, three models, bursts and idle gaps, the autoscaler scaling up and to
  // zero, chains on: every request answered after its arrival or counted lost, serving replicas
  // within max_replicas, at most one replica of a model per host, no reservation left behind.
  TopologySpec t = small();
  t.hosts = 8;
  t.gpus_per_host = 2;
  t.hosts_per_leaf = 4;
  SimOptions o;
  o.autoscaler.enabled = true;
  o.autoscaler.interval_us = 250'000;
  o.autoscaler.look_back_us = 2'000'000;
  o.autoscale.max_replicas = 4;
  o.autoscale.idle_timeout_us = 3'000'000;
  o.autoscale.downscale_delay_us = 1'000'000;
  o.autoscale.upscale_delay_us = 250'000;
  std::string csv;
  uint64_t x = 12345;  // a fixed linear congruential sequence: bursts of each model in turn
  for (int burst = 0; burst < 12; ++burst) {
    const char* name = burst % 3 == 0 ? "a" : burst % 3 == 1 ? "b" : "c";
    const double begin = burst * 4.0;
    for (int i = 0; i < 60; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      csv += std::to_string(begin + static_cast<double>(x >> 40) / static_cast<double>(1ull << 24) * 2.0) + "," + name + "\n";
    }
  }
  auto c = SimCluster::create(t, {model("a", 60'000'000, 40'000), model("b", 150'000'000, 90'000),
                                  model("c", 20'000'000, 15'000)}, o);
  ASSERT_TRUE(c.ok()) << c.error().message();
  const RequestTrace tr = trace(csv);
  auto r = (*c)->run(tr);
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->requests.size(), tr.requests.size());
  for (size_t i = 0; i < r->requests.size(); ++i) {
    const auto& q = r->requests[i];
    EXPECT_EQ(q.arrival_us, tr.requests[i].at_us);
    if (q.lost) continue;
    EXPECT_GE(q.start_us, q.arrival_us) << i;
    EXPECT_GT(q.end_us, q.start_us) << i;
    EXPECT_LT(q.host, t.hosts) << i;
  }
  uint32_t most = 0;
  for (const auto& s : r->samples) {
    for (size_t m = 0; m < s.replicas.size(); ++m) {
      EXPECT_LE(s.replicas[m] - s.draining[m], o.autoscale.max_replicas) << s.at_us;
      EXPECT_LE(s.replicas[m], t.hosts) << s.at_us;
      most = std::max(most, s.replicas[m]);
    }
  }
  EXPECT_GE(most, 2u);  // the bursts did scale up
  for (size_t m = 0; m < 3; ++m) {  // and each model went back to zero between its bursts (8 s idle)
    bool up = false, back_to_zero = false;
    for (const auto& s : r->samples) {
      up = up || s.replicas[m] > 0;
      back_to_zero = back_to_zero || (up && s.replicas[m] == 0);
    }
    EXPECT_TRUE(back_to_zero) << m;
  }
  EXPECT_EQ(r->reserved_bytes_left, 0u);
  uint64_t lost = 0;
  for (const auto& q : r->requests) lost += q.lost;
  EXPECT_EQ(lost, 0u);
  std::printf("  %zu requests, %zu cold starts, %u chains, at most %u replicas, %.0f replica-s\n", r->requests.size(),
              r->cold_starts.size(), r->chains, r->max_replicas, r->replica_seconds);
}

TEST(SimCluster, WarmReplicasAreBoundBeforeTheFirstRequest) {
  TopologySpec t = small();
  SimOptions o;
  o.warm_replicas = 2;
  auto c = SimCluster::create(t, {model("m", 100'000'000, 10'000)}, o);
  ASSERT_TRUE(c.ok());
  auto r = (*c)->run(trace("0,m\n0,m\n"));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(r->cold_starts.empty());
  for (const auto& q : r->requests) {
    EXPECT_FALSE(q.cold);
    EXPECT_EQ(q.start_us, 0u);  // one on each warm replica, at once
  }
  EXPECT_NE(r->requests[0].host, r->requests[1].host);
  EXPECT_EQ(r->samples.front().replicas, std::vector<uint32_t>{2});
}

TEST(SimCluster, DecisionTimeDelaysWhatTheDecisionSent) {
  SimOptions o;
  uint64_t fake_us = 0;
  o.decision_clock = [&fake_us] { return fake_us += 500; };  // every decision takes 500 us
  auto c = SimCluster::create(small(), {model("m", 100'000'000, 10'000)}, o);
  ASSERT_TRUE(c.ok());
  auto r = (*c)->run(trace("0,m\n"));
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->cold_starts.size(), 1u);
  EXPECT_EQ(r->cold_starts[0].started_us, 500u);  // the placement's load leaves 0.5 ms later
  EXPECT_EQ(r->cold_starts[0].ready_us, 1'000'500u);
  EXPECT_EQ(r->requests[0].start_us, 1'000'500u);
  EXPECT_EQ(r->decisions, 2u);  // the placement and the load's answer
  EXPECT_EQ(r->decision_us, 1'000u);
}

TEST(SimCluster, AHeldRequestIsLostAfterTheColdStartTimeout) {
  SimOptions o;
  o.cold_start_timeout_us = 500'000;  // the 1 s download takes longer
  auto c = SimCluster::create(small(), {model("m", 100'000'000, 10'000)}, o);
  ASSERT_TRUE(c.ok());
  auto r = (*c)->run(trace("0,m\n2,m\n"));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->requests[0].lost);
  EXPECT_FALSE(r->requests[1].lost);  // the replica came up meanwhile
  EXPECT_EQ(r->requests[1].end_us, 2'010'000u);
}

/// Four layers of 100 MB, 1 ms each at batch 1, 1 MB out of each.
ModelCosts four_layers(const std::string& name) {
  gpu::ModelProfile p;
  p.model = name;
  p.batches = {1};
  for (int i = 0; i < 4; ++i) p.layers.push_back({"l" + std::to_string(i), 100'000'000, "", {1000.0}, {1'000'000}});
  p.weights_bytes = 400'000'000;
  return *ModelCosts::from_profile(p);
}

TEST(SimCluster, APartitionedColdStartServesThroughItsStagesThenCompletesIntoReplicas) {
  // A fast cloud and 100 MB/s host links: two nodes fetching half each are twice as quick as one
  // fetching the whole.
  TopologySpec t = small();
  t.cloud_bytes_per_s = 1e9;
  t.host_link_bytes_per_s = 100e6;
  SimOptions o;
  o.load_replicas = 2;  // `load --replicas 2` at time 0, as the repository API's
  o.autoscaler.partition_stages = 4;
  o.autoscaler.partition_bandwidth = 100e6;
  o.autoscaler.completion_rate = 10e6;  // completions paced to 10 MB/s: 20 s for the other half
  auto c = SimCluster::create(t, {four_layers("p")}, o);
  ASSERT_TRUE(c.ok()) << c.error().message();
  auto r = (*c)->run(trace("0,p\n10,p\n30,p\n"));
  ASSERT_TRUE(r.ok()) << r.error().message();
  // Two stages of two layers, 200 MB each over its own host link: both bound at 2 s.
  ASSERT_EQ(r->cold_starts.size(), 2u);
  for (const auto& cs : r->cold_starts) {
    EXPECT_EQ(cs.tier, "stage");
    EXPECT_EQ(cs.bytes, 200'000'000u);
    EXPECT_EQ(cs.ready_us, 2'000'000u);
  }
  EXPECT_NE(r->cold_starts[0].node, r->cold_starts[1].node);
  // The held request runs through the pipeline: 2 ms on the first stage, its 1 MB activation over
  // both host links beside the paced completions (90 MB/s left: 11,111 us), 2 ms on the second.
  EXPECT_TRUE(r->requests[0].cold);
  EXPECT_EQ(r->requests[0].start_us, 2'000'000u);
  EXPECT_EQ(r->requests[0].end_us, 2'015'111u);
  EXPECT_EQ(r->requests[1].end_us - r->requests[1].arrival_us, 15'111u);  // still the pipeline at 10 s
  // At 22 s both members hold the whole model: replicas, 4 ms a request.
  EXPECT_EQ(r->requests[2].start_us, 30'000'000u);
  EXPECT_EQ(r->requests[2].end_us, 30'004'000u);
  EXPECT_EQ(r->pipeline_requests, 2u);
  EXPECT_EQ(r->samples.back().replicas, std::vector<uint32_t>{2});
  EXPECT_EQ(r->samples[20].replicas, std::vector<uint32_t>{0});  // at 21 s: members, not yet replicas
  EXPECT_EQ(r->samples[22].replicas, std::vector<uint32_t>{2});  // at 23 s
  EXPECT_EQ(r->reserved_bytes_left, 0u);
  for (const auto& q : r->requests) EXPECT_FALSE(q.lost);
}

TEST(SimCluster, WithPartitioningOffTheSameLoadComesUpWhole) {
  TopologySpec t = small();
  t.cloud_bytes_per_s = 1e9;
  t.host_link_bytes_per_s = 100e6;
  SimOptions o;
  o.load_replicas = 2;
  o.autoscaler.partition_stages = 1;  // never
  auto c = SimCluster::create(t, {four_layers("p")}, o);
  ASSERT_TRUE(c.ok());
  auto r = (*c)->run(trace("0,p\n"));
  ASSERT_TRUE(r.ok()) << r.error().message();
  // One chain from the repository through both nodes, 400 MB at 100 MB/s: 4 s (the second hop a
  // chunk later); the request runs whole on the first.
  ASSERT_EQ(r->cold_starts.size(), 2u);
  EXPECT_EQ(r->cold_starts[0].tier, "repository");
  EXPECT_EQ(r->requests[0].end_us, r->cold_starts[0].ready_us + 4'000);
  EXPECT_GE(r->cold_starts[0].ready_us, 4'000'000u);
  EXPECT_EQ(r->pipeline_requests, 0u);
}

TEST(SimCluster, AFailedHostsRequestsAreRetriedOnTheOtherReplica) {
  SimOptions o;
  o.warm_replicas = 2;                // one replica on each host
  o.failures = {{.host = 0, .at_us = 995'000}};  // host0 dies mid-request
  auto c = SimCluster::create(small(), {model("m", 100'000'000, 10'000)}, o);
  ASSERT_TRUE(c.ok());
  auto r = (*c)->run(trace("0.99,m\n0.99,m\n0.99,m\n0.99,m\n"));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->failures, 1u);
  // Requests 0 and 2 were on host0 (running and queued): sent again to host1, after its own two.
  for (size_t i : {0u, 2u}) {
    EXPECT_EQ(r->requests[i].retries, 1u) << i;
    EXPECT_EQ(r->requests[i].host, 1u) << i;
  }
  EXPECT_EQ(r->requests[0].start_us, 1'010'000u);
  EXPECT_EQ(r->requests[0].end_us, 1'020'000u);
  EXPECT_EQ(r->requests[2].end_us, 1'030'000u);
  EXPECT_EQ(r->requests[1].retries + r->requests[3].retries, 0u);
  for (const auto& q : r->requests) EXPECT_FALSE(q.lost);
  EXPECT_EQ(r->reserved_bytes_left, 0u);
}

TEST(SimCluster, AHostLostDuringItsDownloadIsReplacedAndTheHeldRequestWaitsForTheReplacement) {
  SimOptions o;
  o.failures = {{.host = 0, .at_us = 500'000}};  // half way through the first download
  auto c = SimCluster::create(small(), {model("m", 100'000'000, 10'000)}, o);
  ASSERT_TRUE(c.ok());
  auto r = (*c)->run(trace("0,m\n"));
  ASSERT_TRUE(r.ok()) << r.error().message();
  // The download to host0 stopped; the replacement on host1 takes the whole cloud link from 0.5 s.
  ASSERT_EQ(r->cold_starts.size(), 1u);
  EXPECT_EQ(r->cold_starts[0].node, "host1");
  EXPECT_EQ(r->cold_starts[0].started_us, 500'000u);
  EXPECT_EQ(r->cold_starts[0].ready_us, 1'500'000u);
  EXPECT_FALSE(r->requests[0].lost);
  EXPECT_EQ(r->requests[0].end_us, 1'510'000u);
  EXPECT_EQ(r->reserved_bytes_left, 0u);
  auto bad = SimCluster::create(small(), {model("m", 1000, 10)}, SimOptions{.failures = {{.host = 7, .at_us = 0}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("host7"), std::string::npos) << bad.error().message();
}

TEST(SimCluster, RefusesWhatItCannotRun) {
  auto c = SimCluster::create(small(), {model("m", 1000, 10)});
  ASSERT_TRUE(c.ok());
  auto r = (*c)->run(trace("0,other\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("the trace asks for model 'other', which the cluster lacks"), std::string::npos);
  auto twice = SimCluster::create(small(), {model("m", 1000, 10), model("m", 1000, 10)});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message().find("given twice"), std::string::npos);
  auto empty = SimCluster::create(small(), {model("m", 0, 10)});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message().find("no weights"), std::string::npos);
}

}  // namespace sim_cluster_test
}  // namespace ember::sim
