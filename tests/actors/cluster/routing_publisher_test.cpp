// RoutingPublisher: epochs, full tables and deltas built from the registry and the membership, the
// workflows and report interval they carry, and the recovery window's held gateways (plain C++;
// handles stay null, time passed in).
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

TEST(RoutingPublisher, APipelineIsPublishedWithItsStagesRoutersAndNodeNames) {
  Fixture f;
  f.registry.find({"m", 1})->pipeline = {{1, {"m#0-2", 1}}, {2, {"m#2-4", 1}}, {7, {"m#4-6", 1}}};
  auto u = f.publisher.delta(f.registry, f.members, {{"m", 1}});
  ASSERT_EQ(u.entries.size(), 1u);
  ASSERT_EQ(u.entries[0].pipeline.size(), 2u) << "node 7 is not a member";
  EXPECT_EQ(u.entries[0].pipeline[0].node, "a");
  EXPECT_EQ(u.entries[0].pipeline[1].node, "b");
  EXPECT_EQ(u.entries[0].pipeline[1].stage, (model_key{"m#2-4", 1}));
}

TEST(RoutingPublisher, FullTablesCarryTheWorkflowsAndDeltasOnlyWhenAsked) {
  Fixture f;
  f.publisher.set_report_interval(250'000);
  const std::vector<workflow_entry> flows{{"flow", "{}", ""}};
  EXPECT_TRUE(f.publisher.set_workflows(flows));
  EXPECT_FALSE(f.publisher.set_workflows(flows)) << "unchanged";
  auto full = f.publisher.full(f.registry, f.members);
  EXPECT_TRUE(full.workflows_set);
  EXPECT_EQ(full.workflows, flows);
  EXPECT_EQ(full.report_interval_us, 250'000u);
  auto plain = f.publisher.delta(f.registry, f.members, {});
  EXPECT_FALSE(plain.workflows_set);
  EXPECT_EQ(plain.report_interval_us, 250'000u) << "in every update";
  auto with = f.publisher.delta(f.registry, f.members, {}, {}, true);
  EXPECT_TRUE(with.workflows_set);
  EXPECT_EQ(with.workflows, flows);
}

TEST(RoutingPublisher, GatewaysWithAnOldTableAreHeldUntilTheRecoveryWindowEndsThenAnsweredInOrder) {
  Fixture f;
  f.publisher.set_recovery_window(1'000, 5'000);  // started at 1 ms, a 5 ms window
  EXPECT_FALSE(f.publisher.must_hold(0, 2'000)) << "no table held: subscribed at once";
  EXPECT_TRUE(f.publisher.must_hold(7, 2'000));
  EXPECT_TRUE(f.publisher.must_hold(7, 5'999));
  EXPECT_FALSE(f.publisher.must_hold(7, 6'000)) << "the window is over";
  std::vector<int> answered;
  auto first = [&](routing_update) { answered.push_back(1); };
  auto second = [&](routing_update) { answered.push_back(2); };
  EXPECT_EQ(f.publisher.hold({}, first, 2'000), 4'000) << "the first held arms the window's timer";
  EXPECT_EQ(f.publisher.hold({}, second, 3'000), 0);
  EXPECT_EQ(f.publisher.held(), 2u);
  auto held = f.publisher.window_over();
  ASSERT_EQ(held.size(), 2u);
  for (auto& [gateway, reply] : held) reply(f.publisher.full(f.registry, f.members));
  EXPECT_EQ(answered, (std::vector<int>{1, 2}));
  EXPECT_EQ(f.publisher.held(), 0u);
}

}  // namespace routing_publisher_test
}  // namespace ember
