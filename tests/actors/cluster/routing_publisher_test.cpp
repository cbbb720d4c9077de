// RoutingPublisher: epochs, full tables and deltas built from the registry and the membership
// (plain C++; handles stay null).
#include "actors/cluster/routing_publisher.hpp"

#include <gtest/gtest.h>

namespace ember {
namespace routing_publisher_test {

/// A node's answer: a replica on `device`.
replica_info on(const std::string& device) { return {{}, "n", device, SourceTier::repository, "", 0, 0}; }

struct Fixture {
  ModelRegistry registry;
  Membership members;
  RoutingPublisher publisher;
  Fixture() {
    (void)registry.apply_scan(
        "", {RepositoryEntry{{"m", 1}, "", "{\"m\":1}", 10, ""}, RepositoryEntry{{"n", 1}, "", "{}", 10, "bad"}});
    node_report a;
    a.name = "a";
    members.join(a, {});
    node_report b;
    b.name = "b";
    members.join(b, {});
    auto& v = *registry.find({"m", 1});
    EXPECT_TRUE(registry.replica_ready({"m", 1}, 1, registry.load_started(v, 1), on("gpu0")));
    EXPECT_TRUE(registry.replica_ready({"m", 1}, 2, registry.load_started(v, 2), on("gpu0")));
  }
};

TEST(RoutingPublisher, AFullTableHoldsEveryVersionAndMemberUnderAGrowingEpoch) {
  Fixture f;
  EXPECT_EQ(f.publisher.epoch(), 0u);
  auto u = f.publisher.full(f.registry, f.members);
  EXPECT_EQ(u.epoch, 1u);
  EXPECT_TRUE(u.full);
  ASSERT_EQ(u.entries.size(), 2u);
  EXPECT_EQ(u.entries[0].state.state, ModelReadiness::ready);
  EXPECT_EQ(u.entries[0].manifest_json, "{\"m\":1}");
  ASSERT_EQ(u.entries[0].replicas.size(), 2u);
  EXPECT_EQ(u.entries[0].replicas[1].node, "b");
  EXPECT_EQ(u.entries[1].state.state, ModelReadiness::failed);
  EXPECT_EQ(u.members.size(), 2u);
  EXPECT_EQ(f.publisher.full(f.registry, f.members).epoch, 2u);
}

TEST(RoutingPublisher, ADeltaCarriesTheChangedAndRemovedKeysAndSkipsReplicasOfLostNodes) {
  Fixture f;
  (void)f.members.leave(1);  // the entry is published before the registry heard of the loss
  auto u = f.publisher.delta(f.registry, f.members, {{"m", 1}, {"gone", 1}}, {{"old", 3}});
  EXPECT_EQ(u.epoch, 1u);
  EXPECT_FALSE(u.full);
  ASSERT_EQ(u.entries.size(), 1u);
  ASSERT_EQ(u.entries[0].replicas.size(), 1u);
  EXPECT_EQ(u.entries[0].replicas[0].node, "b");
  EXPECT_EQ(u.removed, (std::vector<model_key>{{"old", 3}}));
  ASSERT_EQ(u.members.size(), 1u);
  EXPECT_EQ(u.members[0].node, "b");
}

TEST(RoutingPublisher, NodeReportsListTheReplicasTheRegistryKnowsNow) {
  Fixture f;
  (void)f.registry.node_lost(2);
  auto reports = RoutingPublisher::node_reports(f.registry, f.members);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].replicas, (std::vector<model_key>{{"m", 1}}));
  EXPECT_TRUE(reports[1].replicas.empty());
}

TEST(RoutingPublisher, UnsubscribingAnUnknownAddressChangesNothing) {
  Fixture f;
  f.publisher.subscribe({});
  EXPECT_EQ(f.publisher.subscribers().size(), 1u);
  EXPECT_TRUE(f.publisher.unsubscribe(caf::actor_addr{}));  // the null gateway's address
  EXPECT_TRUE(f.publisher.subscribers().empty());
  EXPECT_FALSE(f.publisher.unsubscribe(caf::actor_addr{}));
}

}  // namespace routing_publisher_test
}  // namespace ember
