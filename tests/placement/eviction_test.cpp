#include "placement/eviction.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace ember::placement {
namespace eviction_test {

constexpr uint64_t GiB = 1ull << 30;
constexpr uint64_t kCapacity = 16 * GiB;

DeviceReplicaView light(std::string model, uint32_t device, uint64_t tick, uint64_t bytes = 1 * GiB) {
  return {.model = std::move(model), .device = device, .bytes = bytes, .heavy = false, .last_use_tick = tick};
}

DeviceReplicaView heavy(std::string model, uint32_t device, uint64_t tick, uint64_t bytes = 1 * GiB) {
  DeviceReplicaView r = light(std::move(model), device, tick, bytes);
  r.heavy = true;
  return r;
}

/// Device 0 short of room by `short_bytes`.
EvictionRequest short_by(uint64_t short_bytes, uint32_t device = 0) {
  return {.device = device, .need_bytes = 2 * GiB + short_bytes, .free_bytes = 2 * GiB, .capacity_bytes = kCapacity};
}

std::vector<std::string> names(const std::vector<EvictionVictim>& victims) {
  std::vector<std::string> out;
  for (const EvictionVictim& v : victims) out.push_back(v.model);
  return out;
}

/// The victims' names, or the error as text.
std::vector<std::string> evict(const std::vector<DeviceReplicaView>& replicas, const EvictionRequest& request,
                               EvictionRule rule = EvictionRule::torpor) {
  auto plan = choose_evictions(replicas, request, rule);
  if (!plan.ok()) return {plan.error().to_string()};
  return names(plan->victims);
}

using Names = std::vector<std::string>;

TEST(Eviction, DuplicatesGoFirstWhateverTheirHeavinessOrAge) {
  // "dup" is heavy and the most recently used on device 0, but device 1 holds it too.
  std::vector<DeviceReplicaView> rs = {light("old-light", 0, 1), heavy("old-heavy", 0, 2), heavy("dup", 0, 9),
                                       heavy("dup", 1, 3)};
  auto plan = choose_evictions(rs, short_by(1), EvictionRule::torpor);
  ASSERT_TRUE(plan.ok()) << plan.error().to_string();
  EXPECT_EQ(plan->victims, (std::vector<EvictionVictim>{{"dup", 1 * GiB, VictimKind::duplicate}}));
  EXPECT_EQ(plan->freed_bytes, 1 * GiB);
  EXPECT_EQ(names(eviction_order(rs, 0, EvictionRule::torpor)), (Names{"dup", "old-light", "old-heavy"}));
}

TEST(Eviction, ACopyStillSwappingInElsewhereDoesNotMakeADuplicate) {
  DeviceReplicaView incoming = heavy("m", 1, 3);
  incoming.swapping_in = true;
  std::vector<DeviceReplicaView> rs = {light("l", 0, 5), heavy("m", 0, 1), incoming};
  EXPECT_EQ(names(eviction_order(rs, 0, EvictionRule::torpor)), (Names{"l", "m"}));
  EXPECT_EQ(eviction_order(rs, 0, EvictionRule::torpor)[1].kind, VictimKind::heavy);
  // A pinned but complete copy elsewhere (executing, copy source) does count.
  rs[2].swapping_in = false;
  rs[2].executing = true;
  EXPECT_EQ(names(eviction_order(rs, 0, EvictionRule::torpor)), (Names{"m", "l"}));
}

TEST(Eviction, LightBeforeHeavyThenLruWithinEach) {
  std::vector<DeviceReplicaView> rs = {heavy("h-new", 0, 8), heavy("h-old", 0, 1), light("l-new", 0, 9),
                                       light("l-old", 0, 4), heavy("h-mid", 0, 5)};
  auto order = eviction_order(rs, 0, EvictionRule::torpor);
  EXPECT_EQ(names(order), (Names{"l-old", "l-new", "h-old", "h-mid", "h-new"}));
  EXPECT_EQ(order[0].kind, VictimKind::light);
  EXPECT_EQ(order[2].kind, VictimKind::heavy);
  EXPECT_EQ(evict(rs, short_by(3 * GiB)), (Names{"l-old", "l-new", "h-old"}));
}

TEST(Eviction, NeverExecutingCopySourceOrSwappingIn) {
  std::vector<DeviceReplicaView> rs = {light("run", 0, 1), light("src", 0, 2), light("in", 0, 3), heavy("ok", 0, 9)};
  rs[0].executing = true;
  rs[1].copy_source = true;
  rs[2].swapping_in = true;
  for (EvictionRule rule : {EvictionRule::torpor, EvictionRule::lru}) {
    EXPECT_EQ(names(eviction_order(rs, 0, rule)), (Names{"ok"})) << to_string(rule);
    EXPECT_EQ(evict(rs, short_by(1 * GiB), rule), (Names{"ok"}));
  }
}

TEST(Eviction, StopsOnceEnoughIsFreedWithoutSkippingAhead) {
  std::vector<DeviceReplicaView> rs = {light("a", 0, 1, 1 * GiB), light("b", 0, 2, 1 * GiB),
                                       light("big", 0, 3, 8 * GiB), light("d", 0, 4, 1 * GiB)};
  EXPECT_EQ(evict(rs, short_by(1 * GiB)), (Names{"a"}));  // exactly enough
  EXPECT_EQ(evict(rs, short_by(1 * GiB + 1)), (Names{"a", "b"}));
  // "big" alone would do, but the order decides: the shortest prefix, not the fewest victims.
  auto plan = choose_evictions(rs, short_by(3 * GiB), EvictionRule::torpor);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(names(plan->victims), (Names{"a", "b", "big"}));
  EXPECT_EQ(plan->freed_bytes, 10 * GiB);
}

TEST(Eviction, NothingWhenFreeBytesAlreadySuffice) {
  std::vector<DeviceReplicaView> rs = {light("a", 0, 1)};
  EvictionRequest req{.device = 0, .need_bytes = 2 * GiB, .free_bytes = 2 * GiB, .capacity_bytes = kCapacity};
  auto plan = choose_evictions(rs, req, EvictionRule::torpor);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->victims.empty());
  EXPECT_EQ(plan->freed_bytes, 0u);
}

TEST(Eviction, NotEnoughEvictableIsOutOfMemoryNamingWhatIsPinned) {
  std::vector<DeviceReplicaView> rs = {light("a", 0, 1), heavy("bert", 0, 2, 4 * GiB), light("gpt2", 0, 3, 3 * GiB)};
  rs[1].executing = true;
  rs[1].copy_source = true;
  rs[2].swapping_in = true;
  auto plan = choose_evictions(rs, short_by(2 * GiB), EvictionRule::torpor);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().code(), ErrorCode::out_of_memory);
  EXPECT_EQ(plan.error().message(),
            "device 0: need 4294967296 bytes, 2147483648 free, evicting all 1 evictable replicas frees "
            "1073741824 more, 1073741824 short; cannot evict 7516192768 bytes pinned by: "
            "bert (4294967296 bytes, executing, copy source); gpt2 (3221225472 bytes, swapping in)");
}

TEST(Eviction, NeedAboveCapacityFailsAtOnce) {
  std::vector<DeviceReplicaView> rs = {light("a", 0, 1, 15 * GiB)};
  EvictionRequest req{.device = 2, .need_bytes = kCapacity + 1, .free_bytes = 1 * GiB, .capacity_bytes = kCapacity};
  rs[0].device = 2;
  auto plan = choose_evictions(rs, req, EvictionRule::torpor);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().code(), ErrorCode::out_of_memory);
  EXPECT_NE(plan.error().message().find("device 2"), std::string::npos) << plan.error().message();
  EXPECT_NE(plan.error().message().find("capacity"), std::string::npos) << plan.error().message();
  req.need_bytes = kCapacity;  // exactly the capacity is allowed
  EXPECT_EQ(evict(rs, req), (Names{"a"}));
}

TEST(Eviction, LruBaselineEvictsTheHeavyModelTorporKeeps) {
  std::vector<DeviceReplicaView> rs = {heavy("bert-qa", 0, 1), light("densenet", 0, 7)};
  EXPECT_EQ(evict(rs, short_by(1), EvictionRule::torpor), (Names{"densenet"}));
  auto plan = choose_evictions(rs, short_by(1), EvictionRule::lru);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->victims, (std::vector<EvictionVictim>{{"bert-qa", 1 * GiB, VictimKind::heavy}}));
}

TEST(Eviction, LruBaselineIgnoresDuplicatesButReportsThem) {
  std::vector<DeviceReplicaView> rs = {light("old", 0, 1), heavy("dup", 0, 5), heavy("dup", 1, 2)};
  auto order = eviction_order(rs, 0, EvictionRule::lru);
  EXPECT_EQ(names(order), (Names{"old", "dup"}));
  EXPECT_EQ(order[1].kind, VictimKind::duplicate);
}

TEST(Eviction, OnlyTheRequestingDevicesReplicasAreCandidates) {
  std::vector<DeviceReplicaView> rs = {light("x0", 1, 0, 8 * GiB), light("x1", 3, 0, 8 * GiB),
                                       heavy("mine", 0, 9)};
  EXPECT_EQ(names(eviction_order(rs, 0, EvictionRule::lru)), (Names{"mine"}));
  EXPECT_EQ(evict(rs, short_by(1 * GiB)), (Names{"mine"}));
  auto plan = choose_evictions(rs, short_by(2 * GiB), EvictionRule::torpor);  // device 1, 3 have room
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().code(), ErrorCode::out_of_memory);
  EXPECT_TRUE(eviction_order(rs, 2, EvictionRule::torpor).empty());
}

TEST(Eviction, TiesGoByModelNameWhateverTheSnapshotOrder) {
  std::vector<DeviceReplicaView> rs = {heavy("c", 0, 4), heavy("a", 0, 4), heavy("b", 0, 4), light("z", 0, 4)};
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(names(eviction_order(rs, 0, EvictionRule::torpor)), (Names{"z", "a", "b", "c"}));
    EXPECT_EQ(names(eviction_order(rs, 0, EvictionRule::lru)), (Names{"a", "b", "c", "z"}));
    std::reverse(rs.begin(), rs.end());
  }
}

TEST(Eviction, AModelTwiceOnOneDeviceIsInvalid) {
  std::vector<DeviceReplicaView> rs = {light("a", 1, 1), light("a", 1, 2)};
  auto plan = choose_evictions(rs, short_by(1), EvictionRule::torpor);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().code(), ErrorCode::invalid_argument);
}

TEST(Eviction, RuleNamesRoundTrip) {
  for (EvictionRule rule : {EvictionRule::torpor, EvictionRule::lru}) {
    auto parsed = parse_eviction_rule(to_string(rule));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, rule);
  }
  auto bad = parse_eviction_rule("fifo");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(bad.error().message().find("fifo"), std::string::npos);
  EXPECT_EQ(to_string(VictimKind::duplicate), "duplicate");
}

}  // namespace eviction_test
}  // namespace ember::placement
