// Membership: nodes by id and name, device weights, cached models and the placement views (plain
// C++; router handles stay null here).
#include "actors/cluster/membership.hpp"

#include <gtest/gtest.h>

namespace ember {
namespace membership_test {

constexpr uint64_t MiB = 1ull << 20;

node_report report(const std::string& name, std::vector<uint64_t> device_mib, std::vector<model_key> cached = {}) {
  node_report r;
  r.name = name;
  r.data = {"10.0.0.1", 7000};
  for (size_t i = 0; i < device_mib.size(); ++i)
    r.devices.push_back({"sim" + std::to_string(i), device_mib[i] * MiB, 0});
  r.cached = std::move(cached);
  return r;
}

TEST(Membership, IdsGrowAndAreNotReusedAndNamesResolveToThem) {
  Membership m;
  const uint64_t a = m.join(report("a", {100}), {});
  const uint64_t b = m.join(report("b", {100}), {});
  EXPECT_EQ(a, 1u);
  EXPECT_EQ(b, 2u);
  EXPECT_EQ(m.id_of("b"), b);
  EXPECT_EQ(m.id_of("zz"), std::nullopt);
  auto gone = m.leave(a);
  ASSERT_TRUE(gone.has_value());
  EXPECT_EQ(gone->report.name, "a");
  EXPECT_FALSE(m.leave(a).has_value());
  EXPECT_EQ(m.join(report("a", {100}), {}), 3u);  // a node that comes back is a new member
  EXPECT_EQ(m.size(), 2u);
}

TEST(Membership, ResolveNamesEveryNodeOrFailsOnTheFirstUnknownName) {
  Membership m;
  m.join(report("a", {100}), {});
  m.join(report("b", {100}), {});
  EXPECT_EQ(*m.resolve({}), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(*m.resolve({"b", "a", "b"}), (std::vector<uint64_t>{2, 1}));
  auto bad = m.resolve({"a", "c"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::not_found);
  EXPECT_EQ(bad.error().message(), "no node named 'c' in the cluster");
}

TEST(Membership, ViewsShowFreeMemoryAfterBoundWeightsAndWhatTheNodeHolds) {
  Membership m;
  const model_key key{"m", 1};
  const uint64_t a = m.join(report("a", {100, 300}), {});
  const uint64_t b = m.join(report("b", {200}, {key}), {});
  m.bind(a, "sim1", 250 * MiB);
  m.bind(a, "sim1", 40 * MiB);
  m.unbind(a, "sim1", 90 * MiB);
  m.unbind(a, "nosuch", 1);
  EXPECT_EQ(m.release({{a, "sim1"}, {99, "sim0"}}, 0).size(), 1u);  // the routers of present nodes
  m.bind(99, "sim0", 1);                                            // unknown node: ignored
  auto views = m.views(key, {{a, 3}}, {});
  ASSERT_EQ(views.size(), 2u);
  EXPECT_EQ(views[0].id, a);
  EXPECT_EQ(views[0].max_free_device_bytes, 100 * MiB);  // sim0 100 free; sim1 300 - 200
  EXPECT_EQ(views[0].replicas, 3u);
  EXPECT_FALSE(views[0].caches_model);
  EXPECT_EQ(views[1].max_free_device_bytes, 200 * MiB);
  EXPECT_TRUE(views[1].caches_model);
  EXPECT_FALSE(views[1].has_replica);
  EXPECT_EQ(views[1].data.port, 7000);

  m.note_cached(a, key, true);
  m.note_cached(a, key, true);  // once
  m.note_cached(b, key, false);
  EXPECT_TRUE(m.caches(a, key));
  EXPECT_FALSE(m.caches(b, key));
  EXPECT_EQ(m.find(a)->report.cached.size(), 1u);
  views = m.views(key, {}, {b});
  EXPECT_TRUE(views[1].has_replica);
  EXPECT_TRUE(views[1].caches_model);  // serving it implies holding the bytes
}

TEST(Membership, LoadsInFlightHoldTheirMemorySoTwoPlacementsNeverCountItTwice) {
  Membership m;
  const model_key x{"x", 1}, y{"y", 1};
  const uint64_t a = m.join(report("a", {100}), {});
  const uint64_t b = m.join(report("b", {60}), {});
  auto free_on = [&](uint64_t node) {
    for (const auto& v : m.views(x, {}, {}))
      if (v.id == node) return v.max_free_device_bytes;
    return uint64_t{~0ull};
  };
  // Placement 1 chooses a for x (70 MiB); while it loads, placement 2 must not see a as empty.
  ASSERT_EQ(placement::choose_node(m.views(x, {}, {}), 70 * MiB), a);
  m.reserve(a, /*attempt=*/1, 70 * MiB);
  EXPECT_EQ(free_on(a), 30 * MiB);
  EXPECT_EQ(m.reserved(a), 70 * MiB);
  EXPECT_EQ(placement::choose_node(m.views(y, {}, {}), 40 * MiB), b) << "a has 30 MiB left, not 100";
  m.reserve(b, 2, 40 * MiB);
  EXPECT_EQ(placement::choose_node(m.views(y, {}, {}), 40 * MiB, {b}), std::nullopt) << "nowhere left";
  // The load on a failed: its memory is free again. The one on b succeeded: bound instead.
  m.unreserve(a, 1);
  EXPECT_EQ(free_on(a), 100 * MiB);
  m.unreserve(b, 2);
  m.bind(b, "sim0", 40 * MiB);
  EXPECT_EQ(free_on(b), 20 * MiB);
  m.unreserve(a, 1);  // twice, or an unknown attempt or node: nothing happens
  m.reserve(99, 3, MiB);
  EXPECT_EQ(m.reserved(99), 0u);
  m.reserve(a, 4, 500 * MiB);
  EXPECT_EQ(free_on(a), 0u) << "never below zero";
  m.leave(a);
  EXPECT_EQ(m.reserved(a), 0u) << "a node's reservations leave with it";
}

TEST(Membership, TheMemberListAndTheJoinLineNameEveryNode) {
  Membership m;
  m.join(report("a", {512}), {});
  m.join(report("b", {512}), {});
  auto members = m.members();
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[1].node_id, 2u);
  EXPECT_EQ(members[1].node, "b");
  EXPECT_EQ(m.describe_join(1, 2),
            "a joined as #1 (1 device(s), 512 MiB of device memory, cache 0 B, data plane 10.0.0.1:7000, 2 "
            "replica(s) adopted)");
}

// A heartbeat's fresh report comes from the node's router, which does not know where its process
// published it: the member list keeps the endpoint the node joined with (integration.control_tls:
// a standalone gateway never dialed the node that had loaded a replica, and lost its requests
// through the manager's process when the manager restarted).
TEST(Membership, AFreshReportKeepsWhereTheNodesRouterIsPublished) {
  Membership m;
  node_report joined = report("a", {512});
  joined.control = {"127.0.0.1", 7201};
  const uint64_t a = m.join(joined, {});
  node_report fresh = report("a", {512});
  fresh.replicas = {{"mlp", 1}};
  m.update_report(a, fresh);
  EXPECT_EQ(m.find(a)->report.replicas, (std::vector<model_key>{{"mlp", 1}}));
  EXPECT_EQ(m.members().at(0).control, (HostPort{"127.0.0.1", 7201}));
  fresh.control = {"127.0.0.1", 7301};  // one that says (a process that publishes it again elsewhere)
  m.update_report(a, fresh);
  EXPECT_EQ(m.members().at(0).control, (HostPort{"127.0.0.1", 7301}));
}

}  // namespace membership_test
}  // namespace ember
