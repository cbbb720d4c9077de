// ResidentModels (actors/node/engine/resident_models.hpp): the executors the jobs use and the
// published view other threads read, apart; views of an executor made once.
#include "actors/node/engine/resident_models.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "tests/actors/node/engine/engine_test_util.hpp"

namespace ember::resident_models_test {

// The helpers by name, not by `using namespace`: the helper `engine` would clash with the room's
// namespace, ember::engine.
using engine_test::MiB;
using engine_test::write_mlp;

std::unique_ptr<gpu::LayerExecutor> executor(gpu::Device& device, const std::shared_ptr<const gpu::Model>& m) {
  auto ex = gpu::LayerExecutor::create(device, m, {0, m->num_layers()});
  EXPECT_TRUE(ex.ok()) << ex.error().message();
  return std::move(*ex);
}

// A model added is not yet one others see: it is once published (with where its weights are, and
// whether it batches), and no longer once unpublished, while the jobs' executor stays until erased.
TEST(ResidentModels, WhatOtherThreadsSeeIsWhatWasPublished) {
  gpu::testing::TempDir dir;
  auto device = gpu::testing::sim_device(64 * MiB);
  gpu::ServingConfig batching;
  batching.dynamic_batching = true;
  auto plain = write_mlp(dir / "p", 1, 2);
  auto batched = write_mlp(dir / "b", 2, 2, batching);
  const model_key p{"p", 1}, b{"b", 1};
  ember::engine::ResidentModels models;
  EXPECT_TRUE(models.empty());
  EXPECT_FALSE(models.any().has_value());
  ember::engine::Resident& added = models.add(p, ember::engine::Resident{plain, executor(*device, plain), {}});
  models.add(b, ember::engine::Resident{batched, executor(*device, batched), {}});
  EXPECT_EQ(models.find(p), &added);
  EXPECT_TRUE(models.contains(b));
  EXPECT_EQ(models.find({"absent", 1}), nullptr);
  EXPECT_FALSE(models.holds(p)) << "added, not published";
  EXPECT_TRUE(models.bound().empty());
  models.publish(p, *added.ex);
  models.publish(b, *models.find(b)->ex);
  EXPECT_TRUE(models.holds(p));
  EXPECT_FALSE(models.batches(p));
  EXPECT_TRUE(models.batches(b));
  auto segments = models.segments(p);
  ASSERT_TRUE(segments.has_value());
  EXPECT_EQ(segments->size(), added.ex->weight_segments().size());
  EXPECT_EQ(models.bound(), (std::vector<model_key>{b, p}));
  models.unpublish(p);
  EXPECT_FALSE(models.holds(p));
  EXPECT_FALSE(models.segments(p).has_value());
  EXPECT_TRUE(models.contains(p)) << "the executor stays until the job erases it";
  models.erase(p);
  EXPECT_FALSE(models.contains(p));
  EXPECT_EQ(models.any(), std::optional<model_key>(b));
  models.clear();
  EXPECT_TRUE(models.empty());
  EXPECT_TRUE(models.batches(b)) << "clear() drops executors; the published view is the jobs' to change";
}

TEST(ResidentModels, AViewOfAnExecutorIsMadeOnceARange) {
  gpu::testing::TempDir dir;
  auto device = gpu::testing::sim_device(64 * MiB);
  auto m = write_mlp(dir / "m", 3, 3);
  ember::engine::Resident r{m, executor(*device, m), {}};
  auto front = r.view({0, 2});
  ASSERT_TRUE(front.ok()) << front.error().message();
  auto again = r.view({0, 2});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*front, *again);
  auto back = r.view({2, m->num_layers()});
  ASSERT_TRUE(back.ok());
  EXPECT_NE(*back, *front);
  EXPECT_EQ(r.views.size(), 2u);
}

}  // namespace ember::resident_models_test
