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
  // (or none) are planned, from the same table.
  auto many = pc.plan(v, {1, 2, 3, 4}, 4, 4000, 0);
  EXPECT_TRUE(!many.ok() || many->stages.size() < 4u);
  EXPECT_EQ(pc.tables(), 1u);
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
