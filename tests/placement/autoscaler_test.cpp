// The autoscaling policy: each policy's need, the corrected Eq. 4.12 at its edges, the delays, the
// clamps, scaling from zero and idling to zero, and no oscillation under synthetic rate curves
// (step, ramp, burst, sine, silence) driving a simple queue model of the replicas.
#include "placement/autoscaler.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

namespace ember::placement {
namespace autoscaler_test {

constexpr int64_t kSecond = 1'000'000;

AutoscaleConfig no_delays(ScalingPolicy policy = ScalingPolicy::ongoing_requests) {
  AutoscaleConfig c;
  c.policy = policy;
  c.upscale_delay_us = 0;
  c.downscale_delay_us = 0;
  return c;
}

ModelLoad ongoing(uint32_t requests, uint32_t ready, uint32_t pending = 0) {
  ModelLoad l;
  l.ongoing = requests;
  l.arrival_rate = requests > 0 ? 1 : 0;
  l.ready = ready;
  l.pending = pending;
  return l;
}

TEST(Autoscaler, EachPolicyTurnsTheLoadIntoItsNeed) {
  ModelLoad l;
  l.arrival_rate = 20;
  l.ongoing = 9;
  l.queued = 5;
  l.service_time_us = 100'000;  // 10 requests per second per replica
  l.cold_start_us = 500'000;
  l.ready = 1;
  AutoscaleConfig c;
  c.target_ongoing_requests = 2;
  EXPECT_DOUBLE_EQ(replica_need(c, l), 4.5);  // 9 / 2
  c.policy = ScalingPolicy::arrival_rate;
  c.headroom = 1.25;
  EXPECT_DOUBLE_EQ(replica_need(c, l), 2.5);  // 20 * 0.1 * 1.25
  c.policy = ScalingPolicy::queue_latency;
  c.target_queue_latency_us = 100'000;
  // E = 5 queued + (20 - 10 served) * 0.5 s = 10; need = 0.1 * (20 + 10 / 0.1) = 12.
  EXPECT_NEAR(replica_need(c, l), 12, 1e-9);
  c.policy = ScalingPolicy::requests_per_minute;
  c.target_requests_per_minute = 600;
  EXPECT_DOUBLE_EQ(replica_need(c, l), 2);  // 20 * 60 / 600
}

TEST(Autoscaler, PoliciesThatNeedAnExecutionTimeFallBackToOngoingRequestsWithoutOne) {
  ModelLoad l = ongoing(6, 1);
  l.arrival_rate = 100;
  for (ScalingPolicy p : {ScalingPolicy::arrival_rate, ScalingPolicy::queue_latency}) {
    AutoscaleConfig c;
    c.policy = p;
    EXPECT_DOUBLE_EQ(replica_need(c, l), 3) << to_string(p);
  }
}

// Model-level scaling (AsyFunc's Algorithm 1) as a policy: the rate against one replica's capacity
// within the SLO (batching counted, so below arrival_rate's λ·s floor), α = 1 / headroom; with a
// tolerance of 1/3 its scale-in band is the paper's β = 0.6. Without a known capacity it falls back.
TEST(Autoscaler, ModelLevelScalingWeighsTheRateAgainstAReplicasCapacityWithinTheSlo) {
  AutoscaleConfig c = no_delays(ScalingPolicy::model_level);
  c.headroom = 1.25;  // α 0.8
  c.downscale_tolerance = 1.0 / 3;
  ModelLoad l;
  l.arrival_rate = 200;
  l.service_time_us = 20'000;  // one request alone: 50 a second; batched, a replica carries 100
  l.capacity_rps = 100;
  l.ready = 1;
  l.ongoing = 4;
  EXPECT_DOUBLE_EQ(replica_need(c, l), 2.5);  // 200 / (0.8 x 100)
  ScalerState st;
  auto d = decide(c, l, st, 0);
  EXPECT_EQ(d.action, ScaleAction::up);
  EXPECT_EQ(d.desired, 3u);
  // Three replicas: they hold while the rate stays within α of what they carry (240) and above β of
  // what two would (120); under it, one goes.
  l.ready = 3;
  for (double held : {230.0, 170.0, 125.0}) {
    l.arrival_rate = held;
    ScalerState hold;
    EXPECT_EQ(decide(c, l, hold, 0).action, ScaleAction::keep) << held;
  }
  l.arrival_rate = 110;
  ScalerState in;
  EXPECT_EQ(decide(c, l, in, 0).action, ScaleAction::down);
  // No profile or no SLO: ongoing_requests' need (4 / 2, floored by 110 x 0.02 s).
  l.capacity_rps = 0;
  EXPECT_DOUBLE_EQ(replica_need(c, l), 110 * 0.02);
}

TEST(Autoscaler, QueueLatencyCountsTheBacklogThatBuildsDuringTheColdStart) {
  AutoscaleConfig c;
  c.policy = ScalingPolicy::queue_latency;
  ModelLoad l;
  l.arrival_rate = 30;
  l.service_time_us = 100'000;
  l.ready = 2;  // serves 20 per second: 10 per second pile up while a new replica starts
  const double warm = replica_need(c, l);
  l.cold_start_us = 2 * kSecond;
  EXPECT_NEAR(replica_need(c, l) - warm, 0.1 * 20 / 0.1, 1e-9) << "20 more requests to drain within 100 ms";
}

TEST(Autoscaler, TheExpectedBacklogIsTheQueueAndWhatPilesUpDuringTheColdStart) {
  ModelLoad l;
  l.queued = 3;
  l.arrival_rate = 30;
  l.service_time_us = 100'000;
  l.cold_start_us = 2 * kSecond;
  EXPECT_DOUBLE_EQ(expected_backlog(l), 3 + 30 * 2.0) << "no replica: every arrival waits";
  l.ready = 2;
  EXPECT_DOUBLE_EQ(expected_backlog(l), 3 + 10 * 2.0) << "two replicas serve 20 of the 30 per second";
  l.pending = 2;
  EXPECT_DOUBLE_EQ(expected_backlog(l), 3) << "four keep up";
  l.service_time_us = 0;
  EXPECT_DOUBLE_EQ(expected_backlog(l), 3) << "replicas not measured yet are taken as keeping up";
}

// Eq. 4.12 as corrected: up when ceil(need) > supply, down when ceil(need * 1.1) < supply.
TEST(Autoscaler, TheCorrectedEquationKeepsUpAndDownApartAtTheirEdges) {
  AutoscaleConfig c = no_delays();
  c.target_ongoing_requests = 1;
  ScalerState s;
  EXPECT_EQ(decide(c, ongoing(4, 4), s, 0).action, ScaleAction::keep) << "need = supply";
  const ScaleDecision up = decide(c, ongoing(5, 4), s, 0);
  EXPECT_EQ(up.action, ScaleAction::up);
  EXPECT_EQ(up.count, 1u);
  EXPECT_EQ(up.reason, ScaleReason::load);
  EXPECT_EQ(decide(c, ongoing(3, 4), s, 0).action, ScaleAction::keep) << "3 * 1.1 does not fit in 3";
  const ScaleDecision down = decide(c, ongoing(2, 4), s, 0);
  EXPECT_EQ(down.action, ScaleAction::down);
  EXPECT_EQ(down.desired, 3u) << "to ceil(2 * 1.1), not to 2";
  EXPECT_EQ(decide(c, ongoing(2, 3), s, 0).action, ScaleAction::keep) << "and then it stays";
  c.downscale_tolerance = 0;
  EXPECT_EQ(decide(c, ongoing(2, 3), s, 0).desired, 2u) << "without hysteresis straight to the need";
}

TEST(Autoscaler, AConstantNeedNeverTurnsBackAfterAChange) {
  AutoscaleConfig c = no_delays();
  c.target_ongoing_requests = 1;
  c.max_replicas = 100;
  for (uint32_t requests = 1; requests <= 60; ++requests) {
    for (uint32_t supply = 1; supply <= 70; ++supply) {
      ScalerState s;
      const ScaleDecision first = decide(c, ongoing(requests, supply), s, 0);
      const uint32_t after = first.action == ScaleAction::up     ? supply + first.count
                             : first.action == ScaleAction::down ? supply - first.count
                                                                 : supply;
      const ScaleDecision second = decide(c, ongoing(requests, after), s, 1);
      // An up goes all the way; a down halves the surplus, so it may go on down, never back up.
      const ScaleAction allowed = first.action == ScaleAction::down ? ScaleAction::down : ScaleAction::keep;
      if (second.action != ScaleAction::keep) {
        EXPECT_EQ(second.action, allowed) << requests << " requests from " << supply << " replicas";
      }
    }
  }
}

TEST(Autoscaler, AChangeWaitsForItsDelayAndATimerRestartsWhenItsConditionLapses) {
  AutoscaleConfig c;
  c.target_ongoing_requests = 1;
  c.upscale_delay_us = 2 * kSecond;
  c.downscale_delay_us = 10 * kSecond;
  ScalerState s;
  ScaleDecision d = decide(c, ongoing(4, 2), s, 0);
  EXPECT_EQ(d.action, ScaleAction::keep);
  EXPECT_EQ(d.reason, ScaleReason::delayed);
  EXPECT_EQ(d.desired, 4u) << "the target shows while it waits";
  EXPECT_EQ(decide(c, ongoing(4, 2), s, kSecond).action, ScaleAction::keep);
  EXPECT_EQ(decide(c, ongoing(2, 2), s, kSecond + 1).action, ScaleAction::keep) << "the burst ended";
  EXPECT_EQ(decide(c, ongoing(4, 2), s, 2 * kSecond).action, ScaleAction::keep) << "a new timer";
  EXPECT_EQ(decide(c, ongoing(4, 2), s, 4 * kSecond - 1).action, ScaleAction::keep);
  EXPECT_EQ(decide(c, ongoing(4, 2), s, 4 * kSecond).action, ScaleAction::up);

  ScalerState t;
  EXPECT_EQ(decide(c, ongoing(1, 4), t, 0).action, ScaleAction::keep);
  EXPECT_EQ(decide(c, ongoing(1, 4), t, 10 * kSecond - 1).action, ScaleAction::keep);
  const ScaleDecision down = decide(c, ongoing(1, 4), t, 10 * kSecond);
  EXPECT_EQ(down.action, ScaleAction::down);
  EXPECT_EQ(down.desired, 3u) << "half of the surplus over ceil(1 * 1.1) = 2";
  EXPECT_EQ(decide(c, ongoing(1, 3), t, 10 * kSecond + 1).action, ScaleAction::keep) << "a new delay";
  EXPECT_EQ(decide(c, ongoing(1, 3), t, 20 * kSecond).desired, 2u);
  EXPECT_EQ(decide(c, ongoing(1, 4), t, 5 * kSecond).action, ScaleAction::keep) << "time running back: no time passed";
}

TEST(Autoscaler, AModelWithoutReplicasScalesFromZeroAtOnceToItsNeed) {
  AutoscaleConfig c;  // upscale_delay 1 s: not for a request that waits
  ScalerState s;
  const ScaleDecision d = decide(c, ongoing(7, 0), s, 0);
  EXPECT_EQ(d.action, ScaleAction::up);
  EXPECT_EQ(d.reason, ScaleReason::from_zero);
  EXPECT_EQ(d.count, 4u) << "ceil(7 / 2)";
  EXPECT_EQ(decide(c, ongoing(7, 0, 4), s, 1).action, ScaleAction::keep) << "pending replicas are supply";
  ScalerState quiet;
  EXPECT_EQ(decide(c, ongoing(0, 0), quiet, 0).action, ScaleAction::keep) << "nothing asked, nothing placed";
}

TEST(Autoscaler, AQuietModelShrinksAfterTheDownscaleDelayAndGoesToZeroAfterIdleTimeout) {
  AutoscaleConfig c;
  c.downscale_delay_us = 30 * kSecond;
  c.idle_timeout_us = 60 * kSecond;
  ScalerState s;
  uint32_t replicas = 3;
  std::vector<std::pair<int64_t, uint32_t>> changes;
  for (int64_t t = 0; t <= 90 * kSecond; t += kSecond / 2) {
    const ScaleDecision d = decide(c, ongoing(0, replicas), s, t);
    if (d.action == ScaleAction::down) {
      replicas -= d.count;
      changes.emplace_back(t, replicas);
      if (replicas == 0) {
        EXPECT_EQ(d.reason, ScaleReason::idle);
      }
    }
    EXPECT_EQ(d.action == ScaleAction::up, false);
  }
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0], std::make_pair(30 * kSecond, 2u)) << "half the surplus over the one kept while not idle";
  EXPECT_EQ(changes[1], std::make_pair(60 * kSecond, 0u)) << "idle: straight to zero";

  c.min_replicas = 1;
  ScalerState kept;
  for (int64_t t = 0; t <= 90 * kSecond; t += kSecond)
    EXPECT_EQ(decide(c, ongoing(0, 1), kept, t).action, ScaleAction::keep);
}

TEST(Autoscaler, TheClampsActAtOnce) {
  AutoscaleConfig c;  // delays of 1 s and 30 s do not hold the clamps
  c.max_replicas = 8;
  ScalerState s;
  const ScaleDecision capped = decide(c, ongoing(100, 2), s, 0);
  EXPECT_EQ(capped.desired, 8u) << "after its delay, up to max_replicas only";
  EXPECT_EQ(decide(c, ongoing(100, 2), s, kSecond).count, 6u);
  const ScaleDecision lowered = decide(c, ongoing(100, 10), s, 2 * kSecond);
  EXPECT_EQ(lowered.action, ScaleAction::down);
  EXPECT_EQ(lowered.reason, ScaleReason::max_replicas);
  EXPECT_EQ(lowered.count, 2u);
  c.min_replicas = 2;
  ScalerState fresh;
  const ScaleDecision floor = decide(c, ongoing(0, 0), fresh, 0);
  EXPECT_EQ(floor.action, ScaleAction::up);
  EXPECT_EQ(floor.reason, ScaleReason::min_replicas);
  EXPECT_EQ(floor.count, 2u);
}

TEST(Autoscaler, NoScaleDownForLoadWhileReplicasArePending) {
  AutoscaleConfig c = no_delays();
  c.target_ongoing_requests = 1;
  ScalerState s;
  EXPECT_EQ(decide(c, ongoing(1, 1, 3), s, 0).action, ScaleAction::keep);
  EXPECT_EQ(decide(c, ongoing(1, 4, 0), s, 1).action, ScaleAction::down);
}

TEST(Autoscaler, TheLogLineSaysWhatWhyAndFromWhat) {
  AutoscaleConfig c = no_delays();
  ScalerState s;
  const ModelLoad l = ongoing(9, 3);
  EXPECT_EQ(describe(decide(c, l, s, 0), c, l),
            "up by 2 to 5 (load): ongoing_requests need 4.50 with 3 ready, 0 pending");
}

// -- synthetic rate curves -----------------------------------------------------------------------

/// A fluid model of a model's replicas: each serves one request at a time in `service_s`; arrivals
/// beyond what they serve pile up in a backlog; a placed replica serves `cold_start_s` later. The
/// requests in flight and queued follow M/M/1 per replica (ρ / (1 − ρ) and ρ² / (1 − ρ), capped
/// near saturation), plus the backlog.
struct Plant {
  double service_s = 0.1, cold_start_s = 1;
  uint32_t ready = 0;
  std::vector<double> starting;  // when each pending replica will serve
  double backlog = 0;
  uint32_t max_ready = 0, min_ready_after_first = ~0u;

  ModelLoad observe(double rate) const {
    ModelLoad l;
    l.arrival_rate = rate;
    l.service_time_us = static_cast<uint64_t>(service_s * 1e6);
    l.cold_start_us = static_cast<uint64_t>(cold_start_s * 1e6);
    l.ready = ready;
    l.pending = static_cast<uint32_t>(starting.size());
    const double served = ready / service_s;
    const double rho = served > 0 ? std::min(rate / served, 0.95) : 0;
    const double in_flight = ready * rho / (1 - rho);
    l.queued = static_cast<uint32_t>(std::lround(ready * rho * rho / (1 - rho) + backlog));
    l.ongoing = static_cast<uint32_t>(std::lround(in_flight + backlog + (rate > 0 && ready == 0 ? 1 : 0)));
    return l;
  }
  void step(double rate, double now_s, double dt) {
    std::erase_if(starting, [&](double at) { return at <= now_s ? (++ready, true) : false; });
    backlog = std::max(0.0, backlog + (rate - ready / service_s) * dt);
    max_ready = std::max(max_ready, ready);
  }
};

struct Replay {
  std::vector<ScaleAction> actions;  // the ups and downs, in order
  uint32_t final_replicas = 0, peak = 0;
  int reversals() const {
    int n = 0;
    for (size_t i = 1; i < actions.size(); ++i) n += actions[i] != actions[i - 1];
    return n;
  }
};

Replay replay(const AutoscaleConfig& c, const std::function<double(double)>& rate_at, double seconds) {
  Plant plant;
  ScalerState state;
  Replay run;
  const double dt = 0.25;
  for (double t = 0; t < seconds; t += dt) {
    const double rate = rate_at(t);
    plant.step(rate, t, dt);
    const ModelLoad load = plant.observe(rate);
    const ScaleDecision d = decide(c, load, state, static_cast<int64_t>(t * 1e6));
    if (d.action == ScaleAction::up)
      for (uint32_t i = 0; i < d.count; ++i) plant.starting.push_back(t + plant.cold_start_s);
    if (d.action == ScaleAction::down) plant.ready -= d.count;
    if (d.action != ScaleAction::keep) run.actions.push_back(d.action);
    if (std::getenv("TRACE") && d.action != ScaleAction::keep)  // TRACE=1: every change, for tuning
      std::printf("t=%.2f rate=%.1f ready=%u pending=%u ongoing=%u queued=%u %s\n", t, rate, load.ready, load.pending,
                  load.ongoing, load.queued, describe(d, c, load).c_str());
  }
  run.final_replicas = plant.ready + static_cast<uint32_t>(plant.starting.size());
  run.peak = plant.max_ready;
  return run;
}

AutoscaleConfig curve_config(ScalingPolicy policy) {
  AutoscaleConfig c;
  c.policy = policy;
  c.max_replicas = 64;
  c.upscale_delay_us = 2 * kSecond;
  c.downscale_delay_us = 30 * kSecond;
  c.idle_timeout_us = 60 * kSecond;
  c.target_requests_per_minute = 60 * 7;  // 7 per second per replica: a busy but unsaturated replica
  return c;
}

const ScalingPolicy kPolicies[] = {ScalingPolicy::ongoing_requests, ScalingPolicy::arrival_rate,
                                   ScalingPolicy::queue_latency, ScalingPolicy::requests_per_minute};

TEST(AutoscalerCurves, AStepScalesUpOnceItsWorthAndStaysThere) {
  for (ScalingPolicy p : kPolicies) {
    const Replay run = replay(
        curve_config(p), [](double t) { return t < 10 ? 5.0 : 80.0; }, 300);
    EXPECT_GE(run.final_replicas, 9u) << to_string(p) << ": 80 per second need 8 busy replicas";
    EXPECT_LE(run.final_replicas, 24u) << to_string(p);
    EXPECT_LE(run.reversals(), 2) << to_string(p) << ": up, perhaps back once from an overshoot, no more";
  }
}

TEST(AutoscalerCurves, ARampOnlyEverScalesUp) {
  for (ScalingPolicy p : kPolicies) {
    const Replay run = replay(
        curve_config(p), [](double t) { return 1 + t; }, 120);
    ASSERT_FALSE(run.actions.empty()) << to_string(p);
    EXPECT_EQ(std::count(run.actions.begin(), run.actions.end(), ScaleAction::down), 0) << to_string(p);
  }
}

TEST(AutoscalerCurves, ABurstShorterThanTheUpscaleDelayDoesNotScaleOpenLoopPolicies) {
  for (ScalingPolicy p : {ScalingPolicy::arrival_rate, ScalingPolicy::requests_per_minute}) {
    // 4 replicas carry 20 per second; a 1.5 s burst of 200 per second is left to the queues.
    const auto rate = [](double t) { return t >= 60 && t < 61.5 ? 200.0 : 20.0; };
    const Replay run = replay(curve_config(p), rate, 120);
    EXPECT_LE(run.peak, 6u) << to_string(p);
    EXPECT_EQ(run.reversals(), 0) << to_string(p);
  }
}

TEST(AutoscalerCurves, ASineIsFollowedWithOneUpAndOneDownPhasePerPeriod) {
  for (ScalingPolicy p : kPolicies) {
    const auto rate = [](double t) { return 50 + 40 * std::sin(2 * M_PI * t / 240); };
    const Replay run = replay(curve_config(p), rate, 4 * 240);
    EXPECT_GE(run.peak, 8u) << to_string(p);
    EXPECT_LE(run.reversals(), 2 * 4 + 1) << to_string(p) << ": at most two turns a period";
  }
}

TEST(AutoscalerCurves, SilenceTakesEveryPolicyToZeroAndNoSooner) {
  for (ScalingPolicy p : kPolicies) {
    const Replay busy_then_quiet = replay(
        curve_config(p), [](double t) { return t < 30 ? 40.0 : 0.0; }, 30 + 59);
    EXPECT_GE(busy_then_quiet.final_replicas, 1u) << to_string(p) << ": not idle for 60 s yet";
    const Replay quiet = replay(
        curve_config(p), [](double t) { return t < 30 ? 40.0 : 0.0; }, 30 + 62);
    EXPECT_EQ(quiet.final_replicas, 0u) << to_string(p);
  }
}

}  // namespace autoscaler_test
}  // namespace ember::placement
