// EventLoop (sim/event_loop.hpp): time order, scheduling order at one time, cancellation, events
// scheduled by events, run_until, and slot reuse never letting an old id cancel a new event.
#include "sim/event_loop.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ember::sim {
namespace event_loop_test {

TEST(EventLoop, RunsEventsInTimeOrderAndAtOneTimeInSchedulingOrder) {
  EventLoop loop;
  std::vector<std::string> seen;
  loop.at(30, [&] { seen.push_back("c@30"); });
  loop.at(10, [&] { seen.push_back("a@10"); });
  loop.at(20, [&] { seen.push_back("b1@20"); });
  loop.at(20, [&] { seen.push_back("b2@20"); });
  loop.at(10, [&] { seen.push_back("a2@10"); });
  EXPECT_EQ(loop.pending(), 5u);
  loop.run();
  EXPECT_EQ(seen, (std::vector<std::string>{"a@10", "a2@10", "b1@20", "b2@20", "c@30"}));
  EXPECT_EQ(loop.now(), 30u);
  EXPECT_EQ(loop.executed(), 5u);
  EXPECT_EQ(loop.pending(), 0u);
}

TEST(EventLoop, EventsScheduleOthersAlsoAtTheCurrentTimeAfterThoseAlreadyDue) {
  EventLoop loop;
  std::vector<std::string> seen;
  loop.at(5, [&] {
    seen.push_back("first@" + std::to_string(loop.now()));
    loop.after(0, [&] { seen.push_back("now@" + std::to_string(loop.now())); });
    loop.after(7, [&] { seen.push_back("later@" + std::to_string(loop.now())); });
  });
  loop.at(5, [&] { seen.push_back("second@5"); });
  loop.run();
  EXPECT_EQ(seen, (std::vector<std::string>{"first@5", "second@5", "now@5", "later@12"}));
}

TEST(EventLoop, CancelTakesAPendingEventOutOnce) {
  EventLoop loop;
  int ran = 0;
  const EventId a = loop.at(10, [&] { ran += 1; });
  const EventId b = loop.at(20, [&] { ran += 10; });
  EXPECT_TRUE(loop.cancel(b));
  EXPECT_FALSE(loop.cancel(b));
  EXPECT_EQ(loop.pending(), 1u);
  loop.run();
  EXPECT_EQ(ran, 1);
  EXPECT_FALSE(loop.cancel(a));  // ran already
  EXPECT_FALSE(loop.cancel(0));
  EXPECT_FALSE(loop.cancel(12345678901234ull));
  EXPECT_EQ(loop.now(), 10u);  // the cancelled event's time was never reached
}

TEST(EventLoop, AnEventCanCancelOneDueAtTheSameTime) {
  EventLoop loop;
  int ran = 0;
  EventId second = 0;
  loop.at(10, [&] { EXPECT_TRUE(loop.cancel(second)); });
  second = loop.at(10, [&] { ++ran; });
  loop.run();
  EXPECT_EQ(ran, 0);
  EXPECT_EQ(loop.executed(), 1u);
}

TEST(EventLoop, AnOldIdNeverCancelsTheEventThatReusedItsSlot) {
  EventLoop loop;
  int ran = 0;
  const EventId old = loop.at(1, [] {});
  loop.run();
  const EventId fresh = loop.at(2, [&] { ++ran; });  // takes the freed slot
  EXPECT_NE(old, fresh);
  EXPECT_FALSE(loop.cancel(old));
  loop.run();
  EXPECT_EQ(ran, 1);
}

TEST(EventLoop, RunUntilStopsAtItsTimeAndMovesTheClockThere) {
  EventLoop loop;
  std::vector<uint64_t> seen;
  for (uint64_t t : {5u, 10u, 15u}) loop.at(t, [&, t] { seen.push_back(t); });
  loop.run_until(10);
  EXPECT_EQ(seen, (std::vector<uint64_t>{5, 10}));
  EXPECT_EQ(loop.now(), 10u);
  loop.run_until(12);
  EXPECT_EQ(loop.now(), 12u);
  EXPECT_EQ(loop.pending(), 1u);
  loop.after(1, [&] { seen.push_back(loop.now()); });  // at 13, before 15
  loop.run();
  EXPECT_EQ(seen, (std::vector<uint64_t>{5, 10, 13, 15}));
  EXPECT_FALSE(loop.step());
}

TEST(EventLoop, ManyEventsKeepTheirOrderAndReuseSlots) {
  EventLoop loop;
  uint64_t last = 0, count = 0;
  bool ordered = true;
  // A chain of 100,000 events each scheduling the next at a pseudo-random later time, with a
  // cancelled decoy beside each: memory stays at a few slots, the order holds.
  uint64_t x = 1;
  std::function<void()> next = [&] {
    ordered = ordered && loop.now() >= last;
    last = loop.now();
    if (++count == 100'000) return;
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const EventId decoy = loop.after(1 + (x >> 60), [&] { ordered = false; });
    loop.after(1 + (x >> 58), next);
    loop.cancel(decoy);
  };
  loop.at(0, next);
  loop.run();
  EXPECT_TRUE(ordered);
  EXPECT_EQ(count, 100'000u);
  EXPECT_EQ(loop.executed(), 100'000u);
}

}  // namespace event_loop_test
}  // namespace ember::sim
