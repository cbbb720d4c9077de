// GenerationLoop (actors/node/engine/generation_loop.hpp) on a SimDevice, over a small decoder built
// here (learned positions, two kv_attention blocks with grouped-query heads, a tied-shape head):
// the tokens a request gets step by step, with its cache in blocks, are the ones the whole sequence
// recomputed in one step gives; so are a continuous batch's of mixed lengths, and a run whose cache
// is too small for all of them at once (preempted and recomputed). Seeds repeat and a resumed
// stream continues as the first would have; stop tokens, max_tokens, cancel, and refused requests.
#include "actors/node/engine/generation_loop.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "actors/node/engine/step_inputs.hpp"
#include "tests/actors/node/engine/generation_test_util.hpp"
#include "tests/gpu/test_util.hpp"

namespace ember::engine {
namespace generation_loop_test {

using gpu::DType;
using namespace generation_test;

struct Rig {
  gpu::testing::TempDir dir;
  std::unique_ptr<gpu::Device> device = gpu::testing::sim_device(64 * MiB);
  std::unique_ptr<DeviceMemory> memory;
  std::shared_ptr<const gpu::Model> model = decoder(dir / "m");
  std::unique_ptr<gpu::LayerExecutor> ex;

  Rig() {
    auto m = DeviceMemory::reserve(*device, 16 * MiB, 256 * KiB, 0);
    EXPECT_TRUE(m.ok()) << m.error().message();
    memory = std::move(*m);
    auto e = gpu::LayerExecutor::create(*device, model, {0, model->num_layers()});
    EXPECT_TRUE(e.ok()) << e.error().message();
    ex = std::move(*e);
  }
  std::unique_ptr<GenerationLoop> loop(GenerationLoopConfig config = {}) {
    auto l = GenerationLoop::create(*device, *memory, spec(), nullptr, std::move(config));
    EXPECT_TRUE(l.ok()) << l.error().message();
    (*l)->attach(ex.get());
    return std::move(*l);
  }

  std::vector<int32_t> recomputed(std::vector<int32_t> tokens, size_t n) {
    return generation_test::recomputed(*device, *ex, std::move(tokens), n);
  }
};

void run(GenerationLoop& loop, int max_steps = 1000) {
  for (int i = 0; i < max_steps && loop.step(static_cast<uint64_t>(i)); ++i) {
  }
  EXPECT_FALSE(loop.busy());
}

TEST(GenerationLoop, GreedyTokensStepByStepAreTheWholeSequenceRecomputed) {
  Rig rig;
  auto loop = rig.loop();
  std::map<std::string, Received> got;
  const std::vector<int32_t> prompt = {5, 17, 3, 88, 41, 2, 9};
  ASSERT_TRUE(loop->submit(job("a", prompt, 24, got), 0).ok());
  run(*loop);
  EXPECT_EQ(got["a"].tokens, rig.recomputed(prompt, 24));
  ASSERT_EQ(got["a"].finals.size(), 1u);
  const GenerationOutput& end = got["a"].finals[0];
  EXPECT_EQ(end.finish, text::FinishReason::length);
  EXPECT_FALSE(end.error.has_value());
  EXPECT_EQ(end.prompt_tokens, 7u);
  EXPECT_EQ(end.completion_tokens, 24u);
  EXPECT_EQ(loop->stats().kv.in_use, 0u) << "a finished stream's blocks are freed";
}

TEST(GenerationLoop, AContinuousBatchOfMixedLengthsGivesEachTheTokensItGetsAlone) {
  Rig rig;
  GenerationLoopConfig config;
  config.batcher.max_num_batched_tokens = 8;  // prompts arrive in chunks beside the decodes
  config.batcher.max_num_seqs = 4;
  auto loop = rig.loop(config);
  std::map<std::string, Received> got;
  const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3}, {60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70}, {42}};
  ASSERT_TRUE(loop->submit(job("p0", prompts[0], 16, got), 0).ok());
  ASSERT_TRUE(loop->step(0));
  ASSERT_TRUE(loop->step(1));
  ASSERT_TRUE(loop->submit(job("p1", prompts[1], 9, got), 2).ok());  // joins the running batch
  ASSERT_TRUE(loop->step(2));
  ASSERT_TRUE(loop->submit(job("p2", prompts[2], 20, got), 3).ok());
  run(*loop);
  EXPECT_EQ(got["p0"].tokens, rig.recomputed(prompts[0], 16));
  EXPECT_EQ(got["p1"].tokens, rig.recomputed(prompts[1], 9));
  EXPECT_EQ(got["p2"].tokens, rig.recomputed(prompts[2], 20));
  EXPECT_GT(loop->stats().batcher.max_step_tokens, 1u);
}

TEST(GenerationLoop, ACacheTooSmallForAllPreemptsAndRecomputesWithoutChangingATokenOrDroppingOne) {
  Rig rig;
  GenerationLoopConfig config;
  config.kv.budget_bytes = 10 * spec().layout.block_bytes();  // 40 positions for three streams of ~30
  config.kv.host_bytes = 0;                                   // no swap space: recompute
  auto loop = rig.loop(config);
  std::map<std::string, Received> got;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(loop->submit(job("s" + std::to_string(i), {7 + i, 8, 9}, 26, got), 0).ok());
  }
  run(*loop);
  for (int i = 0; i < 3; ++i) {
    const std::string id = "s" + std::to_string(i);
    EXPECT_EQ(got[id].tokens, rig.recomputed({7 + i, 8, 9}, 26)) << id;
    ASSERT_EQ(got[id].finals.size(), 1u) << id;
    EXPECT_FALSE(got[id].finals[0].error.has_value()) << id;
  }
  EXPECT_GT(loop->stats().batcher.preempted_recompute, 0u);
}

TEST(GenerationLoop, ASeedRepeatsAndAResumedStreamContinuesAsTheFirstWould) {
  Rig rig;
  auto loop = rig.loop();
  std::map<std::string, Received> got;
  auto sampled = [&](const std::string& id, std::vector<int32_t> resumed) {
    GenerationJob j = job(id, {3, 1, 4, 1, 5}, 20, got);
    j.sampling.temperature = 1.5f;
    j.sampling.top_k = 20;
    j.sampling.seed = 1234;
    j.resumed = std::move(resumed);
    return j;
  };
  ASSERT_TRUE(loop->submit(sampled("first", {}), 0).ok());
  ASSERT_TRUE(loop->submit(sampled("again", {}), 0).ok());
  run(*loop);
  ASSERT_EQ(got["first"].tokens.size(), 20u);
  EXPECT_EQ(got["again"].tokens, got["first"].tokens);
  const std::vector<int32_t> sent(got["first"].tokens.begin(), got["first"].tokens.begin() + 8);
  ASSERT_TRUE(loop->submit(sampled("resumed", sent), 10).ok());
  run(*loop);
  EXPECT_EQ(got["resumed"].tokens, std::vector<int32_t>(got["first"].tokens.begin() + 8, got["first"].tokens.end()));
  EXPECT_EQ(got["resumed"].finals.at(0).completion_tokens, 20u) << "the resumed tokens count as generated";
  GenerationJob other = sampled("other seed", {});
  other.sampling.seed = 99;
  ASSERT_TRUE(loop->submit(std::move(other), 20).ok());
  run(*loop);
  EXPECT_NE(got["other seed"].tokens, got["first"].tokens);
}

TEST(GenerationLoop, AStopTokenEndsTheStreamAndACancelledOneGetsNothingMore) {
  Rig rig;
  auto loop = rig.loop();
  std::map<std::string, Received> got;
  const std::vector<int32_t> prompt = {10, 20, 30};
  const std::vector<int32_t> want = rig.recomputed(prompt, 12);
  GenerationJob stopping = job("stop", prompt, 12, got);
  stopping.stop.stop_token_ids = {want[4]};
  ASSERT_TRUE(loop->submit(std::move(stopping), 0).ok());
  ASSERT_TRUE(loop->submit(job("gone", prompt, 12, got), 0).ok());
  ASSERT_TRUE(loop->step(0));  // both prefilled, first token each
  ASSERT_TRUE(loop->cancel("gone"));
  EXPECT_FALSE(loop->cancel("gone"));
  run(*loop);
  const auto first_stop = std::find(want.begin(), want.end(), want[4]) - want.begin();
  // The stop token ends the stream and is not sent (as OpenAI and vLLM leave out an end token).
  EXPECT_EQ(got["stop"].tokens, std::vector<int32_t>(want.begin(), want.begin() + first_stop));
  EXPECT_EQ(got["stop"].finals.at(0).finish, text::FinishReason::stop);
  EXPECT_EQ(got["gone"].tokens.size(), 1u);
  EXPECT_TRUE(got["gone"].finals.empty());
  EXPECT_EQ(loop->stats().kv.in_use, 0u);
  EXPECT_EQ(loop->stats().kv.device_bytes, 0u) << "streams that finished leave no KV chunk in the pool";
}

// The client of the only stream went away: no step follows to free its blocks, so they go at the
// cancel itself (the engine runs it between steps), and the loop has nothing left to do.
TEST(GenerationLoop, CancellingTheLastStreamFreesItsBlocksAtOnce) {
  Rig rig;
  auto loop = rig.loop();
  std::map<std::string, Received> got;
  ASSERT_TRUE(loop->submit(job("only", {10, 20, 30}, 40, got), 0).ok());
  ASSERT_TRUE(loop->step(0));
  ASSERT_TRUE(loop->step(0));
  ASSERT_GT(loop->stats().kv.in_use, 0u);
  ASSERT_GT(loop->stats().kv.device_bytes, 0u);
  ASSERT_TRUE(loop->cancel("only"));
  EXPECT_EQ(loop->stats().kv.in_use, 0u);
  EXPECT_EQ(loop->stats().kv.device_bytes, 0u) << "an idle loop gives its KV chunks back to the pool";
  EXPECT_FALSE(loop->busy());
  EXPECT_FALSE(loop->step(0));
  EXPECT_TRUE(got["only"].finals.empty()) << "a cancelled stream gets nothing more";
}

TEST(GenerationLoop, RefusesWhatCannotRunBeforeTakingIt) {
  Rig rig;
  auto loop = rig.loop();
  std::map<std::string, Received> got;
  auto refused = [&](GenerationJob j) {
    Status s = loop->submit(std::move(j), 0);
    EXPECT_FALSE(s.ok());
    return s.ok() ? ErrorCode::internal : s.error().code();
  };
  EXPECT_EQ(refused(job("empty", {}, 4, got)), ErrorCode::invalid_argument);
  EXPECT_EQ(refused(job("vocab", {1, kVocab}, 4, got)), ErrorCode::invalid_argument);
  EXPECT_EQ(refused(job("negative", {1, -3}, 4, got)), ErrorCode::invalid_argument);
  EXPECT_EQ(refused(job("window", std::vector<int32_t>(kContext, 1), 4, got)), ErrorCode::invalid_argument);
  EXPECT_EQ(refused(job("too many", {1, 2}, kContext, got)), ErrorCode::invalid_argument);
  GenerationJob hot = job("hot", {1}, 4, got);
  hot.sampling.temperature = -1;
  EXPECT_EQ(refused(std::move(hot)), ErrorCode::invalid_argument);
  GenerationJob strings = job("strings", {1}, 4, got);
  strings.stop_strings = {"end"};
  EXPECT_EQ(refused(std::move(strings)), ErrorCode::invalid_argument) << "no tokenizer: no text to match";
  ASSERT_TRUE(loop->submit(job("twice", {1}, 4, got), 0).ok());
  EXPECT_EQ(refused(job("twice", {1}, 4, got)), ErrorCode::invalid_argument);
  run(*loop);
  EXPECT_TRUE(got.count("empty") == 0 && got.count("vocab") == 0) << "a refused request is never answered";
}

}  // namespace generation_loop_test
}  // namespace ember::engine
