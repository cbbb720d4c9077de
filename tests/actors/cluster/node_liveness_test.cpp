// NodeLiveness: the manager's heartbeats as data (plain C++; time passed in, nothing sent): which
// members to ping, when one is lost and silent, when a report is asked for and what reconciling it
// changes, and a silent node taken back.
#include "actors/cluster/node_liveness.hpp"

#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/send.hpp>

#include "tests/actors/actor_test_util.hpp"

namespace ember {
namespace node_liveness_test {

constexpr uint64_t MiB = 1ull << 20;
const model_key kM{"m", 1};
const model_key kN{"n", 1};

replica_info on(const std::string& device) { return {{}, "a", device, SourceTier::repository, "", 0, 0}; }

struct Fixture {
  ModelRegistry registry;
  Membership members;
  NodeLiveness liveness{registry, members};
  uint64_t a = 0;
  Fixture() {
    (void)registry.apply_scan(
        "", {RepositoryEntry{kM, "", "{}", 10 * MiB, ""}, RepositoryEntry{kN, "", "{}", 10 * MiB, ""}});
    node_report r;
    r.name = "a";
    r.devices.push_back({"sim0", 1024 * MiB, 0});
    a = members.join(r, {});
    liveness.set_timeout(1000);
    liveness.joined(a, 0, replicas_fingerprint({}));
  }
  /// A replica of `key` the manager loaded on node a itself.
  void replica(const model_key& key) {
    auto& v = *registry.find(key);
    ASSERT_TRUE(registry.replica_ready(key, a, registry.load_started(v, a), on("sim0")));
    members.bind(a, "sim0", v.entry.weights_bytes);
  }
};

TEST(NodeLiveness, AMemberIsPingedOnceAtATimeAndLostWhenItAnswersNothingForTheTimeout) {
  Fixture f;
  auto t1 = f.liveness.tick(100);
  EXPECT_EQ(t1.ping, (std::vector<uint64_t>{f.a}));
  EXPECT_TRUE(t1.lost.empty());
  EXPECT_TRUE(f.liveness.tick(200).ping.empty()) << "a ping is out";
  EXPECT_FALSE(f.liveness.pinged(f.a, replicas_fingerprint({}), 300)) << "nothing changed: no report";
  EXPECT_EQ(f.liveness.tick(400).ping, (std::vector<uint64_t>{f.a}));
  f.liveness.ping_failed(f.a);
  EXPECT_EQ(f.liveness.tick(1300).ping, (std::vector<uint64_t>{f.a})) << "1000 us since its answer: not yet lost";
  f.liveness.ping_failed(f.a);
  auto lost = f.liveness.tick(1301);
  EXPECT_TRUE(lost.ping.empty());
  EXPECT_EQ(lost.lost, (std::vector<uint64_t>{f.a}));
  EXPECT_EQ(lost.ping_silent, (std::vector<uint64_t>{f.a})) << "a silent node is asked at once";
  EXPECT_EQ(f.liveness.members(), 0u);
  EXPECT_EQ(f.liveness.silent(), 1u);
}

TEST(NodeLiveness, AChangedFingerprintAsksOneReportAndOnlyItsAnswerIsReconciled) {
  Fixture f;
  (void)f.liveness.tick(10);
  const uint64_t changed = replicas_fingerprint({kM});
  EXPECT_TRUE(f.liveness.pinged(f.a, changed, 20));
  (void)f.liveness.tick(30);
  EXPECT_FALSE(f.liveness.pinged(f.a, changed, 40)) << "a report is out already";
  EXPECT_FALSE(f.liveness.reported(f.a, std::nullopt)) << "a failed report is not reconciled";
  (void)f.liveness.tick(50);
  EXPECT_TRUE(f.liveness.pinged(f.a, changed, 60)) << "asked again after the failure";
  EXPECT_TRUE(f.liveness.reported(f.a, changed));
  (void)f.liveness.tick(70);
  EXPECT_FALSE(f.liveness.pinged(f.a, changed, 80)) << "the report's fingerprint is the known one now";
  f.liveness.left(f.a);
  EXPECT_FALSE(f.liveness.pinged(f.a, 1, 90)) << "a node that left is not asked";
  EXPECT_FALSE(f.liveness.reported(f.a, 1));
}

TEST(NodeLiveness, ReconcileAdoptsAReplicaTheManagerDidNotCountAndCountsAMissingOneAsLost) {
  Fixture f;
  f.replica(kN);
  node_report now = f.members.find(f.a)->report;
  now.replicas = {kM};  // loaded there by someone else; n lost to a fault
  now.cache_used = 5;
  auto r = f.liveness.reconcile(f.a, now, {});
  EXPECT_EQ(r.adopted, (std::set<model_key>{kM}));
  EXPECT_EQ(r.gone, (std::set<model_key>{kN}));
  EXPECT_EQ(r.changed(), (std::set<model_key>{kM, kN}));
  EXPECT_TRUE(f.registry.find(kM)->replicas.count(f.a));
  EXPECT_TRUE(f.registry.find(kN)->replicas.empty());
  EXPECT_EQ(f.members.find(f.a)->device_weights.at("sim0"), 0u) << "the lost replica's memory is free";
  EXPECT_EQ(f.members.find(f.a)->report.cache_used, 5u) << "the report is kept";
  EXPECT_TRUE(f.registry.check().ok());
}

TEST(NodeLiveness, ReconcileLeavesDrainingUnloadedAndLoadingReplicasAlone) {
  Fixture f;
  node_report now = f.members.find(f.a)->report;
  now.replicas = {kM};
  EXPECT_TRUE(f.liveness.reconcile(f.a, now, {kM}).adopted.empty()) << "the manager's own drain";
  auto& n = *f.registry.find(kN);
  (void)f.registry.load_started(n, f.a);
  now.replicas = {kN};
  EXPECT_TRUE(f.liveness.reconcile(f.a, now, {}).adopted.empty()) << "its load is in flight";
  (void)f.registry.unload(kM);
  now.replicas = {kM};
  EXPECT_TRUE(f.liveness.reconcile(f.a, now, {}).adopted.empty()) << "unloaded on purpose meanwhile";
  EXPECT_TRUE(f.liveness.reconcile(99, now, {}).changed().empty()) << "not a member";
}

// A router its supervisor restarted: the node's requests go to the new one, so every version with a
// replica there moves (is published again), and the fingerprint tells the manager to ask.
TEST(NodeLiveness, ANewRequestsActorMovesEveryReplicaOfTheNode) {
  auto sys = testing::make_system();
  auto first = sys->spawn([] { return caf::behavior{[](int) {}}; });
  auto second = sys->spawn([] { return caf::behavior{[](int) {}}; });
  Fixture f;
  f.replica(kN);
  node_report now = f.members.find(f.a)->report;
  now.replicas = {kN};
  now.requests = first;
  EXPECT_NE(report_fingerprint(now), replicas_fingerprint({kN})) << "the requests actor is part of it";
  auto r = f.liveness.reconcile(f.a, now, {});
  EXPECT_EQ(r.moved, (std::set<model_key>{kN})) << "a first requests actor where there was none";
  EXPECT_TRUE(f.liveness.reconcile(f.a, now, {}).changed().empty()) << "the same one: nothing moved";
  now.requests = second;
  const uint64_t before = replicas_fingerprint({kN}, first.id());
  EXPECT_NE(report_fingerprint(now), before);
  r = f.liveness.reconcile(f.a, now, {});
  EXPECT_EQ(r.moved, (std::set<model_key>{kN}));
  EXPECT_TRUE(r.adopted.empty() && r.gone.empty());
  EXPECT_EQ(r.changed(), (std::set<model_key>{kN}));
  EXPECT_EQ(f.members.find(f.a)->report.requests, second);
  const auto members = f.members.members();
  ASSERT_EQ(members.size(), 1u);
  EXPECT_EQ(members.front().for_requests().address(), second.address()) << "the member list carries it";
  caf::anon_send_exit(first, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(second, caf::exit_reason::user_shutdown);
}

TEST(NodeLiveness, ASilentNodeIsTakenBackOnceAndForgottenWhenItsRouterGoes) {
  Fixture f;
  (void)f.liveness.tick(2000);  // lost: silent now, a ping out
  EXPECT_TRUE(f.liveness.tick(2100).ping_silent.empty()) << "a ping is out";
  f.liveness.silent_failed(f.a);
  EXPECT_EQ(f.liveness.tick(2200).ping_silent, (std::vector<uint64_t>{f.a}));
  EXPECT_TRUE(f.liveness.silent_pinged(f.a)) << "it answered: ask its report";
  EXPECT_TRUE(f.liveness.take_back(f.a));
  EXPECT_FALSE(f.liveness.take_back(f.a)) << "taken back once";
  EXPECT_FALSE(f.liveness.silent_pinged(f.a));
  EXPECT_EQ(f.liveness.silent(), 0u);

  const uint64_t b = f.members.join(node_report{}, {});
  f.liveness.joined(b, 3000, 0);
  (void)f.liveness.tick(5000);
  ASSERT_EQ(f.liveness.silent(), 1u);
  f.liveness.forget_silent(b);
  EXPECT_EQ(f.liveness.silent(), 0u);
  EXPECT_TRUE(f.liveness.tick(5100).ping_silent.empty());
}

}  // namespace node_liveness_test
}  // namespace ember
