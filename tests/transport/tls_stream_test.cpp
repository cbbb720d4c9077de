// The data plane over TLS (security.data_plane: tls): a TCP blob server and fetches with
// certificates from one cluster CA (made with `ember certs`' library) transfer and verify a blob;
// a plain receiver, a receiver with another CA's certificate and a TLS receiver at a plain server
// each fail with an error, and no byte of the blob reaches them. With tickets naming certificates, a
// ticket opens its blob only to the member whose certificate names its receiver.
#include "transport/tls_stream.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "security/certs.hpp"
#include "tests/gpu/test_util.hpp"
#include "tests/transport/transfer_test_util.hpp"
#include "transport/tcp_blob_server.hpp"
#include "transport/tcp_fetch.hpp"
#include "transport/ticket.hpp"

namespace ember::transport {
namespace tls_stream_test {

using testing::lookup_of;
using testing::VectorSink;

std::shared_ptr<const DataTls> member(const gpu::testing::TempDir& dir, const std::string& name) {
  EXPECT_TRUE(security::issue_certificate(dir.path(), {name, "node", {"127.0.0.1"}, 2, false}).ok());
  auto tls = DataTls::make(dir / (name + ".crt"), dir / (name + ".key"), "", dir / "ca.crt");
  EXPECT_TRUE(tls.ok()) << tls.error().message();
  return tls.ok() ? *tls : nullptr;
}

TEST(DataPlaneTls, MembersTransferAndVerifyAndEveryOtherReceiverGetsNothing) {
  gpu::testing::TempDir cluster, other;
  ASSERT_TRUE(security::init_ca(cluster.path(), "cluster CA", 2, false).ok());
  ASSERT_TRUE(security::init_ca(other.path(), "other CA", 2, false).ok());
  auto server_tls = member(cluster, "n1");
  auto client_tls = member(cluster, "n2");
  auto intruder_tls = member(other, "intruder");
  ASSERT_TRUE(server_tls && client_tls && intruder_tls);

  auto bytes = testing::random_bytes(9 * (1u << 20) + 13, 51);
  BlobServerOptions options;
  options.tls = server_tls;
  options.request_timeout = std::chrono::milliseconds(2000);
  auto server = BlobServer::start(options, lookup_of({{"mlp/1", MemoryBlob::of(bytes)}}));
  ASSERT_TRUE(server.ok()) << server.error().message();

  VectorSink sink;
  FetchOptions tls_options;
  tls_options.tls = client_tls;
  auto got = fetch_blob((*server)->endpoint(), "mlp/1", tls_options, sink);
  ASSERT_TRUE(got.ok()) << got.error().message();
  EXPECT_EQ(sink.bytes, bytes);
  EXPECT_EQ(got->digest, Sha256::of(bytes.data(), bytes.size()));

  auto refused = [&](const char* what, const FetchOptions& o, const DataServer& at) {
    VectorSink nothing;
    auto r = fetch_blob(at.endpoint(), "mlp/1", o, nothing);
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_EQ(r.error().code(), ErrorCode::io_error) << what << ": " << r.error().message();
    EXPECT_EQ(nothing.allocations, 0) << what;
  };
  FetchOptions plain;
  plain.idle_timeout = std::chrono::milliseconds(3000);
  refused("a plain receiver", plain, **server);
  FetchOptions intruder;
  intruder.tls = intruder_tls;
  refused("a receiver of another CA", intruder, **server);
  EXPECT_EQ((*server)->bytes_sent(), bytes.size());  // only the member's transfer

  auto plain_server = BlobServer::start(BlobServerOptions{}, lookup_of({{"mlp/1", MemoryBlob::of(bytes)}}));
  ASSERT_TRUE(plain_server.ok());
  tls_options.idle_timeout = std::chrono::milliseconds(3000);
  refused("a TLS receiver at a plain server", tls_options, **plain_server);
}

TEST(DataPlaneTls, WithTicketsNamingCertificatesATicketOpensItsBlobOnlyToTheMemberItNames) {
  // security.ticket_receiver: certificate: n2's ticket, presented by n3 (another member, with a
  // certificate the CA signed: it obtained or overheard the ticket), opens nothing; n2 fetches.
  gpu::testing::TempDir cluster;
  ASSERT_TRUE(security::init_ca(cluster.path(), "cluster CA", 2, false).ok());
  auto server_tls = member(cluster, "n1");
  auto n2 = member(cluster, "n2");
  auto n3 = member(cluster, "n3");
  ASSERT_TRUE(server_tls && n2 && n3);
  auto keys = TicketKeys::from_secret(std::string(32, 'k'));
  ASSERT_TRUE(keys.ok());
  auto bytes = testing::random_bytes((1u << 20) + 7, 52);
  BlobServerOptions options;
  options.tls = server_tls;
  options.tickets = *keys;
  options.tickets_name_certificates = true;
  options.request_timeout = std::chrono::milliseconds(2000);
  auto server = BlobServer::start(options, lookup_of({{"mlp/1", MemoryBlob::of(bytes)}}));
  ASSERT_TRUE(server.ok()) << server.error().message();

  auto fetch_as = [&](const std::shared_ptr<const DataTls>& tls, const Ticket& ticket, VectorSink& sink) {
    FetchOptions o;
    o.tls = tls;
    o.ticket = ticket;
    return fetch_blob((*server)->endpoint(), "mlp/1", o, sink);
  };
  const Ticket for_n2 = (*keys)->issue("mlp/1", "n2");
  VectorSink stolen;
  auto refused = fetch_as(n3, for_n2, stolen);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), ErrorCode::permission_denied) << refused.error().message();
  EXPECT_NE(refused.error().message().find("the ticket of n2 for mlp/1 was presented with the certificate of 'n3'"),
            std::string::npos)
      << refused.error().message();
  EXPECT_EQ(stolen.allocations, 0);
  // n3's own ticket opens it to n3, and n2's to n2.
  VectorSink own;
  auto n3_own = fetch_as(n3, (*keys)->issue("mlp/1", "n3"), own);
  ASSERT_TRUE(n3_own.ok()) << n3_own.error().message();
  VectorSink sink;
  auto got = fetch_as(n2, for_n2, sink);
  ASSERT_TRUE(got.ok()) << got.error().message();
  EXPECT_EQ(sink.bytes, bytes);
  EXPECT_EQ((*server)->bytes_sent(), 2 * bytes.size());  // nothing to the refused receiver

  // The default (tickets name whoever presents them): the same ticket opens it to n3 as well.
  options.tickets_name_certificates = false;
  auto lenient = BlobServer::start(options, lookup_of({{"mlp/1", MemoryBlob::of(bytes)}}));
  ASSERT_TRUE(lenient.ok());
  VectorSink replayed;
  FetchOptions o;
  o.tls = n3;
  o.ticket = for_n2;
  EXPECT_TRUE(fetch_blob((*lenient)->endpoint(), "mlp/1", o, replayed).ok());
}

}  // namespace tls_stream_test
}  // namespace ember::transport
