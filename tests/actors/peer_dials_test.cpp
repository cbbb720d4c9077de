// PeerDials: which peers a process dials, and when again (actors/peer_dials.hpp).
#include "actors/peer_dials.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace ember {
namespace {

HostPort at(uint16_t port) { return HostPort{"10.0.0.1", port}; }

std::vector<std::string> names(const std::vector<PeerDials::Dial>& dials) {
  std::vector<std::string> out;
  for (const auto& d : dials) out.push_back(d.peer);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(PeerDials, EachWantedPeerIsDialedOnceAndAnUnpublishedOneNever) {
  PeerDials p;
  p.want({{"n1", at(1)}, {"n2", at(2)}, {"n3", HostPort{"10.0.0.1", 0}}});
  EXPECT_EQ(names(p.due()), (std::vector<std::string>{"n1", "n2"}));
  EXPECT_TRUE(p.due().empty());  // being dialed
  p.want({{"n1", at(1)}, {"n2", at(2)}});  // the same list again: nothing new to dial
  EXPECT_TRUE(p.due().empty());
  EXPECT_TRUE(p.connected({"n1", at(1)}, caf::actor{}));
  EXPECT_TRUE(p.reached("n1"));
  EXPECT_FALSE(p.reached("n2"));
  EXPECT_FALSE(p.wanted("n3"));
}

TEST(PeerDials, AFailedDialIsDueAgainOnlyOnceTheCallerSaysSo) {
  PeerDials p;
  p.want({{"n1", at(1)}});
  auto first = p.due();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_TRUE(p.due().empty());  // the caller waits its retry interval before failed()
  p.failed(first[0]);
  EXPECT_EQ(names(p.due()), (std::vector<std::string>{"n1"}));
}

TEST(PeerDials, APeerThatLeftOrMovedIsForgottenAndALateAnswerForItDropped) {
  PeerDials p;
  p.want({{"n1", at(1)}, {"n2", at(2)}});
  auto dials = p.due();
  ASSERT_EQ(dials.size(), 2u);
  EXPECT_TRUE(p.connected({"n1", at(1)}, caf::actor{}));
  // n1 left the cluster; n2 came back at another port while its dial was under way.
  p.want({{"n2", at(22)}});
  EXPECT_FALSE(p.reached("n1"));
  EXPECT_FALSE(p.connected({"n2", at(2)}, caf::actor{}));  // the old endpoint's dial answers late: dropped
  auto again = p.due();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].at.port, 22);
  p.failed({"n2", at(2)});  // a stale failure does not make the new dial due twice
  EXPECT_TRUE(p.due().empty());
  EXPECT_TRUE(p.connected(again[0], caf::actor{}));
  EXPECT_EQ(p.reached_count(), 1u);
}

TEST(PeerDials, AForgottenConnectionIsDialedAgain) {
  PeerDials p;
  p.want({{"n1", at(1)}});
  auto d = p.due();
  ASSERT_TRUE(p.connected(d[0], caf::actor{}));
  p.forget("n1");  // its process restarted: a new connection is needed
  EXPECT_FALSE(p.reached("n1"));
  EXPECT_EQ(names(p.due()), (std::vector<std::string>{"n1"}));
}

}  // namespace
}  // namespace ember
