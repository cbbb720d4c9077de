// ChainController: the manager's bookkeeping of multicast transfers (plain C++, no actors).
#include "actors/cluster/chain_controller.hpp"

#include <gtest/gtest.h>

namespace ember {
namespace chain_controller_test {

constexpr uint64_t MiB = 1ull << 20;

std::vector<std::string> hops_of(const std::vector<TransferSplice>& splices) {
  std::vector<std::string> out;
  for (const auto& s : splices) out.push_back(s.hop + "<-" + s.upstream);
  return out;
}

TEST(ChainController, ProgressFromAHopThatMissedASpliceIsAnsweredWithOne) {
  ChainController c;
  const uint64_t id = c.start("m/1", 100 * MiB, {{"h1", {"a", "b", "c"}}}, 0);
  EXPECT_NE(id, 0u);
  EXPECT_TRUE(c.on_progress(id, "b", "a", 10 * MiB, 100).empty());  // as planned
  EXPECT_EQ(hops_of(c.on_failed(id, "a")), (std::vector<std::string>{"b<-h1"}));
  // b reports before the splice reached it: it still pulls from a; the answer re-points it.
  EXPECT_EQ(hops_of(c.on_progress(id, "b", "a", 12 * MiB, 200)), (std::vector<std::string>{"b<-h1"}));
  EXPECT_TRUE(c.on_progress(id, "b", "h1", 14 * MiB, 300).empty());
}

TEST(ChainController, UpstreamAfterFailureSplicesTheFailedHopOut) {
  ChainController c;
  const uint64_t id = c.start("m/1", 100 * MiB, {{"h1", {"a", "b", "c"}}}, 0);
  std::vector<TransferSplice> splices;
  auto up = c.upstream_after_failure(id, "c", "b", splices);
  ASSERT_TRUE(up.ok());
  EXPECT_EQ(*up, "a");
  EXPECT_EQ(hops_of(splices), (std::vector<std::string>{"c<-a"}));
  // b (alive or not) keeps its own upstream; nobody pulls from it any more.
  splices.clear();
  auto again = c.upstream_after_failure(id, "c", "b", splices);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, "a");
  EXPECT_TRUE(splices.empty());
  // Unknown transfer or hop: clear errors.
  EXPECT_EQ(c.upstream_after_failure(id + 7, "c", "b", splices).error().code(), ErrorCode::unavailable);
  EXPECT_EQ(c.upstream_after_failure(id, "zz", "b", splices).error().code(), ErrorCode::not_found);
}

TEST(ChainController, NodeLostSplicesEveryTransferThroughIt) {
  ChainController c;
  const uint64_t t1 = c.start("m/1", 100 * MiB, {{"h1", {"a", "b"}}}, 0);
  const uint64_t t2 = c.start("n/1", 100 * MiB, {{"a", {"c", "d"}}, {"h2", {"e"}}}, 0);
  auto splices = c.node_lost("a", "manager");
  ASSERT_EQ(splices.size(), 2u);
  EXPECT_EQ(splices[0].transfer_id, t1);
  EXPECT_EQ(splices[0].hop, "b");
  EXPECT_EQ(splices[0].upstream, "h1");
  EXPECT_EQ(splices[1].transfer_id, t2);  // a was t2's source: the chain continues from the repository
  EXPECT_EQ(splices[1].hop, "c");
  EXPECT_EQ(splices[1].upstream, "manager");
}

TEST(ChainController, FinishedWhenEveryHopEnded) {
  ChainController c;
  const uint64_t id = c.start("m/1", 100 * MiB, {{"h1", {"a", "b"}}}, 0);
  EXPECT_FALSE(c.finished(id));
  c.on_done(id, "a", 10);
  EXPECT_FALSE(c.finished(id));
  EXPECT_TRUE(c.finished_transfers().empty());
  c.on_failed(id, "b");
  EXPECT_TRUE(c.finished(id));
  EXPECT_EQ(c.finished_transfers(), (std::vector<uint64_t>{id}));
  c.erase(id);
  EXPECT_TRUE(c.empty());
  EXPECT_TRUE(c.finished(id));  // unknown counts as finished
}

TEST(ChainController, StalledHopsAreSplicedOutAndSnapshotShowsThem) {
  ChainController c(placement::StallOptions{1000, 0.25, 8 * MiB, 0});
  const uint64_t id = c.start("m/1", 100 * MiB, {{"h1", {"a", "b", "c"}}}, 0);
  for (int64_t t = 100; t <= 2000; t += 100) {
    c.on_progress(id, "a", "h1", static_cast<uint64_t>(t) * 40 * 1024, t);  // moving
    c.on_progress(id, "b", "a", 2 * MiB, t);                                 // stuck
  }
  EXPECT_EQ(hops_of(c.check_stalls(2000)), (std::vector<std::string>{"c<-a"}));
  auto snap = c.snapshot();
  ASSERT_EQ(snap.size(), 3u);
  EXPECT_EQ(snap[1].hop, "b");
  EXPECT_EQ(snap[1].state, "spliced_out");
  EXPECT_EQ(snap[1].offset, 2 * MiB);
  EXPECT_EQ(snap[2].upstream, "a");
}

}  // namespace chain_controller_test
}  // namespace ember
