#include "base/host_port.hpp"

#include <gtest/gtest.h>

namespace ember {
namespace host_port_test {

TEST(ParseHostPort, Ipv4AndHostnames) {
  EXPECT_EQ(*parse_host_port("127.0.0.1:7070"), (HostPort{"127.0.0.1", 7070}));
  EXPECT_EQ(*parse_host_port("0.0.0.0:0"), (HostPort{"0.0.0.0", 0}));
  EXPECT_EQ(*parse_host_port("255.255.255.255:65535"), (HostPort{"255.255.255.255", 65535}));
  EXPECT_EQ(*parse_host_port("localhost:8000"), (HostPort{"localhost", 8000}));
  EXPECT_EQ(*parse_host_port("gpu-03.rack2.example:7071"), (HostPort{"gpu-03.rack2.example", 7071}));
  EXPECT_EQ(*parse_host_port("ember_node_1:9"), (HostPort{"ember_node_1", 9}));
  EXPECT_EQ(*parse_host_port("3com.net:80"), (HostPort{"3com.net", 80}));
  EXPECT_EQ(*parse_host_port("  host:1 "), (HostPort{"host", 1}));
}

TEST(ParseHostPort, RoundTripsThroughToString) {
  for (const char* text : {"127.0.0.1:7070", "a:0", "node-7.local:65535"}) {
    auto hp = parse_host_port(text);
    ASSERT_TRUE(hp.ok()) << text;
    EXPECT_EQ(hp->to_string(), text);
    EXPECT_EQ(*parse_host_port(hp->to_string()), *hp);
  }
}

TEST(HostPort, ToStringWritesAnIpv6HostInBrackets) {
  // Not parsed from config text yet (below), but a HostPort built in code may hold one.
  EXPECT_EQ((HostPort{"::1", 80}.to_string()), "[::1]:80");
  EXPECT_EQ((HostPort{"node-3.cluster", 7401}.to_string()), "node-3.cluster:7401");
}

TEST(ParseHostPort, RejectsWithTheTextQuoted) {
  for (const char* bad : {"", "7070", "localhost", "localhost:", ":7070", "host:port", "host:65536",
                          "host:-1", "host:123456", "host:+80", "1.2.3.4.5:80", "1.2.3:80", "256.1.1.1:80",
                          "01.2.3.4:80", "1..2.3:80", "host..name:80", "-host:80", "host-:80", "ho st:80",
                          "host/x:80", "::1:80", "[::1]:80", "host.:80", "a.1:80", "host:80x", "[::1]80", "[::1"}) {
    auto r = parse_host_port(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code(), ErrorCode::invalid_argument);
    EXPECT_NE(r.error().message().find(std::string("'") + bad + "'"), std::string::npos) << r.error().message();
  }
  EXPECT_FALSE(parse_host_port(std::string(64, 'a') + ":80").ok());
  EXPECT_TRUE(parse_host_port(std::string(63, 'a') + ":80").ok());
  std::string long_name;
  for (int i = 0; i < 64; ++i) long_name += "abc.";
  EXPECT_FALSE(parse_host_port(long_name + "x:80").ok());
  EXPECT_NE(parse_host_port("[::1]:80").error().message().find("IPv6"), std::string::npos);
}

}  // namespace host_port_test
}  // namespace ember
