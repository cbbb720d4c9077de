#include "placement/rrc_queue.hpp"

#include <gtest/gtest.h>

namespace ember::placement {
namespace rrc_queue_test {

constexpr int64_t kSec = 1'000'000;
constexpr uint64_t kDeadline = 1000;

RrcOptions with_alpha(double alpha) {
  RrcOptions o;
  o.initial_alpha = alpha;
  return o;
}

// Records n outcomes of `model` at now_us, the first m within the deadline.
void feed(RrcQueue& q, const std::string& model, int n, int m, int64_t now_us) {
  for (int i = 0; i < n; ++i) q.record(model, i < m ? kDeadline : kDeadline + 1, now_us);
}

// Pops everything; "model:id" in pop order.
std::vector<std::string> drain(RrcQueue& q, int64_t now_us) {
  std::vector<std::string> out;
  while (auto r = q.pop(now_us)) out.push_back(r->model + ":" + std::to_string(r->id));
  return out;
}

// p = 0.5 makes RRC = n − 2m. After tick(0): ok −10, fresh 0, a 10, b 20, c 70 (total 100).
RrcQueue five_models(double alpha) {
  RrcQueue q(with_alpha(alpha));
  for (const char* name : {"ok", "fresh", "a", "b", "c"}) EXPECT_TRUE(q.register_model(name, kDeadline, 0.5).ok());
  feed(q, "ok", 10, 10, 0);
  feed(q, "a", 10, 0, 0);
  feed(q, "b", 20, 0, 0);
  feed(q, "c", 70, 0, 0);
  q.tick(0);
  return q;
}

std::vector<std::string> high_models(const RrcQueue& q) {
  std::vector<std::string> out;
  for (const RrcModelView& v : q.views()) {
    if (v.group == RrcGroup::high) out.push_back(v.name);
  }
  return out;
}

using Names = std::vector<std::string>;

TEST(RrcQueue, RequiredRequestCount) {
  EXPECT_NEAR(required_request_count(100, 97, 0.98), 50.0, 1e-9);
  EXPECT_EQ(required_request_count(100, 98, 0.98), 0.0);  // exactly at the percentile: complies
  EXPECT_NEAR(required_request_count(100, 100, 0.98), -100.0, 1e-9);
  EXPECT_EQ(required_request_count(0, 0, 0.98), 0.0);
  EXPECT_NEAR(required_request_count(10, 0, 0.5), 10.0, 1e-12);
}

TEST(RrcQueue, HighGroupSize) {
  const std::vector<double> rrc = {-5, 0, 16, 32, 80};  // positive total 128
  EXPECT_EQ(high_group_size(rrc, 1.0), 5u);
  EXPECT_EQ(high_group_size(rrc, 0.25), 3u);      // 16 <= 32 < 48
  EXPECT_EQ(high_group_size(rrc, 0.375), 4u);     // 48 <= 48: the bound is inclusive
  EXPECT_EQ(high_group_size(rrc, 1.0 / 64), 2u);  // only RRC <= 0
  EXPECT_EQ(high_group_size({-3, -1, 0}, 0.0), 3u);
  EXPECT_EQ(high_group_size({0.1, 0.2, 0.3, 0.7}, 1.0), 4u);  // no rounding loss at alpha = 1
  EXPECT_EQ(high_group_size({}, 0.5), 0u);
}

TEST(RrcQueue, GroupingByAlpha) {
  RrcQueue all = five_models(1.0);
  EXPECT_EQ(high_models(all), (Names{"a", "b", "c", "fresh", "ok"}));
  EXPECT_NEAR(all.rrc("c"), 70.0, 1e-9);
  EXPECT_NEAR(all.rrc("ok"), -10.0, 1e-9);

  RrcQueue quarter = five_models(0.25);
  EXPECT_EQ(high_models(quarter), (Names{"a", "fresh", "ok"}));
  EXPECT_TRUE(quarter.in_high_group("a"));
  EXPECT_EQ(quarter.group("b"), RrcGroup::low);

  RrcQueue floor = five_models(1.0 / 64);
  EXPECT_EQ(high_models(floor), (Names{"fresh", "ok"}));
}

TEST(RrcQueue, QueueOrders) {
  RrcQueue q = five_models(0.25);  // high: a 10, fresh 0, ok −10; low: b 20, c 70
  ASSERT_TRUE(q.register_model("bulk", 0).ok());  // no SLO: best effort
  EXPECT_EQ(q.group("bulk"), RrcGroup::best_effort);
  uint64_t id = 0;
  for (const char* m : {"bulk", "c", "b", "ok", "a", "fresh", "a", "ok", "b"}) ASSERT_TRUE(q.push(++id, m, 5).ok());
  EXPECT_EQ(drain(q, 10), (Names{"a:5", "a:7", "fresh:6", "ok:4", "ok:8", "b:3", "b:9", "c:2", "bulk:1"}));
  EXPECT_EQ(q.queued(), 0u);
  EXPECT_FALSE(q.pop(10).has_value());
}

TEST(RrcQueue, DeterministicTies) {
  // Equal RRC (two new models): the model whose oldest request came first, so FIFO across them.
  RrcQueue q;
  ASSERT_TRUE(q.register_model("y", kDeadline).ok());
  ASSERT_TRUE(q.register_model("x", kDeadline).ok());
  uint64_t id = 0;
  for (const char* m : {"y", "x", "y", "x"}) ASSERT_TRUE(q.push(++id, m, 0).ok());
  EXPECT_EQ(drain(q, 0), (Names{"y:1", "x:2", "y:3", "x:4"}));

  // Equal positive RRC at the α boundary: the name decides who makes the group, not registration.
  RrcQueue g(with_alpha(0.1));
  for (const char* name : {"m2", "m1", "big"}) ASSERT_TRUE(g.register_model(name, kDeadline, 0.5).ok());
  feed(g, "m2", 10, 0, 0);
  feed(g, "m1", 10, 0, 0);
  feed(g, "big", 80, 0, 0);
  g.tick(0);
  EXPECT_EQ(high_models(g), (Names{"m1"}));
}

TEST(RrcQueue, NewModelLandsInTheHighGroup) {
  RrcQueue q = five_models(1.0 / 64);
  ASSERT_TRUE(q.register_model("late", kDeadline).ok());
  EXPECT_TRUE(q.in_high_group("late"));
  EXPECT_EQ(q.rrc("late"), 0.0);
  q.tick(kSec);  // still n = 0 at the next repartition
  EXPECT_TRUE(q.in_high_group("late"));
  EXPECT_FALSE(q.in_high_group("a"));
}

// Four models, p = 0.5: `compliant` of them get 2 on-time outcomes, the rest 2 misses.
void period(RrcQueue& q, int compliant, int64_t now_us) {
  int i = 0;
  for (const char* m : {"a", "b", "c", "d"}) feed(q, m, 2, i++ < compliant ? 2 : 0, now_us);
}

RrcQueue four_models(RrcOptions o) {
  RrcQueue q(o);
  for (const char* name : {"a", "b", "c", "d"}) EXPECT_TRUE(q.register_model(name, kDeadline, 0.5).ok());
  q.tick(0);  // no outcomes yet: no signal
  EXPECT_FALSE(q.compliance().has_value());
  return q;
}

TEST(RrcQueue, AlphaFollowsTheCompliantFraction) {
  RrcQueue q = four_models(with_alpha(0.25));
  // Outcomes at 10k+1 s are exactly the window of the alpha step at 10(k+1) s.
  period(q, 2, 1 * kSec);
  q.tick(10 * kSec);
  EXPECT_EQ(q.compliance(), 0.5);  // the first fraction is only a baseline
  EXPECT_EQ(q.alpha(), 0.25);
  period(q, 4, 11 * kSec);
  q.tick(20 * kSec);
  EXPECT_EQ(q.alpha(), 0.5);  // +0.5 > 0.04: α·2
  period(q, 4, 21 * kSec);
  q.tick(30 * kSec);
  EXPECT_EQ(q.alpha(), 0.5);  // no change: inside the band
  period(q, 1, 31 * kSec);
  q.tick(40 * kSec);
  EXPECT_EQ(q.alpha(), 0.25);  // −0.75: α/2
  EXPECT_EQ(q.compliance(), 0.25);
  q.tick(45 * kSec);  // not due
  EXPECT_EQ(q.alpha(), 0.25);
  q.tick(60 * kSec);  // the window is empty: no signal, α and the baseline kept
  EXPECT_EQ(q.alpha(), 0.25);
  EXPECT_EQ(q.compliance(), 0.25);
}

TEST(RrcQueue, AlphaStaysWithinItsFloorAndOne) {
  RrcOptions o = with_alpha(1.0 / 32);
  RrcQueue q = four_models(o);
  period(q, 4, 1 * kSec);
  q.tick(10 * kSec);
  period(q, 2, 11 * kSec);
  q.tick(20 * kSec);
  EXPECT_EQ(q.alpha(), 1.0 / 64);
  period(q, 0, 21 * kSec);
  q.tick(30 * kSec);
  EXPECT_EQ(q.alpha(), 1.0 / 64);  // the floor

  RrcQueue top = four_models(with_alpha(1.0));
  period(top, 0, 1 * kSec);
  top.tick(10 * kSec);
  period(top, 4, 11 * kSec);
  top.tick(20 * kSec);
  EXPECT_EQ(top.alpha(), 1.0);  // capped at 1
}

TEST(RrcQueue, AlphaThresholdIsOnTheAbsoluteChange) {
  RrcOptions o = with_alpha(0.5);
  o.alpha_threshold = 0.3;
  RrcQueue q = four_models(o);
  period(q, 1, 1 * kSec);
  q.tick(10 * kSec);
  period(q, 2, 11 * kSec);  // 0.25 -> 0.5: +100% relative, +0.25 absolute
  q.tick(20 * kSec);
  EXPECT_EQ(q.alpha(), 0.5);
  period(q, 0, 21 * kSec);  // −0.5
  q.tick(30 * kSec);
  EXPECT_EQ(q.alpha(), 0.25);
}

TEST(RrcQueue, OldOutcomesAgeOut) {
  RrcQueue q;
  ASSERT_TRUE(q.register_model("m", kDeadline, 0.5).ok());
  q.tick(0);
  feed(q, "m", 10, 0, kSec / 2);  // a burst of misses in bucket 0
  q.tick(kSec);
  EXPECT_NEAR(q.rrc("m"), 10.0, 1e-12);
  feed(q, "m", 4, 4, 5 * kSec);
  q.tick(9 * kSec + kSec / 2);  // window: buckets 0..9
  EXPECT_NEAR(q.rrc("m"), 6.0, 1e-12);
  ASSERT_TRUE(q.view("m").has_value());
  EXPECT_EQ(q.view("m")->window_requests, 14u);
  q.tick(10 * kSec);  // buckets 1..10: the burst is gone
  EXPECT_NEAR(q.rrc("m"), -4.0, 1e-12);
  EXPECT_EQ(q.counters().misses, 10u);  // the counters, unlike the window, never forget
  EXPECT_EQ(q.counters().on_time, 4u);
}

TEST(RrcQueue, TickRunsPeriodsWhenDueAndSkipsMissedOnes) {
  RrcQueue q;
  ASSERT_TRUE(q.register_model("m", kDeadline, 0.5).ok());
  EXPECT_EQ(q.tick(100), 100 + kSec);  // the first tick runs both; next: the repartition
  feed(q, "m", 3, 0, 200);
  EXPECT_EQ(q.tick(kSec), 100 + kSec);
  EXPECT_EQ(q.rrc("m"), 0.0);  // not yet due
  EXPECT_EQ(q.tick(100 + kSec), 100 + 2 * kSec);
  EXPECT_NEAR(q.rrc("m"), 3.0, 1e-12);
  EXPECT_EQ(q.tick(100 + 5 * kSec / 2), 100 + 3 * kSec);
  EXPECT_EQ(q.tick(100 + 7 * kSec + 1), 100 + 8 * kSec);  // five missed periods run once
  EXPECT_EQ(q.tick(50), 100 + 8 * kSec);                  // time never goes back
}

TEST(RrcQueue, BoundedQueueRejectsTheNewestAndCounts) {
  RrcOptions o;
  o.max_queued_per_model = 2;
  o.max_queued_total = 3;
  RrcQueue q(o);
  ASSERT_TRUE(q.register_model("a", kDeadline).ok());
  ASSERT_TRUE(q.register_model("b", kDeadline).ok());
  EXPECT_TRUE(q.push(1, "a", 0).ok());
  EXPECT_TRUE(q.push(2, "a", 0).ok());
  Status full = q.push(3, "a", 0);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code(), ErrorCode::unavailable);
  EXPECT_TRUE(q.push(4, "b", 0).ok());
  EXPECT_EQ(q.push(5, "b", 0).error().code(), ErrorCode::unavailable);  // the node is full
  EXPECT_EQ(q.counters().rejected, 2u);
  EXPECT_EQ(q.view("a")->counters.rejected, 1u);
  EXPECT_EQ(q.queued(), 3u);
  EXPECT_EQ(drain(q, 0), (Names{"a:1", "a:2", "b:4"}));  // the queued ones are untouched
  EXPECT_TRUE(q.push(6, "b", 0).ok());
}

TEST(RrcQueue, UnknownModelsAndBadArguments) {
  RrcQueue q;
  EXPECT_EQ(q.push(1, "nobody", 0).error().code(), ErrorCode::invalid_argument);
  q.record("nobody", 5, 0);  // ignored
  EXPECT_EQ(q.counters().misses + q.counters().on_time, 0u);
  EXPECT_FALSE(q.group("nobody").has_value());
  EXPECT_EQ(q.register_model("", kDeadline).error().code(), ErrorCode::invalid_argument);
  EXPECT_FALSE(q.register_model("m", kDeadline, 1.0).ok());
  EXPECT_FALSE(q.register_model("m", kDeadline, 0.0).ok());
  EXPECT_FALSE(q.contains("m"));
  EXPECT_TRUE(RrcOptions{}.validate().ok());
  RrcOptions bad;
  bad.alpha_scalar = 1.0;
  EXPECT_FALSE(bad.validate().ok());
  bad = RrcOptions{};
  bad.initial_alpha = 1.0 / 128;  // below the floor
  EXPECT_FALSE(bad.validate().ok());
}

TEST(RrcQueue, PopIfAndBatchesAndLatePops) {
  RrcQueue q = five_models(1.0);  // all high: c 70 first
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(q.push(id, "c", 0).ok());
  ASSERT_TRUE(q.push(4, "a", 0).ok());
  auto not_c = [](const std::string& m) { return m != "c"; };
  EXPECT_EQ(q.pop_if(10, not_c), (QueuedRequest{4, "a", 0}));
  EXPECT_FALSE(q.pop_if(10, not_c).has_value());
  std::vector<QueuedRequest> batch = q.pop_batch(kDeadline + 1, 2);
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[1].id, 2u);
  EXPECT_EQ(q.counters().late_pops, 2u);  // served anyway, counted
  EXPECT_TRUE(q.pop_batch(0, 0).empty());
  EXPECT_EQ(q.pop_batch(0, 8).size(), 1u);
}

TEST(RrcQueue, PopMoreTakesTheRequestsABatchAcceptsAndKeepsTheRestInOrder) {
  RrcQueue q = five_models(0.25);
  for (uint64_t id = 1; id <= 5; ++id) ASSERT_TRUE(q.push(id, "c", static_cast<int64_t>(id)).ok());
  ASSERT_TRUE(q.push(9, "a", 0).ok());
  EXPECT_EQ(q.oldest_arrival("c"), 1);
  EXPECT_FALSE(q.oldest_arrival("d").has_value());
  // Odd ids join, at most two: 1 and 3; 2, 4 and 5 stay, in order.
  auto odd = [](uint64_t id) { return id % 2 == 1; };
  EXPECT_EQ(q.pop_more(10, "c", 2, odd), (std::vector<QueuedRequest>{{1, "c", 1}, {3, "c", 3}}));
  EXPECT_EQ(q.queued("c"), 3u);
  EXPECT_EQ(q.queued(), 4u);
  EXPECT_EQ(q.oldest_arrival("c"), 2);
  EXPECT_EQ(q.pop_more(10, "c", 8), (std::vector<QueuedRequest>{{2, "c", 2}, {4, "c", 4}, {5, "c", 5}}));
  EXPECT_TRUE(q.pop_more(10, "c", 8).empty());
  EXPECT_TRUE(q.pop_more(10, "nope", 8).empty());
  // The other model is still first in line.
  EXPECT_EQ(q.pop(11), (QueuedRequest{9, "a", 0}));
  EXPECT_EQ(q.queued(), 0u);
  EXPECT_EQ(q.counters().popped, 6u);
}

TEST(RrcQueue, RemoveAndReRegister) {
  RrcQueue q = five_models(0.25);
  ASSERT_TRUE(q.push(1, "b", 7).ok());
  ASSERT_TRUE(q.push(2, "b", 8).ok());
  ASSERT_TRUE(q.register_model("b", 2 * kDeadline, 0.9).ok());  // new SLO, same queue and group
  EXPECT_EQ(q.view("b")->deadline_us, 2 * kDeadline);
  EXPECT_EQ(q.group("b"), RrcGroup::low);
  EXPECT_EQ(q.queued("b"), 2u);
  EXPECT_EQ(q.remove_model("b"), (std::vector<QueuedRequest>{{1, "b", 7}, {2, "b", 8}}));
  EXPECT_EQ(q.queued(), 0u);
  EXPECT_EQ(q.push(3, "b", 0).error().code(), ErrorCode::invalid_argument);
  EXPECT_TRUE(q.remove_model("b").empty());
}

}  // namespace rrc_queue_test
}  // namespace ember::placement
