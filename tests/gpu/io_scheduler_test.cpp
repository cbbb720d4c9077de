// IoScheduler (gpu/io_scheduler.hpp): concurrent jobs' blocks interleave round robin, a newcomer
// joins the next batch, every byte lands where it belongs; and the SimDevice copy engine it works
// around serves host-to-device copies in issue order. Timing assertions are lower bounds only.
#include "gpu/io_scheduler.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "gpu/sim_device.hpp"
#include "tests/gpu/test_util.hpp"

namespace ember::gpu {
namespace io_scheduler_test {

constexpr uint64_t kKiB = 1ull << 10, kMiB = 1ull << 20;

std::unique_ptr<SimDevice> paced_device(double bytes_per_s) {
  SimDeviceConfig c;
  c.memory_bytes = 64 * kMiB;
  c.compute_threads = 1;
  c.pcie_bytes_per_s = bytes_per_s;
  return testing::must(SimDevice::create(c, 0), "creating a SimDevice");
}

std::vector<uint8_t> pattern(uint64_t bytes, uint8_t seed) {
  std::vector<uint8_t> v(bytes);
  for (uint64_t i = 0; i < bytes; ++i) v[i] = static_cast<uint8_t>(i * 7 + seed + (i >> 10));
  return v;
}

std::vector<uint8_t> read_back(Device& device, DevicePtr ptr, uint64_t bytes) {
  std::vector<uint8_t> out(bytes);
  auto s = device.create_stream();
  s->copy_to_host(out.data(), ptr, bytes);
  EXPECT_TRUE(s->synchronize().ok());
  return out;
}

TEST(IoScheduler, ConcurrentJobsInterleaveRoundRobinANewcomerJoinsTheNextBatchAndEveryByteLands) {
  auto device = paced_device(2e9);  // 64 KiB blocks of about 33 us: the jobs overlap
  IoSchedulerOptions o;
  o.block_bytes = 64 * kKiB;
  o.batch = 4;
  o.trace = true;
  IoScheduler io(*device, o);
  // Job 1: three pieces (one smaller than a block, two cut in several), each with its event.
  // Job 2, submitted after: one piece of 20 blocks.
  const std::vector<uint64_t> sizes1{10 * kKiB, 640 * kKiB, 300 * kKiB};
  std::vector<std::vector<uint8_t>> host1;
  std::vector<DevicePtr> dev1;
  std::vector<std::unique_ptr<Event>> events;
  std::vector<CopyPiece> job1;
  for (size_t i = 0; i < sizes1.size(); ++i) {
    host1.push_back(pattern(sizes1[i], static_cast<uint8_t>(i + 1)));
    dev1.push_back(testing::must(device->allocate(sizes1[i]), "allocating"));
    events.push_back(device->create_event());
    job1.push_back({dev1[i], host1[i].data(), sizes1[i], events[i].get()});
  }
  const auto host2 = pattern(20 * 64 * kKiB, 9);
  const DevicePtr dev2 = testing::must(device->allocate(host2.size()), "allocating");
  auto t1 = io.submit(job1);
  auto t2 = io.submit({{dev2, host2.data(), host2.size(), nullptr}});
  ASSERT_TRUE(t1->wait().ok());
  ASSERT_TRUE(t2->wait().ok());
  for (auto& e : events) EXPECT_TRUE(e->synchronize().ok());

  const auto trace = io.trace();
  ASSERT_EQ(trace.size(), 1u + 10u + 5u + 20u);  // 10 KiB, 640 KiB = 10 blocks, 300 KiB = 5, 20
  size_t first2 = 0;
  while (trace[first2].first != 2) ++first2;
  EXPECT_LT(first2, t2->issued_before() + o.batch) << "job 2 waited beyond the next batch";
  // From job 2's first block until job 1 ran out, the two alternate block by block.
  size_t i = first2;
  for (; i + 1 < trace.size() && trace[i + 1].first != trace[i].first; ++i) {
  }
  uint32_t job1_left = 0;
  for (size_t k = i + 1; k < trace.size(); ++k) job1_left += trace[k].first == 1;
  EXPECT_EQ(job1_left, 0u) << "job 1 stopped alternating with blocks left";
  for (size_t k = 1; k < trace.size(); ++k) {
    if (trace[k].first == trace[k - 1].first) {
      EXPECT_EQ(trace[k].second, trace[k - 1].second + 1);
    }
  }
  for (size_t p = 0; p < sizes1.size(); ++p) EXPECT_EQ(read_back(*device, dev1[p], sizes1[p]), host1[p]);
  EXPECT_EQ(read_back(*device, dev2, host2.size()), host2);
  const auto st = io.stats();
  EXPECT_EQ(st.jobs, 2u);
  EXPECT_EQ(st.blocks, trace.size());
  EXPECT_EQ(st.bytes, 10 * kKiB + 640 * kKiB + 300 * kKiB + host2.size());
  // An empty job completes at once; the destructor finishes what is queued.
  EXPECT_TRUE(io.submit({})->done());
}

TEST(IoScheduler, TheDestructorFinishesEveryJobSubmitted) {
  auto device = paced_device(1e9);
  const auto host = pattern(2 * kMiB, 3);
  const DevicePtr dev = testing::must(device->allocate(host.size()), "allocating");
  std::shared_ptr<IoTicket> ticket;
  {
    IoScheduler io(*device, {256 * kKiB, 2, false});
    ticket = io.submit({{dev, host.data(), host.size(), nullptr}});
  }
  EXPECT_TRUE(ticket->done());
  EXPECT_TRUE(ticket->wait().ok());
  EXPECT_EQ(read_back(*device, dev, host.size()), host);
}

// What the scheduler is for: without it, the engine serves copies in the order they were issued,
// so a small copy issued after a model's many weight groups waits for all of them.
TEST(SimDeviceCopyEngine, ServesHostToDeviceCopiesInIssueOrder) {
  auto device = paced_device(1e9);  // 1 MiB: about 1 ms
  const auto big = pattern(kMiB, 1);
  const auto small = pattern(4 * kKiB, 2);
  const DevicePtr dst = testing::must(device->allocate(8 * kMiB), "allocating");
  const DevicePtr dst_small = testing::must(device->allocate(small.size()), "allocating");
  auto weights = device->create_stream();
  auto input = device->create_stream();
  const auto start = std::chrono::steady_clock::now();
  for (int g = 0; g < 8; ++g) weights->copy_to_device(dst + static_cast<uint64_t>(g) * kMiB, big.data(), big.size());
  input->copy_to_device(dst_small, small.data(), small.size());
  ASSERT_TRUE(input->synchronize().ok());
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited, 8 * 0.9e-3) << "the small copy overtook copies issued before it";
  ASSERT_TRUE(weights->synchronize().ok());
  EXPECT_EQ(read_back(*device, dst_small, small.size()), small);
}

}  // namespace io_scheduler_test
}  // namespace ember::gpu
