// DeviceMemory (actors/node/engine/device_memory.hpp): the reservation's shape, placing and freeing
// weights with the free bytes committed as the header says, activation lending and its return
// under one lock from many threads, injected allocation faults, the accounting by use; and,
// through an engine, activations borrowing from the pool under a burst and pinned staging.
#include "actors/node/engine/device_memory.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "tests/actors/node/engine/engine_test_util.hpp"

namespace ember::device_memory_test {

// The helpers by name, not by `using namespace`: the helper `engine` would clash with the room's
// namespace, ember::engine.
using engine_test::MiB;
using engine_test::swap_run;
using engine_test::warm_outputs;
using engine_test::write_mlp;

// The activation pool (StreamBox's Algorithm 1): runs whose activations do not fit the workspace
// borrow whole partitions of the model pool, lazily, and give them back as soon as the last buffer
// in them goes; answers stay those of warm runs; with the pool full of weights, a run that needs
// more than the workspace fails out of memory and leaves nothing behind.
TEST(ExecutorEngineStreams, ActivationsBorrowFromThePoolUnderABurstAndGiveItBackAfter) {
  gpu::testing::TempDir dir;
  auto e = ExecutorEngine::create(gpu::testing::sim_device(64 * MiB), EngineOptions{64, 1 * MiB, 256 << 10, 3});
  ASSERT_TRUE(e.ok()) << e.error().message();
  std::vector<std::shared_ptr<const gpu::Model>> models;
  for (int i = 0; i < 3; ++i) models.push_back(write_mlp(dir / ("m" + std::to_string(i)), i + 21, 3));
  auto key = [](size_t i) { return model_key{"m" + std::to_string(i), 1}; };
  for (size_t i = 0; i < models.size(); ++i) {
    auto r = swap_run(**e, SwapRun{key(i), models[i], gpu::testing::arch_inputs(*models[i], 1, 1, 1)});
    ASSERT_TRUE(r.run.outputs.ok()) << r.run.outputs.error().message();
  }
  const uint64_t pool_free = (*e)->engine_memory().pool_free;
  EXPECT_EQ((*e)->activation_stats().grows, 0u) << "small runs fit the workspace";
  // A burst of large runs (1024 rows: megabytes of activations each), three models at once.
  std::vector<std::vector<gpu::HostTensor>> inputs;
  std::vector<std::promise<ExecutorEngine::SwapRunResult>> done(6);
  for (size_t n = 0; n < done.size(); ++n) {
    inputs.push_back(gpu::testing::arch_inputs(*models[n % 3], 1024, 1, 50 + n));
    ASSERT_TRUE((*e)->swap_run(SwapRun{key(n % 3), models[n % 3], inputs[n]},
                               [&, n](ExecutorEngine::SwapRunResult r) { done[n].set_value(std::move(r)); }));
  }
  for (size_t n = 0; n < done.size(); ++n) {
    auto r = done[n].get_future().get();
    ASSERT_TRUE(r.run.outputs.ok()) << r.run.outputs.error().message();
    EXPECT_GT(r.plan_bytes, 1 * MiB) << "the premise: a run needs more than the workspace";
    EXPECT_TRUE(gpu::testing::bitwise_equal((*r.run.outputs)[0], warm_outputs(models[n % 3], inputs[n])[0]));
  }
  auto st = (*e)->activation_stats();
  EXPECT_GE(st.grows, 1u);
  EXPECT_GT(st.peak_reserved_bytes, 0u);
  EXPECT_EQ(st.segments, 0u) << "a segment outlived its last buffer";
  EXPECT_EQ(st.reserved_bytes, 0u);
  EXPECT_EQ(st.shrinks, st.grows);
  EXPECT_EQ((*e)->engine_memory().pool_free, pool_free) << "the weights' room came back";
  // The pool full of weights: nothing to borrow, and a large run says so.
  std::vector<std::shared_ptr<const gpu::Model>> fill;
  for (int i = 0;; ++i) {
    ASSERT_LT(i, 30) << "the pool never filled";
    fill.push_back(write_mlp(dir / ("f" + std::to_string(i)), i + 31, 3));
    auto r = swap_run(
        **e, SwapRun{{"f" + std::to_string(i), 1}, fill.back(), gpu::testing::arch_inputs(*fill.back(), 1, 1, 1)});
    if (r.run.outputs.ok()) continue;
    ASSERT_EQ(r.run.outputs.error().code(), ErrorCode::out_of_memory) << r.run.outputs.error().message();
    break;
  }
  auto big = swap_run(**e, SwapRun{key(0), models[0], gpu::testing::arch_inputs(*models[0], 4096, 1, 9)});
  ASSERT_FALSE(big.run.outputs.ok());
  EXPECT_EQ(big.run.outputs.error().code(), ErrorCode::out_of_memory);
  EXPECT_NE(big.run.outputs.error().message().find("lends no"), std::string::npos) << big.run.outputs.error().message();
  EXPECT_FALSE(big.fault);
  EXPECT_EQ((*e)->activation_stats().segments, 0u);
  auto small = swap_run(**e, SwapRun{key(0), models[0], gpu::testing::arch_inputs(*models[0], 1, 1, 2)});
  EXPECT_TRUE(small.run.outputs.ok()) << "the engine still serves";
}

// With a pinned staging region, a run's inputs and answers cross to and from the device from pinned
// memory only (the device counts no pageable copy), weights included (the host copy is registered),
// and the answers are the same.
TEST(ExecutorEngineSwap, InputsAndAnswersGoThroughThePinnedStagingRegion) {
  gpu::testing::TempDir dir;
  auto m = write_mlp(dir / "m", 5, 3);
  auto device = gpu::testing::sim_device(16 * MiB, 0);
  gpu::SimDevice* sim = device.get();
  EngineOptions options{64, 8 * MiB, 256 << 10, 1};
  options.staging_bytes = 1 * MiB;
  auto e = ExecutorEngine::create(std::move(device), options);
  ASSERT_TRUE(e.ok()) << e.error().message();
  const auto before = sim->copy_counts();
  for (int rows : {1, 64}) {
    const auto x = gpu::testing::arch_inputs(*m, rows, 1, 7 + rows);
    auto r = swap_run(**e, SwapRun{{"m", 1}, m, x});
    ASSERT_TRUE(r.run.outputs.ok()) << r.run.outputs.error().message();
    EXPECT_TRUE(gpu::testing::bitwise_equal((*r.run.outputs)[0], warm_outputs(m, x)[0]));
    SwapRun kept{{"m", 1}, m, x};  // a hand-off run: its inputs go through the engine's own copies
    kept.keep = {"relu2"};
    auto k = swap_run(**e, kept);
    ASSERT_TRUE(k.run.outputs.ok()) << k.run.outputs.error().message();
    ASSERT_EQ(k.kept.size(), 1u);
    (*e)->release({k.kept[0].handle});
  }
  const auto after = sim->copy_counts();
  EXPECT_GT(after.to_device, before.to_device);
  EXPECT_GT(after.to_host_bytes, before.to_host_bytes);
  EXPECT_EQ(after.pageable_bytes, before.pageable_bytes) << "a copy from or to pageable memory reached the device";
}

std::unique_ptr<ember::engine::DeviceMemory> reserve(gpu::Device& device, uint64_t workspace) {
  auto m = ember::engine::DeviceMemory::reserve(device, workspace, 256 << 10, 0);
  EXPECT_TRUE(m.ok()) << m.error().message();
  return m.ok() ? std::move(*m) : nullptr;
}

// 16 MiB with 8 MiB of workspace: a pool of eight 1 MiB partitions, the groups as configured (no
// probe); a workspace as large as the device leaves no room and says so.
TEST(DeviceMemory, ReservesWholePartitionsAndLeavesTheWorkspace) {
  auto device = gpu::testing::sim_device(16 * MiB);
  auto m = reserve(*device, 8 * MiB);
  ASSERT_TRUE(m);
  const EngineMemory t = m->totals();
  EXPECT_EQ(t.pool_capacity, 8 * MiB);
  EXPECT_EQ(t.pool_free, 8 * MiB);
  EXPECT_EQ(t.workspace, 8 * MiB);
  EXPECT_EQ(m->partition_bytes(), 1 * MiB);
  EXPECT_EQ(m->group_bytes(), 256u << 10);
  EXPECT_TRUE(m->elbow_curve().empty());
  EXPECT_EQ(m->staging(), nullptr);
  EXPECT_EQ(device->memory().used_bytes, 8 * MiB) << "the region is reserved whole";
  auto other = gpu::testing::sim_device(16 * MiB, 1);
  auto none = ember::engine::DeviceMemory::reserve(*other, 16 * MiB, 256 << 10, 0);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(none.error().message().find("leaves no room"), std::string::npos) << none.error().message();
}

// Weights placed count in the free bytes others read once committed (a model published), and go
// back, committed, when freed; injected faults fail the next placements only.
TEST(DeviceMemory, PlacedWeightsCountOnceCommittedAndFreedOnesAtOnce) {
  auto device = gpu::testing::sim_device(16 * MiB);
  auto m = reserve(*device, 8 * MiB);
  ASSERT_TRUE(m);
  auto placed = m->placer("m/1")({1 * MiB, 512 << 10});
  ASSERT_TRUE(placed.ok()) << placed.error().message();
  EXPECT_EQ(placed->size(), 2u);
  const uint64_t bytes = m->bytes_of("m/1");
  EXPECT_GE(bytes, 1 * MiB + (512 << 10));
  EXPECT_EQ(m->totals().pool_free, 8 * MiB) << "not committed while the model is not published";
  m->commit();
  EXPECT_EQ(m->totals().pool_free, 8 * MiB - bytes);
  m->free("m/1");
  EXPECT_EQ(m->bytes_of("m/1"), 0u);
  EXPECT_EQ(m->totals().pool_free, 8 * MiB);
  m->free("never placed");  // nothing
  m->fail_allocations(2);
  for (int i = 0; i < 2; ++i) {
    auto failed = m->placer("f")({1 * MiB});
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.error().code(), ErrorCode::out_of_memory);
    EXPECT_NE(failed.error().message().find("injected fault"), std::string::npos);
  }
  EXPECT_TRUE(m->placer("f")({1 * MiB}).ok()) << "only the next two";
}

// Runs on several threads borrow activation memory from the pool (lent segments) while jobs place
// and free weights and the metrics read the accounting: one lock, no deadlock with the activation
// pool's, and everything back where it was at the end.
TEST(DeviceMemory, ActivationLendingAndWeightsShareOneLockFromManyThreads) {
  auto device = gpu::testing::sim_device(16 * MiB);
  auto m = reserve(*device, 1 * MiB);  // 15 partitions of 1 MiB
  ASSERT_TRUE(m);
  const uint64_t capacity = m->totals().pool_capacity;
  ASSERT_EQ(capacity, 15 * MiB);
  constexpr int kThreads = 4, kRounds = 50;
  std::atomic<int> failures{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string name = "w" + std::to_string(t);
      for (int i = 0; i < kRounds; ++i) {
        auto buffer = m->activations().allocate(3 * MiB / 2);  // beyond the workspace: lent
        auto placed = m->placer(name)({1 * MiB});
        if (!buffer.ok() || !placed.ok()) ++failures;
        m->commit();
        m->free(name);
      }
    });
  }
  std::thread reader([&] {
    while (!done.load()) {
      const EngineMemory u = m->use(0, {});
      if (u.pool_free > u.pool_capacity || u.use.lent > u.pool_capacity) ++failures;
    }
  });
  for (auto& t : threads) t.join();
  done = true;
  reader.join();
  EXPECT_EQ(failures.load(), 0);
  const auto st = m->activation_stats();
  EXPECT_GE(st.grows, 1u);
  EXPECT_EQ(st.shrinks, st.grows);
  EXPECT_EQ(st.segments, 0u);
  EXPECT_EQ(st.reserved_bytes, 0u);
  EXPECT_EQ(m->totals().pool_free, capacity);
}

// The accounting by use: weights, Shadows, kept values and lent activation memory, apart.
TEST(DeviceMemory, UseCountsWeightsShadowsKeptAndLentMemoryApart) {
  auto device = gpu::testing::sim_device(16 * MiB);
  auto m = reserve(*device, 1 * MiB);
  ASSERT_TRUE(m);
  ASSERT_TRUE(m->placer("m/1")({2 * MiB}).ok());
  ASSERT_TRUE(m->placer("#shadow/m/1/1")({1 * MiB}).ok());
  m->commit();
  auto buffer = m->activations().allocate(3 * MiB / 2);
  ASSERT_TRUE(buffer.ok());
  const uint64_t kept = 512 << 10;
  const EngineMemory u = m->use(kept, {"#shadow/m/1/1"});
  EXPECT_EQ(u.use.capacity, 16 * MiB);
  EXPECT_EQ(u.use.lent, 2 * MiB) << "whole partitions";
  EXPECT_EQ(u.use.shadows, m->bytes_of("#shadow/m/1/1"));
  EXPECT_EQ(u.use.weights, m->bytes_of("m/1")) << "a Shadow's bytes are not a model's";
  EXPECT_EQ(u.use.kept, kept);
  EXPECT_EQ(u.use.used, device->memory().used_bytes);
  EXPECT_LE(u.use.activations, u.use.lent);
  buffer->reset();
  EXPECT_EQ(m->use(0, {}).use.lent, 0u) << "the segment went back with its last buffer";
}

}  // namespace ember::device_memory_test
