// ScaleDriver: what the manager does with replica counts, as data (plain C++; time passed in,
// nothing sent): a scale-down's order, a drain's life (retired, settled, unbinding, unbound; back
// when wanted again), the console's node drains, embers, and the loop's bounds.
#include "actors/cluster/scale_driver.hpp"

#include <gtest/gtest.h>

namespace ember {
namespace scale_driver_test {

constexpr uint64_t MiB = 1ull << 20;
constexpr int64_t kSecond = 1'000'000;
const model_key kM{"m", 1};

replica_info on(const std::string& node) { return {{}, node, "sim0", SourceTier::repository, "", 0, 0}; }

struct Fixture {
  ModelRegistry registry;
  Membership members;
  ChainController chains;
  LoadPlanner planner{registry, members, chains};
  ScaleDriver driver{registry, members, planner};
  std::vector<uint64_t> nodes;
  explicit Fixture(bool autoscale = true, uint64_t host_keep_alive_us = 600 * kSecond) {
    AutoscaleConfig defaults;
    defaults.host_keep_alive_us = host_keep_alive_us;
    AutoscalerSettings settings;
    settings.enabled = autoscale;
    settings.interval_us = kSecond;
    settings.drain_timeout_us = 30 * kSecond;
    driver.configure(defaults, settings);
    auto changes = registry.apply_scan("", {RepositoryEntry{kM, "", "{}", 100 * MiB, ""}});
    driver.scanned(changes, registry.entries(""));
    for (const char* name : {"a", "b", "c"}) {
      node_report r;
      r.name = name;
      r.data = {name, 7000};
      r.devices.push_back({"sim0", 1024 * MiB, 0});
      nodes.push_back(members.join(r, {}));
    }
  }
  void replica(uint64_t node) {
    auto& v = *registry.find(kM);
    ASSERT_TRUE(registry.replica_ready(kM, node, registry.load_started(v, node), on(members.find(node)->report.name)));
    members.bind(node, "sim0", v.entry.weights_bytes);
    members.note_cached(node, kM, true);
  }
  static AutoscalerLoop::Change down(uint32_t count) {
    AutoscalerLoop::Change c;
    c.key = kM;
    c.decision.action = placement::ScaleAction::down;
    c.decision.count = count;
    c.line = "m/1: down";
    return c;
  }
  std::vector<uint64_t> replicas() const {
    std::vector<uint64_t> out;
    for (const auto& [node, device] : registry.find(kM)->replicas) out.push_back(node);
    return out;
  }
};

TEST(ScaleDriver, AScaleDownRetiresAPipelinesReplicasFirstThenTheLeastBusy) {
  Fixture f;
  for (uint64_t n : f.nodes) f.replica(n);
  f.registry.find(kM)->partitioned.insert(f.nodes[2]);
  load_report busy;
  busy.reporter = "g";
  busy.models.push_back({kM, 0, 0, 0, 3, 0, {{f.nodes[0], 3}}});
  f.driver.report(busy, 0);
  EXPECT_EQ(f.driver.apply(Fixture::down(2), 0), ScaleDriver::Step::publish);
  EXPECT_EQ(f.replicas(), (std::vector<uint64_t>{f.nodes[0]})) << "c (partitioned), then b (idle) left";
  EXPECT_EQ(f.driver.drains(), 2u);
  EXPECT_EQ(f.driver.draining_on(f.nodes[1]), (std::set<model_key>{kM}));
  AutoscalerLoop::Change up;
  up.key = kM;
  up.decision.action = placement::ScaleAction::up;
  up.decision.desired = 3;
  EXPECT_EQ(f.driver.apply(up, 0), ScaleDriver::Step::place);
  EXPECT_EQ(f.registry.find(kM)->wanted, 3u);
  (void)f.registry.unload(kM);
  EXPECT_EQ(f.driver.apply(up, 0), ScaleDriver::Step::none) << "an unload is the user's word";
}

TEST(ScaleDriver, ADrainEndsWhenNoRequestIsInFlightAfterTwoIntervalsOrAtTheTimeout) {
  Fixture f;
  for (uint64_t n : f.nodes) f.replica(n);
  ASSERT_EQ(f.driver.apply(Fixture::down(2), 0), ScaleDriver::Step::publish);  // a and b go
  ASSERT_EQ(f.replicas(), (std::vector<uint64_t>{f.nodes[2]}));
  load_report busy;  // a gateway still has a request on a
  busy.reporter = "g";
  busy.models.push_back({kM, 0, 0, 0, 1, 0, {{f.nodes[0], 1}}});
  f.driver.report(busy, kSecond);
  EXPECT_TRUE(f.driver.drains_over(2 * kSecond - 1).empty()) << "the gateways had no two intervals yet";
  auto over = f.driver.drains_over(2 * kSecond);
  ASSERT_EQ(over.size(), 1u) << "b has nothing in flight; a has a request";
  EXPECT_EQ(over[0].node, f.nodes[1]);
  EXPECT_EQ(over[0].key, kM);
  EXPECT_TRUE(f.driver.drains_over(3 * kSecond).empty()) << "b is unbinding, a still busy";
  auto late = f.driver.drains_over(30 * kSecond);
  ASSERT_EQ(late.size(), 1u) << "drain_timeout";
  EXPECT_EQ(late[0].node, f.nodes[0]);

  auto done = f.driver.unbound(over[0].drain, true, 3 * kSecond);
  EXPECT_TRUE(done.known);
  EXPECT_FALSE(done.evict) << "the bytes stay in the host cache (host_keep_alive)";
  EXPECT_EQ(f.members.find(f.nodes[1])->device_weights.at("sim0"), 0u);
  EXPECT_FALSE(f.driver.unbound(over[0].drain, true, 4 * kSecond).known) << "once";
  f.driver.node_lost(f.nodes[0], "a");
  EXPECT_EQ(f.driver.drains(), 0u);
  EXPECT_FALSE(f.driver.unbound(late[0].drain, true, 31 * kSecond).known) << "its node was lost";
}

TEST(ScaleDriver, WithoutAHostCacheTierTheBytesGoWhenTheReplicaIsUnbound) {
  Fixture f(true, 0);
  for (uint64_t n : f.nodes) f.replica(n);
  ASSERT_EQ(f.driver.apply(Fixture::down(1), 0), ScaleDriver::Step::publish);
  auto over = f.driver.drains_over(2 * kSecond);
  ASSERT_EQ(over.size(), 1u);
  auto done = f.driver.unbound(over[0].drain, true, 2 * kSecond);
  ASSERT_TRUE(done.evict);
  EXPECT_EQ(done.evict->node, over[0].node);
  EXPECT_FALSE(f.members.caches(over[0].node, kM));
}

TEST(ScaleDriver, ADrainingReplicaServesAgainWhenTheVersionWantsMore) {
  Fixture f;
  for (uint64_t n : f.nodes) f.replica(n);
  ASSERT_EQ(f.driver.apply(Fixture::down(2), 0), ScaleDriver::Step::publish);
  ASSERT_EQ(f.replicas().size(), 1u);
  EXPECT_FALSE(f.driver.revive(kM)) << "it wants one, it has one";
  f.registry.set_wanted(kM, 2);
  EXPECT_TRUE(f.driver.revive(kM));
  EXPECT_EQ(f.replicas().size(), 2u);
  EXPECT_EQ(f.driver.drains(), 1u);
  auto over = f.driver.drains_over(2 * kSecond);
  ASSERT_EQ(over.size(), 1u);
  f.registry.set_wanted(kM, 3);
  EXPECT_FALSE(f.driver.revive(kM)) << "an unbinding replica cannot come back";
}

TEST(ScaleDriver, ANodeDrainMovesAReplicaServedElsewhereAndAnswersWhenItIsUnbound) {
  Fixture f(false);  // no loop: the drain's end is checked by the actor after settle_us
  f.replica(f.nodes[0]);
  f.replica(f.nodes[1]);
  std::vector<Result<std::vector<model_key>>> answers;
  f.driver.drain_node(f.nodes[0], [&](const Result<std::vector<model_key>>& r) { answers.push_back(r); });
  EXPECT_TRUE(f.members.find(f.nodes[0])->draining);
  EXPECT_EQ(f.driver.drained_nodes(), (std::vector<uint64_t>{f.nodes[0]}));
  const uint32_t wanted = f.registry.find(kM)->wanted;
  auto move = f.driver.move_off(f.nodes[0], kM, 0);
  EXPECT_EQ(move.kind, ScaleDriver::Move::Kind::moved);
  EXPECT_TRUE(move.check_later);
  EXPECT_EQ(f.replicas(), (std::vector<uint64_t>{f.nodes[1]}));
  EXPECT_EQ(f.registry.find(kM)->wanted, wanted) << "what it wanted, placed back elsewhere";
  EXPECT_FALSE(f.driver.finish(f.nodes[0], std::nullopt)) << "its unbind is still out";
  auto over = f.driver.drains_over(f.driver.settle_us());
  ASSERT_EQ(over.size(), 1u);
  EXPECT_TRUE(f.driver.unbound(over[0].drain, true, f.driver.settle_us()).known);
  EXPECT_TRUE(f.driver.finish(f.nodes[0], std::nullopt));
  ASSERT_EQ(answers.size(), 1u);
  ASSERT_TRUE(answers[0].ok());
  EXPECT_EQ(*answers[0], (std::vector<model_key>{kM}));
  EXPECT_FALSE(f.driver.nodes_draining());
}

TEST(ScaleDriver, ANodeDrainReplacesAnOnlyReplicaFirstAndSaysWhenNoNodeHasRoom) {
  Fixture f;
  f.replica(f.nodes[0]);
  std::vector<Result<std::vector<model_key>>> answers;
  f.driver.drain_node(f.nodes[0], [&](const Result<std::vector<model_key>>& r) { answers.push_back(r); });
  auto move = f.driver.move_off(f.nodes[0], kM, 0);
  EXPECT_EQ(move.kind, ScaleDriver::Move::Kind::replace);
  EXPECT_EQ(f.registry.find(kM)->wanted, 2u) << "one more first";
  EXPECT_EQ(f.replicas(), (std::vector<uint64_t>{f.nodes[0]})) << "it serves until the replacement is ready";
  // The actor places it: no load started (say no node had room) means the drain is stuck.
  const auto stuck = f.driver.stuck(kM);
  ASSERT_TRUE(stuck);
  EXPECT_EQ(stuck->code(), ErrorCode::unavailable);
  EXPECT_TRUE(f.driver.finish(f.nodes[0], stuck));
  ASSERT_EQ(answers.size(), 1u);
  ASSERT_FALSE(answers[0].ok());
  EXPECT_NE(answers[0].error().message().find("no other node has room for m/1"), std::string::npos);
  // A load in flight: not stuck; a drain whose node is lost fails.
  (void)f.registry.load_started(*f.registry.find(kM), f.nodes[1]);
  EXPECT_FALSE(f.driver.stuck(kM));
  f.driver.drain_node(f.nodes[0], [&](const Result<std::vector<model_key>>& r) { answers.push_back(r); });
  EXPECT_EQ(f.driver.move_off(f.nodes[0], kM, 0).kind, ScaleDriver::Move::Kind::none) << "its replacement loads";
  f.driver.node_lost(f.nodes[0], "a");
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[1].error().message(), "node a left while draining");
}

TEST(ScaleDriver, AModelIdleForItsHostKeepAliveLeavesTheCachesOnce) {
  Fixture f(true, 5 * kSecond);
  f.members.note_cached(f.nodes[1], kM, true);
  auto supply = f.driver.decide(0);  // the loop sees the model idle from now
  (void)supply;
  EXPECT_TRUE(f.driver.embers_expired(4 * kSecond).empty());
  auto evict = f.driver.embers_expired(5 * kSecond);
  ASSERT_EQ(evict.size(), 1u);
  EXPECT_EQ(evict[0].node, f.nodes[1]);
  EXPECT_EQ(evict[0].key, kM);
  EXPECT_FALSE(f.members.caches(f.nodes[1], kM));
  EXPECT_TRUE(f.driver.embers_expired(6 * kSecond).empty()) << "once per idle spell";
}

TEST(ScaleDriver, BoundsNeedTheLoopAndAKnownModel) {
  Fixture off(false);
  auto refused = off.driver.set_bounds(kM, 1, 2);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), ErrorCode::unavailable);
  Fixture f;
  EXPECT_EQ(f.driver.set_bounds({"nope", 1}, 1, 2).error().code(), ErrorCode::not_found);
  EXPECT_EQ(f.driver.set_bounds(kM, 3, 2).error().code(), ErrorCode::invalid_argument);
  auto set = f.driver.set_bounds(kM, 1, 0);
  ASSERT_TRUE(set.ok()) << set.error().to_string();
  EXPECT_EQ(set->model, kM);
  EXPECT_EQ(f.driver.autoscaler()->config(kM)->min_replicas, 1u);
}

}  // namespace scale_driver_test
}  // namespace ember
