// FlowNetwork (sim/flow_network.hpp): max-min fair rates against hand-computed cases, completions
// and their times as flows come and go, caps, links crossed twice (a cut-through chain), and the
// errors.
#include "sim/flow_network.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace ember::sim {
namespace flow_network_test {

LinkId link(FlowNetwork& net, double rate, const char* name = "link") {
  auto l = net.add_link(name, rate);
  EXPECT_TRUE(l.ok()) << l.error().message();
  return *l;
}

FlowId flow(FlowNetwork& net, std::vector<LinkId> path, double bytes, uint64_t now_us, double cap = 0) {
  auto f = net.start(path, bytes, now_us, cap);
  EXPECT_TRUE(f.ok()) << f.error().message();
  return *f;
}

TEST(FlowNetwork, OneFlowTakesTheWholeLink) {
  FlowNetwork net;
  const LinkId l = link(net, 10);
  const FlowId f = flow(net, {l}, 100, 0);
  EXPECT_DOUBLE_EQ(net.rate(f), 10);
  EXPECT_EQ(net.next_completion_us(), 10'000'000u);
  EXPECT_TRUE(net.finished(9'999'999)->empty());
  EXPECT_EQ(*net.finished(10'000'000), std::vector<FlowId>{f});
  EXPECT_EQ(net.running(), 0u);
  EXPECT_FALSE(net.next_completion_us());
}

TEST(FlowNetwork, FlowsSharingALinkSplitItAndTheSurvivorSpeedsUp) {
  // 10 B/s; A 100 B and B 300 B at 5 B/s each: A ends at 20 s with 200 B of B left, which then
  // runs at 10 B/s and ends at 40 s.
  FlowNetwork net;
  const LinkId l = link(net, 10);
  const FlowId a = flow(net, {l}, 100, 0);
  const FlowId b = flow(net, {l}, 300, 0);
  EXPECT_DOUBLE_EQ(net.rate(a), 5);
  EXPECT_DOUBLE_EQ(net.rate(b), 5);
  EXPECT_DOUBLE_EQ(net.link_rate(l), 10);
  EXPECT_EQ(net.next_completion_us(), 20'000'000u);
  EXPECT_EQ(*net.finished(20'000'000), std::vector<FlowId>{a});
  EXPECT_DOUBLE_EQ(net.remaining(b), 200);
  EXPECT_DOUBLE_EQ(net.rate(b), 10);
  EXPECT_EQ(net.next_completion_us(), 40'000'000u);
  EXPECT_EQ(*net.finished(40'000'000), std::vector<FlowId>{b});
}

TEST(FlowNetwork, AFlowJoiningLaterSlowsTheOthersFromThen) {
  // 12 B/s; A 120 B alone for 5 s (60 B), then B joins: 6 B/s each; A's 60 B end at 15 s.
  FlowNetwork net;
  const LinkId l = link(net, 12);
  const FlowId a = flow(net, {l}, 120, 0);
  const FlowId b = flow(net, {l}, 1000, 5'000'000);
  EXPECT_DOUBLE_EQ(net.remaining(a), 60);
  EXPECT_DOUBLE_EQ(net.rate(b), 6);
  EXPECT_EQ(net.next_completion_us(), 15'000'000u);
}

TEST(FlowNetwork, MaxMinFairnessAcrossTwoLinks) {
  // The textbook case: L1 10 B/s carries f1 and f2, L2 4 B/s carries f2 and f3. L2 fills first at
  // 2 each (f2, f3 fixed); L1 gives f1 what is left: 8.
  FlowNetwork net;
  const LinkId l1 = link(net, 10, "l1"), l2 = link(net, 4, "l2");
  const FlowId f1 = flow(net, {l1}, 1e9, 0);
  const FlowId f2 = flow(net, {l1, l2}, 1e9, 0);
  const FlowId f3 = flow(net, {l2}, 1e9, 0);
  EXPECT_DOUBLE_EQ(net.rate(f1), 8);
  EXPECT_DOUBLE_EQ(net.rate(f2), 2);
  EXPECT_DOUBLE_EQ(net.rate(f3), 2);
  EXPECT_DOUBLE_EQ(net.link_rate(l1), 10);
  EXPECT_DOUBLE_EQ(net.link_rate(l2), 4);
}

TEST(FlowNetwork, ThreeLevelsOfBottlenecks) {
  // A spine of 30 carries f1, f2, f3; a leaf of 6 carries f1 and f2; f3 alone on its own NIC of 100.
  // Leaf: 3 each; spine left 24 for f3.
  FlowNetwork net;
  const LinkId spine = link(net, 30), leaf = link(net, 6), nic = link(net, 100);
  const FlowId f1 = flow(net, {leaf, spine}, 1e9, 0);
  const FlowId f2 = flow(net, {spine, leaf}, 1e9, 0);
  const FlowId f3 = flow(net, {nic, spine}, 1e9, 0);
  EXPECT_DOUBLE_EQ(net.rate(f1), 3);
  EXPECT_DOUBLE_EQ(net.rate(f2), 3);
  EXPECT_DOUBLE_EQ(net.rate(f3), 24);
}

TEST(FlowNetwork, ACapFixesAFlowBelowItsShareAndTheOthersTakeTheRest) {
  FlowNetwork net;
  const LinkId l = link(net, 10);
  const FlowId slow = flow(net, {l}, 1e9, 0, 3);
  const FlowId fast = flow(net, {l}, 1e9, 0);
  EXPECT_DOUBLE_EQ(net.rate(slow), 3);
  EXPECT_DOUBLE_EQ(net.rate(fast), 7);
  // A cap above the share changes nothing; a flow with only a cap runs at it.
  FlowNetwork other;
  const LinkId m = link(other, 10);
  const FlowId a = flow(other, {m}, 1e9, 0, 50);
  const FlowId b = flow(other, {m}, 1e9, 0);
  const FlowId disk = flow(other, {}, 100, 0, 25);
  EXPECT_DOUBLE_EQ(other.rate(a), 5);
  EXPECT_DOUBLE_EQ(other.rate(b), 5);
  EXPECT_DOUBLE_EQ(other.rate(disk), 25);
  EXPECT_EQ(other.next_completion_us(), 4'000'000u);
}

TEST(FlowNetwork, ACutThroughChainMovesAtItsSlowestHopAndALinkCrossedTwiceCountsTwice) {
  // A chain source -> n1 -> n2 through one switch: hop 1 crosses the source's NIC and n1's, hop 2
  // n1's NIC (out) and n2's. As one flow over their union it moves at the slowest: n2's NIC, 4.
  FlowNetwork net;
  const LinkId src = link(net, 10), n1 = link(net, 8), n2 = link(net, 4);
  const FlowId chain = flow(net, {src, n1, n1, n2}, 1e9, 0);
  EXPECT_DOUBLE_EQ(net.rate(chain), 4);
  // n1 carries the chain twice (in and out: 8 of its 8); a new flow into n1 shares it: the chain's
  // two crossings and the new one's one split 8 as 8/3 each, so the chain runs at 8/3.
  const FlowId other = flow(net, {n1}, 1e9, 0);
  EXPECT_DOUBLE_EQ(net.rate(chain), 8.0 / 3);
  EXPECT_DOUBLE_EQ(net.rate(other), 8.0 / 3);
  EXPECT_DOUBLE_EQ(net.link_rate(n1), 8);
}

TEST(FlowNetwork, CancelFreesTheLinkAtOnce) {
  FlowNetwork net;
  const LinkId l = link(net, 10);
  const FlowId a = flow(net, {l}, 1000, 0);
  const FlowId b = flow(net, {l}, 100, 0);
  EXPECT_TRUE(*net.cancel(a, 4'000'000));  // b has 80 B left
  EXPECT_FALSE(*net.cancel(a, 4'000'000));
  EXPECT_DOUBLE_EQ(net.rate(b), 10);
  EXPECT_EQ(net.next_completion_us(), 12'000'000u);
}

TEST(FlowNetwork, CompletionsComeAtTheNearestMicrosecondAndLeaveNoSliver) {
  FlowNetwork net;
  const LinkId l = link(net, 3);
  const FlowId f = flow(net, {l}, 1, 0);  // 333,333.33 us: a third of a microsecond left at 333,333
  EXPECT_EQ(net.next_completion_us(), 333'333u);
  EXPECT_TRUE(net.finished(333'332)->empty());
  EXPECT_EQ(*net.finished(333'333), std::vector<FlowId>{f});
  const FlowId g = flow(net, {l}, 2, 333'333);  // 666,666.67 us: ends at 999,999.67, so at 1,000,000
  EXPECT_EQ(net.next_completion_us(), 1'000'000u);
  EXPECT_TRUE(net.finished(999'999)->empty());
  EXPECT_EQ(*net.finished(1'000'000), std::vector<FlowId>{g});
  const FlowId empty = flow(net, {l}, 0, 1'400'000);
  EXPECT_EQ(net.next_completion_us(), 1'400'000u);
  EXPECT_EQ(*net.finished(1'400'000), std::vector<FlowId>{empty});
}

TEST(FlowNetwork, TheSameCallsGiveTheSameRatesAndTimes) {
  auto run = [] {
    FlowNetwork net;
    std::vector<LinkId> links;
    for (int i = 0; i < 6; ++i) links.push_back(*net.add_link("l" + std::to_string(i), 3.0 + i));
    std::vector<uint64_t> times;
    uint64_t now = 0;
    for (int i = 0; i < 40; ++i) {
      (void)net.start({links[i % 6], links[(i * 7 + 1) % 6]}, 10.0 + i, now, i % 5 == 0 ? 1.5 : 0);
      now += 700'000;
      const auto done = net.finished(now);
      for (FlowId id : *done) times.push_back(id * 1'000'000'000 + now);
    }
    while (auto next = net.next_completion_us()) {
      const auto done = net.finished(*next);
      for (FlowId id : *done) times.push_back(id * 1'000'000'000 + *next);
    }
    return times;
  };
  const auto first = run();
  EXPECT_EQ(first.size(), 40u);
  EXPECT_EQ(first, run());
}

TEST(FlowNetwork, RefusesWhatCannotBeModelled) {
  FlowNetwork net;
  EXPECT_EQ(net.add_link("zero", 0).error().code(), ErrorCode::invalid_argument);
  EXPECT_EQ(net.add_link("negative", -1).error().code(), ErrorCode::invalid_argument);
  EXPECT_EQ(net.add_link("inf", 1.0 / 0.0).error().code(), ErrorCode::invalid_argument);
  const LinkId l = link(net, 10);
  EXPECT_NE(net.start({l + 1}, 10, 0).error().message().find("does not exist"), std::string::npos);
  EXPECT_NE(net.start({}, 10, 0).error().message().find("neither a link nor a cap"), std::string::npos);
  EXPECT_EQ(net.start({l}, -1, 0).error().code(), ErrorCode::invalid_argument);
  EXPECT_EQ(net.start({l}, 1, 0, -2).error().code(), ErrorCode::invalid_argument);
  (void)flow(net, {l}, 100, 5);
  EXPECT_NE(net.start({l}, 1, 4).error().message().find("before the last call"), std::string::npos);
  EXPECT_EQ(net.finished(4).error().code(), ErrorCode::invalid_argument);
  EXPECT_EQ(net.running(), 1u);
}

}  // namespace flow_network_test
}  // namespace ember::sim
