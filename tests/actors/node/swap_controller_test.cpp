// SwapController: the router's late-binding state machine over the placement policies (plain C++).
#include "actors/node/swap_controller.hpp"

#include <gtest/gtest.h>

namespace ember {
namespace swap_controller_test {

using placement::SwapAction;
constexpr uint64_t MiB = 1ull << 20;

// Four devices, two per PCIe switch; NVLink 0-1 and 2-3 (Torpor Fig. 5, simplified).
placement::NodeTopology topology() {
  auto t = placement::NodeTopology::create({0, 0, 1, 1},
                                           {{0, 50, 0, 0}, {50, 0, 0, 0}, {0, 0, 0, 50}, {0, 0, 50, 0}},
                                           {16, 16, 16, 16});
  EXPECT_TRUE(t.ok());
  return *t;
}

SwapController controller(uint64_t pool = 100 * MiB, SwapControllerOptions o = {}) {
  return SwapController(topology(), {pool, pool, pool, pool}, o);
}

/// Models are named by their key; version 1 here.
model_key key(const std::string& name) { return {name, 1}; }
std::vector<model_key> keys(std::initializer_list<const char*> names) {
  std::vector<model_key> out;
  for (const char* n : names) out.push_back(key(n));
  return out;
}
/// The RRC queue's name of a model (the key's "<name>/<version>"; see swap_controller.hpp).
std::string queue_name(const std::string& name) { return key(name).to_string(); }

SwapModel model(const std::string& name, uint64_t bytes, bool heavy = false) {
  return {key(name), bytes, heavy ? placement::Heaviness::heavy : placement::Heaviness::light, 10'000, 0.98};
}

SwapOutcome done(const SwapDispatch& d, uint64_t footprint, uint64_t pool_free) {
  SwapOutcome o;
  o.resident = true;
  o.footprint = footprint;
  o.pool_free = pool_free;
  o.evicted = d.evict;
  return o;
}

std::vector<SwapDispatch> run_one(SwapController& c, uint64_t id, const std::string& m, int64_t now) {
  EXPECT_TRUE(c.submit(id, key(m), now).ok());
  return c.dispatch(now);
}

TEST(SwapController, FirstRequestSwapsFromHostAndTheNextRunsWhereTheModelIs) {
  auto c = controller();
  ASSERT_TRUE(c.add_model(model("a", 40 * MiB)).ok());
  auto d = run_one(c, 1, "a", 0);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].action, SwapAction::swap_from_host);
  c.finish(d[0], done(d[0], 40 * MiB, 60 * MiB), 100, 100);
  auto again = run_one(c, 2, "a", 200);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].action, SwapAction::run);
  EXPECT_EQ(again[0].device, d[0].device);
}

TEST(SwapController, BusyHolderMeansACopyOverTheFastestLinkAndTheSourceIsLocked) {
  auto c = controller();
  ASSERT_TRUE(c.add_model(model("a", 40 * MiB)).ok());
  auto first = run_one(c, 1, "a", 0);
  c.finish(first[0], done(first[0], 40 * MiB, 60 * MiB), 10, 10);
  const uint32_t holder = first[0].device;
  auto busy = run_one(c, 2, "a", 20);  // runs on the holder, which is now busy
  ASSERT_EQ(busy.size(), 1u);
  EXPECT_EQ(busy[0].action, SwapAction::run);
  auto copy = run_one(c, 3, "a", 30);
  ASSERT_EQ(copy.size(), 1u);
  EXPECT_EQ(copy[0].action, SwapAction::swap_from_peer);
  EXPECT_EQ(copy[0].source, holder);
  EXPECT_EQ(copy[0].device, holder ^ 1u);  // its NVLink partner
  // The locked source is never a victim, even when its device needs room for something else: of
  // four requests for a model that fills a pool, the two idle empty devices take one each, the
  // holder (idle, but its only copy of a is locked) and the copy's target (busy) none.
  c.finish(busy[0], done(busy[0], 40 * MiB, 60 * MiB), 40, 40);
  ASSERT_TRUE(c.add_model(model("big", 90 * MiB)).ok());
  for (uint64_t id = 10; id < 14; ++id) ASSERT_TRUE(c.submit(id, key("big"), 50).ok());
  const auto big = c.dispatch(50);
  ASSERT_EQ(big.size(), 2u) << "premise: the two idle devices without a copy of a take big";
  for (const auto& d : big) {
    EXPECT_NE(d.device, holder) << "the locked holder's device took a swap that evicts its source";
    EXPECT_NE(d.device, copy[0].device) << "a busy device took a second request";
  }
  EXPECT_EQ(c.queue().queued(), 2u);
}

// A running swap may drop its fallback victims (fragmentation); none of them may become the source
// of a copy meanwhile, or the copy would read blocks the swap is overwriting (the density benchmark
// counted 2 wrong answers in 1,882 before this rule).
TEST(SwapController, NoCopyFromAReplicaTheRunningSwapMayStillEvict) {
  auto t = placement::NodeTopology::create({0, 1}, {{0, 50}, {50, 0}}, {16, 16});
  ASSERT_TRUE(t.ok());
  SwapController c(*t, {100 * MiB, 100 * MiB}, {});
  for (const char* m : {"a", "b", "c"}) ASSERT_TRUE(c.add_model(model(m, 40 * MiB)).ok());
  ASSERT_TRUE(c.add_model(model("z", 10 * MiB)).ok());
  auto z = run_one(c, 1, "z", 0);  // keeps one device busy while a, b and c go to the other
  ASSERT_EQ(z.size(), 1u);
  const uint32_t other = z[0].device ^ 1u;
  uint64_t free = 100 * MiB;
  for (const char* m : {"a", "b"}) {
    auto d = run_one(c, 2 + (m[0] - 'a'), m, 1 + (m[0] - 'a'));
    ASSERT_EQ(d.size(), 1u);
    ASSERT_EQ(d[0].device, other);
    free -= 40 * MiB;
    c.finish(d[0], done(d[0], 40 * MiB, free), 1, 2);
  }
  auto swap = run_one(c, 4, "c", 3);  // evicts a (planned); b is the fallback
  ASSERT_EQ(swap.size(), 1u);
  ASSERT_EQ(swap[0].device, other);
  EXPECT_EQ(swap[0].evict, keys({"a"}));
  EXPECT_EQ(swap[0].fallback, keys({"b"}));
  c.finish(z[0], done(z[0], 10 * MiB, 90 * MiB), 1, 4);
  // b's only copy is on the busy device, as a fallback victim: Algorithm 1 would copy it over the
  // link; it must come from host memory instead.
  auto b = run_one(c, 5, "b", 5);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].action, SwapAction::swap_from_host);
  EXPECT_FALSE(b[0].source.has_value());
  // Once the swap answered without using its fallback, b's copy there counts again.
  c.finish(swap[0], done(swap[0], 40 * MiB, 20 * MiB), 1, 6);
  EXPECT_EQ(c.resident(other), keys({"b", "c"}));
  c.finish(b[0], done(b[0], 40 * MiB, 50 * MiB), 1, 7);
  auto busy = run_one(c, 6, "b", 8);  // runs on one holder; the next copies from it
  ASSERT_EQ(busy.size(), 1u);
  auto copy = run_one(c, 7, "c", 9);
  ASSERT_EQ(copy.size(), 1u);
  EXPECT_EQ(copy[0].action, busy[0].device == other ? SwapAction::swap_from_peer : SwapAction::run);
}

TEST(SwapController, HostSwapAvoidsTheSwitchOfALoadingNeighbour) {
  auto c = controller();
  ASSERT_TRUE(c.add_model(model("heavy", 40 * MiB, true)).ok());
  ASSERT_TRUE(c.add_model(model("b", 40 * MiB)).ok());
  auto one = run_one(c, 1, "heavy", 0);
  ASSERT_EQ(one.size(), 1u);
  auto two = run_one(c, 2, "b", 1);
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(two[0].action, SwapAction::swap_from_host);
  // Devices 0,1 share a switch, 2,3 the other: the second load goes to the other switch.
  EXPECT_NE(two[0].device / 2, one[0].device / 2);
}

TEST(SwapController, QueuesWhenEveryDeviceIsBusyAndDispatchesWhenOneFrees) {
  auto c = controller();
  ASSERT_TRUE(c.add_model(model("a", 10 * MiB)).ok());
  std::vector<SwapDispatch> running;
  for (uint64_t id = 1; id <= 5; ++id) {
    ASSERT_TRUE(c.submit(id, key("a"), 0).ok());
  }
  running = c.dispatch(0);
  EXPECT_EQ(running.size(), 4u);
  EXPECT_EQ(c.queue().queued(), 1u);
  EXPECT_TRUE(c.dispatch(1).empty());
  c.finish(running[0], done(running[0], 10 * MiB, 90 * MiB), 5, 5);
  auto next = c.dispatch(6);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].request, 5u);
  EXPECT_EQ(next[0].device, running[0].device);
  EXPECT_EQ(next[0].action, SwapAction::run);
}

TEST(SwapController, EvictsLightBeforeHeavyAndPassesTheRestAsFallback) {
  auto c = SwapController(*placement::NodeTopology::create({0}, {{0}}, {16}), {100 * MiB}, {});
  ASSERT_TRUE(c.add_model(model("heavy", 40 * MiB, true)).ok());
  ASSERT_TRUE(c.add_model(model("light", 40 * MiB)).ok());
  ASSERT_TRUE(c.add_model(model("new", 40 * MiB)).ok());
  int64_t now = 0;
  for (const char* m : {"light", "heavy"}) {  // light is older: plain LRU would evict it too
    ++now;
    auto d = run_one(c, static_cast<uint64_t>(now), m, now);
    ASSERT_EQ(d.size(), 1u);
    c.finish(d[0], done(d[0], 40 * MiB, 100 * MiB - 40 * MiB * static_cast<uint64_t>(now)), 1, now);
  }
  auto heavy_first = run_one(c, 9, "heavy", ++now);  // heavy used last
  c.finish(heavy_first[0], done(heavy_first[0], 40 * MiB, 20 * MiB), 1, now);
  auto d = run_one(c, 10, "new", ++now);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].evict, keys({"light"}));
  EXPECT_EQ(d[0].fallback, keys({"heavy"}));
  c.finish(d[0], done(d[0], 40 * MiB, 20 * MiB), 1, ++now);
  EXPECT_EQ(c.resident(0), keys({"heavy", "new"}));
}

/// One 100 MiB device under the LRU rule, models heavy, light and new (40 MiB each); heavy, then light
/// ran there (at times 1 and 2: `now` is 2 after).
SwapController lru_device_with_heavy_then_light(int64_t& now) {
  SwapControllerOptions o;
  o.eviction = placement::EvictionRule::lru;
  auto c = SwapController(*placement::NodeTopology::create({0}, {{0}}, {16}), {100 * MiB}, o);
  EXPECT_TRUE(c.add_model(model("heavy", 40 * MiB, true)).ok());
  EXPECT_TRUE(c.add_model(model("light", 40 * MiB)).ok());
  EXPECT_TRUE(c.add_model(model("new", 40 * MiB)).ok());
  for (const char* m : {"heavy", "light"}) {
    ++now;
    auto d = run_one(c, static_cast<uint64_t>(now), m, now);
    c.finish(d[0], done(d[0], 40 * MiB, 100 * MiB - 40 * MiB * static_cast<uint64_t>(now)), 1, now);
  }
  return c;
}

TEST(SwapController, LruRuleEvictsTheLeastRecentlyUsedWhateverItsWeight) {
  int64_t now = 0;
  auto c = lru_device_with_heavy_then_light(now);
  auto d = run_one(c, 10, "new", ++now);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].evict, keys({"heavy"}));
}

// A run the router did not dispatch (inline, on the front end's thread) still counts as a use of the
// model on that device, and as an SLO outcome.
TEST(SwapController, AnInlineRunIsAUseForEvictionAndAnOutcomeForTheSlo) {
  int64_t now = 0;
  auto c = lru_device_with_heavy_then_light(now);
  const uint64_t runs = c.counters().runs;
  c.ran_inline(key("heavy"), 0, 50'000, ++now);  // heavy is now the more recent, and its run was late
  c.ran_inline(key("gone"), 0, 1, now);          // an unknown model, a device without the model: nothing
  c.ran_inline(key("new"), 0, 1, now);
  c.ran_inline(key("heavy"), 7, 1, now);
  EXPECT_EQ(c.counters().runs, runs + 1);
  const auto slo = c.queue().view(queue_name("heavy"));
  ASSERT_TRUE(slo.has_value());
  EXPECT_EQ(slo->counters.misses, 1u);  // 50 ms against its 10 ms deadline
  auto d = run_one(c, 10, "new", ++now);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].evict, keys({"light"}));
}

TEST(SwapController, AFaultTakesTheDeviceDownUntilItIsUpAgainAndTheRequestIsRetriedElsewhere) {
  auto c = controller();
  ASSERT_TRUE(c.add_model(model("a", 40 * MiB)).ok());
  auto d = run_one(c, 1, "a", 0);
  ASSERT_EQ(d.size(), 1u);
  SwapOutcome fault;
  fault.fault = true;
  c.finish(d[0], fault, 5, 5);
  EXPECT_FALSE(c.device_is_up(d[0].device));
  EXPECT_TRUE(c.resident(d[0].device).empty());
  ASSERT_TRUE(c.requeue(1, key("a"), 0).ok());
  auto retry = c.dispatch(6);
  ASSERT_EQ(retry.size(), 1u);
  EXPECT_EQ(retry[0].request, 1u);
  EXPECT_NE(retry[0].device, d[0].device);
  EXPECT_EQ(retry[0].action, SwapAction::swap_from_host);
  c.device_up(d[0].device, 100 * MiB);
  EXPECT_TRUE(c.device_is_up(d[0].device));
  EXPECT_EQ(c.counters().faults, 1u);
}

// Dynamic batching: a dispatch takes the queued requests the join accepts, up to max_batch − 1
// more; a model gathering waits until its preferred batch or its delay (cut short by its deadline).
TEST(SwapController, ABatchTakesWhatTheJoinAcceptsAndGatheringWaitsNoLongerThanTheDeadlineAllows) {
  SwapController c(*placement::NodeTopology::create({0}, {{0}}, {16}), {100 * MiB}, {});
  SwapModel m = model("a", 10 * MiB);
  m.max_batch = 3;
  ASSERT_TRUE(c.add_model(m).ok());
  for (uint64_t id = 1; id <= 5; ++id) ASSERT_TRUE(c.submit(id, key("a"), static_cast<int64_t>(id)).ok());
  std::vector<uint64_t> asked;
  auto join = [&](const placement::QueuedRequest& lead) -> placement::RrcQueue::RequestFilter {
    EXPECT_EQ(lead.id, 1u);
    return [&](uint64_t id) {
      asked.push_back(id);
      return id != 2;  // 2 cannot join (another shape, say)
    };
  };
  auto d = c.dispatch(10, join);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].request, 1u);
  ASSERT_EQ(d[0].batch.size(), 2u);
  EXPECT_EQ(d[0].batch[0].id, 3u);
  EXPECT_EQ(d[0].batch[1].id, 4u);
  EXPECT_EQ(asked, (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ(c.queued(key("a")), 2u);  // 2 and 5
  c.finish(d[0], done(d[0], 10 * MiB, 90 * MiB), 100, 110);
  EXPECT_EQ(c.queue().view(queue_name("a"))->counters.on_time + c.queue().view(queue_name("a"))->counters.misses, 3u);

  // Gathering: preferred 4, delay 1 ms, deadline 10 ms, warm run 9.5 ms: waits only 0.5 ms.
  SwapModel g = model("g", 10 * MiB);
  g.max_batch = 8;
  g.preferred_batch = 4;
  g.max_queue_delay_us = 1000;
  g.warm_us = 9'500;
  ASSERT_TRUE(c.add_model(g).ok());
  auto rest = c.dispatch(200);  // 2 and 5 of "a" run first (one device: one at a time)
  ASSERT_EQ(rest.size(), 1u);
  c.finish(rest[0], done(rest[0], 10 * MiB, 90 * MiB), 10, 210);
  rest = c.dispatch(210);
  ASSERT_EQ(rest.size(), 1u);
  c.finish(rest[0], done(rest[0], 10 * MiB, 90 * MiB), 10, 220);
  ASSERT_TRUE(c.submit(10, key("g"), 1000).ok());
  EXPECT_TRUE(c.dispatch(1100).empty());
  EXPECT_EQ(c.gathering_until(), 1500);
  EXPECT_TRUE(c.dispatch(1499).empty());
  auto late = c.dispatch(1500);
  ASSERT_EQ(late.size(), 1u);
  EXPECT_FALSE(c.gathering_until().has_value());
  c.finish(late[0], done(late[0], 10 * MiB, 80 * MiB), 10, 1600);
  // Enough requests waiting: no gathering at all.
  for (uint64_t id = 11; id <= 14; ++id) ASSERT_TRUE(c.submit(id, key("g"), 2000).ok());
  auto full = c.dispatch(2000, [](const placement::QueuedRequest&) {
    return placement::RrcQueue::RequestFilter([](uint64_t) { return true; });
  });
  ASSERT_EQ(full.size(), 1u);
  EXPECT_EQ(full[0].batch.size(), 3u);
}

// Run-ahead: a request of a model resident on a busy device queues there behind the running one, up
// to run_ahead deep; a model that would need a swap still waits for an idle device; a fault ends
// the device's life and the answers of what queued behind it change nothing.
TEST(SwapController, RunAheadQueuesResidentRunsBehindABusyDeviceAndAFaultResetsIt) {
  SwapControllerOptions o;
  o.run_ahead = 1;
  SwapController c(*placement::NodeTopology::create({0}, {{0}}, {16}), {100 * MiB}, o);
  ASSERT_TRUE(c.add_model(model("a", 10 * MiB)).ok());
  ASSERT_TRUE(c.add_model(model("b", 10 * MiB)).ok());
  auto first = run_one(c, 1, "a", 0);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].action, SwapAction::swap_from_host);
  // "a" is being copied in: nothing queues behind its swap.
  EXPECT_TRUE(run_one(c, 2, "a", 1).empty());
  c.finish(first[0], done(first[0], 10 * MiB, 90 * MiB), 10, 10);
  auto second = c.dispatch(11);  // request 2 runs; nothing behind it yet
  ASSERT_EQ(second.size(), 1u);
  auto behind = run_one(c, 3, "a", 12);
  ASSERT_EQ(behind.size(), 1u);
  EXPECT_EQ(behind[0].action, SwapAction::run);
  EXPECT_EQ(behind[0].request, 3u);
  EXPECT_TRUE(run_one(c, 4, "a", 13).empty()) << "run_ahead 1: one behind at most";
  EXPECT_TRUE(run_one(c, 5, "b", 14).empty()) << "b needs a swap: waits for an idle device";
  c.finish(second[0], done(second[0], 10 * MiB, 90 * MiB), 10, 20);
  // 3 runs now; 4 may queue behind it; b still waits.
  auto next = c.dispatch(21);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].request, 4u);
  // 3 faults: the device is down; 4's fault answer belongs to the old life and changes nothing.
  SwapOutcome fault;
  fault.fault = true;
  fault.answered = false;
  c.finish(behind[0], fault, 10, 30);
  EXPECT_FALSE(c.device_is_up(0));
  c.device_up(0, 100 * MiB);
  auto after = c.dispatch(40);
  ASSERT_EQ(after.size(), 1u);  // b, from host, on the fresh device
  EXPECT_EQ(after[0].model, key("b"));
  c.finish(next[0], fault, 10, 41);
  EXPECT_TRUE(c.device_is_up(0)) << "an answer from the old life took the device down again";
  EXPECT_TRUE(c.dispatch(42).empty()) << "b still runs there";
}

// Concurrent runs (streams > 1): other resident models run beside the device's primary while
// their measured activations fit its workspace; runs answer in any order; a fault ends them all.
TEST(SwapController, ResidentModelsRunBesideABusyDeviceWhileTheirActivationsFitItsWorkspace) {
  SwapControllerOptions o;
  o.streams = 3;
  o.run_ahead = 1;
  SwapController c(*placement::NodeTopology::create({0}, {{0}}, {16}), {100 * MiB}, o);
  c.set_workspace(0, 10 * MiB);
  for (const char* name : {"a", "b", "c", "d"}) {
    SwapModel m = model(name, 10 * MiB);
    m.activation_bytes = 4 * MiB;
    ASSERT_TRUE(c.add_model(m).ok());
  }
  uint64_t id = 1;
  for (const char* name : {"a", "b", "c"}) {
    auto swap = run_one(c, id++, name, 0);
    ASSERT_EQ(swap.size(), 1u);
    EXPECT_NE(swap[0].action, SwapAction::run);
    c.finish(swap[0], done(swap[0], 10 * MiB, 70 * MiB), 10, 10);
  }
  // A swap keeps the device to itself: nothing runs beside d's.
  auto swap = run_one(c, id++, "d", 15);
  ASSERT_EQ(swap.size(), 1u);
  EXPECT_TRUE(run_one(c, id++, "b", 16).empty()) << "b ran beside a swap";
  c.finish(swap[0], done(swap[0], 10 * MiB, 60 * MiB), 10, 17);
  auto b = c.dispatch(18);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_FALSE(b[0].beside);
  c.finish(b[0], done(b[0], 10 * MiB, 60 * MiB), 10, 19);
  // a runs (4 MiB); b beside it (8 MiB of 10); c would make 12: it waits.
  auto primary = run_one(c, 10, "a", 20);
  ASSERT_EQ(primary.size(), 1u);
  EXPECT_FALSE(primary[0].beside);
  auto beside = run_one(c, 11, "b", 21);
  ASSERT_EQ(beside.size(), 1u);
  EXPECT_TRUE(beside[0].beside);
  EXPECT_EQ(beside[0].action, SwapAction::run);
  EXPECT_TRUE(run_one(c, 12, "c", 22).empty()) << "c's activations do not fit beside a's and b's";
  EXPECT_TRUE(run_one(c, 13, "d", 23).empty()) << "d's 4 MiB do not fit either";
  // Another request of b may not run beside b, nor queue behind it: only the primary's model runs ahead.
  EXPECT_TRUE(run_one(c, 15, "b", 24).empty()) << "b ran beside itself or ahead behind another model";
  auto ahead = run_one(c, 14, "a", 24);
  ASSERT_EQ(ahead.size(), 1u);
  EXPECT_FALSE(ahead[0].beside);
  EXPECT_EQ(ahead[0].request, 14u);
  // b answers first (runs answer in any order): one of the waiting models takes its room.
  c.finish(beside[0], done(beside[0], 10 * MiB, 70 * MiB), 30, 30);
  auto next = c.dispatch(31);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_TRUE(next[0].beside);
  EXPECT_EQ(c.counters().beside, 2u);
  // A fault of a run beside takes the device down with everything on it.
  SwapOutcome fault;
  fault.fault = true;
  fault.answered = false;
  c.finish(next[0], fault, 10, 40);
  EXPECT_FALSE(c.device_is_up(0));
  c.device_up(0, 100 * MiB);
  c.finish(primary[0], fault, 10, 41);  // answers of the old life change nothing
  c.finish(ahead[0], fault, 10, 41);
  EXPECT_TRUE(c.device_is_up(0));
  EXPECT_TRUE(c.resident(0).empty());
  EXPECT_TRUE(c.dispatch(42).size() == 1u) << "the queued requests go on on the fresh device";
}

// A run beside others that ran out of memory comes back alone: no request of its model goes beside
// others until it ran as a device's own request, and nothing is admitted beside it then.
TEST(SwapController, ARequestRequeuedAloneRunsAsTheDevicesOwnAndNothingBesideIt) {
  SwapControllerOptions o;
  o.streams = 3;
  SwapController c(*placement::NodeTopology::create({0}, {{0}}, {16}), {100 * MiB}, o);
  c.set_workspace(0, 100 * MiB);
  for (const char* name : {"a", "b", "c"}) {
    SwapModel m = model(name, 10 * MiB);
    m.activation_bytes = 1 * MiB;
    ASSERT_TRUE(c.add_model(m).ok());
  }
  uint64_t id = 1;
  for (const char* name : {"a", "b", "c"}) {
    auto swap = run_one(c, id++, name, 0);
    ASSERT_EQ(swap.size(), 1u);
    c.finish(swap[0], done(swap[0], 10 * MiB, 70 * MiB), 10, 10);
  }
  auto primary = run_one(c, 10, "a", 20);
  auto beside = run_one(c, 11, "b", 21);
  ASSERT_EQ(beside.size(), 1u);
  ASSERT_TRUE(beside[0].beside);
  // b ran out of memory beside a: the router requeues it alone (no outcome).
  SwapOutcome oom;
  oom.answered = false;
  oom.resident = true;
  oom.footprint = 10 * MiB;
  oom.pool_free = 70 * MiB;
  c.finish(beside[0], oom, 10, 30);
  ASSERT_TRUE(c.requeue(11, key("b"), 21, /*alone=*/true).ok());
  EXPECT_TRUE(run_one(c, 12, "b", 31).empty()) << "a request of b went beside while one must run alone";
  auto other = run_one(c, 13, "c", 32);
  ASSERT_EQ(other.size(), 1u) << "another model still runs beside";
  EXPECT_TRUE(other[0].beside);
  c.finish(other[0], done(other[0], 10 * MiB, 70 * MiB), 10, 33);
  c.finish(primary[0], done(primary[0], 10 * MiB, 70 * MiB), 10, 34);
  auto alone = c.dispatch(35);
  ASSERT_GE(alone.size(), 1u);
  EXPECT_EQ(alone[0].request, 11u);
  EXPECT_FALSE(alone[0].beside);
  EXPECT_TRUE(run_one(c, 14, "c", 36).empty()) << "a run was admitted beside the one that must run alone";
  c.finish(alone[0], done(alone[0], 10 * MiB, 70 * MiB), 10, 40);
  auto after = c.dispatch(41);
  ASSERT_FALSE(after.empty()) << "b's other request and c's go on once it ran";
}

TEST(SwapController, RefusesAModelNoPoolCanHoldAndUnknownModels) {
  auto c = controller(100 * MiB);
  auto big = c.add_model(model("big", 101 * MiB));
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message().find("big"), std::string::npos);
  EXPECT_EQ(c.submit(1, key("nope"), 0).error().code(), ErrorCode::invalid_argument);
}

TEST(SwapController, RemovingAModelReturnsItsQueuedRequestsAndHolders) {
  auto c = controller();
  ASSERT_TRUE(c.add_model(model("a", 10 * MiB)).ok());
  auto d = run_one(c, 1, "a", 0);
  c.finish(d[0], done(d[0], 10 * MiB, 90 * MiB), 1, 1);
  for (uint64_t id = 2; id < 8; ++id) ASSERT_TRUE(c.submit(id, key("a"), 2).ok());
  auto running = c.dispatch(2);  // four run (one on the holder, three copies or swaps)
  auto [queued, holders] = c.remove_model(key("a"));
  EXPECT_EQ(queued.size(), 6u - running.size());
  EXPECT_FALSE(c.has_model(key("a")));
  for (const auto& r : running) c.finish(r, done(r, 10 * MiB, 90 * MiB), 3, 3);
  for (uint32_t dev = 0; dev < 4; ++dev) EXPECT_TRUE(c.resident(dev).empty()) << dev;
}

// A workflow step prefers the device its inputs are on: it runs there when its model is resident
// and the device idle (Ember's departure from Algorithm 1), and where the policy says otherwise.
TEST(SwapController, ARequestRunsOnItsPreferredDeviceWhenItsModelIsResidentAndIdleThere) {
  auto c = controller();
  ASSERT_TRUE(c.add_model(model("a", 40 * MiB)).ok());
  ASSERT_TRUE(c.add_model(model("b", 40 * MiB)).ok());
  // a on two devices: the first request swaps it in, a second (while the first runs) copies it.
  auto first = run_one(c, 1, "a", 0);
  auto second = run_one(c, 2, "a", 1);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  c.finish(first[0], done(first[0], 40 * MiB, 60 * MiB), 1, 2);
  c.finish(second[0], done(second[0], 40 * MiB, 60 * MiB), 1, 3);
  const uint32_t p = first[0].device, q = second[0].device;
  ASSERT_NE(p, q);
  // Algorithm 1's choice for the next request of a, without a preference, and with the other one.
  ASSERT_TRUE(c.submit(3, key("a"), 10).ok());
  auto plain = c.dispatch(10);
  ASSERT_EQ(plain.size(), 1u);
  c.finish(plain[0], done(plain[0], 40 * MiB, 60 * MiB), 1, 11);
  const uint32_t other = plain[0].device == p ? q : p;
  ASSERT_TRUE(c.submit(4, key("a"), 20, other).ok());
  auto preferred = c.dispatch(20);
  ASSERT_EQ(preferred.size(), 1u);
  EXPECT_EQ(preferred[0].device, other);
  EXPECT_EQ(preferred[0].action, SwapAction::run);
  c.finish(preferred[0], done(preferred[0], 40 * MiB, 60 * MiB), 1, 21);
  // b is resident nowhere: a preference does not move a model; the policy decides.
  ASSERT_TRUE(c.submit(5, key("b"), 30, p).ok());
  auto b = c.dispatch(30);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].action, SwapAction::swap_from_host);
}

}  // namespace swap_controller_test
}  // namespace ember
