// PartitionController: a version's profile turned into the stages of a partitioned cold start,
// planned from the version's plan table for the expected queue (built once per version and part
// limit, rebuilt when the version's files change); and a build's life as the orders it gives the
// actor: stage loads, the pipeline published, completions, the replicas in one update, given up,
// dissolved, unloaded (plain C++; nothing sent).
#include "actors/cluster/partition_controller.hpp"

#include <gtest/gtest.h>

namespace ember {
namespace partition_controller_test {

constexpr uint64_t MB = 1'000'000;

/// Eight layers of 100 MB, 1 ms each, sending 1 MB across a cut; a 4 KB header.
ModelVersion version() {
  auto profile = std::make_shared<gpu::ModelProfile>();
  profile->model = "big";
  profile->header_bytes = 4096;
  profile->header_sha256 = std::string(64, 'a');
  profile->batches = {1};
  for (int i = 0; i < 8; ++i) {
    profile->layers.push_back({"l" + std::to_string(i), 100 * MB, std::string(64, 'b'), {1000.0}, {MB}});
  }
  profile->weights_bytes = profile->header_bytes + 8 * 100 * MB;
  ModelVersion v;
  v.state.model = {"big", 1};
  v.entry.key = v.state.model;
  v.entry.weights_bytes = profile->weights_bytes;
  v.entry.profile = std::move(profile);
  return v;
}

TEST(PartitionController, AShortQueueIsCutIntoTheMostStagesAndALongOneIntoFewer) {
  PartitionController pc;
  pc.configure(4, 100 * MB);  // a layer loads in 1 s, a cut costs 10.5 ms per request
  const ModelVersion v = version();
  EXPECT_EQ(pc.whole_cold_start_us(v), 8'000'040u);
  auto one = pc.plan(v, {1, 2, 3, 4}, 4, 1, 0);
  ASSERT_TRUE(one.ok()) << one.error().to_string();
  ASSERT_EQ(one->stages.size(), 4u) << "one request waits: the cold start is all that counts";
  uint32_t next = 0;
  uint64_t offset = 4096;
  for (size_t i = 0; i < 4; ++i) {
    const StageSpot& s = one->stages[i];
    EXPECT_EQ(s.node, i + 1);
    EXPECT_EQ(s.part.first_layer, next);
    EXPECT_EQ(s.part.offset, offset);
    EXPECT_EQ(s.stage, stage_key_of(v.key(), s.part.first_layer, s.part.last_layer));
    next = s.part.last_layer;
    offset += s.part.length();
  }
  EXPECT_EQ(next, 8u);
  // Thousands waiting: four whole replicas drain them faster than one pipeline, so fewer parts
  // (or none) are planned.
  auto many = pc.plan(v, {1, 2, 3, 4}, 4, 4000, 0);
  EXPECT_TRUE(!many.ok() || many->stages.size() < 4u);
}

TEST(PartitionController, PlanTablesAnswerAsThePlannerAndAChangedProfileMakesThemStale) {
  PartitionController pc;
  pc.configure(4, 100 * MB);
  ModelVersion v = version();
  ASSERT_EQ(pc.tables_missing(v), (std::vector<uint32_t>{2, 3, 4}));
  auto in = pc.inputs(v);
  ASSERT_TRUE(in.ok());
  for (uint32_t parts : pc.tables_missing(v)) {
    auto table = PartitionController::build_table(*in, parts);
    ASSERT_TRUE(table.ok()) << table.error().to_string();
    pc.put_table(v.key(), parts, *in, std::move(*table));
  }
  EXPECT_TRUE(pc.tables_missing(v).empty());
  EXPECT_EQ(pc.tables(), 3u);
  // A lookup gives the plan the planner gives for that queue, for every part limit.
  PartitionController direct;
  direct.configure(4, 100 * MB);
  for (uint32_t nodes : {2u, 3u, 4u}) {
    std::vector<uint64_t> ids;
    for (uint32_t i = 1; i <= nodes; ++i) ids.push_back(i);
    for (double x : {1.0, 37.0, 1500.0, 4000.0}) {
      auto a = pc.plan(v, ids, 4, x, 0);
      auto b = direct.plan(v, ids, 4, x, 0);
      ASSERT_EQ(a.ok(), b.ok()) << nodes << " nodes, x " << x;
      if (!a.ok()) continue;
      ASSERT_EQ(a->stages.size(), b->stages.size()) << nodes << " nodes, x " << x;
      for (size_t i = 0; i < a->stages.size(); ++i) EXPECT_EQ(a->stages[i].stage, b->stages[i].stage);
    }
  }
  // The profile was measured again with other times: the tables no longer apply.
  auto profile = std::make_shared<gpu::ModelProfile>(*v.entry.profile);
  profile->layers[3].exec_us[0] = 50'000;
  v.entry.profile = profile;
  EXPECT_EQ(pc.tables_missing(v).size(), 3u);
  pc.forget(v.key());
  EXPECT_EQ(pc.tables(), 0u);
}

TEST(PartitionController, NoProfileAStaleOneOrTooFewNodesIsSaidNotPlanned) {
  PartitionController pc;
  pc.configure(4, 100 * MB);
  ModelVersion v = version();
  auto few = pc.plan(v, {1}, 4, 1, 0);
  ASSERT_FALSE(few.ok());
  EXPECT_EQ(few.error().code(), ErrorCode::unsupported);
  v.entry.weights_bytes += 1;
  auto stale = pc.plan(v, {1, 2}, 4, 1, 0);
  ASSERT_FALSE(stale.ok());
  EXPECT_NE(stale.error().message().find("stale"), std::string::npos);
  v.entry.profile = nullptr;
  auto none = pc.plan(v, {1, 2}, 4, 1, 0);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message().find("no profile.json"), std::string::npos);
  EXPECT_EQ(pc.whole_cold_start_us(v), 0u);
}

// -- a build's life ------------------------------------------------------------------------------

using Kind = PipelineOrder::Kind;
const model_key kBig{"big", 1};

/// A registry holding version(), `n` nodes with room for a whole replica each, and the controller
/// over them.
struct Cluster {
  ModelRegistry registry;
  Membership members;
  ChainController chains;
  LoadPlanner planner{registry, members, chains};
  PartitionController pc{registry, members, planner};
  std::vector<uint64_t> nodes;
  std::vector<Result<model_state>> answered;  // the version's waiters
  explicit Cluster(int n) {
    planner.set_repository({"repo", 9000});
    pc.configure(4, 100 * MB, 5e6);
    (void)registry.apply_scan("", {version().entry});
    for (int i = 0; i < n; ++i) {
      node_report r;
      r.name = std::string(1, static_cast<char>('a' + i));
      r.data = {r.name, 7000};
      r.devices.push_back({"sim0", 4000 * MB, 0});
      nodes.push_back(members.join(r, {}));
    }
  }
  ModelVersion& v() { return *registry.find(kBig); }
  /// A load of two replicas, started as a pipeline: its orders.
  PipelineOrders start() {
    EXPECT_TRUE(registry.want(kBig, 2, true, [this](const Result<model_state>& r) { answered.push_back(r); }));
    return pc.start(v(), nullptr);
  }
  static model_key stage_key(const PipelineOrder& o) {
    return stage_key_of(kBig, o.stage.part.first_layer, o.stage.part.last_layer);
  }
  static replica_info stage_of(const PipelineOrder& o) {
    return {stage_key(o), "n", "sim0", SourceTier::repository, "", o.stage.part.length(), 1000};
  }
  static replica_info whole(const PipelineOrder& o) {
    return {o.load.model, "n", "sim0", SourceTier::repository, "", o.load.blob_bytes, 1000};
  }
};

std::vector<Kind> kinds(const PipelineOrders& orders) {
  std::vector<Kind> out;
  for (const auto& o : orders) out.push_back(o.kind);
  return out;
}

TEST(PipelineBuild, StagesLoadThenThePipelineServesThenItsMembersBecomeReplicasInOneUpdate) {
  Cluster c(3);
  const PipelineOrders started = c.start();
  ASSERT_EQ(kinds(started), (std::vector<Kind>{Kind::load_stage, Kind::load_stage, Kind::publish}));
  std::set<uint64_t> members;
  for (size_t i = 0; i < 2; ++i) {
    const PipelineOrder& o = started[i];
    members.insert(o.node);
    EXPECT_EQ(o.key, kBig);
    EXPECT_EQ(c.v().loading_on.at(o.node), o.attempt);
    EXPECT_EQ(c.members.reserved(o.node), c.v().entry.weights_bytes) << "the whole replica's memory";
    EXPECT_EQ(o.stage.load.sources.at(0).name, kRepositoryName);
    EXPECT_EQ(o.stage.part.first_layer, i == 0 ? 0u : started[0].stage.part.last_layer);
  }
  EXPECT_EQ(started[1].stage.part.last_layer, 8u);
  EXPECT_EQ(members.size(), 2u);
  EXPECT_TRUE(c.pc.start(c.v(), nullptr).empty()) << "loads in flight";

  // The first stage bound: nothing yet; the last: the pipeline serves (published, then its waiters
  // answered: a gateway relaying the load routes through it before its client hears 'ready') and
  // each member fetches the rest.
  EXPECT_TRUE(c.pc.stage_loaded(kBig, started[0].node, started[0].attempt, Cluster::stage_of(started[0])).empty());
  EXPECT_TRUE(c.answered.empty());
  const PipelineOrders serving =
      c.pc.stage_loaded(kBig, started[1].node, started[1].attempt, Cluster::stage_of(started[1]));
  ASSERT_EQ(kinds(serving),
            (std::vector<Kind>{Kind::publish, Kind::answer_waiters, Kind::complete, Kind::complete}));
  ASSERT_EQ(c.v().pipeline.size(), 2u);
  EXPECT_EQ(c.v().pipeline[0].node, started[0].node);
  EXPECT_EQ(c.v().pipeline[1].stage, Cluster::stage_key(started[1]));
  EXPECT_TRUE(c.answered.empty()) << "the waiters are the actor's to answer, after the update";
  for (size_t i = 2; i < 4; ++i) {
    EXPECT_EQ(serving[i].load.reuse.first_layer, started[i - 2].stage.part.first_layer);
    EXPECT_EQ(serving[i].load.layers.layer_bytes.size(), 8u) << "every layer checked";
    EXPECT_EQ(serving[i].load.max_bytes_per_s, 5'000'000u) << "autoscale.completion_rate";
  }

  // The members complete: the last turns both into replicas, then one publish, then the waiters.
  EXPECT_TRUE(c.pc.member_completed(kBig, serving[2].node, serving[2].attempt, Cluster::whole(serving[2])).empty());
  const PipelineOrders done =
      c.pc.member_completed(kBig, serving[3].node, serving[3].attempt, Cluster::whole(serving[3]));
  ASSERT_EQ(kinds(done), (std::vector<Kind>{Kind::answer, Kind::answer, Kind::publish, Kind::answer_waiters,
                                            Kind::unload_later, Kind::place_if_short}));
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_FALSE(done[i].announce) << "published once, after both";
    EXPECT_TRUE(done[i].completion) << "not a cold start";
    EXPECT_TRUE(done[i].partitioned);
    EXPECT_TRUE(done[i].result->ok());
  }
  EXPECT_EQ(done[4].delay_us, PartitionController::kPipelineGraceUs);
  EXPECT_EQ(done[4].stages.size(), 2u);
  EXPECT_TRUE(c.v().pipeline.empty());
  EXPECT_EQ(c.pc.find(kBig), nullptr);
}

TEST(PipelineBuild, AFailedStageGivesTheBuildUpAndTheVersionIsPlacedWhole) {
  Cluster c(3);
  const PipelineOrders started = c.start();
  ASSERT_EQ(started.size(), 3u);
  EXPECT_TRUE(c.pc.stage_loaded(kBig, started[0].node, started[0].attempt, Cluster::stage_of(started[0])).empty());
  const PipelineOrders gone =
      c.pc.stage_loaded(kBig, started[1].node, started[1].attempt, unavailable("no room after all"));
  ASSERT_EQ(kinds(gone), (std::vector<Kind>{Kind::unload_stage, Kind::publish, Kind::place}));
  EXPECT_EQ(gone[0].node, started[0].node);
  EXPECT_EQ(gone[0].stage_key, Cluster::stage_key(started[0]));
  EXPECT_TRUE(c.v().loading_on.empty());
  EXPECT_TRUE(c.v().failed_on.count(started[1].node)) << "the failure counts against its node";
  for (uint64_t n : c.nodes) EXPECT_EQ(c.members.reserved(n), 0u);
  EXPECT_TRUE(c.pc.forbidden(kBig));
  EXPECT_TRUE(c.pc.start(c.v(), nullptr).empty()) << "placed whole this round";
  // A stage bound after its build was given up leaves its node.
  const PipelineOrders late =
      c.pc.stage_loaded(kBig, started[0].node, started[0].attempt, Cluster::stage_of(started[0]));
  ASSERT_EQ(kinds(late), (std::vector<Kind>{Kind::unload_stage}));
}

TEST(PipelineBuild, AMemberLostWhileServingDissolvesThePipelineAndOneLostBeforeGivesItUp) {
  Cluster c(3);
  const PipelineOrders started = c.start();
  for (size_t i = 0; i < 2; ++i)
    (void)c.pc.stage_loaded(kBig, started[i].node, started[i].attempt, Cluster::stage_of(started[i]));
  ASSERT_EQ(c.v().pipeline.size(), 2u);
  (void)c.pc.member_completed(kBig, started[0].node, started[0].attempt, Cluster::stage_of(started[0]));
  const PipelineOrders dissolved = c.pc.member_lost(kBig, started[1].node);
  ASSERT_EQ(kinds(dissolved), (std::vector<Kind>{Kind::publish, Kind::unload_stage, Kind::answer}));
  EXPECT_TRUE(c.v().pipeline.empty()) << "the pipeline leaves routing at once";
  EXPECT_EQ(dissolved[2].node, started[0].node) << "the member that completed is a replica now";
  EXPECT_TRUE(dissolved[2].announce);
  EXPECT_FALSE(dissolved[2].completion);
  EXPECT_EQ(c.pc.find(kBig), nullptr);

  Cluster d(3);
  const PipelineOrders again = d.start();
  const PipelineOrders given_up = d.pc.member_lost(kBig, again[0].node);
  ASSERT_EQ(kinds(given_up), (std::vector<Kind>{Kind::publish, Kind::place}));
  EXPECT_TRUE(d.pc.forbidden(kBig));
  EXPECT_TRUE(d.pc.member_lost(kBig, again[1].node).empty());
}

TEST(PipelineBuild, AnUnloadEndsTheBuildAndItsBoundStagesLeave) {
  Cluster c(3);
  const PipelineOrders started = c.start();
  (void)c.pc.stage_loaded(kBig, started[0].node, started[0].attempt, Cluster::stage_of(started[0]));
  const PipelineOrders unloaded = c.pc.unloaded(kBig);
  ASSERT_EQ(kinds(unloaded), (std::vector<Kind>{Kind::unload_stage}));
  EXPECT_EQ(unloaded[0].node, started[0].node);
  for (uint64_t n : c.nodes) EXPECT_EQ(c.members.reserved(n), 0u);
  EXPECT_EQ(c.pc.find(kBig), nullptr);
  EXPECT_FALSE(c.pc.forbidden(kBig));
}

TEST(PipelineBuild, PlanTablesAreBuiltOneVersionAtATimeOffTheActor) {
  Cluster c(1);
  auto job = c.pc.next_tables();
  ASSERT_TRUE(job);
  EXPECT_EQ(job->key, kBig);
  EXPECT_EQ(job->parts, (std::vector<uint32_t>{2, 3, 4}));
  EXPECT_FALSE(c.pc.next_tables()) << "one job at a time";
  c.pc.tables_built(*job, PartitionController::build_tables(*job));
  EXPECT_EQ(c.pc.tables(), 3u);
  EXPECT_FALSE(c.pc.next_tables()) << "none lacks a table";
  c.pc.forget(kBig);
  ASSERT_TRUE(c.pc.next_tables());
  c.pc.tables_refused();
  EXPECT_TRUE(c.pc.next_tables()) << "a refused job may be asked again";
}

}  // namespace partition_controller_test
}  // namespace ember
