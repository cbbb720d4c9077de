#include "placement/chain_plan.hpp"

#include <gtest/gtest.h>

namespace ember::placement {
namespace chain_plan_test {

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t kBlob = 1024 * MiB;

ChainPlan plan4() { return ChainPlan(Chain{"src", {"a", "b", "c", "d"}}, kBlob, 0); }

std::string up(const ChainPlan& p, const std::string& hop) {
  auto got = p.upstream_of(hop);
  return got.ok() ? *got : got.error().to_string();
}

using Splices = std::vector<Splice>;

TEST(ChainPlan, StartsAsBuilt) {
  ChainPlan p = plan4();
  EXPECT_EQ(p.source(), "src");
  EXPECT_EQ(up(p, "a"), "src");
  EXPECT_EQ(up(p, "d"), "c");
  EXPECT_EQ(p.state("b"), HopState::receiving);
  EXPECT_FALSE(p.upstream_of("zz").ok());
  EXPECT_EQ(p.upstream_of("zz").error().code(), ErrorCode::not_found);
  EXPECT_FALSE(p.finished());
}

TEST(ChainPlan, OneFailureThenTwoConsecutive) {
  ChainPlan p = plan4();
  EXPECT_EQ(p.on_failed("b"), (Splices{{"c", "a"}}));
  EXPECT_EQ(up(p, "c"), "a");
  EXPECT_EQ(p.on_failed("c"), (Splices{{"d", "a"}}));
  EXPECT_EQ(up(p, "d"), "a");
  EXPECT_EQ(p.state("b"), HopState::failed);
}

TEST(ChainPlan, FirstHopFailsItsDownstreamPullsFromTheSource) {
  ChainPlan p = plan4();
  EXPECT_EQ(p.on_failed("a"), (Splices{{"b", "src"}}));
  EXPECT_EQ(up(p, "b"), "src");
}

TEST(ChainPlan, LastHopFailsNobodyToSplice) {
  ChainPlan p = plan4();
  EXPECT_TRUE(p.on_failed("d").empty());
  EXPECT_EQ(p.state("d"), HopState::failed);
}

TEST(ChainPlan, FailureIsIdempotent) {
  ChainPlan p = plan4();
  EXPECT_EQ(p.on_failed("b").size(), 1u);
  EXPECT_TRUE(p.on_failed("b").empty());
  EXPECT_TRUE(p.on_failed("nobody").empty());
}

TEST(ChainPlan, DoneHopServesUntilItDies) {
  ChainPlan p = plan4();
  ASSERT_TRUE(p.on_done("a", 10).ok());
  EXPECT_EQ(up(p, "b"), "a");  // done still serves
  EXPECT_EQ(p.offset("a"), kBlob);
  EXPECT_EQ(p.on_failed("a"), (Splices{{"b", "src"}}));  // done -> failed: re-point
  EXPECT_EQ(p.on_done("a", 20).error().code(), ErrorCode::invalid_argument);  // failed is final
  EXPECT_EQ(p.on_done("zz", 20).error().code(), ErrorCode::not_found);
}

TEST(ChainPlan, ReplaceSource) {
  ChainPlan p = plan4();
  auto s = p.replace_source("holder2");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, (Splices{{"a", "holder2"}}));
  EXPECT_EQ(p.source(), "holder2");
  EXPECT_EQ(p.chain().source, "holder2");
  EXPECT_EQ(up(p, "b"), "a");
  EXPECT_TRUE(p.replace_source("holder2")->empty());
  EXPECT_FALSE(p.replace_source("c").ok());  // a hop cannot be the source
  EXPECT_FALSE(p.replace_source("").ok());
  p.on_failed("a");
  EXPECT_EQ(*p.replace_source("repo"), (Splices{{"b", "repo"}}));
}

TEST(ChainPlan, StalledHopIsSplicedOutAndItsDownstreamRepointed) {
  ChainPlan p = plan4();
  StallOptions opt;  // 2000 ms
  for (int64_t t = 500; t <= 4000; t += 500) {
    const uint64_t a = static_cast<uint64_t>(t) / 500 * 100 * MiB;
    p.on_progress("a", a, t);
    const uint64_t b = std::min<uint64_t>(a, 150 * MiB);  // b freezes at 150 MiB from t = 1000
    p.on_progress("b", b, t);
    p.on_progress("c", b, t);  // c keeps up with b: it holds all b has
    p.on_progress("d", b, t);
    if (t == 1500 || t == 2000) {
      // 1500: nobody judged before stall_ms; 2000: b frozen only 1000 ms, and not yet slow.
      EXPECT_TRUE(p.check_stalls(t, opt).empty()) << t;
    }
  }
  EXPECT_EQ(p.check_stalls(4000, opt), (Splices{{"c", "a"}}));
  EXPECT_EQ(p.state("b"), HopState::spliced_out);
  EXPECT_EQ(up(p, "b"), "a");  // the stalled hop's own upstream is unchanged
  EXPECT_EQ(up(p, "c"), "a");
  EXPECT_EQ(p.state("c"), HopState::receiving);  // caught up with its upstream: not stalled
  // c was re-pointed at 4000: no judgement until 6000 even if it does not move.
  p.on_progress("a", 900 * MiB, 5000);
  p.on_progress("a", 1000 * MiB, 6000);
  EXPECT_TRUE(p.check_stalls(5500, opt).empty());
  EXPECT_EQ(p.check_stalls(6000, opt), (Splices{{"d", "a"}}));
}

TEST(ChainPlan, SlowHopBySlowFraction) {
  ChainPlan p = plan4();
  for (int64_t t = 500; t <= 4000; t += 500) {
    const uint64_t a = static_cast<uint64_t>(t) / 500 * 100 * MiB;  // 200 MiB/s
    const uint64_t b = static_cast<uint64_t>(t) / 500 * 10 * MiB;   // 20 MiB/s: < 25% of a
    p.on_progress("a", a, t);
    p.on_progress("b", b, t);
    p.on_progress("c", b, t);
  }
  EXPECT_EQ(p.check_stalls(4000, StallOptions{}), (Splices{{"c", "a"}}));
  EXPECT_EQ(p.state("b"), HopState::spliced_out);
  EXPECT_EQ(p.state("a"), HopState::receiving);  // fed by the source: only the stall rule applies
  // The same rates with a lower fraction: not slow.
  ChainPlan q = plan4();
  for (int64_t t = 500; t <= 4000; t += 500) {
    q.on_progress("a", static_cast<uint64_t>(t) / 500 * 100 * MiB, t);
    q.on_progress("b", static_cast<uint64_t>(t) / 500 * 10 * MiB, t);
    q.on_progress("c", static_cast<uint64_t>(t) / 500 * 10 * MiB, t);
  }
  EXPECT_TRUE(q.check_stalls(4000, StallOptions{2000, 0.05, 64 * MiB}).empty());
}

TEST(ChainPlan, SlowHopFedByTheSourceByTheRateFloor) {
  // a is fed by the source and crawls at 10 MiB/s; b and c wait on it.
  ChainPlan p = plan4();
  for (int64_t t = 500; t <= 4000; t += 500) {
    const uint64_t a = static_cast<uint64_t>(t) / 500 * 5 * MiB;
    p.on_progress("a", a, t);
    p.on_progress("b", a, t);
    p.on_progress("c", a, t);
  }
  EXPECT_TRUE(p.check_stalls(4000, StallOptions{}).empty());  // without a floor nothing can judge a
  StallOptions floor{2000, 0.25, 64 * MiB, 50 * MiB};           // 50 MiB/s at least
  EXPECT_EQ(p.check_stalls(4000, floor), (Splices{{"b", "src"}}));
  EXPECT_EQ(p.state("a"), HopState::spliced_out);
  // Above the floor: not slow.
  ChainPlan q = plan4();
  for (int64_t t = 500; t <= 4000; t += 500) {
    const uint64_t a = static_cast<uint64_t>(t) / 500 * 50 * MiB;
    q.on_progress("a", a, t);
    q.on_progress("b", a, t);
    q.on_progress("c", a, t);
  }
  EXPECT_TRUE(q.check_stalls(4000, StallOptions{2000, 0.25, 64 * MiB, 50 * MiB}).empty());
}

TEST(ChainPlan, NoFalsePositiveWhenTheChainIsSlowTogetherOrCaughtUp) {
  // a far ahead of b, but both crawl at the same rate: b keeps pace with its upstream.
  ChainPlan p = plan4();
  p.on_progress("a", 300 * MiB, 1);
  for (int64_t t = 500; t <= 4000; t += 500) {
    p.on_progress("a", 300 * MiB + static_cast<uint64_t>(t) * 10 * 1024, t);
    p.on_progress("b", static_cast<uint64_t>(t) * 10 * 1024, t);
    p.on_progress("c", static_cast<uint64_t>(t) * 10 * 1024, t);
  }
  EXPECT_TRUE(p.check_stalls(4000, StallOptions{}).empty());

  // b gains far less than a but lags by less than lag_bytes; c has caught up with b and stopped.
  ChainPlan q = plan4();
  for (int64_t t = 500; t <= 4000; t += 500) {
    q.on_progress("a", static_cast<uint64_t>(t) * 16 * 1024, t);  // 64 MiB by 4000
    q.on_progress("b", static_cast<uint64_t>(t) * 2 * 1024, t);   // 8 MiB by 4000
    if (t <= 1000) q.on_progress("c", static_cast<uint64_t>(t) * 2 * 1024, t);
  }
  EXPECT_EQ(q.offset("c"), 2000u * 1024);  // frozen since t = 1000
  q.on_progress("c", q.offset("b"), 4000);  // caught up
  EXPECT_TRUE(q.check_stalls(4000, StallOptions{}).empty());
  EXPECT_TRUE(q.check_stalls(5999, StallOptions{}).empty());
}

TEST(ChainPlan, ProgressNeverGoesBackwardsNorPastTheBlob) {
  ChainPlan p = plan4();
  p.on_progress("a", 10 * MiB, 100);
  p.on_progress("a", 5 * MiB, 200);
  EXPECT_EQ(p.offset("a"), 10 * MiB);
  p.on_progress("a", kBlob + 1, 300);
  EXPECT_EQ(p.offset("a"), 10 * MiB);
  p.on_progress("zz", 1, 300);
  EXPECT_EQ(p.offset("zz"), 0u);
}

TEST(ChainPlan, FinishedWhenEveryHopIsDoneOrFailed) {
  ChainPlan p = plan4();
  for (int64_t t = 500; t <= 3000; t += 500) {
    p.on_progress("a", static_cast<uint64_t>(t) * MiB / 10, t);
  }
  // b never moved while a advanced: stalled; c was re-pointed at a.
  EXPECT_EQ(p.check_stalls(3000, StallOptions{}), (Splices{{"c", "a"}}));
  ASSERT_TRUE(p.on_done("a", 3100).ok());
  p.on_failed("d");
  ASSERT_TRUE(p.on_done("c", 3200).ok());
  EXPECT_FALSE(p.finished());  // b is spliced out but still receiving as a leaf
  ASSERT_TRUE(p.on_done("b", 3300).ok());
  EXPECT_TRUE(p.finished());
  std::vector<HopView> v = p.hops();
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[1].name, "b");
  EXPECT_EQ(v[1].state, HopState::done);
  EXPECT_EQ(v[1].offset_bytes, kBlob);
  EXPECT_EQ(v[3].state, HopState::failed);
  EXPECT_EQ(to_string(v[3].state), "failed");
}

// Without its controller a hop walks back up its chain, nearest predecessor first, then the source,
// then round again.
TEST(ChainPlan, AnOrphanedHopTriesItsPredecessorsNearestFirstThenTheSourceThenRoundAgain) {
  const std::vector<std::string> up{"n3", "n2", "n1", "manager"};
  EXPECT_EQ(next_upstream_after(up, "n3"), 1u);
  EXPECT_EQ(next_upstream_after(up, "n2"), 2u);
  EXPECT_EQ(next_upstream_after(up, "n1"), 3u);
  EXPECT_EQ(next_upstream_after(up, "manager"), 0u);
  EXPECT_EQ(next_upstream_after(up, "n9"), 0u);  // spliced elsewhere by the controller: the nearest
  EXPECT_EQ(next_upstream_after({"n1"}, "n1"), 0u);  // one upstream: the same again
  EXPECT_EQ(next_upstream_after({}, "n1"), 0u);
}

TEST(ChainPlan, SamplesStayBounded) {
  ChainPlan p(Chain{"src", {"a", "b"}}, kBlob, 0);
  int64_t t = 0;
  for (uint64_t i = 1; i <= 5000; ++i) p.on_progress("a", i * 1024, t += 100);  // 20 per window
  EXPECT_EQ(p.samples_dropped(), 0u);
  for (uint64_t i = 5001; i <= 7000; ++i) p.on_progress("a", i * 1024, t += 1);  // 2000 per window
  EXPECT_GT(p.samples_dropped(), 0u);
}

}  // namespace chain_plan_test
}  // namespace ember::placement
