// TicketIssuer: every source a receiver is given carries a ticket for that receiver and that blob,
// valid from the time passed in; without keys, none (plain C++).
#include "actors/cluster/ticket_issuer.hpp"

#include <gtest/gtest.h>

namespace ember {
namespace ticket_issuer_test {

constexpr uint64_t kNow = 1'800'000'000;  // unix seconds

std::vector<blob_source> sources() {
  return {blob_source{SourceTier::peer, "b", {"b", 7000}}, blob_source{SourceTier::repository, "manager", {"m", 9000}}};
}

TEST(TicketIssuer, EverySourceGetsTheReceiversTicketForTheBlob) {
  auto keys = transport::TicketKeys::from_secret(std::string(32, 'k'));
  ASSERT_TRUE(keys.ok());
  const TicketIssuer issuer(*keys);
  EXPECT_TRUE(issuer.enabled());
  auto s = sources();
  issuer.stamp(s, "m/1", "a", kNow);
  for (const auto& source : s) {
    EXPECT_EQ(source.ticket.receiver, "a");
    EXPECT_EQ(source.ticket.not_after, kNow + static_cast<uint64_t>(transport::kTicketLifetime.count()));
    EXPECT_TRUE((*keys)->verify("m/1", source.ticket, kNow).ok());
    EXPECT_FALSE((*keys)->verify("m/2", source.ticket, kNow).ok()) << "another blob";
    EXPECT_FALSE((*keys)->verify("m/1", source.ticket, source.ticket.not_after + 3600).ok()) << "expired";
  }
  blob_source one = sources()[0];
  issuer.stamp(one, "m/1", "c", kNow);
  EXPECT_EQ(one.ticket.receiver, "c");
  EXPECT_TRUE((*keys)->verify("m/1", one.ticket, kNow).ok());
}

TEST(TicketIssuer, WithoutKeysNoSourceGetsATicket) {
  const TicketIssuer issuer;
  EXPECT_FALSE(issuer.enabled());
  auto s = sources();
  issuer.stamp(s, "m/1", "a", kNow);
  for (const auto& source : s) EXPECT_TRUE(source.ticket.empty());
}

}  // namespace ticket_issuer_test
}  // namespace ember
