// Both data-plane transports through data_plane.hpp, case for case: every scenario runs once over
// TCP and once over UCX (TEST_P), on loopback, server and receivers in this process. Every case
// bounds its own waits; the whole file runs in a few seconds per transport.
#include "transport/data_plane.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <thread>

#include "tests/transport/transfer_test_util.hpp"
#include "transport/growing_blob.hpp"

namespace ember::transport {
namespace data_plane_test {

using namespace std::chrono_literals;
using testing::eventually;
using testing::Latch;
using testing::lookup_of;
using testing::VectorSink;
using Clock = std::chrono::steady_clock;

constexpr size_t kMiB = 1u << 20;

/// CPU seconds (user + system) of this process.
double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/// A GrowingBlob over its own buffer, and the source bytes its writer copies in.
struct Growing {
  explicit Growing(size_t bytes, uint64_t seed) : source(testing::random_bytes(bytes, seed)) {
    auto buffer = std::make_shared<std::vector<uint8_t>>(bytes);
    blob = std::make_shared<GrowingBlob>(buffer, buffer->data(), bytes);
    data = buffer->data();
  }
  /// Copies and publishes [from, to).
  void write(uint64_t from, uint64_t to) {
    std::memcpy(data + from, source.data() + from, to - from);
    blob->advance(to);
  }
  std::vector<uint8_t> source;
  std::shared_ptr<GrowingBlob> blob;
  uint8_t* data = nullptr;
};

class DataPlane : public ::testing::TestWithParam<TransportKind> {
 public:
  std::unique_ptr<DataServer> start_for(BlobLookup lookup, BlobServerOptions options) {
    return start(std::move(lookup), std::move(options));
  }
  Result<FetchResult> fetch_from(const DataServer& server, const std::string& key, BlobSink& sink) {
    return fetch(server, key, sink);
  }

 protected:
  TransportKind kind() const { return GetParam(); }

  std::unique_ptr<DataServer> start(BlobLookup lookup, BlobServerOptions options = {}) {
    auto server = start_data_server(kind(), std::move(options), std::move(lookup));
    EXPECT_TRUE(server.ok()) << server.error().to_string();
    return server.ok() ? std::move(*server) : nullptr;
  }
  Result<FetchResult> fetch(const DataServer& server, const std::string& key, BlobSink& sink,
                            const FetchOptions& options = {}) {
    return fetch_blob(kind(), server.endpoint(), key, options, sink);
  }
};

TEST_P(DataPlane, TransfersAMultiMiBBlob) {
  auto bytes = testing::random_bytes(24 * kMiB + 5, 31);
  BlobServerOptions options;
  options.chunk_bytes = 1u << 20;
  auto server = start(lookup_of({{"m", MemoryBlob::of(bytes)}}), options);
  ASSERT_TRUE(server);
  VectorSink sink;
  auto result = fetch(*server, "m", sink);
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(sink.bytes, bytes);
  EXPECT_EQ(result->digest, Sha256::of(bytes.data(), bytes.size()));
  EXPECT_EQ(result->blob_bytes, bytes.size());
  EXPECT_EQ(result->bytes_received, bytes.size());
  EXPECT_EQ(sink.allocations, 1);
  EXPECT_EQ(sink.chunks.size(), 25u);
  EXPECT_EQ(sink.chunks.back().second, 5u);
  EXPECT_TRUE(eventually([&] { return server->transfers_served() == 1 && server->transfers_active() == 0; }));
  EXPECT_EQ(server->bytes_sent(), bytes.size());
  EXPECT_EQ(server->transfers_failed(), 0u);
}

TEST_P(DataPlane, ReadBlobAndEmptyBlob) {
  // A blob without memory (sent through staging chunks) and an empty one.
  auto bytes = testing::random_bytes(5 * kMiB + 3, 32);
  auto file_like = std::make_shared<const testing::ReadBlob>(bytes);
  auto server = start(lookup_of({{"r", file_like}, {"empty", MemoryBlob::of({})}}));
  ASSERT_TRUE(server);
  VectorSink sink;
  auto result = fetch(*server, "r", sink);
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(sink.bytes, bytes);
  VectorSink empty;
  result = fetch(*server, "empty", empty);
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(result->blob_bytes, 0u);
  EXPECT_EQ(to_hex(result->digest), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST_P(DataPlane, ConcurrentReceiversOfOneServer) {
  auto a = testing::random_bytes(12 * kMiB, 33);
  auto b = testing::random_bytes(8 * kMiB + 1, 34);
  auto server = start(lookup_of({{"a", MemoryBlob::of(a)}, {"b", MemoryBlob::of(b)}}));
  ASSERT_TRUE(server);
  constexpr int kFetches = 4;
  std::vector<VectorSink> sinks(kFetches);
  std::vector<std::optional<Result<FetchResult>>> results(kFetches);
  std::vector<std::thread> threads;
  for (int i = 0; i < kFetches; ++i) {
    threads.emplace_back([&, i] {
      FetchOptions options;
      options.transfer_id = static_cast<uint64_t>(i + 1);
      const auto u = static_cast<size_t>(i);
      results[u] = fetch(*server, i % 2 ? "b" : "a", sinks[u], options);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kFetches; ++i) {
    auto& r = *results[static_cast<size_t>(i)];
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_EQ(sinks[static_cast<size_t>(i)].bytes, i % 2 ? b : a);
  }
  EXPECT_TRUE(eventually([&] { return server->transfers_served() == kFetches; }));
  EXPECT_EQ(server->bytes_sent(), 2 * a.size() + 2 * b.size());
}

TEST_P(DataPlane, ResumesFromAnOffsetAndVerifiesTheWholeBlob) {
  auto bytes = testing::random_bytes(10 * kMiB + 7, 35);
  auto server = start(lookup_of({{"m", MemoryBlob::of(bytes)}}));
  ASSERT_TRUE(server);
  const uint64_t resume = 3 * kMiB + 123;  // not on a chunk boundary
  VectorSink sink;
  sink.bytes.assign(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(resume));
  FetchOptions options;
  options.resume_offset = resume;
  options.expected_bytes = bytes.size();
  auto result = fetch(*server, "m", sink, options);
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(sink.bytes, bytes);
  EXPECT_EQ(result->bytes_received, bytes.size() - resume);
  ASSERT_FALSE(sink.chunks.empty());
  EXPECT_EQ(sink.chunks.front().first, resume);

  // A wrong prefix fails the whole-blob digest; a resume beyond the end is invalid.
  VectorSink wrong;
  wrong.bytes.assign(resume, 0);
  result = fetch(*server, "m", wrong, options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::corrupt);
  EXPECT_NE(result.error().message().find("SHA-256 mismatch"), std::string::npos) << result.error().message();
  VectorSink beyond;
  options.resume_offset = bytes.size() + 1;
  result = fetch(*server, "m", beyond, options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::invalid_argument) << result.error().to_string();
}

/// The bytes [from, to) of `bytes`.
std::vector<uint8_t> slice(const std::vector<uint8_t>& bytes, uint64_t from, uint64_t to) {
  return {bytes.begin() + static_cast<ptrdiff_t>(from), bytes.begin() + static_cast<ptrdiff_t>(to)};
}

TEST_P(DataPlane, FetchesALayerRangeFromMemoryAndFromAFile) {
  // One stage's bytes: a range that starts and ends off chunk boundaries, from a blob in memory and
  // from one that must be read (staging chunks).
  auto bytes = testing::random_bytes(12 * kMiB + 9, 41);
  BlobServerOptions server_options;
  server_options.chunk_bytes = 1u << 20;
  auto server =
      start(lookup_of({{"m", MemoryBlob::of(bytes)}, {"f", std::make_shared<const testing::ReadBlob>(bytes)}}),
            server_options);
  ASSERT_TRUE(server);
  const uint64_t first = 3 * kMiB + 11;
  const uint64_t length = 5 * kMiB + 3;
  for (const char* key : {"m", "f"}) {
    SCOPED_TRACE(key);
    VectorSink sink;
    FetchOptions options;
    options.range_offset = first;
    options.range_length = length;
    options.expected_bytes = bytes.size();
    auto result = fetch(*server, key, sink, options);
    ASSERT_TRUE(result.ok()) << result.error().to_string();
    EXPECT_EQ(sink.bytes.size(), bytes.size());  // the whole blob's buffer, the range at its offsets
    EXPECT_EQ(slice(sink.bytes, first, first + length), slice(bytes, first, first + length));
    EXPECT_EQ(result->blob_bytes, bytes.size());
    EXPECT_EQ(result->bytes_received, length);
    EXPECT_EQ(result->digest, Sha256::of(bytes.data() + first, length));
    ASSERT_FALSE(sink.chunks.empty());
    EXPECT_EQ(sink.chunks.front().first, first);
    EXPECT_EQ(sink.chunks.back().first + sink.chunks.back().second, first + length);
  }
  EXPECT_TRUE(eventually([&] { return server->transfers_served() == 2 && server->transfers_active() == 0; }));
  EXPECT_EQ(server->bytes_sent(), 2 * length);
}

TEST_P(DataPlane, ResumesInsideARange) {
  auto bytes = testing::random_bytes(9 * kMiB, 42);
  auto server = start(lookup_of({{"m", MemoryBlob::of(bytes)}}));
  ASSERT_TRUE(server);
  const uint64_t first = 2 * kMiB + 5;
  const uint64_t end = 7 * kMiB + 1;
  const uint64_t resume = 4 * kMiB + 77;  // the bytes before it arrived on a broken earlier call
  VectorSink sink;
  sink.bytes.assign(bytes.size(), 0);
  std::copy(bytes.begin() + static_cast<ptrdiff_t>(first), bytes.begin() + static_cast<ptrdiff_t>(resume),
            sink.bytes.begin() + static_cast<ptrdiff_t>(first));
  FetchOptions options;
  options.range_offset = first;
  options.range_length = end - first;
  options.resume_offset = resume;
  auto result = fetch(*server, "m", sink, options);
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(slice(sink.bytes, first, end), slice(bytes, first, end));
  EXPECT_EQ(result->bytes_received, end - resume);
  EXPECT_EQ(result->digest, Sha256::of(bytes.data() + resume, end - resume));
  ASSERT_FALSE(sink.chunks.empty());
  EXPECT_EQ(sink.chunks.front().first, resume);

  // A resume at the range's end leaves nothing to fetch: refused before connecting.
  options.resume_offset = end;
  VectorSink nothing;
  result = fetch(*server, "m", nothing, options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::invalid_argument) << result.error().to_string();
}

TEST_P(DataPlane, ACorruptChunkInsideARangeIsCaughtAndTheRangeResumesPastTheGoodPrefix) {
  auto bytes = testing::random_bytes(10 * kMiB, 43);
  BlobServerOptions server_options;
  server_options.chunk_bytes = 1u << 20;
  server_options.corrupt_frame = 3;  // the range's third data frame
  auto server = start(lookup_of({{"m", MemoryBlob::of(bytes)}}), server_options);
  ASSERT_TRUE(server);
  const uint64_t first = kMiB + 100;
  const uint64_t length = 6 * kMiB;
  VectorSink sink;
  FetchOptions options;
  options.range_offset = first;
  options.range_length = length;
  auto result = fetch(*server, "m", sink, options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::corrupt);
  EXPECT_NE(result.error().message().find("CRC-32C"), std::string::npos) << result.error().message();
  EXPECT_NE(result.error().message().find("offset " + std::to_string(first + 2 * kMiB)), std::string::npos)
      << result.error().message();
  ASSERT_EQ(sink.chunks.size(), 2u);  // the bad chunk was never reported
  // The retry resumes at the end of what was verified and completes the range.
  options.resume_offset = sink.chunks.back().first + sink.chunks.back().second;
  result = fetch(*server, "m", sink, options);
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(slice(sink.bytes, first, first + length), slice(bytes, first, first + length));
}

TEST_P(DataPlane, ARangeBeyondTheBlobIsRefused) {
  // (A source that reads wrong bytes is not caught here: the server hashes a range as it reads it.
  // The receiver's caller checks a range against the model's per-layer digests: model_cache_test.)
  auto bytes = testing::random_bytes(4 * kMiB, 44);
  auto server = start(lookup_of({{"f", std::make_shared<const testing::ReadBlob>(bytes)}}));
  ASSERT_TRUE(server);
  FetchOptions options;
  VectorSink beyond;
  options.range_offset = 3 * kMiB;
  options.range_length = 2 * kMiB;
  auto result = fetch(*server, "f", beyond, options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::invalid_argument) << result.error().to_string();
  EXPECT_NE(result.error().message().find("runs past"), std::string::npos) << result.error().message();
}

TEST_P(DataPlane, UnknownKeyIsNotFound) {
  auto server = start(lookup_of({}));
  ASSERT_TRUE(server);
  VectorSink sink;
  auto result = fetch(*server, "resnet50/3", sink);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::not_found);
  EXPECT_NE(result.error().message().find("no blob 'resnet50/3'"), std::string::npos) << result.error().message();
  EXPECT_NE(result.error().message().find(server->endpoint().to_string()), std::string::npos);
  EXPECT_EQ(sink.allocations, 0);
  EXPECT_TRUE(eventually([&] { return server->transfers_failed() == 1 && server->transfers_active() == 0; }));
}

TEST_P(DataPlane, WithTicketsOnlyAValidTicketForThatBlobIsServedAndNoByteGoesToAnyOther) {
  auto bytes = testing::random_bytes(3 * kMiB + 7, 41);
  auto keys = TicketKeys::from_secret(std::string(64, 'k'));
  ASSERT_TRUE(keys.ok());
  auto other_cluster = TicketKeys::from_secret(std::string(64, 'x'));
  BlobServerOptions options;
  options.tickets = *keys;
  auto server = start(lookup_of({{"mlp/1", MemoryBlob::of(bytes)}, {"bert/1", MemoryBlob::of(bytes)}}), options);
  ASSERT_TRUE(server);
  auto refused = [&](const char* what, const Ticket& ticket, const char* says) {
    VectorSink sink;
    FetchOptions o;
    o.ticket = ticket;
    auto r = fetch(*server, "mlp/1", sink, o);
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_EQ(r.error().code(), ErrorCode::permission_denied) << what << ": " << r.error().to_string();
    EXPECT_NE(r.error().message().find(says), std::string::npos) << what << ": " << r.error().message();
    EXPECT_EQ(sink.allocations, 0) << what;  // refused before the first frame
  };
  refused("no ticket", Ticket{}, "without a ticket");
  Ticket forged = (*keys)->issue("mlp/1", "n1");
  forged.mac[0] ^= 1;
  refused("a forged mac", forged, "not valid here");
  Ticket renamed = (*keys)->issue("mlp/1", "n1");
  renamed.receiver = "n2";  // the mac binds the receiver
  refused("another receiver's name", renamed, "not valid here");
  Ticket longer = (*keys)->issue("mlp/1", "n1");
  longer.not_after += 3600;  // and the expiry
  refused("a stretched window", longer, "not valid here");
  refused("a ticket for another blob", (*keys)->issue("bert/1", "n1"), "not valid here");
  refused("another cluster's ticket", (*other_cluster)->issue("mlp/1", "n1"), "not valid here");
  refused("an expired ticket", (*keys)->issue("mlp/1", "n1", -kTicketSkew - std::chrono::seconds(5)), "expired");
  EXPECT_EQ(server->bytes_sent(), 0u);

  VectorSink sink;
  FetchOptions o;
  o.ticket = (*keys)->issue("mlp/1", "n1");
  auto served = fetch(*server, "mlp/1", sink, o);
  ASSERT_TRUE(served.ok()) << served.error().to_string();
  EXPECT_EQ(sink.bytes, bytes);
}

TEST_P(DataPlane, ACorruptedChunkIsCaughtBeforeTheSinkHearsOfIt) {
  auto bytes = testing::random_bytes(6 * kMiB, 36);
  BlobServerOptions options;
  options.chunk_bytes = 1u << 20;
  options.corrupt_frame = 3;  // a bit flips in the third data frame, after its CRC was computed
  auto server = start(lookup_of({{"m", MemoryBlob::of(bytes)}}), options);
  ASSERT_TRUE(server);
  VectorSink sink;
  auto result = fetch(*server, "m", sink);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::corrupt);
  EXPECT_NE(result.error().message().find("CRC-32C"), std::string::npos) << result.error().message();
  EXPECT_NE(result.error().message().find("offset " + std::to_string(2 * kMiB)), std::string::npos)
      << result.error().message();
  EXPECT_EQ(sink.chunks.size(), 2u);  // the bad chunk was never reported
}

TEST_P(DataPlane, ABlobThatReadsWrongBytesFailsTheDigest) {
  auto bytes = testing::random_bytes(5 * kMiB, 37);
  auto server = start(lookup_of({{"m", std::make_shared<const testing::ReadBlob>(bytes, 3 * kMiB + 5)}}));
  ASSERT_TRUE(server);
  VectorSink sink;
  auto result = fetch(*server, "m", sink);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::corrupt);
  EXPECT_NE(result.error().message().find("SHA-256 mismatch"), std::string::npos) << result.error().message();
}

TEST_P(DataPlane, ASilentServerFailsTheFetchWithinTheIdleTimeoutWithoutSpinning) {
  // An upstream that stalls after one chunk: the server has nothing to send and says nothing.
  Growing g(4 * kMiB, 38);
  g.write(0, kMiB);
  BlobServerOptions server_options;
  server_options.chunk_bytes = 1u << 20;
  server_options.upstream_wait = 10s;
  auto server = start(lookup_of({{"g", g.blob}}), server_options);
  ASSERT_TRUE(server);
  VectorSink sink;
  FetchOptions options;
  options.idle_timeout = 400ms;
  const auto t0 = Clock::now();
  const double cpu0 = cpu_seconds();
  auto result = fetch(*server, "g", sink, options);
  const double cpu = cpu_seconds() - cpu0;
  const auto elapsed = Clock::now() - t0;
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::io_error);
  EXPECT_NE(result.error().message().find("idle timeout"), std::string::npos) << result.error().message();
  EXPECT_GE(elapsed, 390ms);
  EXPECT_LT(elapsed, 2s);
  EXPECT_EQ(sink.chunks.size(), 1u);
  // Both sides slept through the silence (a busy-polling pair would burn two cores' worth).
  EXPECT_LT(cpu, 0.5 * std::chrono::duration<double>(elapsed).count()) << "CPU seconds " << cpu;
  // The server is still waiting for its upstream; stop() cuts that short.
  const auto s0 = Clock::now();
  server->stop();
  EXPECT_LT(Clock::now() - s0, 1s);
}

TEST_P(DataPlane, ASilentServerBeforeTheFirstFrameHitsTheIdleTimeout) {
  Latch release;
  auto server = start([&](const std::string&) -> Result<std::shared_ptr<const Blob>> {
    release.wait(5s);  // a lookup that hangs
    return not_found("late");
  });
  ASSERT_TRUE(server);
  VectorSink sink;
  FetchOptions options;
  options.idle_timeout = 300ms;
  const auto t0 = Clock::now();
  auto result = fetch(*server, "k", sink, options);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message().find("idle timeout"), std::string::npos) << result.error().message();
  EXPECT_LT(Clock::now() - t0, 2s);
  EXPECT_EQ(sink.allocations, 0);
  release.open();
}

TEST_P(DataPlane, CancelFromAnotherThreadReturnsPromptly) {
  Growing g(4 * kMiB, 39);
  g.write(0, 2 * kMiB);  // then the upstream stalls
  BlobServerOptions server_options;
  server_options.chunk_bytes = 1u << 20;
  auto server = start(lookup_of({{"g", g.blob}}), server_options);
  ASSERT_TRUE(server);
  VectorSink sink;
  FetchOptions options;
  options.idle_timeout = 10s;
  options.cancel = std::make_shared<FetchCancel>();
  std::thread canceller;
  Clock::time_point cancelled_at{};
  sink.hook = [&](uint64_t offset, uint64_t) {
    if (offset != kMiB) return;
    canceller = std::thread([&] {
      std::this_thread::sleep_for(100ms);  // the fetch is asleep waiting for the third chunk
      cancelled_at = Clock::now();
      options.cancel->cancel();
    });
  };
  auto result = fetch(*server, "g", sink, options);
  const auto returned_at = Clock::now();
  canceller.join();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::unavailable);
  EXPECT_NE(result.error().message().find("cancelled at offset " + std::to_string(2 * kMiB)), std::string::npos)
      << result.error().message();
  EXPECT_LT(returned_at - cancelled_at, 300ms);
  EXPECT_EQ(sink.chunks.size(), 2u);

  // Sticky: a fetch attached to a cancelled FetchCancel returns at once.
  VectorSink again;
  const auto t0 = Clock::now();
  result = fetch(*server, "g", again, options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::unavailable);
  EXPECT_LT(Clock::now() - t0, 300ms);
}

TEST_P(DataPlane, AGrowingBlobIsForwardedAsItsBytesArrive) {
  Growing g(12 * kMiB + 11, 40);
  BlobServerOptions server_options;
  server_options.chunk_bytes = 1u << 20;
  auto server = start(lookup_of({{"g", g.blob}}), server_options);
  ASSERT_TRUE(server);
  std::thread writer([&] {
    for (uint64_t at = 0; at < g.source.size();) {
      const uint64_t to = std::min<uint64_t>(at + 512 * 1024, g.source.size());
      g.write(at, to);
      at = to;
      std::this_thread::sleep_for(3ms);
    }
    g.blob->complete(Sha256::of(g.source.data(), g.source.size()));
  });
  VectorSink sink;
  FetchOptions options;
  options.idle_timeout = 5s;
  auto result = fetch(*server, "g", sink, options);
  writer.join();
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(sink.bytes, g.source);
  EXPECT_EQ(result->digest, Sha256::of(g.source.data(), g.source.size()));
  EXPECT_EQ(sink.chunks.size(), 13u);
}

/// A multicast hop whose upstream fetch failed gives its growing blob up with that fetch's error;
/// the next hop's receiver must get it in an abort frame at once.
void expect_writer_failure_passed_on(DataPlane& test, const Error& writer_error) {
  Growing g(8 * kMiB, 41);
  BlobServerOptions server_options;
  server_options.chunk_bytes = 1u << 20;
  server_options.upstream_wait = 20s;  // the abort must come from the failure, not this
  auto server = test.start_for(lookup_of({{"g", g.blob}}), server_options);
  ASSERT_TRUE(server);
  g.write(0, 2 * kMiB);
  // The writer fails once the receiver holds the two chunks written (not after a sleep: under load
  // the server had sent only one when a 150 ms sleep ran out, and then rightly sent the abort).
  VectorSink sink;
  Latch received;
  sink.hook = [&](uint64_t offset, uint64_t length) {
    if (offset + length == 2 * kMiB) received.open();
  };
  std::thread writer([&] {
    EXPECT_TRUE(received.wait()) << "the two chunks written never arrived";
    g.blob->fail(writer_error);
  });
  const auto t0 = Clock::now();
  auto result = test.fetch_from(*server, "g", sink);
  writer.join();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), writer_error.code()) << result.error().to_string();
  EXPECT_NE(result.error().message().find(writer_error.message()), std::string::npos) << result.error().message();
  EXPECT_NE(result.error().message().find("aborted"), std::string::npos) << result.error().message();
  EXPECT_EQ(sink.chunks.size(), 2u);
  EXPECT_LT(Clock::now() - t0, 2s);
}

TEST_P(DataPlane, AGrowingBlobWhoseWriterFailsAbortsWithTheWritersError) {
  expect_writer_failure_passed_on(*this, io_error("upstream hop 10.0.0.7 reset the connection"));
}

TEST_P(DataPlane, AGrowingBlobWhoseWriterGivesUpAsUnavailableAbortsAtOnce) {
  // transfer_peer fails a hop's blob with `unavailable` when its upstream is lost for good; an
  // expired wait slice is deadline_exceeded, so the two are never confused.
  expect_writer_failure_passed_on(*this, unavailable("transfer 7 gave up after 3 upstreams"));
}

TEST_P(DataPlane, ConnectionsBeyondTheLimitAreToldTheServerIsBusy) {
  // Big enough that a TCP server cannot finish into the socket buffers while its receiver holds.
  auto bytes = testing::random_bytes(32 * kMiB, 42);
  BlobServerOptions options;
  options.max_transfers = 1;
  options.chunk_bytes = 1u << 20;
  auto server = start(lookup_of({{"m", MemoryBlob::of(bytes)}}), options);
  ASSERT_TRUE(server);
  VectorSink first;
  Latch holding, release;
  first.hook = [&](uint64_t offset, uint64_t) {
    if (offset == 0) {
      holding.open();
      EXPECT_TRUE(release.wait());
    }
  };
  std::optional<Result<FetchResult>> first_result;
  std::thread t([&] { first_result = fetch(*server, "m", first); });
  const bool held = holding.wait();
  std::optional<Result<FetchResult>> busy;
  if (held) {
    VectorSink second;
    busy = fetch(*server, "m", second);
  }
  release.open();
  t.join();
  ASSERT_TRUE(held);
  ASSERT_FALSE(busy->ok());
  EXPECT_EQ(busy->error().code(), ErrorCode::io_error);
  EXPECT_NE(busy->error().message().find("busy"), std::string::npos) << busy->error().message();
  ASSERT_TRUE(first_result->ok()) << first_result->error().to_string();
  EXPECT_EQ(first.bytes, bytes);
  ASSERT_TRUE(eventually([&] { return server->transfers_active() == 0; }));
  VectorSink third;
  auto again = fetch(*server, "m", third);
  ASSERT_TRUE(again.ok()) << again.error().to_string();
}

TEST_P(DataPlane, StopWhileTransfersRunIsPromptAndFailsThemFast) {
  auto bytes = testing::random_bytes(16 * kMiB, 43);
  BlobServerOptions server_options;
  server_options.chunk_bytes = 1u << 20;
  // Socket buffers far smaller than the blob: with the default 4 MiB (8 MiB each way once the kernel
  // doubles them) a held receiver's socket could take all 16 MiB, the server would finish that
  // transfer before stop() and it would not fail (seen once under load).
  server_options.socket_buffer_bytes = 256 << 10;
  auto server = start(lookup_of({{"m", MemoryBlob::of(bytes)}}), server_options);
  ASSERT_TRUE(server);
  constexpr int kFetches = 2;
  Latch stopped;
  std::atomic<int> holding{0};
  std::vector<VectorSink> sinks(kFetches);
  std::vector<std::optional<Result<FetchResult>>> results(kFetches);
  std::vector<std::thread> threads;
  FetchOptions options;
  options.idle_timeout = 20s;  // the failure must come from the stop, not a timeout
  options.socket_buffer_bytes = 256 << 10;
  for (int i = 0; i < kFetches; ++i) {
    const auto u = static_cast<size_t>(i);
    sinks[u].hook = [&](uint64_t offset, uint64_t) {
      if (offset != 0) return;
      ++holding;
      EXPECT_TRUE(stopped.wait());  // the receiver holds still with the server mid-stream
    };
    threads.emplace_back([&, u] { results[u] = fetch(*server, "m", sinks[u], options); });
  }
  if (!eventually([&] { return holding.load() == kFetches; }, 5s)) {
    stopped.open();
    for (auto& t : threads) t.join();
    FAIL() << "the receivers never got their first chunk";
  }
  const auto t0 = Clock::now();
  server->stop();
  EXPECT_LT(Clock::now() - t0, 1s) << "stop() must be prompt";
  EXPECT_EQ(server->transfers_active(), 0u);
  EXPECT_EQ(server->transfers_failed(), static_cast<uint64_t>(kFetches));
  stopped.open();
  const auto t1 = Clock::now();
  for (auto& t : threads) t.join();
  EXPECT_LT(Clock::now() - t1, 3s);
  for (auto& r : results) {
    ASSERT_FALSE(r->ok());
    EXPECT_EQ(r->error().code(), ErrorCode::io_error) << r->error().to_string();
  }
  server->stop();  // idempotent
  // Nothing listens any more.
  VectorSink late;
  FetchOptions quick;
  quick.connect_timeout = 500ms;
  EXPECT_FALSE(fetch(*server, "m", late, quick).ok());
}

TEST_P(DataPlane, AReceiverThatStopsTakingDataIsCutOffAfterTheSendTimeout) {
  auto bytes = testing::random_bytes(48 * kMiB, 45);
  BlobServerOptions server_options;
  server_options.chunk_bytes = 1u << 20;
  server_options.send_timeout = 300ms;
  auto server = start(lookup_of({{"m", MemoryBlob::of(bytes)}}), server_options);
  ASSERT_TRUE(server);
  VectorSink sink;
  sink.hook = [&](uint64_t offset, uint64_t) {
    if (offset == 0) std::this_thread::sleep_for(1200ms);  // a receiver stuck far longer than that
  };
  FetchOptions options;
  options.idle_timeout = 10s;
  const auto t0 = Clock::now();
  auto result = fetch(*server, "m", sink, options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::io_error) << result.error().to_string();
  EXPECT_LT(Clock::now() - t0, 3s);
  EXPECT_TRUE(eventually([&] { return server->transfers_failed() == 1 && server->transfers_active() == 0; }));
}

TEST_P(DataPlane, AnIdleServerSleeps) {
  auto server = start(lookup_of({}));
  ASSERT_TRUE(server);
  std::this_thread::sleep_for(50ms);
  const double cpu0 = cpu_seconds();
  std::this_thread::sleep_for(500ms);
  EXPECT_LT(cpu_seconds() - cpu0, 0.05) << "an idle server must not poll";
}

size_t entries(const char* dir) {
  size_t n = 0;
  for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

/// Waits until the counts of descriptors and threads have held still for `quiet` (a joined thread
/// may stay listed for a moment on a loaded host: the kernel reaps its task entry after the join
/// returns), at most `limit`; returns the counts then.
std::pair<size_t, size_t> settled_counts(std::chrono::milliseconds quiet = 100ms,
                                         std::chrono::milliseconds limit = 3s) {
  auto counts = std::make_pair(entries("/proc/self/fd"), entries("/proc/self/task"));
  auto still_since = Clock::now();
  for (const auto until = Clock::now() + limit; Clock::now() < until && Clock::now() - still_since < quiet;) {
    std::this_thread::sleep_for(5ms);
    const auto now = std::make_pair(entries("/proc/self/fd"), entries("/proc/self/task"));
    if (now != counts) counts = now, still_since = Clock::now();
  }
  return counts;
}

TEST_P(DataPlane, ManyTransfersLeaveNoDescriptorOrThreadBehind) {
  auto bytes = testing::random_bytes(256 * 1024, 44);
  auto lookup = lookup_of({{"m", MemoryBlob::of(bytes)}});
  {
    // Warm-up: whatever a transport sets up once per process (UCX's context and async thread).
    auto server = start(lookup);
    ASSERT_TRUE(server);
    VectorSink sink;
    ASSERT_TRUE(fetch(*server, "m", sink).ok());
  }
  // The baseline too is taken once the warm-up's threads are gone (it once caught one still
  // exiting, and the leak check then saw one thread fewer than its baseline).
  const std::pair<size_t, size_t> baseline = settled_counts();
  const size_t fds = baseline.first;
  const size_t threads = baseline.second;
  {
    BlobServerOptions options;
    options.chunk_bytes = 64 * 1024;
    auto server = start(lookup, options);
    ASSERT_TRUE(server);
    for (int i = 0; i < 30; ++i) {
      VectorSink sink;
      FetchOptions fo;
      if (i % 5 == 3) fo.cancel = std::make_shared<FetchCancel>(), fo.cancel->cancel();
      auto result = fetch(*server, i % 3 == 1 ? "missing" : "m", sink, fo);
      EXPECT_EQ(result.ok(), i % 3 != 1 && i % 5 != 3)
          << i << ": " << (result.ok() ? "ok" : result.error().to_string());
    }
  }
  // A thread that has been joined may still be listed for a moment under a loaded host (the kernel
  // reaps its task entry after the join returns): a leak stays, a slow exit goes, so wait a little.
  const auto settled = [&] { return entries("/proc/self/fd") == fds && entries("/proc/self/task") == threads; };
  for (int i = 0; i < 200 && !settled(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(entries("/proc/self/fd"), fds);
  EXPECT_EQ(entries("/proc/self/task"), threads);
}

TEST_P(DataPlane, ConnectRefusedIsFastAndNamesTheEndpoint) {
  uint16_t port = 0;
  {
    auto l = listen_tcp({"127.0.0.1", 0}, 1);
    ASSERT_TRUE(l.ok());
    port = local_port(l->fd());
  }
  VectorSink sink;
  const auto t0 = Clock::now();
  auto result = fetch_blob(kind(), {"127.0.0.1", port}, "k", {}, sink);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::io_error);
  EXPECT_NE(result.error().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << result.error().message();
  EXPECT_LT(Clock::now() - t0, 1s);
}

TEST_P(DataPlane, AFetchFromPortZeroFailsFastNamingIt) {
  // HostPort allows port 0 (a listener's "any port"); transport::Endpoint's parser used to refuse
  // it for a peer. A receiver handed one now fails at connect instead, as fast and as clearly.
  VectorSink sink;
  FetchOptions options;
  options.connect_timeout = 2s;
  const auto t0 = Clock::now();
  auto result = fetch_blob(kind(), {"127.0.0.1", 0}, "k", options, sink);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ErrorCode::io_error) << result.error().to_string();
  EXPECT_NE(result.error().message().find("127.0.0.1:0"), std::string::npos) << result.error().message();
  EXPECT_LT(Clock::now() - t0, 1s);
  EXPECT_EQ(sink.allocations, 0);
}

INSTANTIATE_TEST_SUITE_P(Transports, DataPlane, ::testing::Values(TransportKind::tcp, TransportKind::ucx),
                         [](const ::testing::TestParamInfo<TransportKind>& info) {
                           return std::string(to_string(info.param));
                         });

TEST(TransportKind, AReceiverOfTheOtherTransportFailsFast) {
  // A manager that hands out an endpoint with the wrong transport must not leave a fetch hanging.
  for (auto server_kind : {TransportKind::tcp, TransportKind::ucx}) {
    const auto receiver_kind = server_kind == TransportKind::tcp ? TransportKind::ucx : TransportKind::tcp;
    auto server =
        start_data_server(server_kind, {}, lookup_of({{"m", MemoryBlob::of(testing::random_bytes(1000, 46))}}));
    ASSERT_TRUE(server.ok()) << server.error().to_string();
    VectorSink sink;
    FetchOptions options;
    options.connect_timeout = 1s;
    options.idle_timeout = 1s;
    const auto t0 = Clock::now();
    auto result = fetch_blob(receiver_kind, (*server)->endpoint(), "m", options, sink);
    ASSERT_FALSE(result.ok()) << to_string(server_kind) << " server, " << to_string(receiver_kind) << " receiver";
    EXPECT_LT(Clock::now() - t0, 3s) << result.error().to_string();
    EXPECT_EQ(sink.chunks.size(), 0u);
  }
}

TEST(TransportKind, ParsesAndNames) {
  EXPECT_EQ(*parse_transport_kind("tcp"), TransportKind::tcp);
  EXPECT_EQ(*parse_transport_kind("ucx"), TransportKind::ucx);
  for (auto kind : {TransportKind::tcp, TransportKind::ucx}) EXPECT_EQ(*parse_transport_kind(to_string(kind)), kind);
  auto bad = parse_transport_kind("rdma");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(bad.error().message().find("'rdma'"), std::string::npos) << bad.error().message();
  EXPECT_FALSE(parse_transport_kind("UCX").ok());
}

}  // namespace data_plane_test
}  // namespace ember::transport
