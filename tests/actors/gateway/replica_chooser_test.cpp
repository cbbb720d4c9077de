// ReplicaChooser (actors/gateway/replica_chooser.hpp): the one replica choice of a gateway process
// and the one in-flight count per node it reads.
#include "actors/gateway/replica_chooser.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace ember {
namespace {

struct Candidate {
  uint64_t node_id = 0;
};

TEST(ReplicaChooser, PicksTheFewestInFlightTiesToTheEarliestAndCountsIt) {
  ReplicaChooser c;
  const std::vector<Candidate> replicas{{3}, {5}, {7}};
  EXPECT_EQ(c.choose_and_start(replicas)->node_id, 3u);  // all idle: the first
  EXPECT_EQ(c.choose_and_start(replicas)->node_id, 5u);  // 3 is busy now
  EXPECT_EQ(c.choose_and_start(replicas)->node_id, 7u);
  EXPECT_EQ(c.choose_and_start(replicas)->node_id, 3u);  // all at one: the first again
  EXPECT_EQ(c.in_flight(3), 2u);
  c.finished(5);
  EXPECT_EQ(c.in_flight(5), 0u);
  EXPECT_EQ(c.choose_and_start(replicas)->node_id, 5u);
}

TEST(ReplicaChooser, CountsWhatWasStartedElsewhereAndSkipsTheRefused) {
  ReplicaChooser c;
  const std::vector<Candidate> replicas{{1}, {2}};
  c.started(1);  // sent by the other path (the gateway actor, or a front-end thread)
  EXPECT_EQ(c.choose_and_start(replicas)->node_id, 2u);
  // Only node 1 qualifies (say, the only one in this process): it is chosen though busier.
  EXPECT_EQ(c.choose_and_start(replicas, [](const Candidate& r) { return r.node_id == 1; })->node_id, 1u);
  EXPECT_EQ(c.in_flight(1), 2u);
  EXPECT_EQ(c.choose_and_start(replicas, [](const Candidate&) { return false; }), nullptr);
  EXPECT_EQ(c.choose_and_start(std::vector<Candidate>{}), nullptr);
  EXPECT_EQ(c.in_flight(1), 2u);  // nothing counted for no choice
  EXPECT_EQ(c.in_flight(2), 1u);
}

TEST(ReplicaChooser, AFinishWithoutItsStartNeverGoesBelowZero) {
  ReplicaChooser c;
  c.finished(4);
  EXPECT_EQ(c.in_flight(4), 0u);
  c.started(4);
  c.finished(4);
  c.finished(4);
  EXPECT_EQ(c.in_flight(4), 0u);
}

TEST(ReplicaChooser, ThreadsChoosingAtOnceSpreadOverTheReplicasAndCountEveryRequest) {
  ReplicaChooser c;
  const std::vector<Candidate> replicas{{1}, {2}, {3}, {4}};
  constexpr int kThreads = 4, kEach = 1000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) c.choose_and_start(replicas);
    });
  }
  for (auto& t : threads) t.join();
  // Choice and count happen under one lock: every pick went to a least-loaded node, so the
  // requests lie evenly over the four.
  for (uint64_t n = 1; n <= 4; ++n) EXPECT_EQ(c.in_flight(n), static_cast<uint32_t>(kThreads * kEach / 4)) << n;
}

}  // namespace
}  // namespace ember
