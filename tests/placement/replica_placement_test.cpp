#include "placement/replica_placement.hpp"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace ember::placement {
namespace replica_placement_test {

NodeView node(uint64_t id, uint64_t free_gib, uint32_t replicas = 0, bool cached = false, bool has = false) {
  NodeView n;
  n.id = id;
  n.name = "n" + std::to_string(id);
  n.max_free_device_bytes = free_gib << 30;
  n.replicas = replicas;
  n.caches_model = cached;
  n.has_replica = has;
  n.data = {"127.0.0.1", static_cast<uint16_t>(9000 + id)};
  return n;
}

TEST(ChooseNode, PrefersCachedBytesThenFreeMemoryThenFewerReplicas) {
  EXPECT_EQ(choose_node({node(1, 4), node(2, 8), node(3, 6)}, 1ull << 30), 2u);
  EXPECT_EQ(choose_node({node(1, 4), node(2, 8), node(3, 6, 0, true)}, 1ull << 30), 3u);
  EXPECT_EQ(choose_node({node(1, 8, 3), node(2, 8, 1), node(3, 8, 2)}, 1ull << 30), 2u);
  EXPECT_EQ(choose_node({node(5, 8), node(2, 8), node(9, 8)}, 1ull << 30), 2u);  // ties: lowest id
}

TEST(ChooseNode, SkipsNodesThatHoldItAreExcludedOrTooSmall) {
  EXPECT_EQ(choose_node({node(1, 8, 0, true, true), node(2, 2)}, 1ull << 30), 2u);
  EXPECT_EQ(choose_node({node(1, 8), node(2, 8)}, 1ull << 30, {1}), 2u);
  // 1 GiB of weights needs 1.25 GiB with headroom.
  EXPECT_EQ(choose_node({node(1, 1)}, 1ull << 30), std::nullopt);
  EXPECT_EQ(choose_node({}, 1), std::nullopt);
  EXPECT_EQ(choose_node({node(1, 8, 0, false, true)}, 1), std::nullopt);
}

TEST(CountFitting, CountsWhatChoosingNodeAfterNodeWouldPick) {
  const std::vector<NodeView> nodes = {node(1, 8, 0, true, true), node(2, 2), node(3, 1), node(4, 8, 5), node(5, 0)};
  EXPECT_EQ(count_fitting(nodes, 1ull << 30), 2u);  // 2 and 4: 1 holds it, 3 and 5 are too small
  std::set<uint64_t> excluded;
  while (auto n = choose_node(nodes, 1ull << 30, excluded)) excluded.insert(*n);
  EXPECT_EQ(excluded.size(), 2u);
  EXPECT_EQ(count_fitting({}, 1), 0u);
}

TEST(ChooseSources, PeersWithTheBytesThenTheRepository) {
  const Source repo{SourceKind::repository, "manager", {"10.0.0.1", 7000}};
  auto s = choose_sources({node(1, 8, 2, true), node(2, 8, 0, true), node(3, 8, 0, false), node(4, 8, 0, true)}, 4,
                          repo);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].name, "n2");  // fewest replicas first
  EXPECT_EQ(s[1].name, "n1");
  EXPECT_EQ(s[2].kind, SourceKind::repository);  // the target itself (n4) is never a source
  auto only_repo = choose_sources({node(1, 8)}, 1, repo);
  ASSERT_EQ(only_repo.size(), 1u);
  EXPECT_EQ(only_repo[0].endpoint.host, "10.0.0.1");
}

}  // namespace replica_placement_test
}  // namespace ember::placement
