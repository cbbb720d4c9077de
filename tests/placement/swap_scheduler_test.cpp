#include "placement/swap_scheduler.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

#include <cmath>

namespace ember::placement {
namespace swap_scheduler_test {

constexpr uint64_t GiB = 1ull << 30;
const std::string kModel = "bert-qa";
constexpr uint64_t kBytes = 2 * GiB;

// Torpor Fig. 5's shape: two PCIe switches {0,1} and {2,3}, NVLinks of two speeds ([proto]'s
// fast/slow), with the pairs 0-2 and 1-3 left unlinked so the host fallback can be exercised.
NodeTopology fig5(double pcie2 = 16) {
  auto t = NodeTopology::create({7, 7, 9, 9}, {{0, 25, 0, 50}, {25, 0, 50, 0}, {0, 50, 0, 25}, {50, 0, 25, 0}},
                                {16, 16, pcie2, 16});
  if (!t.ok()) throw std::runtime_error("the Figure 5 topology: " + t.error().to_string());  // the premise
  return *t;
}

DeviceState idle(uint64_t free_gib = 8) {
  DeviceState d;
  d.free_bytes = free_gib * GiB;
  return d;
}
DeviceState busy(uint64_t free_gib = 8) {
  DeviceState d = idle(free_gib);
  d.executing = true;
  return d;
}
DeviceState holding(DeviceState d) {
  d.resident.insert(kModel);
  return d;
}
DeviceState loading(LoadSource source, Heaviness heaviness) {
  DeviceState d = busy();
  d.loading = {source, heaviness};
  return d;
}

SwapDecision run(const std::vector<DeviceState>& devices, const NodeTopology& t = fig5()) {
  auto d = schedule(t, devices, kModel, kBytes);
  EXPECT_TRUE(d.ok());
  return d.ok() ? *d : SwapDecision{};
}

TEST(NodeTopology, Fig5) {
  NodeTopology t = fig5();
  EXPECT_EQ(t.device_count(), 4u);
  EXPECT_TRUE(t.neighbours(0, 1));
  EXPECT_TRUE(t.neighbours(3, 2));
  EXPECT_FALSE(t.neighbours(1, 2));
  EXPECT_FALSE(t.neighbours(0, 0));
  EXPECT_EQ(t.link_gbps(3, 0), 50);
  EXPECT_EQ(t.pcie_switch(2), 9u);
  EXPECT_EQ(t.pcie_gbps(1), 16);
}

TEST(NodeTopology, RejectsMalformedInput) {
  using M = std::vector<std::vector<double>>;
  struct Case {
    std::vector<uint32_t> sw;
    M link;
    std::vector<double> pcie;
    std::string mentions;
  };
  const double nan = std::nan("");
  const Case cases[] = {
      {{}, {}, {}, "no devices"},
      {{0, 0}, {{0, 1}}, {1, 1}, "1 rows"},
      {{0, 0}, {{0, 1}, {1, 0}}, {1}, "pcie_gbps has 1"},
      {{0, 0}, {{0, 1}, {1}}, {1, 1}, "square"},
      {{0, 0}, {{0, -1}, {-1, 0}}, {1, 1}, "link_gbps[0][1]"},
      {{0, 0}, {{0, nan}, {nan, 0}}, {1, 1}, "finite"},
      {{0, 0}, {{3, 1}, {1, 0}}, {1, 1}, "itself"},
      {{0, 0}, {{0, 50}, {25, 0}}, {1, 1}, "symmetric"},
      {{0, 0}, {{0, 1}, {1, 0}}, {1, 0}, "pcie_gbps[1]"},
  };
  for (const Case& c : cases) {
    auto t = NodeTopology::create(c.sw, c.link, c.pcie);
    ASSERT_FALSE(t.ok()) << c.mentions;
    EXPECT_EQ(t.error().code(), ErrorCode::invalid_argument);
    EXPECT_NE(t.error().message().find(c.mentions), std::string::npos) << t.error().message();
  }
  EXPECT_TRUE(NodeTopology::create({0}, {{0}}, {16}).ok());  // one device, no links
}

TEST(SwapScheduler, RunsWhereResidentAndAvailable) {
  SwapDecision d = run({busy(), idle(), holding(idle(0)), idle()});
  EXPECT_EQ(d.action, SwapAction::run);
  EXPECT_EQ(d.device, 2u);
  EXPECT_EQ(d.source, std::nullopt);
  EXPECT_FALSE(d.evict_first);  // no swap, so nothing to make room for
}

TEST(SwapScheduler, AvailableHolderBeatsPeerCopyFromBusyHolder) {
  SwapDecision d = run({holding(busy()), idle(), busy(), holding(idle())});
  EXPECT_EQ(d.action, SwapAction::run);
  EXPECT_EQ(d.device, 3u);
  EXPECT_EQ(run({busy(), holding(idle()), busy(), holding(idle())}).device, 1u);  // tie: lowest id
}

TEST(SwapScheduler, PeerCopyFromBusyHolderOverTheFastestLink) {
  SwapDecision d = run({holding(busy()), idle(), idle(), idle()});  // 0-1: 25, 0-3: 50, 0-2: none
  EXPECT_EQ(d.action, SwapAction::swap_from_peer);
  EXPECT_EQ(d.device, 3u);
  EXPECT_EQ(d.source, 0u);
  EXPECT_FALSE(d.evict_first);
  EXPECT_NE(d.reason.find("50 GB/s"), std::string::npos) << d.reason;
}

TEST(SwapScheduler, PeerCopyPicksTheHolderWithTheFastestLink) {
  SwapDecision d = run({holding(busy()), idle(), holding(busy()), busy()});  // 0-1: 25, 2-1: 50
  EXPECT_EQ(d.action, SwapAction::swap_from_peer);
  EXPECT_EQ(d.device, 1u);
  EXPECT_EQ(d.source, 2u);
  d = run({holding(busy()), busy(), holding(busy()), idle()});  // 0-3: 50, 2-3: 25
  EXPECT_EQ(d.device, 3u);
  EXPECT_EQ(d.source, 0u);
}

TEST(SwapScheduler, PeerCopyTieBreaks) {
  // Pairs (1 <- 2) and (3 <- 0) both run at 50 GB/s.
  auto pair = [](const std::vector<DeviceState>& devs) {
    SwapDecision d = run(devs);
    EXPECT_EQ(d.action, SwapAction::swap_from_peer);
    return std::make_pair(d.device.value_or(99), d.source.value_or(99));
  };
  DeviceState h = holding(busy());
  DeviceState h_locked = h;
  h_locked.locked.insert(kModel);
  EXPECT_EQ(pair({h, idle(), h, idle()}), std::make_pair(1u, 2u));          // all equal: lowest target
  EXPECT_EQ(pair({h, idle(1), h, idle()}), std::make_pair(3u, 0u));         // target 1 lacks room
  EXPECT_EQ(pair({h, idle(), h_locked, idle()}), std::make_pair(3u, 0u));   // source 2 already copying
  EXPECT_EQ(pair({h_locked, idle(1), h, idle()}), std::make_pair(3u, 0u));  // room beats locks
  EXPECT_EQ(pair({h, idle(8), h, idle(12)}), std::make_pair(3u, 0u));       // most free bytes
  SwapDecision d = run({h, idle(1), h, idle(1)});                           // neither fits
  EXPECT_EQ(d.device, 1u);
  EXPECT_TRUE(d.evict_first);
}

TEST(SwapScheduler, LockedReplicaIsStillACopySource) {
  DeviceState h = holding(busy());
  h.locked.insert(kModel);
  SwapDecision d = run({h, busy(), busy(), idle()});
  EXPECT_EQ(d.action, SwapAction::swap_from_peer);
  EXPECT_EQ(d.source, 0u);
  EXPECT_EQ(d.device, 3u);
}

TEST(SwapScheduler, NoDirectLinkFallsBackToHost) {
  SwapDecision d = run({holding(busy()), busy(), idle(), busy()});  // 0-2 unlinked
  EXPECT_EQ(d.action, SwapAction::swap_from_host);
  EXPECT_EQ(d.device, 2u);
  EXPECT_EQ(d.source, std::nullopt);
  EXPECT_NE(d.reason.find("no direct link"), std::string::npos) << d.reason;
  d = run({busy(), holding(busy()), busy(), idle()});  // 1-3 unlinked
  EXPECT_EQ(d.action, SwapAction::swap_from_host);
  EXPECT_EQ(d.device, 3u);
}

TEST(SwapScheduler, HostSwapPrefersNeighbourIdleThenLightThenAny) {
  const DeviceState heavy = loading(LoadSource::host, Heaviness::heavy);
  const DeviceState light = loading(LoadSource::host, Heaviness::light);
  SwapDecision d = run({heavy, idle(), light, idle()});
  EXPECT_EQ(d.action, SwapAction::swap_from_host);
  EXPECT_EQ(d.device, 3u);  // neighbour loads light beats neighbour loads heavy
  EXPECT_NE(d.reason.find("light"), std::string::npos) << d.reason;

  d = run({heavy, idle(), busy(), idle()});  // 2 executes but loads nothing
  EXPECT_EQ(d.device, 3u);
  EXPECT_NE(d.reason.find("no neighbour loading"), std::string::npos) << d.reason;

  d = run({heavy, idle(), heavy, idle()});  // every neighbour loads heavy: any device, lowest id
  EXPECT_EQ(d.device, 1u);
  EXPECT_NE(d.reason.find("heavy"), std::string::npos) << d.reason;

  // A neighbour's peer copy is milder than any host load, whatever the model's heaviness.
  EXPECT_EQ(run({loading(LoadSource::peer, Heaviness::heavy), idle(), light, idle()}).device, 1u);
  EXPECT_EQ(run({light, idle(), loading(LoadSource::peer, Heaviness::heavy), idle()}).device, 3u);
}

TEST(SwapScheduler, HostSwapTieBreaks) {
  EXPECT_EQ(run({idle(), idle(), idle(), idle()}).device, 0u);             // all equal: lowest id
  EXPECT_EQ(run({idle(1), idle(), idle(), idle()}).device, 1u);            // fits without eviction first
  EXPECT_EQ(run({idle(), idle(), idle(), idle(9)}).device, 3u);            // then most free bytes
  EXPECT_EQ(run({idle(), idle(), idle(), idle(9)}, fig5(32)).device, 2u);  // faster host link first
  EXPECT_EQ(run({idle(1), idle(), idle(), idle()}, fig5(32)).device, 2u);

  SwapDecision d = run({idle(1), idle(0), idle(0), idle(0)});  // nothing fits: most free, evict there
  EXPECT_EQ(d.device, 0u);
  EXPECT_TRUE(d.evict_first);

  // Room never beats a milder neighbour: 1 has room but its neighbour loads heavy.
  d = run({loading(LoadSource::host, Heaviness::heavy), idle(), idle(0), busy()});
  EXPECT_EQ(d.device, 2u);
  EXPECT_TRUE(d.evict_first);
}

TEST(SwapScheduler, QueuesWhenNoDeviceIsAvailable) {
  SwapDecision d = run({holding(busy()), busy(), busy(), busy()});
  EXPECT_EQ(d.action, SwapAction::queue);
  EXPECT_EQ(d.device, std::nullopt);
  EXPECT_EQ(d.source, std::nullopt);
  EXPECT_NE(d.reason.find("queue"), std::string::npos);
}

TEST(SwapScheduler, LoadingDeviceIsNotAvailable) {
  DeviceState prefetching = holding(idle());  // no request runs, but a swap-in is in flight
  prefetching.loading = {LoadSource::host, Heaviness::light};
  EXPECT_FALSE(available(prefetching));
  EXPECT_EQ(run({busy(), prefetching, busy(), busy()}).action, SwapAction::queue);
  // It still serves as a copy source for the model it already holds.
  SwapDecision d = run({prefetching, busy(), busy(), idle()});
  EXPECT_EQ(d.action, SwapAction::swap_from_peer);
  EXPECT_EQ(d.source, 0u);
}

TEST(SwapScheduler, RunOrderTakesAvailableDevicesByIdThenTheBusyOnes) {
  DeviceState prefetching = holding(idle());
  prefetching.loading = {LoadSource::host, Heaviness::light};
  EXPECT_EQ(run_order({busy(), idle(), prefetching, holding(idle())}), (std::vector<DeviceIndex>{1, 3, 0, 2}));
  EXPECT_EQ(run_order({idle(), idle()}), (std::vector<DeviceIndex>{0, 1}));
  EXPECT_TRUE(run_order({}).empty());
  // Step 2 agrees: of the available holders, the first in this order runs the request.
  SwapDecision d = run({holding(busy()), idle(), holding(idle()), holding(idle())});
  EXPECT_EQ(d.action, SwapAction::run);
  EXPECT_EQ(d.device, 2u);
}

TEST(SwapScheduler, SwapOfTheSameModelInFlightIsNotWaitedFor) {
  // Device 0 is loading this very model: not a holder yet, so no peer copy from it and no waiting.
  DeviceState inflight = loading(LoadSource::host, Heaviness::heavy);
  SwapDecision d = run({inflight, idle(), busy(), idle()});
  EXPECT_EQ(d.action, SwapAction::swap_from_host);
  EXPECT_EQ(d.device, 3u);  // and away from the first swap's switch
}

TEST(SwapScheduler, RejectsSnapshotOfTheWrongSize) {
  auto d = schedule(fig5(), {idle(), idle()}, kModel, kBytes);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code(), ErrorCode::invalid_argument);
  EXPECT_FALSE(schedule_random(fig5(), {idle()}, kModel, kBytes, 0).ok());
}

SwapDecision random_pick(const std::vector<DeviceState>& devices, uint64_t random_value) {
  auto d = schedule_random(fig5(), devices, kModel, kBytes, random_value);
  EXPECT_TRUE(d.ok());
  return d.ok() ? *d : SwapDecision{};
}

TEST(ScheduleRandom, UsesAnAvailableHolderFirst) {
  SwapDecision d = random_pick({holding(busy()), idle(), holding(idle()), holding(idle())}, 1);
  EXPECT_EQ(d.action, SwapAction::run);
  EXPECT_EQ(d.device, 2u);
}

TEST(ScheduleRandom, RandomValuePicksByPositionAmongAvailable) {
  const std::vector<DeviceState> devs{busy(), idle(), busy(), idle()};
  EXPECT_EQ(random_pick(devs, 0).device, 1u);
  EXPECT_EQ(random_pick(devs, 1).device, 3u);
  EXPECT_EQ(random_pick(devs, 4).device, 1u);
  EXPECT_EQ(random_pick(devs, 7).device, 3u);
  EXPECT_EQ(random_pick(devs, 7).action, SwapAction::swap_from_host);
}

TEST(ScheduleRandom, NeverCopiesFromAPeerAndIgnoresNeighbours) {
  SwapDecision d = random_pick({holding(busy()), busy(), busy(), idle(1)}, 5);  // 0-3 has 50 GB/s
  EXPECT_EQ(d.action, SwapAction::swap_from_host);
  EXPECT_EQ(d.device, 3u);
  EXPECT_EQ(d.source, std::nullopt);
  EXPECT_TRUE(d.evict_first);
  // Algorithm 1 would avoid 1 (its neighbour loads heavy); the baseline takes what it draws.
  EXPECT_EQ(random_pick({loading(LoadSource::host, Heaviness::heavy), idle(), busy(), idle()}, 0).device, 1u);
  EXPECT_EQ(random_pick({busy(), busy(), busy(), busy()}, 3).action, SwapAction::queue);
}

TEST(Classify, Table4AtTheDefaultFactor) {
  // Torpor Table 4, ms (swap-PCIe, GPU remoting).
  EXPECT_EQ(*classify(27'000, 25'000), Heaviness::light);   // DenseNet-169
  EXPECT_EQ(*classify(17'000, 14'000), Heaviness::light);   // Inception-v3
  EXPECT_EQ(*classify(25'000, 17'000), Heaviness::heavy);   // ResNet-152
  EXPECT_EQ(*classify(144'000, 43'000), Heaviness::heavy);  // Bert-qa
  EXPECT_EQ(*classify(13'000, 10'000), Heaviness::light);   // exactly 1.3x: not "more than"
  EXPECT_EQ(*classify(25'000, 17'000, 2.0), Heaviness::light);
  EXPECT_EQ(*classify(144'000, 43'000, 2.0), Heaviness::heavy);
  EXPECT_EQ(to_string(Heaviness::heavy), "heavy");
  EXPECT_EQ(to_string(SwapAction::swap_from_peer), "swap_from_peer");
}

TEST(Classify, RejectsBadMeasurements) {
  EXPECT_EQ(classify(10, 0).error().code(), ErrorCode::invalid_argument);
  EXPECT_FALSE(classify(-1, 10).ok());
  EXPECT_FALSE(classify(10, 10, 0.9).ok());
  EXPECT_FALSE(classify(10, 10, std::nan("")).ok());
  EXPECT_TRUE(classify(0, 10, 1.0).ok());
}

}  // namespace swap_scheduler_test
}  // namespace ember::placement
