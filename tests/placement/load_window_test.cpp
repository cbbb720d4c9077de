// LoadWindow: the arrival rate over the look-back window (and over its age while the model is
// younger), the execution time kept through idle windows, the latest ongoing and queued counts.
#include "placement/load_window.hpp"

#include <gtest/gtest.h>

namespace ember::placement {
namespace load_window_test {

constexpr int64_t kSecond = 1'000'000;

LoadReport arrivals(uint64_t n) {
  LoadReport r;
  r.arrivals = n;
  return r;
}

TEST(LoadWindow, TheRateIsTheArrivalsOfTheLastWindowOverItsLength) {
  LoadWindow w(kSecond, 5 * kSecond);
  EXPECT_EQ(w.arrival_rate(0), 0) << "nothing reported yet";
  for (int t = 1; t <= 10; ++t) w.add(t * kSecond, arrivals(10));
  EXPECT_DOUBLE_EQ(w.arrival_rate(10 * kSecond), 10);
  for (int t = 11; t <= 12; ++t) w.add(t * kSecond, arrivals(0));
  EXPECT_DOUBLE_EQ(w.arrival_rate(12 * kSecond), 6) << "30 arrivals in the last 5 s";
  EXPECT_DOUBLE_EQ(w.arrival_rate(15 * kSecond), 0) << "the window moved past them, with no new report";
}

TEST(LoadWindow, AYoungModelsRateDividesByItsAgeNotByTheWholeWindow) {
  LoadWindow w(kSecond, 30 * kSecond);
  w.add(100 * kSecond, arrivals(20));
  EXPECT_DOUBLE_EQ(w.arrival_rate(100 * kSecond), 20) << "the first report covers one tick";
  w.add(101 * kSecond, arrivals(20));
  EXPECT_DOUBLE_EQ(w.arrival_rate(101 * kSecond), 20);
}

TEST(LoadWindow, TheExecutionTimeIsKeptThroughWindowsWhereNothingCompleted) {
  LoadWindow w(kSecond, 2 * kSecond);
  EXPECT_EQ(w.service_time_us(), 0u);
  LoadReport busy;
  busy.completions = 10;
  busy.busy_us = 200'000;
  w.add(kSecond, busy);
  busy.completions = 30;
  busy.busy_us = 1'400'000;
  w.add(2 * kSecond, busy);
  EXPECT_EQ(w.service_time_us(), 40'000u) << "1.6 s over 40 requests";
  w.add(3 * kSecond, LoadReport{});
  EXPECT_EQ(w.service_time_us(), 46'666u) << "the window (1 s, 3 s] holds the second report only";
  for (int t = 4; t <= 10; ++t) w.add(t * kSecond, LoadReport{});
  EXPECT_EQ(w.service_time_us(), 46'666u) << "no completion since: the last value stays";
}

TEST(LoadWindow, FillsTheLoadWithTheLatestCountsAndLeavesTheRest) {
  LoadWindow w(kSecond, 4 * kSecond);
  LoadReport r = arrivals(8);
  r.ongoing = 5;
  r.queued = 2;
  r.completions = 4;
  r.busy_us = 100'000;
  w.add(kSecond, r);
  r.ongoing = 7;
  r.queued = 3;
  w.add(2 * kSecond, r);
  ModelLoad load;
  load.ready = 2;
  load.cold_start_us = 123;
  w.fill(2 * kSecond, load);
  EXPECT_DOUBLE_EQ(load.arrival_rate, 8);
  EXPECT_EQ(load.ongoing, 7u);
  EXPECT_EQ(load.queued, 3u);
  EXPECT_EQ(load.service_time_us, 25'000u);
  EXPECT_EQ(load.ready, 2u);
  EXPECT_EQ(load.cold_start_us, 123u);
}

TEST(LoadWindow, AReportFromThePastCountsAsMadeAtTheLatestTime) {
  LoadWindow w(kSecond, 3 * kSecond);
  w.add(10 * kSecond, arrivals(3));
  w.add(5 * kSecond, arrivals(3));
  EXPECT_DOUBLE_EQ(w.arrival_rate(10 * kSecond), 6) << "both reports at 10 s: 6 arrivals in its first tick";
}

}  // namespace load_window_test
}  // namespace ember::placement
