// GenerationProfiler (actors/node/engine/generation_profile.hpp) over a GenerationLoop of the small
// decoder on a SimDevice, with a fake clock that moves only while a step runs (100 µs a step): the
// times, the prefill cost per token and the host bytes/s it sets are the header's arithmetic; the
// elbow curve wins over the probe; a small context window shortens the request; a step that
// faults, a failed weight copy, a loop that stops with the request unfinished and a request the
// loop refuses each fail the profile with their error.
#include "actors/node/engine/generation_profile.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <vector>

#include "tests/actors/node/engine/generation_test_util.hpp"
#include "tests/gpu/test_util.hpp"

namespace ember::engine {
namespace generation_profile_test {

using namespace generation_test;

constexpr uint64_t kStepUs = 100;

struct Rig {
  gpu::testing::TempDir dir;
  std::unique_ptr<gpu::Device> device = gpu::testing::sim_device(64 * MiB);
  std::unique_ptr<DeviceMemory> memory;
  std::shared_ptr<const gpu::Model> model = decoder(dir / "m");
  std::unique_ptr<gpu::LayerExecutor> ex;
  std::unique_ptr<GenerationLoop> loop;
  // The fake clock and what the seams saw.
  uint64_t now = 1000;
  int steps = 0;
  std::optional<int> fault_at;  // the guarded call (counted from 1) that faults
  Status weights = Status::OK();
  std::vector<Error> faults;

  explicit Rig(GenerativeSpec s = spec()) {
    auto m = DeviceMemory::reserve(*device, 16 * MiB, 256 * KiB, 0);
    EXPECT_TRUE(m.ok()) << m.error().message();
    memory = std::move(*m);
    auto e = gpu::LayerExecutor::create(*device, model, {0, model->num_layers()});
    EXPECT_TRUE(e.ok()) << e.error().message();
    ex = std::move(*e);
    auto l = GenerationLoop::create(*device, *memory, s, nullptr, {});
    EXPECT_TRUE(l.ok()) << l.error().message();
    loop = std::move(*l);
    loop->attach(ex.get());
  }

  GenerationProfileSeams seams() {
    GenerationProfileSeams s;
    s.guarded = [this](const std::function<Status()>& fn) -> Status {
      ++steps;
      now += kStepUs;
      if (fault_at && steps == *fault_at) return device_fault("injected fault");
      return fn();
    };
    s.now_us = [this] { return now; };
    s.plan_bytes = [this] { return ex->last_plan_bytes(); };
    s.wait_weights = [this] { return weights; };
    s.fault = [this](const Error& e) {
      faults.push_back(e);
      loop->fail_all(e, /*resumable=*/true);  // as the engine's Generations::fail_all does
    };
    s.model = "tiny-decoder:1";
    return s;
  }
};

TEST(GenerationProfile, TimesAndCostsAreTheHeadersArithmeticOnTheClockPassedIn) {
  Rig rig;
  GenerationProfiler profiler(*rig.loop, rig.seams());
  auto p = profiler.run();
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_FALSE(profiler.weights_failed());
  EXPECT_EQ(p->prompt_tokens, kProfilePromptTokens);
  EXPECT_EQ(p->decode_tokens, kProfileDecodeTokens);
  // Both requests take the same steps: the clock moved only inside them.
  ASSERT_EQ(rig.steps % 2, 0);
  const uint64_t request_us = static_cast<uint64_t>(rig.steps / 2) * kStepUs;
  EXPECT_GE(rig.steps / 2, static_cast<int>(kProfileDecodeTokens));
  EXPECT_EQ(p->cold_us, request_us);
  EXPECT_EQ(p->warm_us, request_us);
  EXPECT_EQ(p->cold_prefill_us, kStepUs);
  EXPECT_EQ(p->warm_prefill_us, kStepUs);
  EXPECT_DOUBLE_EQ(p->costs.prefill_us_per_token, static_cast<double>(kStepUs) / kProfilePromptTokens);
  // No elbow curve: the timed probe (the clock stood still: 1 µs) moved kProbeBlocks out and back.
  EXPECT_DOUBLE_EQ(p->costs.host_bytes_per_s, 2.0 * kProbeBlocks * spec().layout.block_bytes() * 1e6);
  EXPECT_GT(p->plan_bytes, 0u);
  EXPECT_EQ(profiler.plan_bytes(), p->plan_bytes);
  // Set on the loop, which holds nothing after.
  const GenerationLoopStats st = rig.loop->stats();
  EXPECT_DOUBLE_EQ(st.costs.prefill_us_per_token, p->costs.prefill_us_per_token);
  EXPECT_DOUBLE_EQ(st.costs.host_bytes_per_s, p->costs.host_bytes_per_s);
  EXPECT_EQ(st.tokens_generated, 2u * kProfileDecodeTokens);
  EXPECT_FALSE(rig.loop->busy());
  EXPECT_EQ(st.kv.in_use, 0u);
  EXPECT_TRUE(rig.faults.empty());
}

TEST(GenerationProfile, TheElbowCurvesFastestSizeIsTheHostCopyRate) {
  Rig rig;
  GenerationProfileSeams s = rig.seams();
  s.elbow = {{1 * MiB, 3.0}, {4 * MiB, 12.5}, {16 * MiB, 11.0}};
  GenerationProfiler profiler(*rig.loop, std::move(s));
  auto p = profiler.run();
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_DOUBLE_EQ(p->costs.host_bytes_per_s, 12.5e9);
  EXPECT_DOUBLE_EQ(rig.loop->stats().costs.host_bytes_per_s, 12.5e9);
}

TEST(GenerationProfile, ASmallContextWindowShortensTheRequest) {
  GenerativeSpec s = spec();
  s.context_window = 6;  // prompt min(16, 6 / 2) = 3, decode min(4, 6 - 3) = 3
  Rig rig(s);
  GenerationProfiler profiler(*rig.loop, rig.seams());
  auto p = profiler.run();
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->prompt_tokens, 3u);
  EXPECT_EQ(p->decode_tokens, 3u);
  EXPECT_DOUBLE_EQ(p->costs.prefill_us_per_token, static_cast<double>(kStepUs) / 3);
  EXPECT_EQ(rig.loop->stats().tokens_generated, 6u);
}

TEST(GenerationProfile, AStepThatFaultsIsToldThenFailsTheProfile) {
  Rig rig;
  rig.fault_at = 2;  // the cold request's first decode step
  GenerationProfiler profiler(*rig.loop, rig.seams());
  auto p = profiler.run();
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code(), ErrorCode::device_fault);
  EXPECT_FALSE(profiler.weights_failed());
  ASSERT_EQ(rig.faults.size(), 1u);
  EXPECT_EQ(rig.faults[0].code(), ErrorCode::device_fault);
  EXPECT_EQ(rig.steps, 2) << "no warm request after a failed cold one";
  EXPECT_GT(profiler.plan_bytes(), 0u) << "the prefill's plan is kept for the caller";
  EXPECT_FALSE(rig.loop->busy());
  EXPECT_DOUBLE_EQ(rig.loop->stats().costs.prefill_us_per_token, 0.0) << "no costs set";
}

TEST(GenerationProfile, AFailedWeightCopyFailsItWithItsErrorEvenAfterAFailedColdRequest) {
  {
    Rig rig;
    rig.weights = device_fault("the weights' copy failed");
    GenerationProfiler profiler(*rig.loop, rig.seams());
    const int cold_steps_before = rig.steps;
    auto p = profiler.run();
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.error().message(), "the weights' copy failed");
    EXPECT_TRUE(profiler.weights_failed());
    EXPECT_GT(rig.steps, cold_steps_before);
    EXPECT_EQ(rig.loop->stats().tokens_generated, kProfileDecodeTokens) << "the cold request only";
  }
  {
    Rig rig;
    rig.fault_at = 1;
    rig.weights = device_fault("the weights' copy failed");
    GenerationProfiler profiler(*rig.loop, rig.seams());
    auto p = profiler.run();
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.error().message(), "the weights' copy failed");
    EXPECT_TRUE(profiler.weights_failed());
    EXPECT_EQ(rig.faults.size(), 1u);
  }
}

TEST(GenerationProfile, ALoopThatStopsWithTheRequestUnfinishedFailsIt) {
  Rig rig;
  rig.loop->attach(nullptr);  // the model left: step() runs nothing
  GenerationProfiler profiler(*rig.loop, rig.seams());
  auto p = profiler.run();
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code(), ErrorCode::internal);
  EXPECT_NE(p.error().message().find("tiny-decoder:1"), std::string::npos) << p.error().message();
  EXPECT_NE(p.error().message().find("stopped unfinished"), std::string::npos);
  EXPECT_EQ(rig.steps, 1);
  EXPECT_FALSE(profiler.weights_failed());
}

TEST(GenerationProfile, ARequestTheLoopRefusesFailsItBeforeAnyStep) {
  GenerativeSpec s = spec();
  s.context_window = 1;  // a prompt of 1 token leaves no room for a generated one: max_tokens 0
  Rig rig(s);
  GenerationProfiler profiler(*rig.loop, rig.seams());
  auto p = profiler.run();
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code(), ErrorCode::invalid_argument) << p.error().message();
  EXPECT_EQ(rig.steps, 0);
  EXPECT_FALSE(rig.loop->busy());
}

}  // namespace generation_profile_test
}  // namespace ember::engine
