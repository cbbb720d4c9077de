// Generation through the ExecutorEngine façade (executor_engine.hpp, generations.hpp): a swap_run
// with SwapRun::generate swaps the model in and joins its loop; the steps run as worker jobs beside
// other models' runs; an eviction preempts a model's streams and the next join brings them back
// with every token right; what cannot generate is refused before any output; a cancel ends a stream;
// an engine that stops ends every stream with an answer.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "actors/node/engine/executor_engine.hpp"
#include "tests/actors/node/engine/engine_test_util.hpp"
#include "tests/actors/node/engine/generation_test_util.hpp"
#include "tests/gpu/test_util.hpp"

namespace ember::engine_generation_test {

using namespace std::chrono_literals;
using engine::generation_test::decoder;
using engine::generation_test::kVocab;

// What each stream received, filled on the engine's worker.
class Streams {
 public:
  MakeGeneration job(const std::string& id, std::vector<int32_t> prompt, int64_t max_tokens) {
    return [this, id, prompt = std::move(prompt), max_tokens](const text::Tokenizer*) -> Result<GenerationJob> {
      GenerationJob j;
      j.id = id;
      j.prompt = prompt;
      j.sampling.temperature = 0;
      j.stop.max_tokens = max_tokens;
      j.emit = [this, id](GenerationOutput out) {
        std::lock_guard lock(mu_);
        auto& r = got_[id];
        r.tokens.insert(r.tokens.end(), out.tokens.begin(), out.tokens.end());
        if (out.final) {
          r.finals.push_back(std::move(out));
          cv_.notify_all();
        }
      };
      return j;
    };
  }
  struct Received {
    std::vector<int32_t> tokens;
    std::vector<GenerationOutput> finals;
  };
  /// Waits for `id`'s final output (a bound, not a pace: the stream's steps are what it waits for).
  Received wait(const std::string& id) {
    std::unique_lock lock(mu_);
    EXPECT_TRUE(cv_.wait_for(lock, 60s, [&] { return !got_[id].finals.empty(); })) << id << " never ended";
    return got_[id];
  }
  Received now(const std::string& id) {
    std::lock_guard lock(mu_);
    return got_[id];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Received> got_;
};

struct Rig {
  gpu::testing::TempDir dir;
  std::shared_ptr<const gpu::Model> llm = decoder(dir / "llm", true);
  std::unique_ptr<ExecutorEngine> engine = engine_test::engine(gpu::testing::sim_device(64 * engine_test::MiB));
  const model_key key{"llm", 1};
  Streams streams;

  std::vector<int32_t> reference(std::vector<int32_t> prompt, size_t n) {
    auto device = gpu::testing::sim_device(64 * engine_test::MiB);
    auto ex = gpu::LayerExecutor::create(*device, llm, {0, llm->num_layers()});
    EXPECT_TRUE(ex.ok());
    return engine::generation_test::recomputed(*device, **ex, std::move(prompt), n);
  }
  SwapRun generate(const std::string& id, std::vector<int32_t> prompt, int64_t max_tokens) {
    SwapRun run;
    run.key = key;
    run.model = llm;
    run.generate = streams.job(id, std::move(prompt), max_tokens);
    return run;
  }
};

TEST(EngineGeneration, AJoinSwapsTheModelInAndStreamsBesideOtherModelsRuns) {
  Rig rig;
  auto joined = engine_test::swap_run(*rig.engine, rig.generate("a", {4, 8, 15, 16}, 30));
  ASSERT_TRUE(joined.run.outputs.ok()) << joined.run.outputs.error().message();
  EXPECT_TRUE(joined.swapped);
  EXPECT_TRUE(joined.run.outputs->empty());
  ASSERT_TRUE(engine_test::swap_run(*rig.engine, rig.generate("b", {23, 42}, 25)).run.outputs.ok());
  // Another model's runs take their turns between the steps.
  auto mlp = engine_test::write_mlp(rig.dir / "mlp", 3, 2);
  SwapRun other;
  other.key = {"mlp", 1};
  other.model = mlp;
  other.inputs = gpu::testing::arch_inputs(*mlp, 2, 1, 5);
  for (int i = 0; i < 3; ++i) {
    auto r = engine_test::swap_run(*rig.engine, other);
    ASSERT_TRUE(r.run.outputs.ok()) << r.run.outputs.error().message();
  }
  const auto a = rig.streams.wait("a"), b = rig.streams.wait("b");
  EXPECT_EQ(a.tokens, rig.reference({4, 8, 15, 16}, 30));
  EXPECT_EQ(b.tokens, rig.reference({23, 42}, 25));
  EXPECT_EQ(a.finals.at(0).finish, text::FinishReason::length);
  EXPECT_EQ(a.finals.at(0).completion_tokens, 30u);
  const auto st = rig.engine->generation_stats();
  EXPECT_EQ(st.loops, 1u);
  EXPECT_EQ(st.tokens_generated, 55u);
}

TEST(EngineGeneration, AnEvictedModelsStreamsArePreemptedAndEndRightOnceItIsBack) {
  Rig rig;
  auto mlp = engine_test::write_mlp(rig.dir / "mlp", 3, 2);
  SwapRun other;
  other.key = {"mlp", 1};
  other.model = mlp;
  other.inputs = gpu::testing::arch_inputs(*mlp, 1, 1, 5);
  other.evict = {rig.key};
  // Another model takes the device: the generating one is evicted under its stream. The join posts
  // its first step before it answers, and the answer (on the worker) posts the eviction: so the
  // eviction runs right after that first step, in the worker's order, with 59 tokens to go.
  std::promise<ExecutorEngine::SwapRunResult> joined, evicted;
  ASSERT_TRUE(rig.engine->swap_run(rig.generate("long", {1, 2, 3}, 60), [&](ExecutorEngine::SwapRunResult r) {
    EXPECT_TRUE(rig.engine->swap_run(other, [&](ExecutorEngine::SwapRunResult e) { evicted.set_value(std::move(e)); }));
    joined.set_value(std::move(r));
  }));
  ASSERT_TRUE(joined.get_future().get().run.outputs.ok());
  auto evicting = evicted.get_future().get();
  ASSERT_TRUE(evicting.run.outputs.ok());
  ASSERT_EQ(evicting.evicted, std::vector<model_key>{rig.key});
  EXPECT_LT(rig.streams.now("long").tokens.size(), 60u);
  // The next request of the model swaps it back; the preempted stream resumes with it.
  ASSERT_TRUE(engine_test::swap_run(*rig.engine, rig.generate("next", {9, 9}, 10)).run.outputs.ok());
  const auto got = rig.streams.wait("long");
  EXPECT_EQ(got.tokens, rig.reference({1, 2, 3}, 60));
  EXPECT_FALSE(got.finals.at(0).error.has_value());
  EXPECT_EQ(rig.streams.wait("next").tokens, rig.reference({9, 9}, 10));
  const auto st = rig.engine->generation_stats();
  EXPECT_EQ(st.preempted_swap + st.preempted_recompute, 1u) << "the eviction preempted the running stream";
}

TEST(EngineGeneration, WhatCannotGenerateIsRefusedBeforeAnyOutput) {
  Rig rig;
  // A model without a generation section.
  auto mlp = engine_test::write_mlp(rig.dir / "mlp", 3, 1);
  SwapRun plain;
  plain.key = {"mlp", 1};
  plain.model = mlp;
  plain.generate = rig.streams.job("plain", {1}, 4);
  auto r = engine_test::swap_run(*rig.engine, plain);
  ASSERT_FALSE(r.run.outputs.ok());
  EXPECT_EQ(r.run.outputs.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(r.run.outputs.error().message().find("not a generative model"), std::string::npos);
  // A job that fails to be made (a tokenizer-less model asked for text, say), and a bad one.
  SwapRun failing = rig.generate("failing", {1}, 4);
  failing.generate = [](const text::Tokenizer*) -> Result<GenerationJob> {
    return invalid_argument("model has no tokenizer: send token ids");
  };
  EXPECT_EQ(engine_test::swap_run(*rig.engine, failing).run.outputs.error().code(), ErrorCode::invalid_argument);
  auto bad = engine_test::swap_run(*rig.engine, rig.generate("vocab", {kVocab + 5}, 4));
  EXPECT_EQ(bad.run.outputs.error().code(), ErrorCode::invalid_argument);
  EXPECT_TRUE(rig.streams.now("plain").finals.empty() && rig.streams.now("vocab").finals.empty());
}

TEST(EngineGeneration, ACancelledStreamEndsAndAStoppingEngineAnswersTheRest) {
  Rig rig;
  // Each join's answer (on the worker, after its first step was posted) queues what the test wants
  // next in the worker's order: the cancel right after the first step; then a job that holds the
  // worker until the engine has begun to stop.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> holding;
  std::promise<ExecutorEngine::SwapRunResult> cancelled_joined, cut_joined;
  ASSERT_TRUE(rig.engine->swap_run(rig.generate("cancelled", {5, 6}, 100), [&](ExecutorEngine::SwapRunResult r) {
    rig.engine->cancel_generation(rig.key, "cancelled");
    cancelled_joined.set_value(std::move(r));
  }));
  ASSERT_TRUE(cancelled_joined.get_future().get().run.outputs.ok());
  ASSERT_TRUE(rig.engine->swap_run(rig.generate("cut", {7, 8}, 100), [&](ExecutorEngine::SwapRunResult r) {
    rig.engine->unbind({"nothing", 1}, [&holding, released] {
      holding.set_value();
      released.wait();
    });
    cut_joined.set_value(std::move(r));
  }));
  ASSERT_TRUE(cut_joined.get_future().get().run.outputs.ok());
  holding.get_future().wait();
  std::shared_ptr<EngineGate> gate = rig.engine->gate();
  std::thread stopper([&] { rig.engine.reset(); });  // mid-stream: the engine stops
  while (gate->open()) std::this_thread::yield();     // the destructor has begun
  release.set_value();
  stopper.join();
  const auto cut = rig.streams.now("cut");
  ASSERT_EQ(cut.finals.size(), 1u) << "a stream the engine stopped under gets its final answer";
  ASSERT_TRUE(cut.finals[0].error.has_value());
  EXPECT_EQ(cut.finals[0].error->code(), ErrorCode::unavailable);
  EXPECT_LT(cut.tokens.size(), 100u);
  const auto cancelled = rig.streams.now("cancelled");
  EXPECT_TRUE(cancelled.finals.empty()) << "a cancelled stream gets nothing more";
  EXPECT_EQ(cancelled.tokens.size(), 1u) << "its first step ran, then the cancel";
}

}  // namespace ember::engine_generation_test
