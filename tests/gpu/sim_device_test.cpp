#include "gpu/sim_device.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <numeric>
#include <thread>
#include <vector>

#include "gpu/device_registry.hpp"
#include "tests/gpu/test_util.hpp"

namespace ember::gpu {
namespace sim_device_test {

using testing::sim_device;

TEST(SimDevice, OutOfMemoryIsAnErrorNamingTheDevice) {
  auto d = sim_device(4 << 20);
  auto a = d->allocate(3 << 20);
  ASSERT_TRUE(a.ok());
  auto b = d->allocate(2 << 20);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().code(), ErrorCode::out_of_memory);
  EXPECT_NE(b.error().message().find("sim:0: out of device memory: requested 2.00 MiB"), std::string::npos)
      << b.error().message();
  d->free(*a);
  EXPECT_TRUE(d->allocate(4 << 20).ok());
  EXPECT_EQ(d->memory().capacity_bytes, 4u << 20);
  EXPECT_TRUE(d->status().ok());
}

TEST(SimDevice, CopiesRoundTripInStreamOrder) {
  auto d = sim_device();
  auto s = d->create_stream();
  std::vector<float> src(1 << 16), dst(1 << 16, 0.f);
  std::iota(src.begin(), src.end(), 0.f);
  auto a = DeviceBuffer::allocate(*d, src.size() * 4);
  auto b = DeviceBuffer::allocate(*d, src.size() * 4);
  s->copy_to_device((*a)->ptr(), src.data(), src.size() * 4);
  s->copy_on_device((*b)->ptr(), (*a)->ptr(), src.size() * 4);
  s->copy_to_host(dst.data(), (*b)->ptr(), src.size() * 4);
  ASSERT_TRUE(s->synchronize().ok());
  EXPECT_EQ(src, dst);
}

TEST(SimDevice, DevicePointersAreNotHostPointers) {
  auto d = sim_device();
  auto p = d->allocate(256);
  ASSERT_TRUE(p.ok());
  // Far above any host mapping: host code that dereferences it crashes instead of "working".
  EXPECT_GE(p->addr, 1ull << 44);
}

TEST(SimDevice, WorkIsAsynchronousAndEventsOrderStreams) {
  auto d = sim_device();
  auto producer = d->create_stream();
  auto consumer = d->create_stream();
  auto ready = d->create_event();
  std::promise<void> gate;
  auto opened = gate.get_future().share();
  // Block the producer until the test opens the gate; enqueue calls must not block meanwhile.
  producer->then([opened](const Status&) { opened.wait(); });
  std::vector<int32_t> value = {42}, out = {0};
  auto buf = DeviceBuffer::allocate(*d, 4);
  producer->copy_to_device((*buf)->ptr(), value.data(), 4);
  producer->record(*ready);
  consumer->wait(*ready);
  consumer->copy_to_host(out.data(), (*buf)->ptr(), 4);
  auto done = d->create_event();
  consumer->record(*done);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(ready->query());
  EXPECT_FALSE(done->query());
  EXPECT_EQ(out[0], 0);
  gate.set_value();
  ASSERT_TRUE(done->synchronize().ok());
  EXPECT_TRUE(ready->query());
  EXPECT_EQ(out[0], 42);
}

// Stream::set_caller_waits: an idle stream runs each operation on the calling thread (no wake-up of
// its own), a busy one queues it behind the work it has, in order, as ever.
TEST(SimDevice, ACallerThatWaitsRunsAnIdleStreamsWorkItselfAndABusyStreamsInOrder) {
  auto d = sim_device();
  auto s = d->create_stream();
  const auto caller = std::this_thread::get_id();
  std::vector<float> src(1024), dst(1024, 0.f);
  std::iota(src.begin(), src.end(), 1.f);
  auto buf = DeviceBuffer::allocate(*d, src.size() * 4);
  s->set_caller_waits(true);
  std::thread::id ran_on;
  s->copy_to_device((*buf)->ptr(), src.data(), src.size() * 4);
  s->copy_to_host(dst.data(), (*buf)->ptr(), src.size() * 4);
  s->then([&](const Status&) { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(dst, src) << "the copies had not run when enqueue returned";
  EXPECT_EQ(ran_on, caller);
  ASSERT_TRUE(s->synchronize().ok());

  s->set_caller_waits(false);
  std::promise<void> gate;
  auto opened = gate.get_future().share();
  s->then([opened](const Status&) { opened.wait(); });  // the stream's own thread is busy
  s->set_caller_waits(true);
  std::vector<float> later(1024, 0.f);
  std::vector<int> order;
  s->then([&](const Status&) { order.push_back(1); });
  s->copy_to_host(later.data(), (*buf)->ptr(), src.size() * 4);
  s->then([&](const Status&) {
    order.push_back(2);
    ran_on = std::this_thread::get_id();
  });
  EXPECT_TRUE(order.empty()) << "work ran ahead of the operation in progress";
  gate.set_value();
  ASSERT_TRUE(s->synchronize().ok());
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_NE(ran_on, caller);
  EXPECT_EQ(later, src);
}

TEST(SimDevice, UnrecordedEventIsComplete) {
  auto d = sim_device();
  auto e = d->create_event();
  EXPECT_TRUE(e->query());
  EXPECT_TRUE(e->synchronize().ok());
}

TEST(SimDevice, IllegalAddressFaultsTheDeviceAndStaysFaulted) {
  auto d = sim_device(1 << 20);
  auto s = d->create_stream();
  std::vector<char> host(1024);
  auto p = d->allocate(1024);
  s->copy_to_device(DevicePtr{p->addr + (1 << 20)}, host.data(), 1024);  // past the end of memory
  Status st = s->synchronize();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::device_fault);
  EXPECT_NE(st.error().message().find("illegal address in copy_to_device"), std::string::npos) << st.error().message();
  // Sticky: valid work afterwards still reports the fault, and callbacks still run.
  s->copy_to_device(*p, host.data(), 1024);
  EXPECT_FALSE(s->synchronize().ok());
  EXPECT_FALSE(d->status().ok());
  std::promise<bool> saw;
  s->then([&](const Status& status) { saw.set_value(status.ok()); });
  EXPECT_FALSE(saw.get_future().get());
}

TEST(SimDevice, InjectedKernelFaultIsSticky) {
  auto d = sim_device();
  auto s = d->create_stream();
  auto buf = DeviceBuffer::allocate(*d, 64);
  KernelArgs relu;
  relu.op = OpKind::relu;
  relu.num_inputs = 1;
  relu.inputs[0] = {{DType::f32, Shape{16}}, (*buf)->ptr()};
  relu.output = relu.inputs[0];
  d->TEST_fail_after_kernels(2);
  s->launch(relu);
  s->launch(relu);
  EXPECT_TRUE(s->synchronize().ok());
  s->launch(relu);
  Status st = s->synchronize();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("injected fault"), std::string::npos);
  s->launch(relu);
  EXPECT_FALSE(s->synchronize().ok());
}

TEST(SimDevice, KernelWithPointerOutsideMemoryFaults) {
  auto d = sim_device(1 << 20);
  auto s = d->create_stream();
  auto buf = DeviceBuffer::allocate(*d, 64);
  KernelArgs relu;
  relu.op = OpKind::relu;
  relu.num_inputs = 1;
  relu.inputs[0] = {{DType::f32, Shape{1 << 20}}, (*buf)->ptr()};  // 4 MiB from a 64-byte buffer
  relu.output = relu.inputs[0];
  s->launch(relu);
  Status st = s->synchronize();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("illegal address in relu"), std::string::npos) << st.error().message();
}

TEST(SimDevice, CopiesArePacedAtTheConfiguredBandwidth) {
  SimDeviceConfig c;
  c.memory_bytes = 64 << 20;
  c.pcie_bytes_per_s = 1e9;  // 1 GB/s: 16 MiB take at least 16.7 ms
  auto d = SimDevice::create(c, 0);
  ASSERT_TRUE(d.ok());
  auto s = (*d)->create_stream();
  std::vector<char> host(16 << 20, 1);
  auto buf = DeviceBuffer::allocate(**d, host.size());
  const auto start = std::chrono::steady_clock::now();
  s->copy_to_device((*buf)->ptr(), host.data(), host.size());
  ASSERT_TRUE(s->synchronize().ok());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(seconds, 16.7e-3);  // a lower bound only: pacing never makes copies faster than configured
}

TEST(DeviceRegistry, FallsBackToSimAndSaysWhy) {
  DevicesConfig c;
  c.kind = DeviceKind::automatic;
  c.count = 2;
  c.sim.memory_bytes = 16 << 20;
  auto opened = open_devices(c);
  ASSERT_TRUE(opened.ok()) << opened.error().message();
  if (opened->cuda_unavailable_reason.empty()) GTEST_SKIP() << "a CUDA device is present";
  ASSERT_EQ(opened->devices.size(), 2u);
  EXPECT_EQ(opened->devices[1]->info().name, "sim:1");
  EXPECT_EQ(opened->devices[0]->info().memory_bytes, 16u << 20);
}

TEST(DeviceRegistry, RejectsBadConfig) {
  DevicesConfig c;
  c.count = 0;
  auto opened = open_devices(c);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.error().code(), ErrorCode::invalid_argument);
}

}  // namespace sim_device_test
}  // namespace ember::gpu
