// LoadPlanner: placement and sourcing as plans (plain C++): the node with room, why none fits,
// chains for several receivers that lack the bytes, peers before the repository.
#include "actors/cluster/load_planner.hpp"

#include <gtest/gtest.h>

#include <set>

#include "model/model_profile.hpp"

namespace ember {
namespace load_planner_test {

constexpr uint64_t MiB = 1ull << 20;

struct Fixture {
  ModelRegistry registry;
  Membership members;
  ChainController chains;
  LoadPlanner planner{registry, members, chains};
  Fixture() {
    planner.set_repository({"repo", 9000});
    (void)registry.apply_scan("", {RepositoryEntry{{"m", 1}, "", "{}", 100 * MiB, ""}});
  }
  uint64_t node(const std::string& name, uint64_t device_mib, bool caches = false) {
    node_report r;
    r.name = name;
    r.data = {name, 7000};
    r.devices.push_back({"sim0", device_mib * MiB, 0});
    if (caches) r.cached.push_back({"m", 1});
    return members.join(r, {});
  }
  ModelVersion& v() { return *registry.find({"m", 1}); }
};

TEST(LoadPlanner, AReplicaGoesToTheNodeWithRoomAndPullsFromTheRepositoryWhenNoPeerHoldsIt) {
  Fixture f;
  f.node("small", 100);  // 100 MiB of weights need 125 MiB with headroom
  const uint64_t big = f.node("big", 1024);
  auto plans = f.planner.place(f.v(), 0);
  ASSERT_TRUE(plans.ok()) << plans.error().message();
  ASSERT_EQ(plans->loads.size(), 1u);
  EXPECT_EQ(plans->loads[0].node, big);
  EXPECT_EQ(plans->loads[0].transfer_id, 0u);
  ASSERT_EQ(plans->loads[0].sources.size(), 1u);
  EXPECT_EQ(plans->loads[0].sources[0].kind, SourceTier::repository);
  EXPECT_EQ(plans->loads[0].sources[0].name, kRepositoryName);
  EXPECT_EQ(plans->loads[0].sources[0].endpoint.port, 9000);
}

TEST(LoadPlanner, TheBaselinesOptionsTurnOffChainsAndPeersAndPlaceAtRandom) {
  Fixture f;
  f.node("a", 1024);
  f.node("b", 1024);
  f.node("c", 1024, true);
  f.v().wanted = 3;
  f.planner.set_options({.chain = false, .peers = false, .random = false, .seed = 1});
  auto plans = f.planner.place(f.v(), 0);
  ASSERT_TRUE(plans.ok()) << plans.error().message();
  ASSERT_EQ(plans->loads.size(), 3u);
  EXPECT_TRUE(plans->chains.empty()) << "no chain";
  for (const auto& p : plans->loads) {
    EXPECT_EQ(p.transfer_id, 0u);
    ASSERT_EQ(p.sources.size(), 1u) << "no peer, though c caches the bytes";
    EXPECT_EQ(p.sources[0].kind, SourceTier::repository);
  }
  // Random placement: over seeds, the one replica lands on every node with room, the cached one too.
  f.v().wanted = 1;
  std::set<uint64_t> chosen;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    f.planner.set_options({.chain = true, .peers = true, .random = true, .seed = seed});
    auto one = f.planner.place(f.v(), 0);
    ASSERT_TRUE(one.ok());
    ASSERT_EQ(one->loads.size(), 1u);
    chosen.insert(one->loads[0].node);
  }
  EXPECT_EQ(chosen.size(), 3u);
  f.planner.set_options({});
  auto local = f.planner.place(f.v(), 0);
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(f.members.find(local->loads[0].node)->report.name, "c") << "locality: the node that caches the bytes";
}

TEST(LoadPlanner, NoRoomAnywhereIsUnavailableAndSaysWhy) {
  Fixture f;
  auto none = f.planner.place(f.v(), 0);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message(), "cannot place model m/1: no node has joined the cluster");
  f.node("small", 100);
  f.v().failed_on = {};
  auto full = f.planner.place(f.v(), 0);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code(), ErrorCode::unavailable);
  EXPECT_EQ(full.error().message(),
            "cannot place model m/1: no node has room for 100 MiB of weights (tried 0 of 1 nodes)");
  // A node that failed this round is not tried again.
  const uint64_t big = f.node("big", 1024);
  f.v().failed_on = {big};
  EXPECT_FALSE(f.planner.place(f.v(), 0).ok());
}

TEST(LoadPlanner, SeveralReplicasThatLackTheBytesGetThemAlongAChainAndHoldersLoadDirectly) {
  Fixture f;
  const uint64_t a = f.node("a", 1024);
  const uint64_t b = f.node("b", 1024);
  const uint64_t c = f.node("c", 1024, true);
  f.v().wanted = 3;
  auto plans = f.planner.place(f.v(), 0);
  ASSERT_TRUE(plans.ok()) << plans.error().message();
  ASSERT_EQ(plans->loads.size(), 3u);
  // a and b lack the bytes: one chain from c, the node that holds them.
  ASSERT_EQ(plans->chains, (std::vector<std::string>{"c -> a -> b"}));
  EXPECT_EQ(plans->loads[0].node, a);
  EXPECT_EQ(plans->loads[0].sources[0].name, "c");
  EXPECT_EQ(plans->loads[0].sources[0].kind, SourceTier::peer);
  EXPECT_EQ(plans->loads[1].node, b);
  EXPECT_EQ(plans->loads[1].sources[0].name, "a");
  // Behind its upstream, what a hop tries while the controller is away: the hops before it nearest
  // first, then the chain's source.
  ASSERT_EQ(plans->loads[0].sources.size(), 1u);
  ASSERT_EQ(plans->loads[1].sources.size(), 2u);
  EXPECT_EQ(plans->loads[1].sources[1].name, "c");
  EXPECT_NE(plans->loads[0].transfer_id, 0u);
  EXPECT_EQ(plans->loads[0].transfer_id, plans->loads[1].transfer_id);
  EXPECT_FALSE(f.chains.empty());
  EXPECT_EQ(plans->loads[2].node, c);  // its own cache
  EXPECT_EQ(plans->loads[2].transfer_id, 0u);
}

// A version's profile goes to the node with the load (burst scaling decides from it there); none
// without one.
TEST(LoadPlanner, ALoadCarriesTheVersionsProfile) {
  Fixture f;
  const uint64_t n = f.node("n", 1024);
  auto plans = f.planner.place(f.v(), 0);
  ASSERT_TRUE(plans.ok()) << plans.error().message();
  ASSERT_EQ(plans->loads.size(), 1u);
  EXPECT_EQ(plans->loads[0].node, n);
  EXPECT_TRUE(load_request(f.v(), plans->loads[0]).profile_json.empty());
  gpu::ModelProfile profile;
  profile.model = "m";
  profile.header_sha256 = std::string(64, 'b');
  profile.batches = {1, 2};
  gpu::LayerCost layer;
  layer.name = "fc";
  layer.sha256 = std::string(64, 'a');
  layer.exec_us = {10, 15};
  layer.out_bytes = {64, 128};
  profile.layers.push_back(layer);
  f.v().entry.profile = std::make_shared<const gpu::ModelProfile>(profile);
  const std::string json = load_request(f.v(), plans->loads[0]).profile_json;
  auto back = gpu::parse_profile(json, "the load's profile");
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->model, "m");
  ASSERT_EQ(back->layers.size(), 1u);
  EXPECT_EQ(back->layers[0].exec_us, layer.exec_us);
}

distribute_request request(std::vector<std::string> nodes, DistributeMode mode, uint32_t version = 1) {
  return distribute_request{{"m", version}, std::move(nodes), mode};
}

TEST(LoadPlanner, ADistributionFillsOnlyTheNodesThatLackTheBytesInTheModeAsked) {
  Fixture f;
  f.node("a", 1024, true);
  const uint64_t b = f.node("b", 1024);
  const uint64_t c = f.node("c", 1024);
  auto one = f.planner.distribute(request({"a", "b"}, DistributeMode::automatic), 0);
  ASSERT_TRUE(one.ok()) << one.error().message();
  EXPECT_EQ(one->result.mode, DistributeMode::unicast);  // one receiver
  ASSERT_EQ(one->loads.size(), 1u);
  EXPECT_EQ(one->loads[0].node, b);
  EXPECT_EQ(one->loads[0].sources.front().name, "a");  // peers before the repository
  EXPECT_EQ(one->loads[0].sources.back().kind, SourceTier::repository);
  EXPECT_TRUE(one->loads[0].cache_only);
  EXPECT_TRUE(load_request(f.v(), one->loads[0]).cache_only);
  ASSERT_EQ(one->pending.size(), 1u);
  EXPECT_EQ(one->pending.at(b).node, "b");
  auto two = f.planner.distribute(request({}, DistributeMode::automatic, 0), 0);  // every node, latest version
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->result.mode, DistributeMode::chain);
  EXPECT_EQ(two->result.chains, (std::vector<std::string>{"a -> b -> c"}));
  EXPECT_EQ(two->result.blob_bytes, 100 * MiB);
  EXPECT_NE(two->pending.at(c).transfer_id, 0u);
  auto none = f.planner.distribute(request({"a"}, DistributeMode::chain), 0);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->loads.empty());
  EXPECT_TRUE(none->pending.empty());
}

TEST(LoadPlanner, DistributeAndEvictNameWhatTheyDoNotKnow) {
  Fixture f;
  f.node("a", 1024, true);
  EXPECT_EQ(f.planner.distribute(request({}, DistributeMode::chain, 9), 0).error().message(), "unknown model 'm'");
  EXPECT_EQ(f.planner.evict(request({"zz"}, DistributeMode::chain)).error().message(),
            "no node named 'zz' in the cluster");
  auto evict = f.planner.evict(request({}, DistributeMode::chain));
  ASSERT_TRUE(evict.ok());
  EXPECT_TRUE(evict->result.evicted);
  EXPECT_EQ(evict->pending.size(), 1u);
  (void)f.registry.apply_scan("m", {RepositoryEntry{{"m", 1}, "", "{}", 100 * MiB, "model.json: bad"}});
  auto bad = f.planner.distribute(request({}, DistributeMode::chain), 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::invalid_argument);
}

TEST(LoadPlanner, SourcesAreNamedNodesOrTheRepository) {
  Fixture f;
  f.node("a", 1024);
  ASSERT_TRUE(f.planner.source_named("a").has_value());
  EXPECT_EQ(f.planner.source_named("a")->endpoint.host, "a");
  EXPECT_EQ(f.planner.source_named(kRepositoryName)->kind, SourceTier::repository);
  EXPECT_FALSE(f.planner.source_named("gone").has_value());
}

}  // namespace load_planner_test
}  // namespace ember
