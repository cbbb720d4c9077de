// ReplicaDriver: the manager's placement of a version and its loads' answers, as decisions called
// in order through ReplicaActions (plain C++, the actor's classes, time passed in). What the actor
// does with them is cluster_manager_test's; here, the order of what leaves and the state left.
#include "actors/cluster/replica_driver.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace ember {
namespace replica_driver_test {

constexpr uint64_t MiB = 1ull << 20;

struct Fixture {
  ModelRegistry registry;
  Membership members;
  ChainController chains;
  LoadPlanner planner{registry, members, chains};
  PartitionController partitions{registry, members, planner};
  ScaleDriver scaler{registry, members, planner};
  ReplicaDriver driver{registry, members, planner, partitions, scaler};
  std::vector<std::string> log;  // what left, in order
  struct Sent {
    model_key key;
    uint64_t node, attempt;
    load_replica load;
  };
  std::vector<Sent> sent;
  struct Stage {
    model_key key;
    uint64_t node, attempt;
    load_stage stage;
  };
  std::vector<Stage> stages;
  std::vector<std::string> answers;  // what the waiters heard
  ReplicaActions act;
  const model_key m{"m", 1};

  Fixture() {
    planner.set_repository({"repo", 9000});
    (void)registry.apply_scan("", {RepositoryEntry{m, "", "{}", 100 * MiB, ""}});
    act.send_load = [this](const model_key& key, uint64_t node, uint64_t attempt, load_replica load) {
      log.push_back("load " + key.to_string() + " on #" + std::to_string(node));
      sent.push_back({key, node, attempt, std::move(load)});
    };
    act.send_stage = [this](const model_key& key, uint64_t node, uint64_t attempt, load_stage stage) {
      log.push_back("stage " + key.to_string() + " [" + std::to_string(stage.part.first_layer) + ", " +
                    std::to_string(stage.part.last_layer) + ") on #" + std::to_string(node));
      stages.push_back({key, node, attempt, std::move(stage)});
    };
    act.send_completion = [this](const model_key& key, uint64_t node, uint64_t attempt, load_replica load) {
      log.push_back("complete " + key.to_string() + " on #" + std::to_string(node));
      sent.push_back({key, node, attempt, std::move(load)});
    };
    act.unload_stage = [this](uint64_t node, const model_key& stage, int64_t delay_us) {
      log.push_back("unload " + stage.to_string() + " on #" + std::to_string(node) + " in " +
                    std::to_string(delay_us) + " us");
    };
    act.publish = [this](const std::set<model_key>& keys) {
      std::string names;
      for (const auto& k : keys) names += (names.empty() ? "" : ", ") + k.to_string();
      log.push_back("publish " + names + " (" + std::to_string(answers.size()) + " answered)");
    };
    act.chain_timer = [this] { log.push_back("chain timer"); };
    act.drain_step = [this] { log.push_back("drain step"); };
    act.check_drains = [this] { log.push_back("check drains"); };
    act.unbind = [this](const ScaleDriver::Unbind& u) { log.push_back("unbind " + u.key.to_string()); };
    act.evict = [this](const ScaleDriver::Evict& e) { log.push_back("evict " + e.key.to_string()); };
    act.place_later = [this](const model_key& key, int64_t delay_ms) {
      log.push_back("place " + key.to_string() + " again in " + std::to_string(delay_ms) + " ms");
    };
  }
  uint64_t node(const std::string& name, uint64_t device_mib) {
    node_report r;
    r.name = name;
    r.data = {name, 7000};
    r.devices.push_back({"sim0", device_mib * MiB, 0});
    return members.join(r, {});
  }
  void want(uint32_t replicas = 0) {
    auto key = registry.want(m, replicas, replicas > 0, [this](const Result<model_state>& s) {
      answers.push_back(s.ok() ? "ready" : s.error().message());
    });
    ASSERT_TRUE(key.has_value());
  }
  replica_info ready(uint64_t node_id) {
    replica_info info;
    info.model = m;
    info.node = members.find(node_id)->report.name;
    info.device = "sim0";
    info.source = SourceTier::repository;
    info.load_us = 1000;
    return info;
  }
};

TEST(ReplicaDriver, AColdStartSendsALoadReservesItsMemoryThenPublishes) {
  Fixture f;
  const uint64_t n = f.node("n1", 1024);
  f.want();
  f.driver.place(f.m, 0, f.act);
  EXPECT_EQ(f.log, (std::vector<std::string>{"load m/1 on #1", "chain timer", "publish m/1 (0 answered)"}));
  ASSERT_EQ(f.sent.size(), 1u);
  EXPECT_EQ(f.sent[0].load.model, f.m);
  EXPECT_EQ(f.sent[0].load.blob_bytes, 100 * MiB);
  ASSERT_EQ(f.sent[0].load.sources.size(), 1u);
  EXPECT_EQ(f.sent[0].load.sources[0].kind, SourceTier::repository);
  EXPECT_EQ(f.members.reserved(n), 100 * MiB);
  EXPECT_EQ(f.registry.find(f.m)->loading_on.count(n), 1u);
  // A second place while the load is in flight does nothing.
  f.log.clear();
  f.driver.place(f.m, 1, f.act);
  EXPECT_TRUE(f.log.empty());
}

TEST(ReplicaDriver, AnAnswerBindsPublishesBeforeTheWaitersHearAndPlacesWhatIsStillWanted) {
  Fixture f;
  const uint64_t a = f.node("a", 1024);
  f.node("b", 1024);
  f.want();
  f.driver.place(f.m, 0, f.act);
  ASSERT_EQ(f.sent.size(), 1u);
  f.registry.find(f.m)->wanted = 2;  // the autoscaler wanted one more meanwhile
  f.log.clear();
  f.driver.answered(f.m, a, f.sent[0].attempt, f.ready(a), true, false, 5, f.act);
  EXPECT_EQ(f.members.reserved(a), 0u);
  EXPECT_TRUE(f.members.caches(a, f.m));
  EXPECT_EQ(f.registry.find(f.m)->replicas.count(a), 1u);
  EXPECT_EQ(f.answers, (std::vector<std::string>{"ready"}));
  // The routing update left before the waiter heard; then the second replica's load, on b.
  EXPECT_EQ(f.log, (std::vector<std::string>{"publish m/1 (0 answered)", "load m/1 on #2", "chain timer",
                                             "publish m/1 (1 answered)"}));
}

TEST(ReplicaDriver, AFailedLoadIsPublishedAndPlacedOnAnotherNode) {
  Fixture f;
  const uint64_t a = f.node("a", 1024);
  const uint64_t b = f.node("b", 512);
  f.want();
  f.driver.place(f.m, 0, f.act);
  ASSERT_EQ(f.sent.size(), 1u);
  const uint64_t first = f.sent[0].node;
  f.log.clear();
  f.driver.answered(f.m, first, f.sent[0].attempt, Result<replica_info>(unavailable("its device broke")), true, false,
                    5, f.act);
  EXPECT_EQ(f.members.reserved(first), 0u);
  ASSERT_EQ(f.sent.size(), 2u);
  EXPECT_EQ(f.sent[1].node, first == a ? b : a);
  EXPECT_EQ(f.log.front(), "publish m/1 (0 answered)");
  EXPECT_TRUE(f.answers.empty());  // still waiting, for the other node
  // A stale answer (the attempt is over) changes nothing and sends nothing.
  f.log.clear();
  f.driver.answered(f.m, first, f.sent[0].attempt, f.ready(first), true, false, 6, f.act);
  EXPECT_TRUE(f.log.empty());
  EXPECT_EQ(f.registry.find(f.m)->replicas.count(first), 0u);
}

TEST(ReplicaDriver, NoNodeWithRoomFailsTheWaitersAndSendsNothing) {
  Fixture f;
  f.node("tiny", 64);
  f.want();
  f.driver.place(f.m, 0, f.act);
  EXPECT_TRUE(f.sent.empty());
  EXPECT_TRUE(f.log.empty());
  ASSERT_EQ(f.answers.size(), 1u);
  EXPECT_NE(f.answers[0].find("no node has room"), std::string::npos) << f.answers[0];
}

TEST(ReplicaDriver, AVersionShortOfReplicasWhoseLoadsAllFailedIsPlacedAgainAfterABackOff) {
  // Found when a standby manager took over mid-chain: both loads of a second replica joined fetches
  // the dead leader had started, failed with them, and nothing placed the version again.
  Fixture f;
  const uint64_t a = f.node("a", 1024);
  const uint64_t b = f.node("b", 1024);
  f.want(2);
  auto fail_all = [&f](int64_t now) {
    const auto sent = f.sent;
    f.sent.clear();
    for (const auto& s : sent) {
      f.driver.answered(f.m, s.node, s.attempt, Result<replica_info>(unavailable("its chain's source went away")),
                        true, false, now, f.act);
    }
  };
  f.driver.place(f.m, 0, f.act);
  ASSERT_EQ(f.sent.size(), 2u);
  f.log.clear();
  fail_all(10);
  // Every node failed this round: the waiter hears why, and the round after the back-off is asked.
  EXPECT_EQ(f.log.back(), "place m/1 again in 1000 ms");
  ASSERT_EQ(f.answers.size(), 1u);
  EXPECT_TRUE(f.sent.empty());
  // Another round meanwhile (a request, a drain step) tries every node again; failing too, it asks
  // for no second round while one is asked.
  f.driver.place(f.m, 500, f.act);
  ASSERT_EQ(f.sent.size(), 2u);
  f.log.clear();
  fail_all(510);
  for (const auto& line : f.log) EXPECT_EQ(line.find("again"), std::string::npos) << line;
  // The asked round tries every node again; failing again, the next waits twice as long.
  f.driver.place_again(f.m, 1010, f.act);
  ASSERT_EQ(f.sent.size(), 2u);
  f.log.clear();
  fail_all(1020);
  EXPECT_EQ(f.log.back(), "place m/1 again in 2000 ms");
  // Now the loads succeed: two replicas, and the back-off starts over.
  f.driver.place_again(f.m, 3020, f.act);
  ASSERT_EQ(f.sent.size(), 2u);
  f.log.clear();
  f.driver.answered(f.m, a, f.sent[0].node == a ? f.sent[0].attempt : f.sent[1].attempt, f.ready(a), true, false,
                    3030, f.act);
  f.driver.answered(f.m, b, f.sent[0].node == b ? f.sent[0].attempt : f.sent[1].attempt, f.ready(b), true, false,
                    3040, f.act);
  EXPECT_EQ(f.registry.find(f.m)->replicas.size(), 2u);
  EXPECT_EQ(f.registry.find(f.m)->rounds_unplaced, 0u);
  for (const auto& line : f.log) EXPECT_EQ(line.find("again"), std::string::npos) << line;
}

TEST(ReplicaDriver, ThePlacementBackOffDoublesFromOneSecondToHalfAMinute) {
  EXPECT_EQ(ReplicaDriver::place_again_delay_ms(0), 1000);
  EXPECT_EQ(ReplicaDriver::place_again_delay_ms(1), 2000);
  EXPECT_EQ(ReplicaDriver::place_again_delay_ms(4), 16000);
  EXPECT_EQ(ReplicaDriver::place_again_delay_ms(5), 30000);
  EXPECT_EQ(ReplicaDriver::place_again_delay_ms(400), 30000);
}

TEST(ReplicaDriver, AnUnannouncedAnswerLeavesPublishingToTheCaller) {
  Fixture f;
  const uint64_t a = f.node("a", 1024);
  f.want();
  f.driver.place(f.m, 0, f.act);
  f.log.clear();
  f.driver.answered(f.m, a, f.sent[0].attempt, f.ready(a), false, true, 5, f.act);
  EXPECT_TRUE(f.log.empty());
  EXPECT_TRUE(f.answers.empty());
  EXPECT_EQ(f.registry.find(f.m)->replicas.count(a), 1u);
}

TEST(ReplicaDriver, TheAutoscalersTickScalesAnIdleModelToZeroThenUnbindsItsDrainedReplica) {
  Fixture f;
  AutoscalerSettings settings;
  settings.enabled = true;
  settings.interval_us = 1'000'000;
  f.scaler.configure(AutoscaleConfig{}, settings);
  f.scaler.scanned(f.registry.apply_scan("", {RepositoryEntry{f.m, "", "{}", 100 * MiB, ""}}), f.registry.entries(""));
  const uint64_t a = f.node("a", 1024);
  f.want();
  f.driver.place(f.m, 0, f.act);
  f.driver.answered(f.m, a, f.sent[0].attempt, f.ready(a), true, false, 0, f.act);
  f.log.clear();
  // No request for longer than idle_timeout (60 s by default): one tick publishes the scale to zero,
  // a later one unbinds the drained replica.
  for (int64_t s = 1; s <= 70; ++s) {
    load_report quiet;
    quiet.reporter = "g";
    quiet.models.push_back({f.m, 0, 0, 0, 0, 0, {}});
    f.scaler.report(quiet, s * 1'000'000);
    f.driver.scale(s * 1'000'000, f.act);
  }
  ASSERT_EQ(f.log, (std::vector<std::string>{"publish m/1 (1 answered)", "unbind m/1"}));
  EXPECT_TRUE(f.registry.find(f.m)->replicas.empty());
}

TEST(ReplicaDriver, ALostNodesReplicasArePublishedOnceAndReplacedOnASurvivor) {
  Fixture f;
  const uint64_t a = f.node("a", 1024);
  const uint64_t b = f.node("b", 1024);
  f.want();
  f.driver.place(f.m, 0, f.act);
  ASSERT_EQ(f.sent.size(), 1u);
  const uint64_t on = f.sent[0].node, other = on == a ? b : a;
  f.driver.answered(f.m, on, f.sent[0].attempt, f.ready(on), true, false, 5, f.act);
  f.log.clear();
  const std::string name = f.members.find(on)->report.name;
  (void)f.members.leave(on);
  const auto changed = f.driver.node_lost(on, name, true, 10, f.act);
  EXPECT_EQ(changed, (std::set<model_key>{f.m}));
  // One routing update without the replica, then the replacement's load on the survivor.
  EXPECT_EQ(f.log, (std::vector<std::string>{"publish m/1 (1 answered)", "load m/1 on #" + std::to_string(other),
                                             "chain timer", "publish m/1 (1 answered)"}));
  EXPECT_TRUE(f.registry.find(f.m)->replicas.empty());
  // Without replace_on_failure the version is only published.
  Fixture g;
  const uint64_t c = g.node("c", 1024);
  g.want();
  g.driver.place(g.m, 0, g.act);
  g.driver.answered(g.m, c, g.sent[0].attempt, g.ready(c), true, false, 5, g.act);
  g.log.clear();
  (void)g.members.leave(c);
  (void)g.driver.node_lost(c, "c", false, 10, g.act);
  EXPECT_EQ(g.log, (std::vector<std::string>{"publish m/1 (1 answered)"}));
}

/// Eight layers of 100 MB, 1 ms each, 1 MB across a cut; a 4 KB header.
RepositoryEntry profiled(const model_key& key) {
  auto profile = std::make_shared<gpu::ModelProfile>();
  profile->model = key.name;
  profile->header_bytes = 4096;
  profile->header_sha256 = std::string(64, 'a');
  profile->batches = {1};
  for (int i = 0; i < 8; ++i) {
    profile->layers.push_back({"l" + std::to_string(i), 100'000'000, std::string(64, 'b'), {1000.0}, {1'000'000}});
  }
  profile->weights_bytes = profile->header_bytes + 800'000'000;
  RepositoryEntry e{key, "", "{}", profile->weights_bytes, ""};
  e.profile = std::move(profile);
  return e;
}

TEST(ReplicaDriver, APartitionedColdStartRunsItsOrdersFromStagesToReplicas) {
  Fixture f;
  const model_key big{"big", 1};
  (void)f.registry.apply_scan("", {profiled(big)});
  f.partitions.configure(4, 100'000'000);  // a layer loads in 1 s
  const uint64_t a = f.node("a", 1024), b = f.node("b", 1024);
  ASSERT_TRUE(f.registry.want(big, 2, true, [&f](const Result<model_state>& s) {
    f.answers.push_back(s.ok() ? "ready" : s.error().message());
  }));
  f.driver.place(big, 0, f.act);
  // One request waits: two stages of four layers, loaded in parallel, each node's whole replica reserved.
  ASSERT_EQ(f.log, (std::vector<std::string>{"stage big/1 [0, 4) on #1", "stage big/1 [4, 8) on #2",
                                             "publish big/1 (0 answered)"}));
  EXPECT_EQ(f.members.reserved(a), 800'004'096u);
  f.log.clear();
  auto stage_ready = [&f](const Fixture::Stage& s) {
    replica_info info{stage_key_of(s.key, s.stage.part.first_layer, s.stage.part.last_layer),
                      f.members.find(s.node)->report.name, "sim0", SourceTier::repository, "",
                      s.stage.part.length(), 1000};
    f.driver.stage_answered(s.key, s.node, s.attempt, info, 10, f.act);
  };
  stage_ready(f.stages[0]);
  EXPECT_TRUE(f.log.empty());  // the pipeline serves when every stage is bound
  stage_ready(f.stages[1]);
  // The routing update before the waiter hears; then each member fetches the rest of the model.
  ASSERT_EQ(f.log, (std::vector<std::string>{"publish big/1 (0 answered)", "complete big/1 on #1", "complete big/1 on #2"}));
  EXPECT_EQ(f.answers, (std::vector<std::string>{"ready"}));
  EXPECT_EQ(f.registry.find(big)->pipeline.size(), 2u);
  ASSERT_EQ(f.sent.size(), 2u);
  f.log.clear();
  for (const auto& c : f.sent) {
    replica_info info{big, f.members.find(c.node)->report.name, "sim0", SourceTier::repository, "", c.load.blob_bytes, 2000};
    f.driver.completion_answered(big, c.node, c.attempt, info, 20, f.act);
  }
  // Both replicas in one update; the stages leave after the grace; nothing more is wanted.
  EXPECT_EQ(f.log, (std::vector<std::string>{"publish big/1 (1 answered)", "unload big#0-4/1 on #1 in 5000000 us",
                                             "unload big#4-8/1 on #2 in 5000000 us"}));
  const ModelVersion& v = *f.registry.find(big);
  EXPECT_EQ(v.replicas.size(), 2u);
  EXPECT_TRUE(v.pipeline.empty());
  EXPECT_EQ(v.partitioned.size(), 2u);
  EXPECT_EQ(f.members.reserved(a) + f.members.reserved(b), 0u);
  EXPECT_EQ(f.answers.size(), 1u);
}

}  // namespace replica_driver_test
}  // namespace ember
