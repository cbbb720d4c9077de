// DistributionTracker: distribute/evict calls answered once, when their last node settles; stale
// answers ignored; durations from the time given (plain C++).
#include "actors/cluster/distribution_tracker.hpp"

#include <gtest/gtest.h>

namespace ember {
namespace distribution_tracker_test {

using namespace std::chrono_literals;
using time_point = DistributionTracker::time_point;

std::optional<replica_info> line(const std::string& node) {
  return replica_info{{"m", 1}, node, "", SourceTier::peer, "a", 0, 0};
}

TEST(DistributionTracker, ACallIsAnsweredOnceWhenItsLastNodeSettlesWithEveryLineAndError) {
  DistributionTracker t;
  std::vector<distribute_result> answers;
  distribute_result r;
  r.model = {"m", 1};
  const time_point t0{10s};
  const uint64_t id = t.start(r, {{1, {"a", 7}}, {2, {"b", 7}}, {3, {"c", 0}}}, t0,
                              [&](distribute_result x) { answers.push_back(std::move(x)); });
  EXPECT_NE(id, 0u);
  EXPECT_EQ(t.waiting_on(2), (std::vector<uint64_t>{id}));
  auto hop = t.settle(id, 1, line("a"), t0 + 1s);
  ASSERT_TRUE(hop.has_value());
  EXPECT_EQ(hop->hop.node, "a");
  EXPECT_EQ(hop->hop.transfer_id, 7u);
  EXPECT_EQ(hop->model, (model_key{"m", 1}));
  EXPECT_FALSE(hop->evicted);
  EXPECT_FALSE(t.settle(id, 1, line("a"), t0 + 1s).has_value());  // a second answer: stale
  EXPECT_TRUE(t.settle(id, 3, unavailable("node c was lost"), t0 + 2s).has_value());
  EXPECT_TRUE(answers.empty());
  EXPECT_TRUE(t.settle(id, 2, line("b"), t0 + 2500ms).has_value());
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].nodes.size(), 2u);
  EXPECT_EQ(answers[0].errors, (std::vector<std::string>{"c: node c was lost"}));
  EXPECT_DOUBLE_EQ(answers[0].seconds, 2.5);
  EXPECT_EQ(t.in_progress(), 0u);
  EXPECT_FALSE(t.settle(id, 2, unavailable("late"), t0 + 3s).has_value());  // forgotten
  EXPECT_EQ(answers.size(), 1u);
}

TEST(DistributionTracker, AnEvictionHasNoDurationAndANodeWithNothingToDropAddsNoLine) {
  DistributionTracker t;
  std::optional<distribute_result> answer;
  distribute_result r;
  r.evicted = true;
  const uint64_t id =
      t.start(r, {{1, {"a", 0}}, {2, {"b", 0}}}, time_point{}, [&](distribute_result x) { answer = std::move(x); });
  EXPECT_TRUE(t.settle(id, 1, std::optional<replica_info>{}, time_point{5s}).has_value());
  auto settled = t.settle(id, 2, line("b"), time_point{5s});
  ASSERT_TRUE(settled.has_value());
  EXPECT_TRUE(settled->evicted);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->nodes.size(), 1u);
  EXPECT_EQ(answer->seconds, 0);
}

TEST(DistributionTracker, CallsWaitingOnANodeAreListedUntilItSettles) {
  DistributionTracker t;
  const uint64_t a = t.start({}, {{1, {"a", 0}}}, time_point{}, {});
  const uint64_t b = t.start({}, {{1, {"a", 0}}, {2, {"b", 0}}}, time_point{}, {});
  EXPECT_NE(a, b);
  EXPECT_EQ(t.waiting_on(1), (std::vector<uint64_t>{a, b}));
  EXPECT_TRUE(t.settle(b, 1, unavailable("lost"), time_point{}).has_value());
  EXPECT_EQ(t.waiting_on(1), (std::vector<uint64_t>{a}));
  EXPECT_EQ(t.in_progress(), 2u);
}

}  // namespace distribution_tracker_test
}  // namespace ember
