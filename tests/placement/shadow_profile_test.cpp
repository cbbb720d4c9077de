// A profiled model as the Shadow policy sees it (placement/shadow_profile.hpp).
#include "placement/shadow_profile.hpp"

#include <gtest/gtest.h>

namespace ember::placement {
namespace shadow_profile_test {

// One replica's capacity from a profile alone (autoscale.policy model_level): the most rows a
// second at a profiled batch (or between two) whose summed layer times meet the SLO.
TEST(ShadowProfile, AReplicasCapacityIsTheBestBatchWithinTheSlo) {
  gpu::ModelProfile p;
  p.batches = {1, 2, 4, 8};
  for (int l = 0; l < 2; ++l) {
    gpu::LayerCost c;
    c.exec_us = {5'000, 6'000, 8'000, 12'000};  // 10, 12, 16 and 24 ms summed
    p.layers.push_back(c);
  }
  EXPECT_DOUBLE_EQ(replica_capacity(p, 30'000, 8), 8 / 0.024);
  EXPECT_DOUBLE_EQ(replica_capacity(p, 30'000, 1), 1 / 0.010) << "no batching: one row at a time";
  EXPECT_DOUBLE_EQ(replica_capacity(p, 16'000, 8), 4 / 0.016) << "batch 8 misses the SLO";
  EXPECT_DOUBLE_EQ(replica_capacity(p, 5'000, 8), 0) << "not even one row meets it";
  EXPECT_DOUBLE_EQ(replica_capacity(gpu::ModelProfile{}, 30'000, 8), 0);
}

}  // namespace shadow_profile_test
}  // namespace ember::placement
