// DirectTraffic (actors/gateway/routing_view.hpp): what the front-end threads send straight to
// replicas, as the gateway's load reports read it; the in-flight count per node those sends leave
// is the ReplicaChooser's, counted beside it as GatewayClient does.
#include "actors/gateway/routing_view.hpp"

#include <gtest/gtest.h>

namespace ember {
namespace {

TEST(DirectTraffic, CountsArrivalsCompletionsAndWhatIsInFlightUntilDrained) {
  DirectTraffic t;
  ReplicaChooser c;
  auto started = [&](const model_key& m, uint64_t node) {
    c.started(node);
    t.started(m, node);
  };
  auto finished = [&](const model_key& m, uint64_t node, bool answered, uint64_t busy_us, bool handed_on = false) {
    t.finished(m, node, answered, busy_us, handed_on);
    c.finished(node);
  };
  const model_key a{"a", 1}, b{"b", 2};
  started(a, 7);
  started(a, 7);
  started(b, 8);
  EXPECT_EQ(c.in_flight(7), 2u);
  EXPECT_EQ(c.in_flight(9), 0u);
  finished(a, 7, true, 40);
  // b's node could not take it: the gateway's way counts it, so its arrival is taken back here.
  finished(b, 8, false, 0, /*handed_on=*/true);
  EXPECT_EQ(c.in_flight(7), 1u);
  EXPECT_EQ(c.in_flight(8), 0u);
  auto [counts, in_flight] = t.drain();
  EXPECT_EQ(counts[a].arrivals, 2u);
  EXPECT_EQ(counts[a].completions, 1u);
  EXPECT_EQ(counts[a].busy_us, 40u);
  EXPECT_EQ(counts[b].arrivals, 0u);
  EXPECT_EQ(counts[b].completions, 0u);
  ASSERT_EQ(in_flight.size(), 1u);
  EXPECT_EQ((in_flight[{a, 7}]), 1u);
  // Counts start again; what is in flight stays until it comes back.
  auto [again, still] = t.drain();
  EXPECT_TRUE(again.empty());
  EXPECT_EQ(still.size(), 1u);
  finished(a, 7, false, 0);  // an error answer: no completion, nothing in flight
  EXPECT_TRUE(t.drain().second.empty());
  EXPECT_EQ(c.in_flight(7), 0u);
}

}  // namespace
}  // namespace ember
