// SimDevice's links (sim_device.hpp): peer copies, host registration, and copy pacing at the
// pinned, pageable, switch-uplink and peer-link rates. Timing assertions are lower bounds only: the
// machine is shared, so a copy may always take longer than its link allows, never shorter.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "gpu/device_registry.hpp"
#include "gpu/sim_device.hpp"
#include "tests/gpu/test_util.hpp"

namespace ember::gpu {
namespace sim_device_link_test {

using testing::sim_device;
constexpr uint64_t kMiB = 1ull << 20;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<uint8_t> pattern(uint64_t bytes, uint8_t seed) {
  std::vector<uint8_t> v(bytes);
  for (uint64_t i = 0; i < bytes; ++i) v[i] = static_cast<uint8_t>(i * 31 + seed + (i >> 12));
  return v;
}

// Two sim devices as open_devices makes them from `config` (kind sim, count 2 unless set).
OpenedDevices open_sim(DevicesConfig config) {
  config.kind = DeviceKind::sim;
  config.sim.compute_threads = 1;
  if (config.sim.memory_bytes == (8ull << 30)) config.sim.memory_bytes = 160 * kMiB;
  return testing::must(open_devices(config), "opening the sim devices");
}

SimDevice& sim(const OpenedDevices& opened, size_t i) { return dynamic_cast<SimDevice&>(*opened.devices[i]); }

// A device of another kind: only its identity matters to a peer copy.
class OtherDevice final : public Device {
 public:
  OtherDevice() { info_.name = "other:0"; }
  const DeviceInfo& info() const override { return info_; }
  Result<DevicePtr> allocate(uint64_t) override { return unsupported("other"); }
  void free(DevicePtr) override {}
  MemoryInfo memory() const override { return {}; }
  std::unique_ptr<Stream> create_stream() override { return nullptr; }
  std::unique_ptr<Event> create_event() override { return nullptr; }
  Status status() const override { return Status::OK(); }
  Status register_host(const void*, uint64_t) override { return Status::OK(); }
  void unregister_host(const void*) override {}
  bool host_registered(const void*, uint64_t) const override { return false; }

 private:
  DeviceInfo info_;
};

// Writes `bytes` to a fresh buffer on `from`, copies it to `to` with copy_from_peer and reads it back.
void expect_peer_copy_exact(Device& from, Device& to, uint64_t bytes) {
  const auto src = pattern(bytes, 7);
  std::vector<uint8_t> back(bytes, 0);
  auto a = DeviceBuffer::allocate(from, bytes);
  auto b = DeviceBuffer::allocate(to, bytes);
  ASSERT_TRUE(a.ok() && b.ok());
  auto s_from = from.create_stream();
  auto s_to = to.create_stream();
  s_from->copy_to_device((*a)->ptr(), src.data(), bytes);
  ASSERT_TRUE(s_from->synchronize().ok());
  s_to->copy_from_peer((*b)->ptr(), from, (*a)->ptr(), bytes);
  s_to->copy_to_host(back.data(), (*b)->ptr(), bytes);
  ASSERT_TRUE(s_to->synchronize().ok()) << to.status().error().message();
  EXPECT_TRUE(back == src);
}

TEST(SimDeviceLinks, PeerCopiesAreExactOverALinkAndThroughTheHost) {
  DevicesConfig linked;
  linked.count = 2;
  linked.link_bytes_per_s = {{0, 40e9}, {40e9, 0}};
  auto a = open_sim(linked);
  expect_peer_copy_exact(*a.devices[0], *a.devices[1], 3 * kMiB + 17);  // several chunks and a tail
  expect_peer_copy_exact(*a.devices[1], *a.devices[0], 4096);
  auto b = open_sim(DevicesConfig{.count = 2});  // no links: staged through the host
  expect_peer_copy_exact(*b.devices[1], *b.devices[0], 2 * kMiB + 5);
}

TEST(SimDeviceLinks, PeerCopyFromAnotherKindOfDeviceFaultsThisDevice) {
  auto d = sim_device(4 * kMiB);
  OtherDevice other;
  auto s = d->create_stream();
  auto buf = d->allocate(4096);
  s->copy_from_peer(*buf, other, DevicePtr{1ull << 44}, 4096);
  Status st = s->synchronize();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::device_fault);
  EXPECT_NE(st.error().message().find("other:0 is not a simulated device"), std::string::npos) << st.error().message();
  EXPECT_FALSE(d->status().ok());  // sticky
}

TEST(SimDeviceLinks, PeerCopyOutsideEitherDeviceFaultsOnlyTheDestination) {
  auto opened = open_sim(DevicesConfig{.count = 2});
  Device& src = *opened.devices[0];
  Device& dst = *opened.devices[1];
  auto a = src.allocate(4096);
  auto b = dst.allocate(4096);
  auto s = dst.create_stream();
  s->copy_from_peer(*b, src, DevicePtr{a->addr + src.info().memory_bytes}, 4096);  // past the source's end
  Status st = s->synchronize();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("illegal address in copy_from_peer source"), std::string::npos)
      << st.error().message();
  EXPECT_NE(st.error().message().find("sim:1"), std::string::npos) << st.error().message();
  EXPECT_TRUE(src.status().ok()) << "the source device must not be faulted by a bad request from a peer";

  auto fresh = opened.reopen(1);
  ASSERT_TRUE(fresh.ok()) << fresh.error().message();
  auto c = (*fresh)->allocate(4096);
  auto s2 = (*fresh)->create_stream();
  s2->copy_from_peer(DevicePtr{c->addr + (*fresh)->info().memory_bytes}, src, *a, 4096);  // bad destination
  st = s2->synchronize();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("illegal address in copy_from_peer destination"), std::string::npos)
      << st.error().message();
  EXPECT_TRUE(src.status().ok());
}

TEST(SimDeviceLinks, PeerCopyFromAFaultedDeviceFaultsThisDevice) {
  auto opened = open_sim(DevicesConfig{.count = 2});
  auto a = opened.devices[0]->allocate(4096);
  auto b = opened.devices[1]->allocate(4096);
  sim(opened, 0).fault("injected for the test");
  auto s = opened.devices[1]->create_stream();
  s->copy_from_peer(*b, *opened.devices[0], *a, 4096);
  Status st = s->synchronize();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("sim:0 has faulted"), std::string::npos) << st.error().message();
}

TEST(SimDeviceLinks, HostRegistrationRules) {
  auto d = sim_device(4 * kMiB);
  std::vector<uint8_t> host(64 * 1024);
  uint8_t* p = host.data();
  EXPECT_FALSE(d->host_registered(p, 16));
  ASSERT_TRUE(d->register_host(p + 4096, 8192).ok());
  EXPECT_TRUE(d->host_registered(p + 4096, 8192));
  EXPECT_TRUE(d->host_registered(p + 8192, 100));
  EXPECT_FALSE(d->host_registered(p + 8192, 8192)) << "runs past the end of the range";
  EXPECT_FALSE(d->host_registered(p, 16));
  // Overlaps are refused, whichever side they overlap on; touching ranges are fine.
  for (auto [offset, bytes] : {std::pair{0, 4097}, std::pair{12287, 10}, std::pair{6000, 10}, std::pair{0, 65536}}) {
    Status st = d->register_host(p + offset, bytes);
    ASSERT_FALSE(st.ok()) << offset << "+" << bytes;
    EXPECT_EQ(st.error().code(), ErrorCode::invalid_argument);
    EXPECT_NE(st.error().message().find("overlaps"), std::string::npos) << st.error().message();
  }
  EXPECT_TRUE(d->register_host(p, 4096).ok());
  EXPECT_TRUE(d->register_host(p + 12288, 4096).ok());
  EXPECT_FALSE(d->host_registered(p + 4000, 200)) << "spans two ranges: not inside one";
  EXPECT_EQ(d->register_host(nullptr, 16).error().code(), ErrorCode::invalid_argument);
  EXPECT_EQ(d->register_host(p + 20000, 0).error().code(), ErrorCode::invalid_argument);
  // Unregistering is by start address; an unknown one is a no-op.
  d->unregister_host(p + 5000);
  EXPECT_TRUE(d->host_registered(p + 4096, 8192));
  d->unregister_host(p + 4096);
  EXPECT_FALSE(d->host_registered(p + 4096, 1));
  EXPECT_TRUE(d->register_host(p + 4096, 8192).ok());
  EXPECT_TRUE(d->status().ok()) << "registration errors are the caller's, not device faults";
  // Registration is per device.
  auto other = sim_device(4 * kMiB, 1);
  EXPECT_FALSE(other->host_registered(p + 4096, 1));
  EXPECT_TRUE(other->register_host(p, host.size()).ok());
}

// One copy of `bytes` from (or to, when `to_host`) host memory, timed through synchronize.
double timed_host_copy(Device& d, std::vector<uint8_t>& host, bool to_host = false) {
  auto buf = DeviceBuffer::allocate(d, host.size());
  EXPECT_TRUE(buf.ok());
  auto s = d.create_stream();
  const auto start = std::chrono::steady_clock::now();
  if (to_host) {
    s->copy_to_host(host.data(), (*buf)->ptr(), host.size());
  } else {
    s->copy_to_device((*buf)->ptr(), host.data(), host.size());
  }
  EXPECT_TRUE(s->synchronize().ok());
  return seconds_since(start);
}

TEST(SimDeviceLinks, PinnedCopiesRunAtPcieRate) {
  SimDeviceConfig c;
  c.memory_bytes = 80 * kMiB;
  c.pcie_bytes_per_s = 1e9;  // 64 MiB take at least 67 ms
  auto d = SimDevice::create(c, 0);
  ASSERT_TRUE(d.ok());
  std::vector<uint8_t> host(64 * kMiB, 3);
  ASSERT_TRUE((*d)->register_host(host.data(), host.size()).ok());
  EXPECT_GE(timed_host_copy(**d, host), 0.060);
}

TEST(SimDeviceLinks, PageableCopiesRunAtPageableRate) {
  SimDeviceConfig c;
  c.memory_bytes = 80 * kMiB;
  c.pcie_bytes_per_s = 4e9;
  c.pageable_bytes_per_s = 0.5e9;  // 64 MiB take at least 134 ms when not registered
  auto d = SimDevice::create(c, 0);
  ASSERT_TRUE(d.ok());
  std::vector<uint8_t> host(64 * kMiB, 3);
  EXPECT_GE(timed_host_copy(**d, host), 0.120);
  // Default pageable rate: half of PCIe. 32 MiB at 1 GB/s / 2 take at least 67 ms, both ways.
  c.pcie_bytes_per_s = 1e9;
  c.pageable_bytes_per_s = 0;
  auto half = SimDevice::create(c, 1);
  ASSERT_TRUE(half.ok());
  std::vector<uint8_t> small(32 * kMiB, 5);
  EXPECT_GE(timed_host_copy(**half, small, /*to_host=*/true), 0.060);
}

TEST(SimDeviceLinks, NeighboursBehindOneSwitchShareItsUplink) {
  DevicesConfig c;
  c.count = 2;
  c.pcie_switch = {4, 4};
  c.sim.pcie_bytes_per_s = 1e9;  // switch_bandwidth 0: the uplink runs at 1 GB/s too
  auto opened = open_sim(c);
  ASSERT_EQ(sim(opened, 0).uplink(), sim(opened, 1).uplink());
  std::vector<uint8_t> host0(64 * kMiB, 1), host1(64 * kMiB, 2);
  ASSERT_TRUE(opened.devices[0]->register_host(host0.data(), host0.size()).ok());
  ASSERT_TRUE(opened.devices[1]->register_host(host1.data(), host1.size()).ok());
  auto b0 = DeviceBuffer::allocate(*opened.devices[0], host0.size());
  auto b1 = DeviceBuffer::allocate(*opened.devices[1], host1.size());
  auto s0 = opened.devices[0]->create_stream();
  auto s1 = opened.devices[1]->create_stream();
  const auto start = std::chrono::steady_clock::now();
  s0->copy_to_device((*b0)->ptr(), host0.data(), host0.size());
  s1->copy_to_device((*b1)->ptr(), host1.data(), host1.size());
  ASSERT_TRUE(s0->synchronize().ok());
  ASSERT_TRUE(s1->synchronize().ok());
  EXPECT_GE(seconds_since(start), 0.120);  // 128 MiB through one 1 GB/s uplink: at least 134 ms
  // A reopened device stays behind the same switch.
  auto fresh = opened.reopen(1);
  ASSERT_TRUE(fresh.ok()) << fresh.error().message();
  EXPECT_EQ(dynamic_cast<SimDevice&>(**fresh).uplink(), sim(opened, 0).uplink());
}

TEST(SimDeviceLinks, DevicesOnTheirOwnSwitchesHaveTheirOwnUplinks) {
  DevicesConfig c;
  c.count = 3;
  c.pcie_switch = {0, 1, 0};
  auto opened = open_sim(c);
  EXPECT_EQ(sim(opened, 0).uplink(), sim(opened, 2).uplink());
  EXPECT_NE(sim(opened, 0).uplink(), sim(opened, 1).uplink());
  auto silent = open_sim(DevicesConfig{.count = 2});
  EXPECT_NE(sim(silent, 0).uplink(), sim(silent, 1).uplink());
}

TEST(SimDeviceLinks, PeerCopyOverALinkOverlapsAHostCopyOnTheUplink) {
  DevicesConfig c;
  c.count = 2;
  c.pcie_switch = {0, 0};
  c.sim.pcie_bytes_per_s = 1e9;
  c.link_bytes_per_s = {{0, 4e9}, {4e9, 0}};
  auto opened = open_sim(c);
  Device& d0 = *opened.devices[0];
  Device& d1 = *opened.devices[1];
  std::vector<uint8_t> host(48 * kMiB, 9);
  ASSERT_TRUE(d0.register_host(host.data(), host.size()).ok());
  const auto peer_src = pattern(16 * kMiB, 11);
  auto a = DeviceBuffer::allocate(d1, peer_src.size());
  auto b = DeviceBuffer::allocate(d0, peer_src.size());
  auto h = DeviceBuffer::allocate(d0, host.size());
  auto s1 = d1.create_stream();
  s1->copy_to_device((*a)->ptr(), peer_src.data(), peer_src.size());  // pageable, before the race
  ASSERT_TRUE(s1->synchronize().ok());
  auto host_stream = d0.create_stream();
  auto peer_stream = d0.create_stream();
  host_stream->copy_to_device((*h)->ptr(), host.data(), host.size());  // holds the uplink ~50 ms
  peer_stream->copy_from_peer((*b)->ptr(), d1, (*a)->ptr(), peer_src.size());
  ASSERT_TRUE(peer_stream->synchronize().ok());
  ASSERT_TRUE(host_stream->synchronize().ok());
  std::vector<uint8_t> back(peer_src.size());
  peer_stream->copy_to_host(back.data(), (*b)->ptr(), back.size());
  ASSERT_TRUE(peer_stream->synchronize().ok());
  EXPECT_TRUE(back == peer_src);
}

TEST(SimDeviceLinks, PeerCopyWithoutALinkGoesAtTheSlowerPcieRate) {
  DevicesConfig c;
  c.count = 2;
  c.sim.pcie_bytes_per_s = 1e9;  // 32 MiB staged through the host take at least 33 ms
  auto opened = open_sim(c);
  auto a = DeviceBuffer::allocate(*opened.devices[0], 32 * kMiB);
  auto b = DeviceBuffer::allocate(*opened.devices[1], 32 * kMiB);
  auto s = opened.devices[1]->create_stream();
  const auto start = std::chrono::steady_clock::now();
  s->copy_from_peer((*b)->ptr(), *opened.devices[0], (*a)->ptr(), 32 * kMiB);
  ASSERT_TRUE(s->synchronize().ok());
  EXPECT_GE(seconds_since(start), 0.030);
}

TEST(SimDeviceLinks, ReopenRebuildsTheSameDevice) {
  DevicesConfig c;
  c.count = 2;
  c.link_bytes_per_s = {{0, 25e9}, {25e9, 0}};
  auto opened = open_sim(c);
  EXPECT_EQ(sim(opened, 1).config().peer_bytes_per_s, (std::vector<double>{25e9, 0}));
  sim(opened, 1).fault("injected for the test");
  auto fresh = opened.reopen(1);
  ASSERT_TRUE(fresh.ok()) << fresh.error().message();
  EXPECT_EQ((*fresh)->info().name, "sim:1");
  EXPECT_EQ((*fresh)->info().memory_bytes, opened.devices[1]->info().memory_bytes);
  EXPECT_TRUE((*fresh)->status().ok());
  EXPECT_DOUBLE_EQ(dynamic_cast<SimDevice&>(**fresh).peer_bytes_per_s(0), 25e9);
  auto beyond = opened.reopen(2);
  ASSERT_FALSE(beyond.ok());
  EXPECT_EQ(beyond.error().code(), ErrorCode::invalid_argument);
}

}  // namespace sim_device_link_test
}  // namespace ember::gpu
