// DirectTraffic (actors/gateway/routing_view.hpp): what the front-end threads send straight to
// replicas, as the gateway's load reports and least-loaded choice read it.
#include "actors/gateway/routing_view.hpp"

#include <gtest/gtest.h>

namespace ember {
namespace {

TEST(DirectTraffic, CountsArrivalsCompletionsAndWhatIsInFlightUntilDrained) {
  DirectTraffic t;
  const model_key a{"a", 1}, b{"b", 2};
  t.started(a, 7);
  t.started(a, 7);
  t.started(b, 8);
  EXPECT_EQ(t.outstanding(7), 2u);
  EXPECT_EQ(t.outstanding(9), 0u);
  t.finished(a, 7, true, 40);
  // b's node could not take it: the gateway's way counts it, so its arrival is taken back here.
  t.finished(b, 8, false, 0, /*handed_on=*/true);
  EXPECT_EQ(t.outstanding(7), 1u);
  EXPECT_EQ(t.outstanding(8), 0u);
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
  t.finished(a, 7, false, 0);  // an error answer: no completion, nothing in flight
  EXPECT_TRUE(t.drain().second.empty());
  EXPECT_EQ(t.outstanding(7), 0u);
}

}  // namespace
}  // namespace ember
