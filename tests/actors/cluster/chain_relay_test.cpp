// ChainRelay: what hops report becomes splice orders for their transfer peers (plain C++; the peer
// handles are dummy actors of a deterministic actor system, never run).
#include "actors/cluster/chain_relay.hpp"

#include <gtest/gtest.h>

#include <caf/event_based_actor.hpp>

#include "tests/actors/deterministic.hpp"

namespace ember {
namespace chain_relay_test {

constexpr uint64_t MiB = 1ull << 20;

struct Fixture {
  testing::Deterministic d;
  ModelRegistry registry;
  Membership members;
  ChainController chains{placement::StallOptions{1000, 0.25, 8 * MiB, 0}};
  LoadPlanner planner{registry, members, chains};
  ChainRelay relay{chains, planner};
  caf::actor peer_a = d.sys().spawn([] { return caf::behavior{[](const chain_splice&) {}}; });
  caf::actor peer_b = d.sys().spawn([] { return caf::behavior{[](const chain_splice&) {}}; });
  uint64_t transfer = 0;

  Fixture() {
    planner.set_repository({"repo", 9000});
    for (const char* name : {"a", "b"}) {
      node_report r;
      r.name = name;
      r.data = {name, 7000};
      members.join(r, {});
    }
    transfer = chains.start("m/1", 100 * MiB, {{kRepositoryName, {"a", "b"}}}, 0);
  }
  ~Fixture() {
    caf::anon_send_exit(peer_a, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(peer_b, caf::exit_reason::user_shutdown);
  }
  chain_progress progress(const std::string& hop, const std::string& upstream, uint64_t offset, caf::actor peer) {
    return {transfer, hop, upstream, offset, 100 * MiB, placement::HopState::receiving, "", std::move(peer)};
  }
};

TEST(ChainRelay, AStalledHopIsSplicedOutAndItsDownstreamPeerIsOrderedToTheRepository) {
  Fixture f;
  EXPECT_TRUE(f.relay.active());
  EXPECT_TRUE(f.relay.on_progress(f.progress("a", kRepositoryName, 10 * MiB, f.peer_a), 0).empty());
  EXPECT_TRUE(f.relay.on_progress(f.progress("b", "a", 5 * MiB, f.peer_b), 0).empty());
  EXPECT_EQ(f.relay.peers(), 2u);
  EXPECT_TRUE(f.relay.check_stalls(999).empty());
  auto orders = f.relay.check_stalls(1000);
  ASSERT_EQ(orders.size(), 1u);
  EXPECT_EQ(orders[0].peer, f.peer_b);
  EXPECT_EQ(orders[0].splice.transfer_id, f.transfer);
  EXPECT_EQ(orders[0].splice.upstream.kind, SourceTier::repository);
  EXPECT_EQ(orders[0].splice.upstream.endpoint.port, 9000);
}

TEST(ChainRelay, ASpliceForAHopThatHasNotReportedWaitsForItsFirstReport) {
  Fixture f;
  auto orders = f.relay.hop_ended(f.transfer, "a", false, 10);  // a failed before b reported
  EXPECT_TRUE(orders.empty());
  // b's first report still names a: it is re-pointed at once.
  orders = f.relay.on_progress(f.progress("b", "a", 0, f.peer_b), 20);
  ASSERT_EQ(orders.size(), 1u);
  EXPECT_EQ(orders[0].splice.upstream.name, kRepositoryName);
}

TEST(ChainRelay, ALostUpstreamIsAnsweredWithTheNextLiveOneAndAFinishedTransferIsForgotten) {
  Fixture f;
  (void)f.relay.on_progress(f.progress("b", "a", 0, f.peer_b), 0);
  std::vector<SpliceOrder> orders;
  auto up = f.relay.upstream_after_failure({f.transfer, "b", "a", 0, "connection reset"}, orders);
  ASSERT_TRUE(up.ok()) << up.error().message();
  EXPECT_EQ(up->kind, SourceTier::repository);
  auto unknown = f.relay.upstream_after_failure({f.transfer + 1, "b", "a", 0, "x"}, orders);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code(), ErrorCode::unavailable);
  EXPECT_TRUE(f.relay.hop_ended(f.transfer, "a", true, 5).empty());
  EXPECT_TRUE(f.relay.hop_ended(f.transfer, "b", true, 6).empty());
  EXPECT_FALSE(f.relay.active());
  EXPECT_EQ(f.relay.peers(), 0u);
  EXPECT_TRUE(f.relay.hop_ended(0, "x", false, 7).empty());  // not a hop
}

TEST(ChainRelay, ALostNodeIsSplicedAroundAndItsTransfersGoOnWithoutIt) {
  Fixture f;
  (void)f.relay.on_progress(f.progress("b", "a", 0, f.peer_b), 0);
  (void)f.members.leave(1);  // a
  auto orders = f.relay.node_lost("a");
  ASSERT_EQ(orders.size(), 1u);
  EXPECT_EQ(orders[0].peer, f.peer_b);
  EXPECT_EQ(orders[0].splice.upstream.name, kRepositoryName);
  EXPECT_TRUE(f.relay.active());  // b still receives
}

}  // namespace chain_relay_test
}  // namespace ember
