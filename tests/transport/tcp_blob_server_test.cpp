// BlobServer and fetch_blob together on loopback: whole and resumed transfers of in-memory and
// file blobs, errors the server reports, a server that stops mid-transfer, concurrency and the
// connection limit. Every case is bounded in time.
#include "transport/tcp_blob_server.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "tests/transport/transfer_test_util.hpp"
#include "transport/tcp_fetch.hpp"

namespace ember::transport {
namespace tcp_blob_server_test {

using namespace std::chrono_literals;
using testing::eventually;
using testing::Latch;
using testing::lookup_of;
using testing::VectorSink;
using Clock = std::chrono::steady_clock;

constexpr size_t kMiB = 1u << 20;

std::unique_ptr<BlobServer> start_server(BlobLookup lookup, BlobServerOptions options = {}) {
  auto server = BlobServer::start(std::move(options), std::move(lookup));
  EXPECT_TRUE(server.ok()) << server.error().to_string();
  return std::move(*server);
}

class TempFile {
 public:
  explicit TempFile(const std::vector<uint8_t>& bytes)
      : path_(std::filesystem::temp_directory_path() /
              ("ember_blob_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++))) {
    std::ofstream(path_, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                 static_cast<std::streamsize>(bytes.size()));
  }
  ~TempFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

TEST(BlobServer, Transfers64MiBInMemoryBlob) {
  auto bytes = testing::random_bytes(64 * kMiB, 11);
  const Digest want = Sha256::of(bytes.data(), bytes.size());
  auto server = start_server(lookup_of({{"m", MemoryBlob::of(bytes)}}));
  VectorSink sink;
  auto result = fetch_blob(server->endpoint(), "m", {}, sink);
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(sink.bytes, bytes);
  EXPECT_EQ(result->digest, want);
  EXPECT_EQ(result->blob_bytes, bytes.size());
  EXPECT_EQ(result->bytes_received, bytes.size());
  EXPECT_EQ(sink.allocations, 1);
  EXPECT_EQ(sink.chunks.size(), 64u);  // 1 MiB default chunks
  EXPECT_TRUE(eventually([&] { return server->transfers_served() == 1; }));
  EXPECT_EQ(server->bytes_sent(), bytes.size());
  EXPECT_EQ(server->transfers_failed(), 0u);
  EXPECT_TRUE(eventually([&] { return server->transfers_active() == 0; }));
}

TEST(BlobServer, TransfersAFileBlobWithAPartialLastChunk) {
  auto bytes = testing::random_bytes(37 * kMiB + 12345, 12);
  TempFile file(bytes);
  auto blob = FileBlob::open(file.path());
  ASSERT_TRUE(blob.ok()) << blob.error().to_string();
  BlobServerOptions options;
  options.chunk_bytes = 1u << 20;
  auto server = start_server(lookup_of({{"weights", *blob}}), options);
  VectorSink sink;
  auto result = fetch_blob(server->endpoint(), "weights", {}, sink);
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(sink.bytes, bytes);
  EXPECT_EQ(result->digest, Sha256::of(bytes.data(), bytes.size()));
  EXPECT_EQ(sink.chunks.size(), 38u);
  EXPECT_EQ(sink.chunks.back().second, 12345u);
}

TEST(BlobServer, ResumesFromAnOffsetAndStillVerifiesTheWholeBlob) {
  auto bytes = testing::random_bytes(20 * kMiB + 7, 13);
  auto server = start_server(lookup_of({{"m", MemoryBlob::of(bytes)}}));
  const uint64_t resume = 5 * kMiB + 123;  // not on a chunk boundary
  VectorSink sink;
  sink.bytes.assign(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(resume));  // what arrived before
  FetchOptions options;
  options.resume_offset = resume;
  options.expected_bytes = bytes.size();
  auto result = fetch_blob(server->endpoint(), "m", options, sink);
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(sink.bytes, bytes);
  EXPECT_EQ(result->bytes_received, bytes.size() - resume);
  EXPECT_EQ(result->digest, Sha256::of(bytes.data(), bytes.size()));
  ASSERT_FALSE(sink.chunks.empty());
  EXPECT_EQ(sink.chunks.front().first, resume);
}

TEST(BlobServer, ResumeOverAWrongPrefixFailsTheDigest) {
  auto bytes = testing::random_bytes(3 * kMiB, 14);
  auto server = start_server(lookup_of({{"m", MemoryBlob::of(bytes)}}));
  VectorSink sink;
  sink.bytes.assign(kMiB, 0);  // not the blob's first MiB
  FetchOptions options;
  options.resume_offset = kMiB;
  auto result = fetch_blob(server->endpoint(), "m", options, sink);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::corrupt);
  EXPECT_NE(result.error().message().find("SHA-256 mismatch"), std::string::npos);
}

TEST(BlobServer, ResumeAtTheEndSendsOnlyTheEndFrame) {
  auto bytes = testing::random_bytes(kMiB, 15);
  auto server = start_server(lookup_of({{"m", MemoryBlob::of(bytes)}}));
  VectorSink sink;
  sink.bytes = bytes;
  FetchOptions options;
  options.resume_offset = bytes.size();
  auto result = fetch_blob(server->endpoint(), "m", options, sink);
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(result->bytes_received, 0u);
  EXPECT_TRUE(sink.chunks.empty());
}

TEST(BlobServer, ResumeBeyondTheBlobIsInvalid) {
  auto server = start_server(lookup_of({{"m", MemoryBlob::of(testing::random_bytes(100, 16))}}));
  VectorSink sink;
  FetchOptions options;
  options.resume_offset = 101;
  auto result = fetch_blob(server->endpoint(), "m", options, sink);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(result.error().message().find("beyond"), std::string::npos) << result.error().message();
}

TEST(BlobServer, EmptyBlob) {
  auto server = start_server(lookup_of({{"empty", MemoryBlob::of({})}}));
  VectorSink sink;
  auto result = fetch_blob(server->endpoint(), "empty", {}, sink);
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(result->blob_bytes, 0u);
  EXPECT_EQ(to_hex(result->digest), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(BlobServer, UnknownKeyIsNotFound) {
  auto server = start_server(lookup_of({}));
  VectorSink sink;
  auto result = fetch_blob(server->endpoint(), "resnet50/3", {}, sink);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::not_found);
  EXPECT_NE(result.error().message().find("no blob 'resnet50/3'"), std::string::npos) << result.error().message();
  EXPECT_NE(result.error().message().find(server->endpoint().to_string()), std::string::npos);
  EXPECT_EQ(sink.allocations, 0);
  EXPECT_TRUE(eventually([&] { return server->transfers_failed() == 1; }));
}

TEST(BlobServer, LookupErrorsPassThrough) {
  auto server = start_server([](const std::string&) -> Result<std::shared_ptr<const Blob>> {
    return io_error("repository disk is gone");
  });
  VectorSink sink;
  auto result = fetch_blob(server->endpoint(), "m", {}, sink);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::io_error);
  EXPECT_NE(result.error().message().find("repository disk is gone"), std::string::npos);
}

TEST(BlobServer, ExpectedSizeMismatchIsCorrupt) {
  auto server = start_server(lookup_of({{"m", MemoryBlob::of(testing::random_bytes(1000, 17))}}));
  VectorSink sink;
  FetchOptions options;
  options.expected_bytes = 999;
  auto result = fetch_blob(server->endpoint(), "m", options, sink);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::corrupt);
  EXPECT_NE(result.error().message().find("expected 999"), std::string::npos);
  EXPECT_EQ(sink.allocations, 0);
}

TEST(BlobServer, ABlobThatReadsWrongBytesFailsTheDigest) {
  auto bytes = testing::random_bytes(9 * kMiB, 18);
  auto blob = std::make_shared<const testing::ReadBlob>(bytes, 6 * kMiB + 5);
  auto server = start_server(lookup_of({{"m", blob}}));
  VectorSink sink;
  auto result = fetch_blob(server->endpoint(), "m", {}, sink);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::corrupt);
  EXPECT_NE(result.error().message().find("SHA-256 mismatch"), std::string::npos) << result.error().message();
}

TEST(BlobServer, AFileThatShrinksMidTransferAbortsWithCorrupt) {
  auto bytes = testing::random_bytes(64 * kMiB, 19);
  TempFile file(bytes);
  auto blob = FileBlob::open(file.path());
  ASSERT_TRUE(blob.ok());
  BlobServerOptions options;
  options.chunk_bytes = 1u << 20;
  auto server = start_server(lookup_of({{"f", *blob}}), options);
  VectorSink sink;
  sink.hook = [&](uint64_t offset, uint64_t) {
    if (offset == 0) std::filesystem::resize_file(file.path(), 10 * kMiB);
  };
  auto result = fetch_blob(server->endpoint(), "f", {}, sink);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::corrupt) << result.error().to_string();
  EXPECT_NE(result.error().message().find("changed size"), std::string::npos) << result.error().message();
  // Sticky: the blob keeps saying so.
  uint8_t b;
  EXPECT_EQ((*blob)->read(0, &b, 1).error().code(), ErrorCode::corrupt);
}

TEST(BlobServer, StopMidTransferFailsTheFetchFast) {
  auto bytes = testing::random_bytes(64 * kMiB, 20);
  auto server = start_server(lookup_of({{"m", MemoryBlob::of(bytes)}}));
  VectorSink sink;
  FetchOptions options;
  options.idle_timeout = 20s;  // the failure must come from the closed connection, not a timeout
  Latch stopped;
  std::thread stopper;
  sink.hook = [&](uint64_t offset, uint64_t) {
    if (offset != 0) return;
    // The receiver holds still with the server mid-stream, blocked on full socket buffers.
    stopper = std::thread([&] {
      const auto t0 = Clock::now();
      server->stop();
      EXPECT_LT(Clock::now() - t0, 1s) << "stop() must be prompt";
      stopped.open();
    });
    EXPECT_TRUE(stopped.wait());
  };
  const auto t0 = Clock::now();
  auto result = fetch_blob(server->endpoint(), "m", options, sink);
  stopper.join();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::io_error);
  EXPECT_NE(result.error().message().find("truncated stream"), std::string::npos) << result.error().message();
  EXPECT_LT(Clock::now() - t0, 3s);
  EXPECT_EQ(server->transfers_failed(), 1u);
  EXPECT_EQ(server->transfers_active(), 0u);
}

TEST(BlobServer, StopIsPromptWithIdleAndHalfOpenConnections) {
  auto server = start_server(lookup_of({}));
  // One connection that never sends its request.
  auto silent = connect_tcp(server->endpoint(), 1s, 0);
  ASSERT_TRUE(silent.ok());
  ASSERT_TRUE(eventually([&] { return server->transfers_active() == 1; }));
  const auto t0 = Clock::now();
  server->stop();
  EXPECT_LT(Clock::now() - t0, 1s);
  server->stop();  // idempotent
  // The port is closed now.
  VectorSink sink;
  FetchOptions options;
  options.connect_timeout = 500ms;
  EXPECT_FALSE(fetch_blob(server->endpoint(), "m", options, sink).ok());
}

TEST(BlobServer, ARequestTrickledByteByByteIsCutOffAtTheRequestTimeout) {
  BlobServerOptions options;
  options.request_timeout = 300ms;
  auto server = start_server(lookup_of({}), options);
  auto s = connect_tcp(server->endpoint(), 1s, 0);
  ASSERT_TRUE(s.ok());
  auto request = encode_fetch_request({1, "k", 0});
  ASSERT_TRUE(request.ok());
  const auto t0 = Clock::now();
  bool closed = false;
  for (size_t i = 0; i < request->size() && Clock::now() - t0 < 3s; ++i) {
    if (::send(s->fd(), request->data() + i, 1, MSG_NOSIGNAL) != 1) break;
    pollfd p{s->fd(), POLLIN, 0};
    if (::poll(&p, 1, 100) == 1) {  // the server hung up on us
      char c;
      closed = ::recv(s->fd(), &c, 1, 0) <= 0;
      break;
    }
  }
  EXPECT_TRUE(closed);
  EXPECT_LT(Clock::now() - t0, 1s);
  EXPECT_TRUE(eventually([&] { return server->transfers_failed() == 1 && server->transfers_active() == 0; }));
}

TEST(BlobServer, AReceiverThatGoesAwayEndsOnlyItsTransfer) {
  auto bytes = testing::random_bytes(32 * kMiB, 21);
  auto server = start_server(lookup_of({{"m", MemoryBlob::of(bytes)}}));
  VectorSink refusing;
  refusing.refuse = true;
  auto result = fetch_blob(server->endpoint(), "m", {}, refusing);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::out_of_memory);
  EXPECT_TRUE(eventually([&] { return server->transfers_failed() == 1 && server->transfers_active() == 0; }));

  VectorSink sink;
  result = fetch_blob(server->endpoint(), "m", {}, sink);
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(sink.bytes, bytes);
}

TEST(BlobServer, ConcurrentFetchesFromOneServer) {
  auto a = testing::random_bytes(24 * kMiB, 22);
  auto b = testing::random_bytes(16 * kMiB + 1, 23);
  auto server = start_server(lookup_of({{"a", MemoryBlob::of(a)}, {"b", MemoryBlob::of(b)}}));
  constexpr int kFetches = 6;
  std::vector<VectorSink> sinks(kFetches);
  std::vector<std::optional<Result<FetchResult>>> results(kFetches);
  std::vector<std::thread> threads;
  for (int i = 0; i < kFetches; ++i) {
    threads.emplace_back([&, i] {
      FetchOptions options;
      options.transfer_id = static_cast<uint64_t>(i + 1);
      results[static_cast<size_t>(i)] = fetch_blob(server->endpoint(), i % 2 ? "b" : "a", options, sinks[static_cast<size_t>(i)]);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kFetches; ++i) {
    auto& r = *results[static_cast<size_t>(i)];
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_EQ(sinks[static_cast<size_t>(i)].bytes, i % 2 ? b : a);
  }
  EXPECT_TRUE(eventually([&] { return server->transfers_served() == kFetches; }));
  EXPECT_EQ(server->bytes_sent(), 3 * a.size() + 3 * b.size());
}

TEST(BlobServer, ConnectionsBeyondTheLimitAreToldTheServerIsBusy) {
  auto bytes = testing::random_bytes(32 * kMiB, 24);
  BlobServerOptions options;
  options.max_transfers = 1;
  auto server = start_server(lookup_of({{"m", MemoryBlob::of(bytes)}}), options);

  // The first fetch holds the only slot: its receiver waits inside on_chunk.
  VectorSink first;
  Latch holding, release;
  first.hook = [&](uint64_t offset, uint64_t) {
    if (offset == 0) {
      holding.open();
      EXPECT_TRUE(release.wait());
    }
  };
  std::optional<Result<FetchResult>> first_result;
  std::thread t([&] { first_result = fetch_blob(server->endpoint(), "m", {}, first); });
  ASSERT_TRUE(holding.wait());

  VectorSink second;
  auto busy = fetch_blob(server->endpoint(), "m", {}, second);
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.error().code(), ErrorCode::io_error);
  EXPECT_NE(busy.error().message().find("busy"), std::string::npos) << busy.error().message();
  EXPECT_EQ(server->connections_rejected(), 1u);

  release.open();
  t.join();
  ASSERT_TRUE(first_result->ok()) << first_result->error().to_string();
  EXPECT_EQ(first.bytes, bytes);

  // The slot is free again.
  ASSERT_TRUE(eventually([&] { return server->transfers_active() == 0; }));
  VectorSink third;
  auto again = fetch_blob(server->endpoint(), "m", {}, third);
  ASSERT_TRUE(again.ok()) << again.error().to_string();
}

TEST(BlobServer, BadOptionsAreRejected) {
  BlobServerOptions options;
  options.chunk_bytes = 100;
  EXPECT_EQ(BlobServer::start(options, lookup_of({})).error().code(), ErrorCode::invalid_argument);
  options = {};
  options.max_transfers = 0;
  EXPECT_EQ(BlobServer::start(options, lookup_of({})).error().code(), ErrorCode::invalid_argument);
  options = {};
  EXPECT_EQ(BlobServer::start(options, nullptr).error().code(), ErrorCode::invalid_argument);
}

}  // namespace tcp_blob_server_test
}  // namespace ember::transport
