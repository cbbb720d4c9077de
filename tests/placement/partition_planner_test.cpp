// The partition planner: the thesis's worked example, the exact DP against brute force over every
// cut set (memory limits included), plan choice over p, and the precomputed table.
#include "placement/partition_planner.hpp"

#include <gtest/gtest.h>

#include <random>

namespace ember::placement {
namespace partition_planner_test {

constexpr uint64_t kS = 1'000'000;

// Figs. 4.2-4.4: 4 s per request, 8 queued, a 24 s cold start, 2 GPUs; split in two, 12 s each and
// 1 s to send the activation. Full replicas: 34 s mean; a pipelined 2-way split: 24 s.
TEST(PartitionPlanner, ReproducesTheThesisWorkedExample) {
  const std::vector<LayerProfile> layers{{100, 12 * kS, 2 * kS, 1000}, {100, 12 * kS, 2 * kS, 10}};
  const PartitionCosts costs{0, 1.0 * kS / 1000, 0};
  EXPECT_DOUBLE_EQ(evaluate(layers, costs, {}, 8, 2).mean_total_us, 34.0 * kS);
  const PartitionPlan split = evaluate(layers, costs, {0}, 8, 2);
  EXPECT_DOUBLE_EQ(split.mean_total_us, 24.0 * kS);
  EXPECT_EQ(split.cold_start_us, 12 * kS);
  EXPECT_EQ(split.network_us, 1 * kS);
  EXPECT_EQ(split.inference_us, 5 * kS);
  auto chosen = choose_plan(layers, costs, 2, 8);
  ASSERT_TRUE(chosen.ok());
  EXPECT_EQ(chosen->parts, 2u);
  EXPECT_EQ(chosen->cuts, (std::vector<uint32_t>{0}));
}

std::vector<LayerProfile> random_layers(std::mt19937_64& rng, uint32_t n) {
  std::uniform_int_distribution<uint64_t> load(1, 2000), exec(1, 300), out(0, 5000), bytes(1, 100);
  std::vector<LayerProfile> layers;
  for (uint32_t i = 0; i < n; ++i) layers.push_back({bytes(rng), load(rng), exec(rng), out(rng)});
  return layers;
}

// Every cut set with parts − 1 cuts that fits the memory limit; the best T̄ among them.
std::optional<double> brute_force(const std::vector<LayerProfile>& layers, const PartitionCosts& costs, uint32_t parts,
                                  uint64_t x, uint32_t devices) {
  const auto n = static_cast<uint32_t>(layers.size());
  std::optional<double> best;
  for (uint32_t mask = 0; mask < (1u << (n - 1)); ++mask) {
    if (static_cast<uint32_t>(__builtin_popcount(mask)) != parts - 1) continue;
    std::vector<uint32_t> cuts;
    for (uint32_t k = 0; k + 1 < n; ++k)
      if (mask & (1u << k)) cuts.push_back(k);
    bool fits = true;
    uint64_t bytes = 0;
    size_t c = 0;
    for (uint32_t i = 0; i < n; ++i) {
      bytes += layers[i].bytes;
      if (costs.stage_memory_bytes && bytes > costs.stage_memory_bytes) fits = false;
      if (c < cuts.size() && cuts[c] == i) {
        bytes = 0;
        ++c;
      }
    }
    if (!fits) continue;
    const double t = evaluate(layers, costs, cuts, x, devices).mean_total_us;
    if (!best || t < *best) best = t;
  }
  return best;
}

TEST(PartitionPlanner, TheExactPlanMatchesBruteForceOnSmallModels) {
  std::mt19937_64 rng(7);
  int compared = 0, infeasible = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const uint32_t n = 1 + static_cast<uint32_t>(rng() % 9);
    const auto layers = random_layers(rng, n);
    PartitionCosts costs{static_cast<uint64_t>(rng() % 50), static_cast<double>(rng() % 100) / 100, 0};
    if (trial % 3 == 0) costs.stage_memory_bytes = 100 + rng() % 300;  // some plans do not fit
    const uint32_t parts = 1 + static_cast<uint32_t>(rng() % n);
    const uint64_t x = 1 + rng() % 200;
    const uint32_t devices = 1 + static_cast<uint32_t>(rng() % 16);
    const auto want = brute_force(layers, costs, parts, x, devices);
    auto got = best_plan(layers, costs, parts, x, devices);
    if (!want) {
      ++infeasible;
      ASSERT_FALSE(got.ok()) << "trial " << trial;
      EXPECT_EQ(got.error().code(), ErrorCode::unavailable);
      continue;
    }
    ASSERT_TRUE(got.ok()) << "trial " << trial << ": " << got.error().message();
    EXPECT_EQ(got->parts, parts);
    EXPECT_EQ(got->cuts.size(), parts - 1);
    EXPECT_NEAR(got->mean_total_us, *want, 1e-6 * *want) << "trial " << trial;
    ++compared;
  }
  EXPECT_GT(compared, 200);
  EXPECT_GT(infeasible, 0) << "the memory limit was exercised";
}

TEST(PartitionPlanner, EveryStageOfAPlanFitsTheMemoryLimit) {
  std::vector<LayerProfile> layers(12, LayerProfile{100, 1000, 100, 10});
  const PartitionCosts costs{10, 0.01, 250};  // at most 2 layers per stage
  EXPECT_FALSE(best_plan(layers, costs, 5, 10, 8).ok()) << "5 stages cannot hold 12 layers 2 at a time";
  auto plan = best_plan(layers, costs, 6, 10, 8);
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  EXPECT_EQ(plan->cuts, (std::vector<uint32_t>{1, 3, 5, 7, 9}));
  auto chosen = choose_plan(layers, costs, 8, 10);
  ASSERT_TRUE(chosen.ok());
  EXPECT_GE(chosen->parts, 6u);
}

TEST(PartitionPlanner, BadInputIsRefusedByName) {
  const std::vector<LayerProfile> layers(3, LayerProfile{1, 1, 1, 1});
  EXPECT_EQ(best_plan({}, {}, 1, 1, 1).error().code(), ErrorCode::invalid_argument);
  EXPECT_EQ(best_plan(layers, {}, 4, 1, 1).error().message(), "partition planning: 4 parts for 3 layers");
  EXPECT_EQ(best_plan(layers, {}, 1, 0, 1).error().code(), ErrorCode::invalid_argument);
  EXPECT_EQ(choose_plan(layers, {}, 0, 1).error().code(), ErrorCode::invalid_argument);
}

TEST(PartitionPlanner, TheTableHoldsTheBestPlanForEveryQueueLength) {
  std::mt19937_64 rng(11);
  const auto layers = random_layers(rng, 16);
  const PartitionCosts costs{20, 0.05, 0};
  auto table = PlanTable::build(layers, costs, 4, 3000);
  ASSERT_TRUE(table.ok()) << table.error().message();
  ASSERT_FALSE(table->ranges().empty());
  EXPECT_EQ(table->ranges().front().from_x, 1u);
  for (size_t i = 1; i < table->ranges().size(); ++i)
    EXPECT_GT(table->ranges()[i].from_x, table->ranges()[i - 1].from_x);
  for (uint64_t x : {1, 2, 3, 5, 8, 13, 40, 100, 333, 1000, 2999, 3000}) {
    auto direct = choose_plan(layers, costs, 4, x);
    ASSERT_TRUE(direct.ok());
    EXPECT_EQ(table->lookup(static_cast<double>(x)).cuts, direct->cuts) << "x = " << x;
  }
  EXPECT_EQ(table->lookup(0.2).cuts, table->lookup(1).cuts);
  EXPECT_EQ(table->lookup(1e9).cuts, table->lookup(3000).cuts);
}

}  // namespace partition_planner_test
}  // namespace ember::placement
