// ShadowHost (actors/node/engine/shadow_host.hpp): Shadows loaded, replaced and dropped, their pool
// memory back once the last holder lets go; and a Body on another engine splitting its batch with
// one, taking the rows back when it is gone.
#include "actors/node/engine/shadow_host.hpp"

#include <gtest/gtest.h>

#include <future>
#include <string>

#include "model/layer_blocks.hpp"
#include "tests/actors/node/engine/engine_test_util.hpp"

namespace ember::shadow_host_test {

// The helpers by name, not by `using namespace`: the helper `engine` would clash with the room's
// namespace, ember::engine.
using engine_test::engine;
using engine_test::MiB;
using engine_test::swap_run;
using engine_test::write_mlp;

// AsyFunc's Body and Shadow on two engines: a Shadow of a range of blocks loaded on one device from
// the host copy, a Body on another splitting its batch with it; the answers are the Body's own
// (within the batch size's 1e-5), and a Shadow dropped, or on a device that restarted, leaves its
// rows to the Body.
TEST(ExecutorEngineShadow, ABodySplitsItsBatchWithAShadowOnAnotherDeviceAndTakesItsRowsBackWhenItIsGone) {
  gpu::testing::TempDir dir;
  auto m = write_mlp(dir / "m", 9, 4);
  auto body = engine(gpu::testing::sim_device(16 * MiB, 0));
  auto shadow = engine(gpu::testing::sim_device(16 * MiB, 1));
  const model_key key{"m", 1};
  const auto x = gpu::testing::arch_inputs(*m, 6, 1, 17);
  auto warm = swap_run(*body, SwapRun{key, m, x});  // the Body: resident
  ASSERT_TRUE(warm.run.outputs.ok()) << warm.run.outputs.error().message();
  const auto want = (*warm.run.outputs)[0];
  const auto blocks = gpu::layer_blocks(m->graph());
  ASSERT_GE(blocks.size(), 4u);
  const gpu::LayerRange range{blocks[1].first, blocks[2].last};
  std::promise<Result<ExecutorEngine::ShadowInfo>> loaded;
  shadow->load_shadow(key, m, range, [&](Result<ExecutorEngine::ShadowInfo> r) { loaded.set_value(std::move(r)); });
  auto info = loaded.get_future().get();
  ASSERT_TRUE(info.ok()) << info.error().message();
  EXPECT_EQ(info->bytes, m->range_bytes(range).length);
  EXPECT_LT(info->bytes, m->range_bytes({0, m->num_layers()}).length / 2) << "a Shadow holds part of the model";
  EXPECT_EQ(shadow->memory_use().use.shadows,
            shadow->engine_memory().pool_capacity - shadow->engine_memory().pool_free);
  EXPECT_GE(shadow->memory_use().use.shadows, info->bytes);
  EXPECT_EQ(shadow->memory_use().use.weights, 0u) << "a Shadow's memory is its own figure, not a model's";
  // Late binding's path: a swap_run paired with the Shadow puts its share of the 6 rows there.
  auto split = [&](ExecutorEngine& e, std::shared_ptr<EngineGate> gate, int64_t rows) {
    SwapRun paired{key, m, x};
    paired.shadow = std::move(gate);
    paired.shadow_share = static_cast<double>(rows) / 6;
    return swap_run(e, paired);
  };
  for (int64_t rows : {1, 3, 5}) {
    auto r = split(*body, shadow->gate(), rows);
    ASSERT_TRUE(r.run.outputs.ok()) << r.run.outputs.error().message();
    EXPECT_FALSE(r.split.shadow_failed) << r.split.shadow_error;
    EXPECT_EQ(r.split.shadow_rows, rows);
    EXPECT_LT(gpu::testing::relative_error((*r.run.outputs)[0], want), 1e-5) << rows << " rows on the Shadow";
  }
  // Loaded again: it replaces the first, whose memory goes back.
  const uint64_t one = shadow->memory_use().use.shadows;
  std::promise<Result<ExecutorEngine::ShadowInfo>> replaced;
  shadow->load_shadow(key, m, range, [&](Result<ExecutorEngine::ShadowInfo> r) { replaced.set_value(std::move(r)); });
  ASSERT_TRUE(replaced.get_future().get().ok());
  EXPECT_EQ(shadow->memory_use().use.shadows, one) << "one Shadow's memory, not two";
  // Dropped: the Body computes every row.
  std::promise<bool> dropped;
  shadow->drop_shadow(key, [&](bool d) { dropped.set_value(d); });
  EXPECT_TRUE(dropped.get_future().get());
  auto alone = split(*body, shadow->gate(), 3);
  ASSERT_TRUE(alone.run.outputs.ok());
  EXPECT_TRUE(alone.split.shadow_failed);
  EXPECT_NE(alone.split.shadow_error.find("no Shadow"), std::string::npos) << alone.split.shadow_error;
  EXPECT_TRUE(alone.split.shadow_lost) << "the Shadow's absence ends a pair";
  EXPECT_LT(gpu::testing::relative_error((*alone.run.outputs)[0], want), 1e-5);
  EXPECT_EQ(shadow->memory_use().use.shadows, 0u) << "the Shadow's memory went back";
  // Loaded again, then its device restarts (the engine goes): the Body still answers.
  std::promise<Result<ExecutorEngine::ShadowInfo>> again;
  shadow->load_shadow(key, m, range, [&](Result<ExecutorEngine::ShadowInfo> r) { again.set_value(std::move(r)); });
  ASSERT_TRUE(again.get_future().get().ok());
  auto gate = shadow->gate();
  shadow.reset();
  auto orphan = split(*body, gate, 3);
  ASSERT_TRUE(orphan.run.outputs.ok()) << orphan.run.outputs.error().message();
  EXPECT_TRUE(orphan.split.shadow_failed);
  EXPECT_LT(gpu::testing::relative_error((*orphan.run.outputs)[0], want), 1e-5);
}

// ShadowHost on its own: a device, its memory and worker.
struct Host {
  std::unique_ptr<gpu::SimDevice> device = gpu::testing::sim_device(16 * MiB);
  std::unique_ptr<ember::engine::DeviceMemory> memory =
      std::move(*ember::engine::DeviceMemory::reserve(*device, 8 * MiB, 256 << 10, 0));
  ember::engine::JobWorker worker{*device, 8};
  ember::engine::ShadowHost shadows{*device, *memory, worker};
  ~Host() { shadows.clear(); }
};

// A load replaces the Shadow held for the key under a pool name of its own; the one replaced keeps
// its memory while a split still holds it and gives it back with its last holder; a drop lets the
// Shadow go, and dropping again says none was held.
TEST(ShadowHost, ALoadReplacesTheShadowHeldAndItsMemoryGoesBackWithTheLastHolder) {
  gpu::testing::TempDir dir;
  Host h;
  auto m = write_mlp(dir / "m", 7, 4);
  const model_key key{"m", 1};
  const auto blocks = gpu::layer_blocks(m->graph());
  ASSERT_GE(blocks.size(), 3u);
  const gpu::LayerRange range{blocks[1].first, blocks[2].last};
  auto first = h.shadows.load(key, m, range);
  ASSERT_TRUE(first.ok()) << first.error().message();
  EXPECT_EQ(*first, m->range_bytes(range).length);
  ASSERT_EQ(h.shadows.pool_names().size(), 1u);
  const std::string first_name = h.shadows.pool_names()[0];
  EXPECT_GE(h.memory->bytes_of(first_name), *first);
  EXPECT_EQ(h.memory->totals().pool_free, 8 * MiB - h.memory->bytes_of(first_name)) << "committed";
  auto held = h.shadows.held(key);  // a split runs on it
  ASSERT_TRUE(held);
  EXPECT_EQ(held->ex->range().first, range.first);
  ASSERT_TRUE(h.shadows.load(key, m, range).ok());
  ASSERT_EQ(h.shadows.pool_names().size(), 1u) << "one Shadow a key";
  const std::string second_name = h.shadows.pool_names()[0];
  EXPECT_NE(second_name, first_name);
  EXPECT_GT(h.memory->bytes_of(first_name), 0u) << "the split still holds the one replaced";
  held.reset();
  EXPECT_EQ(h.memory->bytes_of(first_name), 0u) << "its last holder let go";
  EXPECT_TRUE(h.shadows.drop(key));
  EXPECT_FALSE(h.shadows.drop(key)) << "none left";
  EXPECT_FALSE(h.shadows.held(key));
  EXPECT_TRUE(h.shadows.pool_names().empty());
  EXPECT_EQ(h.memory->bytes_of(second_name), 0u);
  EXPECT_EQ(h.memory->totals().pool_free, 8 * MiB);
}

// A range outside the model, a Shadow that does not fit and a broken engine are refused, and
// leave nothing behind in the pool.
TEST(ShadowHost, ALoadThatFailsLeavesNothingBehind) {
  gpu::testing::TempDir dir;
  Host h;
  auto m = write_mlp(dir / "m", 8, 4);
  const model_key key{"m", 1};
  auto outside = h.shadows.load(key, m, {0, m->num_layers() + 5});
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.error().code(), ErrorCode::invalid_argument) << outside.error().message();
  auto big = write_mlp(dir / "big", 9, 12);  // 12 MiB of weights in an 8 MiB pool
  auto too_big = h.shadows.load({"big", 1}, big, {0, big->num_layers()});
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.error().code(), ErrorCode::out_of_memory) << too_big.error().message();
  h.worker.fault_next_kernel();
  auto broken = h.shadows.load(key, m, {0, m->num_layers()});
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.error().code(), ErrorCode::device_fault);
  EXPECT_TRUE(h.shadows.pool_names().empty());
  EXPECT_EQ(h.memory->totals().pool_free, 8 * MiB);
}

}  // namespace ember::shadow_host_test
