// PartitionController: a version's profile turned into the stages of a partitioned cold start,
// planned from the version's plan table for the expected queue (built once per version and part
// limit, rebuilt when the version's files change).
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

}  // namespace partition_controller_test
}  // namespace ember
