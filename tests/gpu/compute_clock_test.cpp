// ComputeClock (gpu/compute_clock.hpp): the booking arithmetic (time is a parameter), and the
// guarantee a dilated SimDevice gives: nothing after a kernel is observed before k times its CPU time.
#include "gpu/compute_clock.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "gpu/sim_device.hpp"

namespace ember::gpu {
namespace compute_clock_test {

using Clock = ComputeClock::Clock;
using std::chrono::milliseconds;

TEST(ComputeClock, AKernelOnAnIdleDeviceTakesKTimesItsCpuTimeFromItsStart) {
  ComputeClock clock(3);
  const Clock::time_point t0{std::chrono::seconds(100)};
  EXPECT_EQ(clock.book(t0, milliseconds(2)), t0 + milliseconds(6));
}

TEST(ComputeClock, KernelsOfOneDeviceQueueBehindEachOther) {
  ComputeClock clock(3);
  const Clock::time_point t0{std::chrono::seconds(100)};
  clock.book(t0, milliseconds(2));  // busy until t0 + 6 ms
  // Computed on the host at t0 + 1 ms (the host runs ahead), but the device is busy until t0 + 6.
  EXPECT_EQ(clock.book(t0 + milliseconds(1), milliseconds(1)), t0 + milliseconds(9));
  // Another stream's kernel on the same device queues too.
  EXPECT_EQ(clock.book(t0 + milliseconds(2), milliseconds(1)), t0 + milliseconds(12));
}

TEST(ComputeClock, IdleTimeIsNotBanked) {
  ComputeClock clock(2);
  const Clock::time_point t0{std::chrono::seconds(100)};
  clock.book(t0, milliseconds(1));
  EXPECT_EQ(clock.book(t0 + milliseconds(50), milliseconds(1)), t0 + milliseconds(52));
}

TEST(ComputeClock, DisabledIsWallTime) {
  ComputeClock clock(0);
  EXPECT_FALSE(clock.enabled());
  const auto before = Clock::now();
  const auto end = clock.book(Clock::time_point{}, std::chrono::hours(1));
  EXPECT_GE(end, before);
  EXPECT_LE(end, Clock::now());
}

TEST(ComputeClock, ThreadCpuTimeCountsWorkNotSleep) {
  const auto c0 = thread_cpu_time();
  std::this_thread::sleep_for(milliseconds(30));
  const auto c1 = thread_cpu_time();
  EXPECT_LT(c1 - c0, milliseconds(10)) << "sleeping does not use CPU time";
  volatile double x = 0;
  for (int i = 0; i < 20'000'000; ++i) x = x + 1e-9 * i;
  EXPECT_GT(thread_cpu_time() - c1, std::chrono::microseconds(100));
}

// What a request on a dilated device can rely on: the callback after two kernels runs no earlier
// than the device time booked for them (k times each kernel's CPU time) after the callback before
// them. Exact, not a ratio with slack: the booked time is what the model promises, and it never
// exceeds k times the CPU time the stream thread used between the callbacks. (An earlier version
// compared with that CPU time itself, bookkeeping included, and failed on a loaded CI machine
// whenever the bookkeeping around the kernels reached 10% of their time.)
TEST(ComputeClock, DilatedSimDeviceShowsResultsOnlyAfterTheirDeviceTime) {
  constexpr double kDilation = 20;
  SimDeviceConfig c;
  c.memory_bytes = 64ull << 20;
  c.compute_threads = 1;
  c.compute_dilation = kDilation;
  auto d = SimDevice::create(c, 0);
  ASSERT_TRUE(d.ok());
  auto s = (*d)->create_stream();
  const int64_t n = 1 << 20;
  std::vector<float> host(static_cast<size_t>(n), -1.f);
  auto buf = DeviceBuffer::allocate(**d, static_cast<uint64_t>(n) * 4);
  ASSERT_TRUE(buf.ok());
  s->copy_to_device((*buf)->ptr(), host.data(), host.size() * 4);
  KernelArgs relu;
  relu.op = OpKind::relu;
  relu.num_inputs = 1;
  relu.inputs[0] = {{DType::f32, Shape{n}}, (*buf)->ptr()};
  relu.output = relu.inputs[0];
  struct Mark {
    Clock::duration cpu;
    Clock::time_point at;
  };
  std::promise<Mark> before, after;
  s->then([&](const Status&) { before.set_value({thread_cpu_time(), Clock::now()}); });
  s->launch(relu);
  s->launch(relu);
  s->then([&](const Status&) { after.set_value({thread_cpu_time(), Clock::now()}); });
  s->copy_to_host(host.data(), (*buf)->ptr(), host.size() * 4);
  ASSERT_TRUE(s->synchronize().ok());
  const Mark b = before.get_future().get(), a = after.get_future().get();
  const Clock::duration booked = (*d)->compute_clock().booked();
  EXPECT_GT(booked, Clock::duration::zero()) << "the kernels are booked";
  EXPECT_GE(a.at - b.at, booked) << "observed before the device time booked for the kernels";
  EXPECT_LE(std::chrono::duration<double>(booked).count(),
            kDilation * std::chrono::duration<double>(a.cpu - b.cpu).count())
      << "booked more than k times the CPU time the stream used";
  EXPECT_EQ(host.front(), 0.f) << "the results are computed, not only timed";
  EXPECT_EQ(host.back(), 0.f);
}

}  // namespace compute_clock_test
}  // namespace ember::gpu
