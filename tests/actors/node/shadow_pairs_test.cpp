// ShadowPairs (the router's burst scaling, AsyFunc) over a SwapController, plain C++ on a synthetic
// profile: a burst pairs a Body with a Shadow on an idle device and lends it; the pair's share is
// Eq. 6's; Shadows go when the rate falls, smallest benefit first, and when their Body is gone;
// model-level scaling bounds a model's copies and frees them as the rate falls; adaptive batching
// waits for one more request exactly while the oldest would still meet its deadline.
#include "actors/node/shadow_pairs.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace ember {
namespace shadow_pairs_test {

constexpr uint64_t MiB = 1ull << 20;

placement::NodeTopology topology(uint32_t devices) {
  auto t = placement::NodeTopology::create(std::vector<uint32_t>(devices, 0),
                                           std::vector<std::vector<double>>(devices, std::vector<double>(devices, 0.0)),
                                           std::vector<double>(devices, 16.0));
  EXPECT_TRUE(t.ok());
  return *t;
}

// A CNN-like model of four blocks: the first light and compute-hungry (its time grows with the
// batch), the last heavy and flat: 81 ms at batch 8, so that one Body carries about 99 rows/s
// within an SLO of 200 ms.
placement::ShadowProfile profile() {
  placement::ShadowProfile p;
  p.batches = {1, 2, 4, 8};
  auto block = [&](uint32_t first, uint64_t bytes, double per_row, double fixed) {
    placement::ShadowBlock b;
    b.first_layer = first;
    b.last_layer = first + 2;
    b.weight_bytes = bytes;
    b.macs = 1000;
    b.in_bytes = b.out_bytes = 1000;
    for (uint32_t x : p.batches) b.exec_us.push_back(fixed + per_row * x);
    p.blocks.push_back(b);
  };
  block(0, 1 * MiB, 8000, 200);
  block(2, 2 * MiB, 1500, 200);
  block(4, 4 * MiB, 400, 300);
  block(6, 20 * MiB, 100, 300);
  return p;
}

/// The model of these tests, by its key.
const model_key kM{"m", 1};

SwapModel swap_model(const model_key& name) {
  SwapModel m{name, 27 * MiB, placement::Heaviness::light, 200'000, 0.98};
  m.max_batch = 8;
  return m;
}

struct Fixture {
  explicit Fixture(uint32_t devices, ShadowScalingOptions o)
      : swap(topology(devices), std::vector<uint64_t>(devices, 100 * MiB), {}), pairs(o, topology(devices)) {
    EXPECT_TRUE(swap.add_model(swap_model(kM)).ok());
    pairs.add_model(kM, {profile(), 200'000, 8}, swap);
  }
  /// Runs one request of "m" to its end (dispatched when a batch gathering for it stops waiting):
  /// the model is resident where it ran.
  uint32_t run_once(uint64_t id, int64_t now) {
    EXPECT_TRUE(swap.submit(id, kM, now).ok());
    auto d = swap.dispatch(now);
    if (d.empty() && swap.gathering_until()) d = swap.dispatch(*swap.gathering_until());
    if (d.size() != 1) {
      ADD_FAILURE() << d.size() << " dispatches";
      return 0;
    }
    SwapOutcome o;
    o.resident = true;
    o.footprint = 27 * MiB;
    swap.finish(d[0], o, 10, now + 10);
    return d[0].device;
  }
  /// `n` arrivals spread evenly over [from, from + span): the Shadows they started.
  std::vector<ShadowPairs::Row> arrivals(int n, int64_t from, int64_t span) {
    std::vector<ShadowPairs::Row> started;
    for (int i = 0; i < n; ++i) {
      for (auto& r : pairs.arrival(kM, from + span * i / n, swap)) started.push_back(r);
    }
    return started;
  }
  SwapController swap;
  ShadowPairs pairs;
};

ShadowScalingOptions lls() {
  ShadowScalingOptions o;
  o.shadows = true;
  o.burst_window_us = 100'000;
  o.period_us = 1'000'000;
  return o;
}

TEST(ShadowPairs, ABurstPairsTheBodyWithAShadowOnAnIdleDeviceAndLendsIt) {
  Fixture f(3, lls());
  const uint32_t body = f.run_once(1, 0);
  // 40 requests/s: within one Body's capacity, no Shadow.
  EXPECT_TRUE(f.arrivals(4, 10'000, 100'000).empty());
  EXPECT_TRUE(f.pairs.table().empty());
  // 200 requests/s: a Shadow on an idle device other than the Body's, lent from now on.
  auto started = f.arrivals(20, 200'000, 100'000);
  ASSERT_EQ(started.size(), 1u);
  const auto& row = started[0];
  EXPECT_EQ(row.body, body);
  EXPECT_NE(row.device, body);
  EXPECT_TRUE(f.swap.lent(row.device));
  EXPECT_FALSE(f.swap.idle(row.device));
  EXPECT_FALSE(row.ready);
  // Algorithm 2's choice on this profile: the compute-hungry light first block.
  EXPECT_EQ(row.choice.first_block, 0u);
  EXPECT_GT(row.choice.gain_rows_per_s, 0);
  // Starting, it shares nothing yet; once its executor answered, batches split as Eq. 6 says.
  EXPECT_FALSE(f.pairs.pair(kM, body, 8).has_value());
  f.pairs.started(row.id, 1 * MiB, 300, f.swap);
  auto share = f.pairs.pair(kM, body, 8);
  ASSERT_TRUE(share.has_value());
  EXPECT_EQ(share->first, row.id);
  const auto split = placement::split_batch(profile(), row.choice.first_block, row.choice.last_block, 8);
  EXPECT_DOUBLE_EQ(share->second, split.shadow_rows / 8.0);
  EXPECT_FALSE(f.pairs.pair(kM, body, 1).has_value()) << "one row is not split";
  EXPECT_FALSE(f.pairs.pair(kM, row.device, 8).has_value()) << "only its Body shares";
  // The lent device takes no request: with the Body busy, the next waits or goes to the third device.
  ASSERT_TRUE(f.swap.submit(100, kM, 300'000).ok());
  ASSERT_TRUE(f.swap.submit(101, kM, 300'000).ok());
  for (const auto& d : f.swap.dispatch(300'000)) EXPECT_NE(d.device, row.device);
  // A single Body takes a single Shadow, however the rate climbs.
  EXPECT_TRUE(f.arrivals(60, 310'000, 100'000).empty());
}

// The rate a burst is told by: the window's when it holds 8 arrivals or more; else the gaps between
// the last 8 over their span, so that a few requests a second are not read as a burst of one per
// window; fewer than 8 requests in all tell none.
TEST(ShadowPairs, TheRateOfAFewRequestsASecondIsTheirGapsNotOneWindowsCount) {
  Fixture f(2, lls());
  f.run_once(1, 0);
  for (int64_t t = 0; t < 7 * 50'000; t += 50'000) f.pairs.arrival(kM, 1'000'000 + t, f.swap);
  EXPECT_EQ(f.pairs.rate(kM, 1'300'000), 0) << "seven arrivals";
  f.pairs.arrival(kM, 1'400'000, f.swap);
  EXPECT_DOUBLE_EQ(f.pairs.rate(kM, 1'400'000), 7 / 0.4);  // seven gaps over 400 ms, not 2 per 100 ms
  for (int64_t t = 2'000'000; t <= 2'080'000; t += 10'000) f.pairs.arrival(kM, t, f.swap);
  EXPECT_DOUBLE_EQ(f.pairs.rate(kM, 2'080'000), 9 / 0.1);  // nine within the window: its count
  EXPECT_TRUE(f.pairs.table().empty()) << "90 a second is within one Body's 99";
}

TEST(ShadowPairs, ShadowsGoWhenTheRateFallsSmallestBenefitFirst) {
  Fixture f(4, lls());
  // Two Bodies (devices 0 and 1 hold copies), each paired in a burst.
  f.run_once(1, 0);
  ASSERT_TRUE(f.swap.submit(2, kM, 10).ok());
  ASSERT_TRUE(f.swap.submit(3, kM, 10).ok());
  auto two = f.swap.dispatch(10);
  ASSERT_EQ(two.size(), 2u);
  for (const auto& d : two) {
    SwapOutcome o;
    o.resident = true;
    o.footprint = 27 * MiB;
    f.swap.finish(d, o, 10, 20);
  }
  ASSERT_EQ(f.swap.holders(kM).size(), 2u);
  auto started = f.arrivals(1000, 0, 1'000'000);  // 1000 requests/s for a second
  ASSERT_EQ(started.size(), 2u);
  for (const auto& r : started) f.pairs.started(r.id, 1 * MiB, 300, f.swap);
  // Within the period, nothing goes; after it, at the burst's rate, nothing either.
  EXPECT_TRUE(f.pairs.period(500'000, f.swap).release.empty()) << "the first period starts at 0";
  EXPECT_TRUE(f.pairs.period(1'000'000, f.swap).release.empty());
  // The rate falls under what the Bodies carry alone: both go, the smaller benefit first.
  auto after = f.pairs.period(2'100'000, f.swap);
  ASSERT_EQ(after.release.size(), 2u);
  EXPECT_LE(after.release[0].choice.benefit, after.release[1].choice.benefit);
  for (const auto& r : after.release) EXPECT_FALSE(f.swap.lent(r.device));
  EXPECT_TRUE(f.pairs.table().empty());
}

TEST(ShadowPairs, AShadowWhoseBodyOrDeviceIsGoneLeavesTheTable) {
  Fixture f(2, lls());
  const uint32_t body = f.run_once(1, 0);
  auto started = f.arrivals(30, 100'000, 100'000);
  ASSERT_EQ(started.size(), 1u);
  f.pairs.started(started[0].id, 1 * MiB, 300, f.swap);
  // Its device restarted (a split could not reach it): gone at once, the device no longer lent.
  auto row = f.pairs.gone(started[0].id, f.swap);
  ASSERT_TRUE(row.has_value());
  EXPECT_FALSE(f.swap.lent(row->device));
  EXPECT_FALSE(f.pairs.gone(started[0].id, f.swap).has_value());
  // Another burst pairs again; then the Body's device faults: the next period lets the Shadow go.
  auto again = f.arrivals(30, 300'000, 100'000);
  ASSERT_EQ(again.size(), 1u);
  f.pairs.started(again[0].id, 1 * MiB, 300, f.swap);
  f.swap.device_down(body);
  auto period = f.pairs.period(1'500'000, f.swap);
  ASSERT_EQ(period.release.size(), 1u);
  EXPECT_EQ(period.release[0].id, again[0].id);
  // Unloading the model lets every Shadow of it go.
  f.swap.device_up(body, 100 * MiB);
  f.run_once(2, 1'600'000);
  auto third = f.arrivals(30, 1'700'000, 100'000);
  ASSERT_EQ(third.size(), 1u);
  auto removed = f.pairs.remove_model(kM, f.swap);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_FALSE(f.swap.lent(removed[0].device));
}

TEST(ShadowPairs, ModelLevelScalingBoundsTheCopiesAndFreesThemAsTheRateFalls) {
  ShadowScalingOptions o;
  o.model_level = true;
  o.period_us = 1'000'000;
  Fixture f(4, o);
  EXPECT_EQ(f.pairs.bodies(kM), 1u);
  EXPECT_EQ(f.swap.model(kM)->max_devices, 1u);
  // One copy: a second request while it runs waits for it rather than copying the model elsewhere.
  f.run_once(1, 0);
  ASSERT_TRUE(f.swap.submit(2, kM, 10).ok());
  ASSERT_TRUE(f.swap.submit(3, kM, 10).ok());
  auto d = f.swap.dispatch(10);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].action, placement::SwapAction::run);
  SwapOutcome ok;
  ok.resident = true;
  ok.footprint = 27 * MiB;
  f.swap.finish(d[0], ok, 10, 20);
  // A period at 200 requests/s against one Body's ~99 within the SLO: out to ceil(200 / (0.8 x 99)).
  f.arrivals(200, 0, 1'000'000);
  EXPECT_TRUE(f.pairs.period(1'000'000, f.swap).drop.empty());
  const uint32_t out = f.pairs.bodies(kM);
  const double body = placement::body_capacity(profile(), 200'000, 8).rows_per_s;
  EXPECT_EQ(out, static_cast<uint32_t>(std::ceil(200 / (0.8 * body))));
  EXPECT_EQ(out, 3u);
  EXPECT_EQ(f.swap.model(kM)->max_devices, out);
  // Now the waiting request may take a copy elsewhere.
  ASSERT_TRUE(f.swap.submit(4, kM, 1'000'010).ok());
  ASSERT_TRUE(f.swap.submit(5, kM, 1'000'010).ok());
  auto spread = f.swap.dispatch(1'000'010);
  ASSERT_GE(spread.size(), 2u);
  for (const auto& s : spread) f.swap.finish(s, ok, 10, 1'000'020);
  const size_t copies = f.swap.holders(kM).size();
  ASSERT_GE(copies, 2u);
  // The rate falls to nothing: one Body fewer a period, the copies beyond them freed, down to one.
  uint32_t before = out;
  for (int64_t t = 2'000'000; before > 1; t += 1'000'000) {
    auto p = f.pairs.period(t, f.swap);
    EXPECT_EQ(f.pairs.bodies(kM), before - 1);
    before = f.pairs.bodies(kM);
    EXPECT_LE(f.swap.holders(kM).size(), std::max<size_t>(before, 1));
    for (const auto& [model, device] : p.drop) EXPECT_EQ(model, kM);
  }
  EXPECT_EQ(f.swap.holders(kM).size(), 1u);
}

TEST(ShadowPairs, AdaptiveBatchingWaitsWhileTheOldestStillMeetsItsDeadline) {
  ShadowScalingOptions o;
  o.adaptive_batching = true;
  Fixture f(1, o);
  f.run_once(1, 0);
  const int64_t start = 300'000;  // after the first run answered
  const auto m = f.swap.model(kM);
  ASSERT_EQ(m->batch_us.size(), 8u);
  EXPECT_DOUBLE_EQ(m->batch_us[7], placement::body_us(profile(), 8));
  // One request waits: the device waits for a second until the oldest would miss its deadline with it.
  ASSERT_TRUE(f.swap.submit(2, kM, start).ok());
  const int64_t until = start + 200'000 - static_cast<int64_t>(std::ceil(m->batch_us[1]));
  EXPECT_TRUE(f.swap.dispatch(until - 1).empty());
  EXPECT_EQ(f.swap.gathering_until(), until);
  auto go = f.swap.dispatch(until);
  ASSERT_EQ(go.size(), 1u);
  SwapOutcome ok;
  ok.resident = true;
  ok.footprint = 27 * MiB;
  f.swap.finish(go[0], ok, 10, until + 10);
  // A full batch goes at once.
  for (uint64_t id = 10; id < 18; ++id) ASSERT_TRUE(f.swap.submit(id, kM, until + 20).ok());
  EXPECT_EQ(f.swap.dispatch(until + 20).size(), 1u);
}

}  // namespace shadow_pairs_test
}  // namespace ember
