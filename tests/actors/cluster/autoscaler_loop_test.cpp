// AutoscalerLoop: knobs per model (defaults with the model's own keys, a bad merge named), reports
// summed over reporters within a tick, cold starts averaged per tier and used by the policy, and
// the changes of a tick with their log lines.
#include "actors/cluster/autoscaler_loop.hpp"

#include <gtest/gtest.h>

namespace ember {
namespace autoscaler_loop_test {

constexpr int64_t kSecond = 1'000'000;
const model_key kModel{"m", 1};

AutoscaleConfig defaults() {
  AutoscaleConfig c;
  c.upscale_delay_us = 0;
  c.max_replicas = 8;
  return c;
}

placement::LoadReport ongoing(uint32_t n) {
  placement::LoadReport r;
  r.arrivals = n;
  r.ongoing = n;
  return r;
}

TEST(AutoscalerLoop, AModelsOwnKeysOverrideTheDefaultsAndABadMergeIsNamed) {
  AutoscalerLoop loop(defaults(), kSecond, 10 * kSecond);
  AutoscaleOverrides own;
  own.max_replicas = 3;
  EXPECT_TRUE(loop.configure(kModel, own).ok());
  EXPECT_EQ(loop.config(kModel)->max_replicas, 3u);
  EXPECT_EQ(loop.config(kModel)->upscale_delay_us, 0u) << "the cluster's, where the model says nothing";
  AutoscaleOverrides clash;
  clash.min_replicas = 9;
  const Status bad = loop.configure(kModel, clash);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(),
            "m/1/model.json: serving.autoscale.max_replicas: 8 is below serving.autoscale.min_replicas (9)");
  EXPECT_EQ(loop.config(kModel)->max_replicas, 8u) << "the defaults, then";
  loop.forget(kModel);
  EXPECT_EQ(loop.config(kModel), nullptr);
}

TEST(AutoscalerLoop, ReportsOfOneTickAreSummedAcrossReportersAndDecideTogether) {
  AutoscalerLoop loop(defaults(), kSecond, 10 * kSecond);
  ASSERT_TRUE(loop.configure(kModel, {}).ok());
  loop.report("g1", kModel, ongoing(3), {{1, 3}}, 0);
  loop.report("g2", kModel, ongoing(4), {{1, 2}, {2, 2}}, 0);
  loop.report("g1", {"unknown", 1}, ongoing(100), {}, 0);
  EXPECT_EQ(loop.in_flight(kModel, 1), 5u);
  EXPECT_EQ(loop.in_flight(kModel, 2), 2u);
  EXPECT_EQ(loop.in_flight(kModel, 3), 0u);
  const auto changes = loop.tick(kSecond, [](const model_key&) { return AutoscalerLoop::Supply{1, 0}; });
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].key, kModel);
  EXPECT_EQ(changes[0].decision.action, placement::ScaleAction::up);
  EXPECT_EQ(changes[0].decision.desired, 4u) << "7 ongoing over a target of 2";
  EXPECT_EQ(changes[0].line, "m/1: up by 3 to 4 (load): ongoing_requests need 3.50 with 1 ready, 0 pending");
  const auto quiet = loop.tick(2 * kSecond, [](const model_key&) { return AutoscalerLoop::Supply{4, 0}; });
  EXPECT_TRUE(quiet.empty()) << "the next tick counts no new arrivals; a scale-down waits 30 s";
}

TEST(AutoscalerLoop, AReportersGaugesStandUntilItReportsAgainOrGoesSilentForThreeTicks) {
  AutoscalerLoop loop(defaults(), kSecond, 10 * kSecond);
  ASSERT_TRUE(loop.configure(kModel, {}).ok());
  const auto supply = [](const model_key&) { return AutoscalerLoop::Supply{1, 0}; };
  loop.report("g", kModel, ongoing(6), {{1, 6}}, 0);
  auto first = loop.tick(kSecond, supply);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].decision.desired, 3u);
  // No report in this tick (it lands just after): the gateway's 6 in flight still count.
  auto second = loop.tick(2 * kSecond, supply);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].decision.desired, 3u);
  EXPECT_EQ(loop.in_flight(kModel, 1), 6u);
  loop.tick(4 * kSecond, supply);  // three ticks without a report: the gateway is gone
  EXPECT_EQ(loop.in_flight(kModel, 1), 0u);
}

TEST(AutoscalerLoop, AFloorRaisesMinReplicasUntilLifted) {
  AutoscalerLoop loop(defaults(), kSecond, 10 * kSecond);
  ASSERT_TRUE(loop.configure(kModel, {}).ok());
  loop.set_floor(kModel, 3);
  EXPECT_EQ(loop.config(kModel)->min_replicas, 3u);
  auto changes = loop.tick(kSecond, [](const model_key&) { return AutoscalerLoop::Supply{1, 0}; });
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].decision.reason, placement::ScaleReason::min_replicas);
  EXPECT_EQ(changes[0].decision.desired, 3u);
  loop.set_floor(kModel, 12);
  EXPECT_EQ(loop.config(kModel)->max_replicas, 12u) << "a floor above max_replicas lifts it";
  loop.set_floor(kModel, 0);
  EXPECT_EQ(loop.config(kModel)->min_replicas, 0u);
  EXPECT_EQ(loop.config(kModel)->max_replicas, 8u);
}

TEST(AutoscalerLoop, AnIdleModelsEmberExpiresOncePerIdleSpellAfterHostKeepAlive) {
  AutoscaleConfig c = defaults();
  c.idle_timeout_us = 5 * kSecond;
  c.host_keep_alive_us = 20 * kSecond;
  AutoscalerLoop loop(c, kSecond, 2 * kSecond);
  ASSERT_TRUE(loop.configure(kModel, {}).ok());
  const auto none = [](const model_key&) { return AutoscalerLoop::Supply{0, 0}; };
  const auto any = [](const model_key&) { return true; };
  loop.tick(kSecond, none);  // idle from here
  loop.tick(20 * kSecond, none);
  EXPECT_TRUE(loop.embers_expired(20 * kSecond, any).empty());
  loop.tick(21 * kSecond, none);
  EXPECT_TRUE(loop.embers_expired(21 * kSecond, [](const model_key&) { return false; }).empty())
      << "not while the caller says no (a replica still drains)";
  EXPECT_EQ(loop.embers_expired(21 * kSecond, any), (std::vector<model_key>{kModel}));
  EXPECT_TRUE(loop.embers_expired(22 * kSecond, any).empty()) << "once per idle spell";
  loop.report("g", kModel, ongoing(1), {}, 23 * kSecond);
  loop.tick(23 * kSecond, none);
  EXPECT_TRUE(loop.embers_expired(23 * kSecond, any).empty());
  loop.report("g", kModel, {}, {}, 24 * kSecond);
  for (int64_t t = 24; t <= 50; ++t) loop.tick(t * kSecond, none);
  EXPECT_EQ(loop.embers_expired(50 * kSecond, any), (std::vector<model_key>{kModel})) << "a new spell expires again";
}

TEST(AutoscalerLoop, TheColdStartOfTheBestTierFeedsTheQueueLatencyPolicy) {
  AutoscaleConfig c = defaults();
  c.policy = ScalingPolicy::queue_latency;
  AutoscalerLoop loop(c, kSecond, 10 * kSecond);
  ASSERT_TRUE(loop.configure(kModel, {}).ok());
  loop.cold_start_measured(SourceTier::repository, 2 * kSecond);
  loop.cold_start_measured(SourceTier::repository, 7 * kSecond);
  EXPECT_EQ(loop.cold_start_us(SourceTier::repository), 3 * kSecond) << "(4 * 2 s + 7 s) / 5";
  loop.cold_start_measured(SourceTier::cache, 100'000);
  placement::LoadReport r;
  r.arrivals = 30;  // 30 per second against 2 replicas serving 10 per second each
  r.completions = 10;
  r.busy_us = 1'000'000;
  auto need = [&](SourceTier tier, int64_t at) {
    AutoscalerLoop copy = loop;
    copy.report("g", kModel, r, {}, at);
    auto changes = copy.tick(at, [&](const model_key&) { return AutoscalerLoop::Supply{2, 0, tier}; });
    return changes.empty() ? 0.0 : changes[0].decision.need;
  };
  // need = s * (λ + (λ - μ) * C / target) = 0.1 * (30 + 10 * C / 0.1)
  EXPECT_NEAR(need(SourceTier::cache, kSecond), 0.1 * (30 + 10 * 0.1 / 0.1), 1e-6);
  EXPECT_NEAR(need(SourceTier::repository, kSecond), 0.1 * (30 + 10 * 3.0 / 0.1), 1e-6);
}

TEST(AutoscalerLoop, TheProfilesServiceTimeStandsInUntilOneIsMeasured) {
  AutoscaleConfig c = defaults();
  c.policy = ScalingPolicy::arrival_rate;
  c.max_replicas = 200;
  AutoscalerLoop loop(c, kSecond, 10 * kSecond);
  ASSERT_TRUE(loop.configure(kModel, {}).ok());
  // A first cold start: 100 requests a second arrive and are held, none has run yet.
  placement::LoadReport held;
  held.arrivals = 100;
  held.ongoing = held.queued = 100;
  auto desired = [&](AutoscalerLoop copy, const placement::LoadReport& r) {
    copy.report("g", kModel, r, {}, kSecond);
    auto changes = copy.tick(kSecond, [](const model_key&) { return AutoscalerLoop::Supply{0, 1}; });
    return changes.empty() ? 0u : changes[0].decision.desired;
  };
  EXPECT_EQ(desired(loop, held), 50u) << "no service time: the requests in flight over a target of 2";
  loop.set_profiled_service(kModel, 20'000);  // 20 ms a request by profile.json
  EXPECT_EQ(desired(loop, held), 3u) << "100/s * 20 ms * headroom 1.2 = 2.4";
  // Once requests ran, their measured time decides: 40 ms each.
  placement::LoadReport ran = held;
  ran.completions = 10;
  ran.busy_us = 400'000;
  EXPECT_EQ(desired(loop, ran), 5u) << "100/s * 40 ms * 1.2 = 4.8";
}

TEST(AutoscalerLoop, TheExpectedQueueIsTheLastTicksBacklogForTheColdStartAsked) {
  AutoscalerLoop loop(defaults(), kSecond, 10 * kSecond);
  ASSERT_TRUE(loop.configure(kModel, {}).ok());
  EXPECT_EQ(loop.expected_queue(kModel), 0.0) << "before any tick";
  loop.cold_start_measured(SourceTier::repository, 2 * kSecond);
  placement::LoadReport r;
  r.arrivals = 20;  // in the tick's second: 20 per second
  r.queued = 5;
  loop.report("g", kModel, r, {}, kSecond);
  loop.tick(kSecond, [](const model_key&) { return AutoscalerLoop::Supply{0, 0, SourceTier::repository}; });
  EXPECT_NEAR(loop.expected_queue(kModel), 5 + 20 * 2.0, 1e-9) << "the measured repository cold start";
  EXPECT_NEAR(loop.expected_queue(kModel, 10 * kSecond), 5 + 20 * 10.0, 1e-9) << "the one asked for";
  EXPECT_EQ(loop.expected_queue({"other", 1}), 0.0);
}

TEST(AutoscalerLoop, AnUpIsCutToTheRoomThereIsAndABlockedOneIsSaidOnce) {
  AutoscalerLoop loop(defaults(), kSecond, 10 * kSecond);
  ASSERT_TRUE(loop.configure(kModel, {}).ok());
  auto tick = [&](int64_t at, uint32_t room) {
    loop.report("g", kModel, ongoing(8), {}, at);
    return loop.tick(
        at, [](const model_key&) { return AutoscalerLoop::Supply{1, 0, SourceTier::peer}; },
        [room](const model_key&) { return room; });
  };
  auto cut = tick(kSecond, 2);
  ASSERT_EQ(cut.size(), 1u);
  EXPECT_EQ(cut[0].decision.count, 2u) << "room for two of the three wanted";
  EXPECT_EQ(cut[0].decision.desired, 4u);
  auto blocked = tick(2 * kSecond, 0);
  ASSERT_EQ(blocked.size(), 1u);
  EXPECT_EQ(blocked[0].decision.action, placement::ScaleAction::keep);
  EXPECT_NE(blocked[0].line.find("no node has room"), std::string::npos) << blocked[0].line;
  EXPECT_TRUE(tick(3 * kSecond, 0).empty()) << "said once";
  EXPECT_EQ(loop.desired(kModel), 4u) << "still wanted";
  EXPECT_EQ(tick(4 * kSecond, 5).size(), 1u) << "room again: the up is made";
}

}  // namespace autoscaler_loop_test
}  // namespace ember
