// DeviceHealth (plain C++): one restart at a time, the retry backoff of failed restarts (1, 2, 4,
// ... s, at most a minute), forgotten once a restart serves; a replaced executor frees the device
// for a new restart at once. The router's timers on the actor clock are node_router_test's.
#include "actors/node/device_health.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace ember {
namespace device_health_test {

using std::chrono::seconds;

TEST(DeviceHealth, OneRestartAtATime) {
  DeviceHealth h;
  EXPECT_FALSE(h.restarting());
  EXPECT_TRUE(h.begin_restart());
  EXPECT_FALSE(h.begin_restart()) << "a second restart while one is out";
  EXPECT_TRUE(h.restarting());
  h.restarted();
  EXPECT_FALSE(h.restarting());
  EXPECT_TRUE(h.begin_restart());
}

TEST(DeviceHealth, FailedRestartsBackOffOneTwoFourUpToAMinuteAndASuccessForgetsThem) {
  DeviceHealth h;
  std::vector<seconds> waits;
  for (int i = 0; i < 9; ++i) {
    ASSERT_TRUE(h.begin_restart());
    waits.push_back(h.failed());
    EXPECT_FALSE(h.restarting()) << "a failed restart leaves room for the next";
  }
  EXPECT_EQ(waits, (std::vector<seconds>{seconds(1), seconds(2), seconds(4), seconds(8), seconds(16), seconds(32),
                                         seconds(60), seconds(60), seconds(60)}));
  EXPECT_EQ(h.failures(), 9u);
  ASSERT_TRUE(h.begin_restart());
  h.restarted();
  EXPECT_EQ(h.failures(), 0u);
  ASSERT_TRUE(h.begin_restart());
  EXPECT_EQ(h.failed(), seconds(1));
}

TEST(DeviceHealth, AReplacedExecutorMayBeRestartedAtOnceAndKeepsItsFailures) {
  DeviceHealth h;
  ASSERT_TRUE(h.begin_restart());
  h.failed();
  ASSERT_TRUE(h.begin_restart());
  h.replaced();  // the restart went to an executor that died meanwhile
  EXPECT_FALSE(h.restarting());
  EXPECT_TRUE(h.begin_restart());
  EXPECT_EQ(h.failures(), 1u);
}

}  // namespace device_health_test
}  // namespace ember
