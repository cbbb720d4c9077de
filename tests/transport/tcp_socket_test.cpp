#include "transport/tcp_socket.hpp"

#include <gtest/gtest.h>

namespace ember::transport {
namespace {

TEST(Endpoint, Parses) {
  auto e = Endpoint::parse("node-3.cluster:7401");
  ASSERT_TRUE(e.ok()) << e.error().message();
  EXPECT_EQ(e->host, "node-3.cluster");
  EXPECT_EQ(e->port, 7401);
  EXPECT_EQ(e->to_string(), "node-3.cluster:7401");
  e = Endpoint::parse("[::1]:80");
  ASSERT_TRUE(e.ok()) << e.error().message();
  EXPECT_EQ(e->host, "::1");
  EXPECT_EQ(e->to_string(), "[::1]:80");
}

TEST(Endpoint, RejectsWithTheTextAndTheReason) {
  for (const char* bad : {"", "host", "host:", ":80", "host:0", "host:65536", "host:80x", "::1:80", "[::1]80", "[::1"}) {
    auto e = Endpoint::parse(bad);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.error().code(), ErrorCode::invalid_argument);
    EXPECT_NE(e.error().message().find(std::string("'") + bad + "'"), std::string::npos) << e.error().message();
  }
}

}  // namespace
}  // namespace ember::transport
