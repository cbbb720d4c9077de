// Lanes (actors/node/engine/lanes.hpp): runs of different models at once, each model's runs in
// order and one at a time, drain, and the hand-off streams reused; and, through an engine, runs of
// resident models in lanes answering as they would alone.
#include "actors/node/engine/lanes.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "tests/actors/node/engine/engine_test_util.hpp"

namespace ember::lanes_test {

// The helpers by name, not by `using namespace`: the helper `engine` would clash with the room's
// namespace, ember::engine.
using engine_test::MiB;
using engine_test::swap_run;
using engine_test::warm_outputs;
using engine_test::write_mlp;

// Functions as streams: with three lanes, runs of three resident models (plain inference and
// late-binding runs, mixed) execute at once, each answer bit for bit the model's answer alone, each
// model's answers in the order asked; an unbind queued behind them waits for its model's runs.
TEST(ExecutorEngineStreams, RunsOfDifferentModelsRunAtOnceAnswerAsAloneAndKeepEachModelsOrder) {
  gpu::testing::TempDir dir;
  auto e = ExecutorEngine::create(gpu::testing::sim_device(64 * MiB), EngineOptions{256, 32 * MiB, 256 << 10, 3});
  ASSERT_TRUE(e.ok()) << e.error().message();
  std::vector<std::shared_ptr<const gpu::Model>> models;
  for (int i = 0; i < 3; ++i) models.push_back(write_mlp(dir / ("m" + std::to_string(i)), i + 11, 6));
  auto key = [](size_t i) { return model_key{"m" + std::to_string(i), 1}; };
  for (size_t i = 0; i < models.size(); ++i) {
    auto r = swap_run(**e, SwapRun{key(i), models[i], gpu::testing::arch_inputs(*models[i], 1, 1, 1)});
    ASSERT_TRUE(r.run.outputs.ok()) << r.run.outputs.error().message();
    EXPECT_GT(r.plan_bytes, 0u) << "a run reports its activations' bytes";
  }
  constexpr int kPerModel = 8;
  std::mutex mu;
  std::map<size_t, std::vector<int>> order;  // per model, the answers' indices as they came
  std::vector<std::promise<std::vector<gpu::HostTensor>>> answers(models.size() * kPerModel);
  std::vector<std::vector<gpu::HostTensor>> inputs(answers.size());
  for (int k = 0; k < kPerModel; ++k) {
    for (size_t i = 0; i < models.size(); ++i) {
      const size_t n = i * kPerModel + k;
      inputs[n] = gpu::testing::arch_inputs(*models[i], 16, 1, 100 + n);
      auto record = [&, i, k, n](Result<std::vector<gpu::HostTensor>> out) {
        {
          std::lock_guard lock(mu);
          order[i].push_back(k);
        }
        answers[n].set_value(out.ok() ? std::move(*out) : std::vector<gpu::HostTensor>{});
      };
      if (k % 2) {
        ASSERT_TRUE(
            (*e)->infer(key(i), inputs[n], [record](ExecutorEngine::InferResult r) { record(std::move(r.outputs)); }));
      } else {
        ASSERT_TRUE((*e)->swap_run(SwapRun{key(i), models[i], inputs[n]},
                                   [record](ExecutorEngine::SwapRunResult r) { record(std::move(r.run.outputs)); }));
      }
    }
  }
  std::promise<void> unbound;
  (*e)->unbind(key(0), [&] { unbound.set_value(); });
  for (size_t n = 0; n < answers.size(); ++n) {
    auto got = answers[n].get_future().get();
    const auto want = warm_outputs(models[n / kPerModel], inputs[n]);
    ASSERT_EQ(got.size(), want.size()) << "run " << n << " failed";
    EXPECT_TRUE(gpu::testing::bitwise_equal(got[0], want[0])) << "run " << n;
  }
  unbound.get_future().get();
  for (const auto& [i, seen] : order) {
    std::vector<int> asked(kPerModel);
    std::iota(asked.begin(), asked.end(), 0);
    EXPECT_EQ(seen, asked) << "model " << i << "'s answers out of order";
  }
  EXPECT_GE((*e)->peak_running(), 2u) << "no two runs were ever in lanes at once";
  EXPECT_LE((*e)->peak_running(), 3u);
  EXPECT_EQ((*e)->running(), 0u);
  EXPECT_FALSE((*e)->holds(key(0)));
  std::promise<ExecutorEngine::InferResult> gone;
  ASSERT_TRUE((*e)->infer(key(0), inputs[0], [&](ExecutorEngine::InferResult r) { gone.set_value(std::move(r)); }));
  auto r = gone.get_future().get();
  ASSERT_FALSE(r.outputs.ok());
  EXPECT_EQ(r.outputs.error().code(), ErrorCode::unavailable);
}

// One model's runs form a strand: in the order handed on, one at a time, whatever the lanes.
TEST(Lanes, RunsOfOneModelKeepTheirOrderOneAtATime) {
  auto device = gpu::testing::sim_device(16 * MiB);
  ember::engine::Lanes lanes(*device, 3);
  const model_key key{"m", 1};
  std::mutex mu;
  std::vector<int> order;
  std::atomic<int> inside{0}, most{0};
  for (int i = 0; i < 20; ++i) {
    lanes.beside(key, [&, i] {
      const int now = ++inside;
      most = std::max(most.load(), now);
      {
        std::lock_guard lock(mu);
        order.push_back(i);
      }
      --inside;
    });
  }
  lanes.drain();
  std::vector<int> asked(20);
  std::iota(asked.begin(), asked.end(), 0);
  EXPECT_EQ(order, asked);
  EXPECT_EQ(most.load(), 1) << "two runs of one model at once";
  EXPECT_EQ(lanes.running(), 0u);
  EXPECT_EQ(lanes.waiting(), 0u);
  EXPECT_FALSE(lanes.in_lane(key));
}

// Runs of two models run at once: each waits for the other to have started (a lane each, or
// neither would ever start; the bounded wait turns that into a failure instead of a hang).
TEST(Lanes, RunsOfDifferentModelsRunAtOnce) {
  auto device = gpu::testing::sim_device(16 * MiB);
  ember::engine::Lanes lanes(*device, 2);
  std::promise<void> a_started, b_started;
  std::shared_future<void> a = a_started.get_future().share(), b = b_started.get_future().share();
  std::atomic<bool> met_a{false}, met_b{false};
  lanes.beside({"a", 1}, [&] {
    a_started.set_value();
    met_a = b.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  });
  lanes.beside({"b", 1}, [&] {
    b_started.set_value();
    met_b = a.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  });
  lanes.drain();
  EXPECT_TRUE(met_a.load() && met_b.load()) << "the two models' runs did not overlap";
  EXPECT_EQ(lanes.peak(), 2u);
}

// drain() returns only once every strand ended, runs waiting behind a strand included; in_lane()
// says which models have a run in a lane or waiting.
TEST(Lanes, DrainWaitsForEveryStrandAndInLaneSaysWhichModelsRun) {
  auto device = gpu::testing::sim_device(16 * MiB);
  ember::engine::Lanes lanes(*device, 2);
  const model_key a{"a", 1}, b{"b", 1};
  std::promise<void> started, go;
  std::shared_future<void> release = go.get_future().share();
  std::atomic<int> ran{0};
  lanes.beside(a, [&] {
    started.set_value();
    release.wait();
    ++ran;
  });
  lanes.beside(a, [&] { ++ran; });
  started.get_future().wait();
  EXPECT_TRUE(lanes.in_lane(a));
  EXPECT_FALSE(lanes.in_lane(b));
  EXPECT_EQ(lanes.waiting(), 1u);
  EXPECT_EQ(lanes.running(), 1u);
  std::atomic<bool> drained{false};
  std::thread worker([&] {
    lanes.drain();
    drained = true;
  });
  EXPECT_FALSE(drained.load()) << "drained while a run was in a lane";
  go.set_value();
  worker.join();
  EXPECT_TRUE(drained.load());
  EXPECT_EQ(ran.load(), 2);
  EXPECT_FALSE(lanes.in_lane(a));
  EXPECT_EQ(lanes.waiting(), 0u);
}

// A hand-off stream given back is the next one taken; a second taken meanwhile is a new one.
TEST(Lanes, HandOffStreamsAreMadeOnceAndReused) {
  auto device = gpu::testing::sim_device(16 * MiB);
  ember::engine::Lanes lanes(*device, 2);
  auto first = lanes.take_stream();
  gpu::Stream* made = first.get();
  lanes.give_stream(std::move(first));
  auto again = lanes.take_stream();
  EXPECT_EQ(again.get(), made);
  auto second = lanes.take_stream();
  EXPECT_NE(second.get(), made);
  lanes.give_stream(std::move(again));
  lanes.give_stream(std::move(second));
}

}  // namespace ember::lanes_test
