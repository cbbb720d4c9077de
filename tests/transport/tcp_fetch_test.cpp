// fetch_blob against scripted servers that send what a real BlobServer never would: bad CRCs,
// silence, truncated payloads, frames out of order, garbage. Every case is bounded in time.
#include "transport/tcp_fetch.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <chrono>
#include <thread>

#include "tests/transport/transfer_test_util.hpp"

namespace ember::transport {
namespace tcp_fetch_test {

using namespace std::chrono_literals;
using testing::ScriptedServer;
using testing::VectorSink;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kChunk = 4096;

/// Sends `blob` in kChunk frames; `tamper(index, payload)` may change a chunk after its CRC.
void send_blob(int fd, const FetchRequest& r, const std::vector<uint8_t>& blob,
               const std::function<void(size_t, std::vector<uint8_t>&)>& tamper = {}) {
  size_t index = 0;
  for (uint64_t at = r.offset; at < blob.size(); at += kChunk, ++index) {
    const auto n = static_cast<uint32_t>(std::min<uint64_t>(kChunk, blob.size() - at));
    std::vector<uint8_t> payload(blob.begin() + static_cast<ptrdiff_t>(at), blob.begin() + static_cast<ptrdiff_t>(at + n));
    FrameHeader h = data_frame(r.transfer_id, at, payload.data(), n, blob.size());
    if (tamper) tamper(index, payload);
    if (!testing::send_frame(fd, h, payload.data(), n)) return;
  }
  FrameHeader end;
  end.transfer_id = r.transfer_id;
  end.kind = FrameKind::end;
  end.offset = end.blob_bytes = blob.size();
  end.digest = Sha256::of(blob.data(), blob.size());
  testing::send_frame(fd, end, nullptr, 0);
}

TEST(TcpFetch, ScriptedServerHappyPath) {
  const auto blob = testing::random_bytes(5 * kChunk + 17, 1);
  ScriptedServer server([&](int fd, const FetchRequest& r, testing::Latch&) { send_blob(fd, r, blob); });
  VectorSink sink;
  FetchOptions options;
  options.transfer_id = 99;
  auto result = fetch_blob(server.endpoint(), "k", options, sink);
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(sink.bytes, blob);
  EXPECT_EQ(sink.chunks.size(), 6u);
  EXPECT_EQ(result->bytes_received, blob.size());
}

TEST(TcpFetch, BadCrcIsCorruptAndNamesTheOffset) {
  const auto blob = testing::random_bytes(8 * kChunk, 2);
  ScriptedServer server([&](int fd, const FetchRequest& r, testing::Latch&) {
    send_blob(fd, r, blob, [](size_t index, std::vector<uint8_t>& p) {
      if (index == 3) p[100] ^= 0x40;
    });
  });
  VectorSink sink;
  auto result = fetch_blob(server.endpoint(), "k", {}, sink);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::corrupt);
  EXPECT_NE(result.error().message().find("offset " + std::to_string(3 * kChunk)), std::string::npos)
      << result.error().message();
  EXPECT_NE(result.error().message().find("CRC-32C"), std::string::npos);
  // The corrupt chunk was never reported as verified.
  ASSERT_EQ(sink.chunks.size(), 3u);
}

TEST(TcpFetch, DigestMismatchIsCorrupt) {
  const auto blob = testing::random_bytes(3 * kChunk, 3);
  ScriptedServer server([&](int fd, const FetchRequest& r, testing::Latch&) {
    auto other = blob;
    other[0] ^= 1;  // the chunks are right, the end frame's digest is of other bytes
    for (uint64_t at = 0; at < blob.size(); at += kChunk) {
      testing::send_frame(fd, data_frame(r.transfer_id, at, blob.data() + at, kChunk, blob.size()), blob.data() + at, kChunk);
    }
    FrameHeader end;
    end.transfer_id = r.transfer_id;
    end.kind = FrameKind::end;
    end.offset = end.blob_bytes = blob.size();
    end.digest = Sha256::of(other.data(), other.size());
    testing::send_frame(fd, end, nullptr, 0);
  });
  VectorSink sink;
  auto result = fetch_blob(server.endpoint(), "k", {}, sink);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::corrupt);
  EXPECT_NE(result.error().message().find("SHA-256 mismatch"), std::string::npos) << result.error().message();
}

TEST(TcpFetch, StalledServerHitsTheIdleTimeout) {
  const auto blob = testing::random_bytes(4 * kChunk, 4);
  ScriptedServer server([&](int fd, const FetchRequest& r, testing::Latch& release) {
    testing::send_frame(fd, data_frame(r.transfer_id, 0, blob.data(), kChunk, blob.size()), blob.data(), kChunk);
    release.wait();  // then silence, connection open
  });
  VectorSink sink;
  FetchOptions options;
  options.idle_timeout = 300ms;
  const auto t0 = Clock::now();
  auto result = fetch_blob(server.endpoint(), "k", options, sink);
  const auto elapsed = Clock::now() - t0;
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::io_error);
  EXPECT_NE(result.error().message().find("idle timeout"), std::string::npos) << result.error().message();
  EXPECT_GE(elapsed, 290ms);
  EXPECT_LT(elapsed, 2s);
  EXPECT_EQ(sink.chunks.size(), 1u);
}

TEST(TcpFetch, TricklingServerHitsTheTotalTimeout) {
  const auto blob = testing::random_bytes(64 * kChunk, 7);
  ScriptedServer server([&](int fd, const FetchRequest& r, testing::Latch& release) {
    // One small chunk every 50 ms: never idle for long, never done.
    for (uint64_t at = 0; at < blob.size(); at += kChunk) {
      if (!testing::send_frame(fd, data_frame(r.transfer_id, at, blob.data() + at, kChunk, blob.size()),
                               blob.data() + at, kChunk) ||
          release.wait(50ms)) {
        return;
      }
    }
  });
  VectorSink sink;
  FetchOptions options;
  options.idle_timeout = 1s;
  options.total_timeout = 400ms;
  const auto t0 = Clock::now();
  auto result = fetch_blob(server.endpoint(), "k", options, sink);
  const auto elapsed = Clock::now() - t0;
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::io_error);
  EXPECT_NE(result.error().message().find("total timeout"), std::string::npos) << result.error().message();
  EXPECT_GE(elapsed, 390ms);
  EXPECT_LT(elapsed, 1s);
}

TEST(TcpFetch, SilentServerBeforeAnyFrameHitsTheIdleTimeout) {
  ScriptedServer server([&](int, const FetchRequest&, testing::Latch& release) { release.wait(); });
  VectorSink sink;
  FetchOptions options;
  options.idle_timeout = 200ms;
  const auto t0 = Clock::now();
  auto result = fetch_blob(server.endpoint(), "k", options, sink);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message().find("idle timeout"), std::string::npos) << result.error().message();
  EXPECT_LT(Clock::now() - t0, 2s);
  EXPECT_EQ(sink.allocations, 0);
}

TEST(TcpFetch, ConnectionClosedMidPayloadIsATruncatedStream) {
  const auto blob = testing::random_bytes(4 * kChunk, 5);
  ScriptedServer server([&](int fd, const FetchRequest& r, testing::Latch&) {
    testing::send_frame(fd, data_frame(r.transfer_id, 0, blob.data(), kChunk, blob.size()), blob.data(), kChunk);
    // The header of the second frame and half its payload, then the socket closes.
    auto header = encode_frame_header(data_frame(r.transfer_id, kChunk, blob.data() + kChunk, kChunk, blob.size()));
    iovec iov[2] = {{header.data(), header.size()}, {const_cast<uint8_t*>(blob.data()) + kChunk, kChunk / 2}};
    (void)send_all(fd, iov, 2);
  });
  VectorSink sink;
  auto result = fetch_blob(server.endpoint(), "k", {}, sink);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::io_error);
  EXPECT_NE(result.error().message().find("truncated stream"), std::string::npos) << result.error().message();
  EXPECT_NE(result.error().message().find("after 4096 of 16384 bytes"), std::string::npos) << result.error().message();
}

TEST(TcpFetch, FramesOutOfOrderAreCorrupt) {
  const auto blob = testing::random_bytes(4 * kChunk, 6);
  ScriptedServer server([&](int fd, const FetchRequest& r, testing::Latch&) {
    testing::send_frame(fd, data_frame(r.transfer_id, kChunk, blob.data() + kChunk, kChunk, blob.size()),
                        blob.data() + kChunk, kChunk);
  });
  VectorSink sink;
  auto result = fetch_blob(server.endpoint(), "k", {}, sink);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::corrupt);
  EXPECT_NE(result.error().message().find("where offset 0 was due"), std::string::npos) << result.error().message();
}

TEST(TcpFetch, GarbageIsCorrupt) {
  ScriptedServer server([&](int fd, const FetchRequest&, testing::Latch&) {
    const uint8_t junk[16] = {0xff, 0xff, 0xff, 0x7f, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    iovec iov{const_cast<uint8_t*>(junk), sizeof(junk)};
    (void)send_all(fd, &iov, 1);
  });
  VectorSink sink;
  auto result = fetch_blob(server.endpoint(), "k", {}, sink);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::corrupt) << result.error().to_string();
}

TEST(TcpFetch, AbortCarriesCodeAndReason) {
  ScriptedServer server([&](int fd, const FetchRequest& r, testing::Latch&) {
    testing::send_frame(fd, abort_frame(r.transfer_id, unsupported("no such dtype")), nullptr, 0);
  });
  VectorSink sink;
  auto result = fetch_blob(server.endpoint(), "model/7", {}, sink);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::unsupported);
  EXPECT_NE(result.error().message().find("no such dtype"), std::string::npos);
  EXPECT_NE(result.error().message().find("'model/7'"), std::string::npos);
}

TEST(TcpFetch, ConnectRefusedNamesTheEndpointAndIsFast) {
  // A port that was just free: bind, read it back, close.
  uint16_t port = 0;
  {
    auto l = listen_tcp({"127.0.0.1", 0}, 1);
    ASSERT_TRUE(l.ok());
    port = local_port(l->fd());
  }
  VectorSink sink;
  const auto t0 = Clock::now();
  auto result = fetch_blob({"127.0.0.1", port}, "k", {}, sink);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::io_error);
  EXPECT_NE(result.error().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << result.error().message();
  EXPECT_LT(Clock::now() - t0, 1s);
}

TEST(TcpFetch, ConnectTimeoutIsBounded) {
  // A listener that never accepts, its backlog full: the kernel drops further SYNs, so a connect
  // hangs exactly like one to a host that is gone. (An unroutable address would not do: sandboxes
  // and proxies may answer for any address.)
  auto listener = listen_tcp({"127.0.0.1", 0}, 0);
  ASSERT_TRUE(listener.ok());
  const HostPort full{"127.0.0.1", local_port(listener->fd())};
  std::vector<Socket> fillers;
  for (int i = 0; i < 3; ++i) {
    Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(full.port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    (void)::connect(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    fillers.push_back(std::move(s));
  }
  std::this_thread::sleep_for(50ms);
  VectorSink sink;
  FetchOptions options;
  options.connect_timeout = 300ms;
  const auto t0 = Clock::now();
  auto result = fetch_blob(full, "k", options, sink);
  const auto elapsed = Clock::now() - t0;
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::io_error);
  EXPECT_NE(result.error().message().find("timed out"), std::string::npos) << result.error().message();
  EXPECT_NE(result.error().message().find(full.to_string()), std::string::npos) << result.error().message();
  EXPECT_GE(elapsed, 290ms);
  EXPECT_LT(elapsed, 2s);
}

TEST(TcpFetch, BadKeysAreRejectedBeforeConnecting) {
  VectorSink sink;
  auto result = fetch_blob({"127.0.0.1", 1}, "", {}, sink);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::invalid_argument);
  result = fetch_blob({"127.0.0.1", 1}, std::string(kMaxFetchKeyBytes + 1, 'k'), {}, sink);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::invalid_argument);
}

}  // namespace tcp_fetch_test
}  // namespace ember::transport
