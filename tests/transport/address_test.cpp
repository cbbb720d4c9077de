// The data plane's addresses: HostPort as transport writes it (the IPv6 brackets that
// the former transport::Endpoint added) and the one resolve() that TCP and UCX share.
#include "transport/address.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

namespace ember::transport {
namespace address_test {

TEST(Address, AHostPortWritesAnIpv6HostInBrackets) {
  EXPECT_EQ((HostPort{"node-3.cluster", 7401}.to_string()), "node-3.cluster:7401");
  EXPECT_EQ((HostPort{"::1", 80}.to_string()), "[::1]:80");
  EXPECT_EQ((HostPort{"fe80::1%eth0", 7070}.to_string()), "[fe80::1%eth0]:7070");
}

TEST(Address, ResolvesNumericAddressesOfBothFamiliesWithTheirPort) {
  auto v4 = resolve({"127.0.0.1", 7401}, /*passive=*/false);
  ASSERT_TRUE(v4.ok()) << v4.error().to_string();
  ASSERT_EQ(v4->size(), 1u);
  ASSERT_EQ(v4->front().family(), AF_INET);
  EXPECT_EQ(ntohs(reinterpret_cast<const sockaddr_in*>(v4->front().get())->sin_port), 7401);
  EXPECT_EQ(v4->front().length, sizeof(sockaddr_in));

  auto v6 = resolve({"::1", 80}, /*passive=*/false);
  ASSERT_TRUE(v6.ok()) << v6.error().to_string();
  ASSERT_EQ(v6->size(), 1u);
  ASSERT_EQ(v6->front().family(), AF_INET6);
  EXPECT_EQ(ntohs(reinterpret_cast<const sockaddr_in6*>(v6->front().get())->sin6_port), 80);
}

TEST(Address, AnEmptyPassiveHostIsEveryInterface) {
  auto any = resolve({"", 0}, /*passive=*/true);
  ASSERT_TRUE(any.ok()) << any.error().to_string();
  ASSERT_FALSE(any->empty());
}

TEST(Address, AHostThatDoesNotResolveIsAnIoErrorNamingIt) {
  // Not a valid DNS name, so the resolver refuses it without asking a name server.
  auto bad = resolve({"no such host!", 7070}, /*passive=*/false);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::io_error);
  EXPECT_NE(bad.error().message().find("cannot resolve no such host!:7070"), std::string::npos)
      << bad.error().message();
}

}  // namespace address_test
}  // namespace ember::transport
