// Generation through the ExecutorEngine façade (executor_engine.hpp, generations.hpp): a swap_run
// with SwapRun::generate swaps the model in and joins its loop; the steps run as worker jobs beside
// other models' runs; an eviction parks a model's streams (SwapRunResult::parked) and a resume, on
// the same engine or another device's, continues them with every token right, their KV swapped or
// recomputed; parked streams never taken back, and an unloaded model's, end resumable; what cannot
// generate is refused before any output; a cancel ends a stream; an engine that stops ends every
// stream with an answer; the profile of a generative model runs through its loop and sets the
// measured preemption costs.
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

// An engine whose loops weigh `costs` until a profile measures them (all 0: every preemption
// recomputes).
std::unique_ptr<ExecutorEngine> engine_with(engine::KvPreemptionCosts costs, uint64_t seed = 1) {
  EngineOptions options{64, 32 * engine_test::MiB, 256 << 10, 1};
  options.generation.costs = costs;
  auto e = ExecutorEngine::create(gpu::testing::sim_device(64 * engine_test::MiB, seed), options);
  EXPECT_TRUE(e.ok()) << e.error().message();
  return std::move(*e);
}

// Costs under which a preemption swaps: copies are fast, prefills slow.
engine::KvPreemptionCosts swapping() {
  engine::KvPreemptionCosts c;
  c.host_bytes_per_s = 1e12;
  c.prefill_us_per_token = 1e6;
  return c;
}

// Every job queued on `e` before this call has run (its worker's order): the stats it published are
// the ones generation_stats() reads.
void sync(ExecutorEngine& e) {
  std::promise<void> p;
  e.unbind({"nothing", 1}, [&] { p.set_value(); });
  p.get_future().wait();
}

struct Rig {
  explicit Rig(engine::KvPreemptionCosts costs = {}) : engine(engine_with(costs)) {}
  gpu::testing::TempDir dir;
  std::shared_ptr<const gpu::Model> llm = decoder(dir / "llm", true);
  std::unique_ptr<ExecutorEngine> engine;
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
  sync(*rig.engine);
  const auto st = rig.engine->generation_stats();
  EXPECT_EQ(st.loops, 1u);
  EXPECT_EQ(st.tokens_generated, 55u);
  ASSERT_EQ(st.models.size(), 1u);
  const engine::GenerationModelStats& m = st.models.at(rig.key);
  EXPECT_EQ(m.tokens_generated, 55u);
  EXPECT_EQ(m.streams, 0u);
  EXPECT_EQ(m.kv_blocks_in_use, 0u);
}

// Starts stream `id` of rig's model, and has another model evict it right after its first step:
// the join posts its first step before it answers, and the answer (on the worker) posts the
// eviction, so the eviction runs right after that step, with tokens to go. The eviction's result.
ExecutorEngine::SwapRunResult evicted_mid_stream(Rig& rig, const std::string& id, std::vector<int32_t> prompt,
                                                 int64_t max_tokens) {
  auto mlp = engine_test::write_mlp(rig.dir / ("mlp-" + id), 3, 2);
  SwapRun other;
  other.key = {"mlp", 1};
  other.model = mlp;
  other.inputs = gpu::testing::arch_inputs(*mlp, 1, 1, 5);
  other.evict = {rig.key};
  std::promise<ExecutorEngine::SwapRunResult> joined, evicted;
  auto then_evict = [&](ExecutorEngine::SwapRunResult r) {
    EXPECT_TRUE(rig.engine->swap_run(other, [&](ExecutorEngine::SwapRunResult e) { evicted.set_value(std::move(e)); }));
    joined.set_value(std::move(r));
  };
  EXPECT_TRUE(rig.engine->swap_run(rig.generate(id, std::move(prompt), max_tokens), then_evict));
  EXPECT_TRUE(joined.get_future().get().run.outputs.ok());
  auto r = evicted.get_future().get();
  EXPECT_TRUE(r.run.outputs.ok());
  EXPECT_EQ(r.evicted, std::vector<model_key>{rig.key});
  return r;
}

class EngineParked : public ::testing::TestWithParam<bool> {};  // true: the KV is swapped, else recomputed

TEST_P(EngineParked, AnEvictionParksTheStreamsAndAResumeHereOrOnAnotherDeviceContinuesThemExactly) {
  const bool swap = GetParam();
  for (const bool elsewhere : {false, true}) {
    SCOPED_TRACE(elsewhere ? "resumed on a second engine" : "resumed on the same engine");
    Rig rig(swap ? swapping() : engine::KvPreemptionCosts{});
    auto evicting = evicted_mid_stream(rig, "long", {1, 2, 3}, 60);
    ASSERT_EQ(evicting.parked.size(), 1u);
    EXPECT_EQ(evicting.parked[0].first, rig.key);
    std::shared_ptr<ParkedGenerations> parked = evicting.parked[0].second;
    evicting.parked.clear();
    ASSERT_EQ(parked->streams(), 1u);
    if (swap) {
      EXPECT_GT(parked->host_bytes(), 0u) << "its KV went to host memory with it";
    } else {
      EXPECT_EQ(parked->host_bytes(), 0u) << "its KV was dropped, to be recomputed";
    }
    const auto before = rig.streams.now("long");
    EXPECT_TRUE(before.finals.empty());
    EXPECT_LT(before.tokens.size(), 60u);
    sync(*rig.engine);
    EXPECT_EQ(rig.engine->generation_stats().models.at(rig.key).parked, 1u);
    EXPECT_EQ(rig.engine->generation_stats().kv_blocks_in_use, 0u) << "a parked stream holds no device blocks";

    std::unique_ptr<ExecutorEngine> second = elsewhere ? engine_with({}, 7) : nullptr;
    ExecutorEngine& there = elsewhere ? *second : *rig.engine;
    SwapRun resume;
    resume.key = rig.key;
    resume.model = rig.llm;
    resume.resume = parked;
    auto resumed = engine_test::swap_run(there, resume);
    ASSERT_TRUE(resumed.run.outputs.ok()) << resumed.run.outputs.error().message();
    EXPECT_TRUE(resumed.run.outputs->empty());
    EXPECT_EQ(parked->streams(), 0u) << "taken back";
    const auto got = rig.streams.wait("long");
    EXPECT_EQ(got.tokens, rig.reference({1, 2, 3}, 60)) << "no token repeated, skipped or changed";
    ASSERT_EQ(got.finals.size(), 1u);
    EXPECT_FALSE(got.finals[0].error.has_value());
    EXPECT_EQ(got.finals[0].completion_tokens, 60u);
    sync(there);
    const auto st = there.generation_stats();
    EXPECT_EQ(st.models.at(rig.key).resumed, 1u);
    EXPECT_EQ(st.kv_blocks_in_use, 0u);
    EXPECT_EQ(st.kv_blocks_swapped_bytes, 0u);
    parked.reset();  // taken: nothing more is sent
    EXPECT_EQ(rig.streams.now("long").finals.size(), 1u);
  }
}

INSTANTIATE_TEST_SUITE_P(SwapOrRecompute, EngineParked, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "Swap" : "Recompute"; });

TEST(EngineGeneration, ParkedStreamsNeverTakenBackAndAnUnloadedModelsEndResumable) {
  Rig rig(swapping());
  auto evicting = evicted_mid_stream(rig, "dropped", {1, 2, 3}, 60);
  ASSERT_EQ(evicting.parked.size(), 1u);
  evicting.parked.clear();  // the router dropped it: the model was unloaded
  const auto dropped = rig.streams.now("dropped");
  ASSERT_EQ(dropped.finals.size(), 1u);
  ASSERT_TRUE(dropped.finals[0].error.has_value());
  EXPECT_EQ(dropped.finals[0].error->code(), ErrorCode::unavailable);
  EXPECT_TRUE(dropped.finals[0].resumable);

  auto again = evicted_mid_stream(rig, "failed", {4, 5}, 60);
  ASSERT_EQ(again.parked.size(), 1u);
  again.parked[0].second->fail(not_found("model llm:1 was unloaded"));
  again.parked[0].second->fail(internal_error("twice"));  // idempotent: nothing more
  const auto failed = rig.streams.now("failed");
  ASSERT_EQ(failed.finals.size(), 1u);
  EXPECT_EQ(failed.finals[0].error->code(), ErrorCode::not_found);
  EXPECT_TRUE(failed.finals[0].resumable);
  EXPECT_EQ(again.parked[0].second->streams(), 0u);

  // An unbind of the model under a stream: it ends resumable too.
  std::promise<void> unbound;
  ASSERT_TRUE(rig.engine->swap_run(rig.generate("unloaded", {6, 7}, 60), [&](ExecutorEngine::SwapRunResult r) {
    EXPECT_TRUE(r.run.outputs.ok());
    rig.engine->unbind(rig.key, [&] { unbound.set_value(); });
  }));
  unbound.get_future().wait();
  const auto unloaded = rig.streams.wait("unloaded");
  ASSERT_TRUE(unloaded.finals.at(0).error.has_value());
  EXPECT_TRUE(unloaded.finals[0].resumable);
  EXPECT_LT(unloaded.tokens.size(), 60u);
  sync(*rig.engine);
  EXPECT_EQ(rig.engine->generation_stats().kv_blocks_in_use, 0u);
  EXPECT_EQ(rig.engine->generation_stats().kv_blocks_swapped_bytes, 0u);
}

TEST(EngineGeneration, AResumeOfAnotherKindOrBesideAGenerateIsRefused) {
  Rig rig;
  struct Foreign : ParkedGenerations {
    size_t streams() const override { return 0; }
    uint64_t host_bytes() const override { return 0; }
    void fail(const Error&) override {}
  };
  SwapRun resume;
  resume.key = rig.key;
  resume.model = rig.llm;
  resume.resume = std::make_shared<Foreign>();
  auto r = engine_test::swap_run(*rig.engine, resume);
  ASSERT_FALSE(r.run.outputs.ok());
  EXPECT_EQ(r.run.outputs.error().code(), ErrorCode::invalid_argument);
  SwapRun both = rig.generate("both", {1}, 4);
  both.resume = resume.resume;
  r = engine_test::swap_run(*rig.engine, both);
  ASSERT_FALSE(r.run.outputs.ok());
  EXPECT_EQ(r.run.outputs.error().code(), ErrorCode::invalid_argument);
  EXPECT_TRUE(rig.streams.now("both").finals.empty());
}

TEST(EngineGeneration, TheProfileOfAGenerativeModelRunsThroughItsLoopAndSetsThePreemptionCosts) {
  Rig rig;
  SwapRun profile;  // as a late-binding router registers a model: random inputs the loop ignores
  profile.key = rig.key;
  profile.model = rig.llm;
  profile.profile = true;
  profile.inputs = gpu::testing::arch_inputs(*rig.llm, 1, 1, 5);
  auto r = engine_test::swap_run(*rig.engine, profile);
  ASSERT_TRUE(r.run.outputs.ok()) << r.run.outputs.error().message();
  EXPECT_TRUE(r.swapped);
  EXPECT_GT(r.run.compute_us, 0u);
  EXPECT_GT(r.warm_us, 0u);
  EXPECT_GT(r.plan_bytes, 0u);
  EXPECT_GT(r.footprint, 0u);
  EXPECT_TRUE(rig.engine->holds(rig.key));
  sync(*rig.engine);
  const auto st = rig.engine->generation_stats();
  const engine::GenerationModelStats& m = st.models.at(rig.key);
  EXPECT_GT(m.costs.prefill_us_per_token, 0.0) << "set_costs was called with the measured prefill";
  EXPECT_GT(m.costs.host_bytes_per_s, 0.0) << "and the timed KV swap";
  EXPECT_EQ(m.tokens_generated, 2u * ExecutorEngine::kProfileDecodeTokens);
  EXPECT_EQ(m.streams, 0u);
  EXPECT_EQ(m.kv_blocks_in_use, 0u);
  // The model generates as usual after it.
  ASSERT_TRUE(engine_test::swap_run(*rig.engine, rig.generate("after", {9, 9}, 10)).run.outputs.ok());
  EXPECT_EQ(rig.streams.wait("after").tokens, rig.reference({9, 9}, 10));
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
  EXPECT_TRUE(cut.finals[0].resumable) << "given up by this replica, to be continued elsewhere";
  EXPECT_LT(cut.tokens.size(), 100u);
  const auto cancelled = rig.streams.now("cancelled");
  EXPECT_TRUE(cancelled.finals.empty()) << "a cancelled stream gets nothing more";
  EXPECT_EQ(cancelled.tokens.size(), 1u) << "its first step ran, then the cancel";
}

}  // namespace ember::engine_generation_test
