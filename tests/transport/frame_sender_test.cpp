// FrameSender over memory, read, growing and failing blobs, no sockets: the frames it hands out,
// byte for byte against the frame codec, the waits it asks for (time is a parameter), and the
// abort for every failure. Last, its frames fed to a FrameReceiver: the protocol end to end.
#include "transport/frame_sender.hpp"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "tests/transport/transfer_test_util.hpp"
#include "transport/frame_receiver.hpp"
#include "transport/growing_blob.hpp"

namespace ember::transport {
namespace frame_sender_test {

using namespace std::chrono_literals;
using Clock = FrameSender::Clock;
using Frame = FrameSender::Frame;
using Step = FrameSender::Step;
using testing::lookup_of;
using testing::ReadBlob;

constexpr uint32_t kChunk = 4096;
constexpr uint64_t kId = 5;

BlobServerOptions options_with(uint64_t corrupt_frame = 0) {
  BlobServerOptions o;
  o.chunk_bytes = kChunk;
  o.upstream_wait = 1000ms;
  o.corrupt_frame = corrupt_frame;
  return o;
}

std::vector<uint8_t> end_header(uint64_t id, const std::vector<uint8_t>& blob) {
  FrameHeader end;
  end.transfer_id = id;
  end.kind = FrameKind::end;
  end.offset = end.blob_bytes = blob.size();
  end.digest = Sha256::of(blob.data(), blob.size());
  return encode_frame_header(end);
}

/// A blob in memory whose digest cannot be had.
class UnhashableBlob final : public Blob {
 public:
  explicit UnhashableBlob(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  uint64_t size() const override { return bytes_.size(); }
  const uint8_t* data() const override { return bytes_.data(); }
  Status read(uint64_t, void*, uint64_t) const override { return Status::OK(); }

 protected:
  Result<Digest> compute_digest() const override { return io_error("the upstream gave up"); }

 private:
  std::vector<uint8_t> bytes_;
};

/// A growing blob "g" of `size` random bytes, none of them arrived yet (the writer publishes them
/// with blob->advance()), and a sender opened on it.
struct GrowingSend {
  GrowingSend(size_t size, uint64_t seed) : bytes(testing::random_bytes(size, seed)) {
    auto buffer = std::make_shared<std::vector<uint8_t>>(bytes);
    blob = std::make_shared<GrowingBlob>(buffer, buffer->data(), bytes.size());
    sender.open(FetchRequest{kId, "g", 0}, lookup_of({{"g", blob}}));
  }
  std::vector<uint8_t> bytes;
  std::shared_ptr<GrowingBlob> blob;
  std::atomic<uint64_t> sent{0};
  FrameSender sender{options_with(), sent};
};

/// Opens a sender on `request` and asks for frames until it is done, failing on a wait.
std::vector<Frame> transcript(FrameSender& s, Result<FetchRequest> request, const BlobLookup& lookup) {
  s.open(std::move(request), lookup);
  std::vector<Frame> frames;
  const auto now = Clock::now();
  for (int i = 0; i < 1000; ++i) {
    Frame f;
    const Step step = s.next(now, f);
    if (step == Step::done) return frames;
    EXPECT_EQ(step, Step::send) << "an unexpected wait";
    if (step != Step::send) return frames;
    frames.push_back(std::move(f));
  }
  ADD_FAILURE() << "the sender never finished";
  return frames;
}

TEST(FrameSender, AMemoryBlobGoesOutAsDataFramesFromItsMemoryThenTheEndFrame) {
  const auto bytes = testing::random_bytes(2 * kChunk + 1000, 1);
  auto blob = MemoryBlob::of(bytes);
  std::atomic<uint64_t> sent{0};
  FrameSender s(options_with(), sent);
  auto frames = transcript(s, FetchRequest{kId, "m", 0}, lookup_of({{"m", blob}}));
  ASSERT_EQ(frames.size(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    const uint64_t at = i * kChunk;
    const auto n = static_cast<uint32_t>(std::min<uint64_t>(kChunk, bytes.size() - at));
    EXPECT_EQ(frames[i].kind, FrameKind::data);
    EXPECT_EQ(frames[i].header, encode_frame_header(data_frame(kId, at, bytes.data() + at, n, bytes.size())));
    EXPECT_EQ(frames[i].payload, blob->data() + at) << "zero copy: the payload is the blob's memory";
    EXPECT_EQ(frames[i].payload_bytes, n);
    EXPECT_TRUE(frames[i].corrupted.empty());
  }
  EXPECT_EQ(frames[3].kind, FrameKind::end);
  EXPECT_EQ(frames[3].header, end_header(kId, bytes));
  EXPECT_EQ(frames[3].payload_bytes, 0u);
  EXPECT_TRUE(s.finished());
  EXPECT_TRUE(s.result().ok());
  EXPECT_EQ(sent.load(), 0u) << "the seam's counter moves only when the seam is armed";
}

TEST(FrameSender, AResumedRequestStartsAtItsOffsetAndEndsWithTheWholeBlobsDigest) {
  const auto bytes = testing::random_bytes(3 * kChunk, 2);
  std::atomic<uint64_t> sent{0};
  FrameSender s(options_with(), sent);
  auto frames = transcript(s, FetchRequest{kId, "m", 5000}, lookup_of({{"m", MemoryBlob::of(bytes)}}));
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].header, encode_frame_header(data_frame(kId, 5000, bytes.data() + 5000, kChunk, bytes.size())));
  EXPECT_EQ(frames[1].header, encode_frame_header(data_frame(kId, 9096, bytes.data() + 9096, 3192, bytes.size())));
  EXPECT_EQ(frames[2].header, end_header(kId, bytes));

  // At the very end: only the end frame; an empty blob: the same.
  FrameSender at_end(options_with(), sent);
  auto end_only = transcript(at_end, FetchRequest{kId, "m", bytes.size()}, lookup_of({{"m", MemoryBlob::of(bytes)}}));
  ASSERT_EQ(end_only.size(), 1u);
  EXPECT_EQ(end_only[0].header, end_header(kId, bytes));
  FrameSender empty(options_with(), sent);
  auto nothing = transcript(empty, FetchRequest{kId, "e", 0}, lookup_of({{"e", MemoryBlob::of({})}}));
  ASSERT_EQ(nothing.size(), 1u);
  EXPECT_EQ(nothing[0].header, end_header(kId, {}));
}

TEST(FrameSender, ABlobThatMustBeReadGoesThroughItsStagingChunksInTurn) {
  const auto bytes = testing::random_bytes(3 * kChunk + 10, 3);
  std::atomic<uint64_t> sent{0};
  FrameSender s(options_with(), sent, /*staging_chunks=*/2);
  s.open(FetchRequest{kId, "r", 0}, lookup_of({{"r", std::make_shared<ReadBlob>(bytes)}}));
  std::vector<const uint8_t*> buffers;
  Frame f;
  for (uint64_t at = 0; at < bytes.size(); at += kChunk) {
    ASSERT_EQ(s.next(Clock::now(), f), Step::send);
    const auto n = static_cast<uint32_t>(std::min<uint64_t>(kChunk, bytes.size() - at));
    EXPECT_EQ(f.header, encode_frame_header(data_frame(kId, at, bytes.data() + at, n, bytes.size())));
    EXPECT_EQ(std::vector<uint8_t>(f.payload, f.payload + n),
              std::vector<uint8_t>(bytes.begin() + at, bytes.begin() + at + n));
    buffers.push_back(f.payload);
  }
  EXPECT_EQ(buffers[0], buffers[2]);
  EXPECT_EQ(buffers[1], buffers[3]);
  EXPECT_NE(buffers[0], buffers[1]);
  EXPECT_TRUE(s.data_done());
  ASSERT_EQ(s.next(Clock::now(), f), Step::send);
  EXPECT_EQ(f.header, end_header(kId, bytes));
}

TEST(FrameSender, ABlobThatFailsToReadIsAbortedWithTheReadError) {
  const auto bytes = testing::random_bytes(3 * kChunk, 4);
  std::atomic<uint64_t> sent{0};
  FrameSender s(options_with(), sent);
  auto frames = transcript(s, FetchRequest{kId, "r", 0},
                           lookup_of({{"r", std::make_shared<ReadBlob>(bytes, UINT64_MAX, kChunk + 1)}}));
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].kind, FrameKind::data);
  const Error want = io_error("disk sector unreadable").with_context("reading blob 'r'");
  EXPECT_EQ(frames[1].kind, FrameKind::abort);
  EXPECT_EQ(frames[1].header, encode_frame_header(abort_frame(kId, want)));
  ASSERT_FALSE(s.result().ok());
  EXPECT_EQ(s.result().error().message(), want.message());
}

TEST(FrameSender, RequestsThatCannotBeServedAreAbortedWithTheirReason) {
  const auto bytes = testing::random_bytes(kChunk, 5);
  auto lookup = lookup_of({{"m", MemoryBlob::of(bytes)}});
  std::atomic<uint64_t> sent{0};
  struct Case {
    Result<FetchRequest> request;
    BlobLookup lookup;
    Error want;
  };
  const BlobLookup null_lookup = [](const std::string&) -> Result<std::shared_ptr<const Blob>> {
    return std::shared_ptr<const Blob>();
  };
  std::vector<Case> cases = {
      {corrupt("fetch request is truncated"), lookup, corrupt("fetch request is truncated")},
      {FetchRequest{kId, "x", 0}, lookup, not_found("no blob 'x'")},
      {FetchRequest{kId, "m", 0}, null_lookup, internal_error("lookup of 'm' returned no blob")},
      {FetchRequest{kId, "m", kChunk + 1}, lookup, invalid_argument("offset 4097 is beyond blob 'm' of 4096 bytes")},
  };
  for (auto& c : cases) {
    const uint64_t id = c.request.ok() ? kId : 0;  // a request never read is answered as transfer 0
    FrameSender s(options_with(), sent);
    auto frames = transcript(s, std::move(c.request), c.lookup);
    ASSERT_EQ(frames.size(), 1u) << c.want.message();
    EXPECT_EQ(frames[0].kind, FrameKind::abort);
    EXPECT_EQ(frames[0].header, encode_frame_header(abort_frame(id, c.want))) << c.want.message();
    ASSERT_FALSE(s.result().ok());
    EXPECT_EQ(s.result().error().code(), c.want.code());
  }
}

TEST(FrameSender, ADigestThatCannotBeHadAbortsAfterTheData) {
  const auto bytes = testing::random_bytes(kChunk, 6);
  std::atomic<uint64_t> sent{0};
  FrameSender s(options_with(), sent);
  auto frames = transcript(s, FetchRequest{kId, "u", 0}, lookup_of({{"u", std::make_shared<UnhashableBlob>(bytes)}}));
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[1].header,
            encode_frame_header(abort_frame(kId, io_error("the upstream gave up").with_context("hashing blob 'u'"))));
}

TEST(FrameSender, AGrowingBlobIsSentAsItsBytesArriveWithWaitsBetween) {
  GrowingSend send(2 * kChunk + 100, 7);
  auto& [bytes, g, sent, s] = send;
  g->advance(kChunk);
  const auto t0 = Clock::now();
  Frame f;
  ASSERT_EQ(s.next(t0, f), Step::send);
  EXPECT_EQ(f.header, encode_frame_header(data_frame(kId, 0, bytes.data(), kChunk, bytes.size())));
  ASSERT_EQ(s.next(t0, f), Step::wait);
  EXPECT_EQ(s.wait(0ms).error().code(), ErrorCode::deadline_exceeded);  // a slice ran out
  ASSERT_EQ(s.next(t0 + 999ms, f), Step::wait) << "within upstream_wait";
  g->advance(2 * kChunk);
  EXPECT_TRUE(s.wait(0ms).ok());
  ASSERT_EQ(s.next(t0 + 999ms, f), Step::send);
  EXPECT_EQ(f.header, encode_frame_header(data_frame(kId, kChunk, bytes.data() + kChunk, kChunk, bytes.size())));
  // The last chunk's wait has its own upstream_wait, from when it began.
  ASSERT_EQ(s.next(t0 + 1500ms, f), Step::wait);
  ASSERT_EQ(s.next(t0 + 2400ms, f), Step::wait);
  g->complete(Sha256::of(bytes.data(), bytes.size()));
  ASSERT_EQ(s.next(t0 + 2400ms, f), Step::send);
  EXPECT_EQ(f.payload_bytes, 100u);
  ASSERT_EQ(s.next(t0 + 2400ms, f), Step::send);
  EXPECT_EQ(f.header, end_header(kId, bytes)) << "the digest the writer verified";
  EXPECT_EQ(s.next(t0 + 2400ms, f), Step::done);
  EXPECT_TRUE(s.result().ok());
}

TEST(FrameSender, AnUpstreamSilentForUpstreamWaitIsAbortedAsUnavailable) {
  GrowingSend send(2 * kChunk, 8);
  FrameSender& s = send.sender;
  const auto t0 = Clock::now();
  Frame f;
  ASSERT_EQ(s.next(t0, f), Step::wait);
  ASSERT_EQ(s.next(t0 + 999ms, f), Step::wait);
  ASSERT_EQ(s.next(t0 + 1000ms, f), Step::send);
  const Error want =
      unavailable("upstream stalled: no bytes up to offset 4096 within 1000 ms").with_context("forwarding blob 'g'");
  EXPECT_EQ(f.header, encode_frame_header(abort_frame(kId, want)));
  EXPECT_EQ(s.result().error().code(), ErrorCode::unavailable);
  EXPECT_EQ(s.next(t0 + 1000ms, f), Step::done);
}

TEST(FrameSender, AGrowingBlobWhoseWriterFailsIsAbortedWithTheWritersError) {
  GrowingSend send(2 * kChunk, 9);
  FrameSender& s = send.sender;
  const auto t0 = Clock::now();
  Frame f;
  ASSERT_EQ(s.next(t0, f), Step::wait);
  send.blob->fail(unavailable("transfer 7 gave up after 3 upstreams"));
  EXPECT_EQ(s.wait(0ms).error().code(), ErrorCode::unavailable);
  ASSERT_EQ(s.next(t0, f), Step::send) << "at once, not after upstream_wait";
  EXPECT_EQ(f.header,
            encode_frame_header(abort_frame(
                kId, unavailable("transfer 7 gave up after 3 upstreams").with_context("forwarding blob 'g'"))));
}

TEST(FrameSender, ATransportThatGivesUpGetsTheAbortFrameInTheContextOfTheWait) {
  GrowingSend send(2 * kChunk, 10);
  FrameSender& waiting = send.sender;
  Frame f;
  ASSERT_EQ(waiting.next(Clock::now(), f), Step::wait);
  Frame stop = waiting.abort(io_error("blob server stopping"));
  EXPECT_EQ(stop.header, encode_frame_header(abort_frame(kId, io_error("forwarding blob 'g': blob server stopping"))));
  EXPECT_EQ(waiting.next(Clock::now(), f), Step::done);

  FrameSender unopened(options_with(), send.sent);  // no request yet: transfer 0, as a turned-away connection
  EXPECT_EQ(unopened.abort(io_error("blob server stopping")).header,
            encode_frame_header(abort_frame(0, io_error("blob server stopping"))));
}

TEST(FrameSender, TheCorruptFrameSeamFlipsOneBitOfTheNthDataFrameOfTheServerAfterItsChecksum) {
  const auto bytes = testing::random_bytes(2 * kChunk, 11);
  auto lookup = lookup_of({{"m", MemoryBlob::of(bytes)}});
  std::atomic<uint64_t> sent{0};  // the server's count, over transfers
  FrameSender first(options_with(3), sent);
  auto clean = transcript(first, FetchRequest{kId, "m", 0}, lookup);
  ASSERT_EQ(clean.size(), 3u);
  EXPECT_TRUE(clean[0].corrupted.empty() && clean[1].corrupted.empty());
  FrameSender second(options_with(3), sent);
  auto frames = transcript(second, FetchRequest{kId, "m", 0}, lookup);
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_TRUE(frames[1].corrupted.empty());
  const Frame& bad = frames[0];  // the server's third data frame
  EXPECT_EQ(bad.header, encode_frame_header(data_frame(kId, 0, bytes.data(), kChunk, bytes.size())))
      << "the header's CRC is of the good bytes";
  ASSERT_EQ(bad.payload, bad.corrupted.data());
  std::vector<uint8_t> want(bytes.begin(), bytes.begin() + kChunk);
  want[kChunk / 2] ^= 0x10;
  EXPECT_EQ(bad.corrupted, want);
  // Moving the frame (into a transport's in-flight list) keeps the payload pointer valid.
  Frame moved = std::move(frames[0]);
  EXPECT_EQ(moved.payload, moved.corrupted.data());
}

/// The sender's frames, decoded from their bytes, into a receiver: the protocol with no transport.
Result<FetchResult> loop_back(FrameSender& s, FetchRequest request, const BlobLookup& lookup, testing::VectorSink& sink,
                              FetchOptions options = {}) {
  options.transfer_id = request.transfer_id;
  options.resume_offset = request.offset;
  FrameReceiver r(options, sink);
  s.open(std::move(request), lookup);
  Frame f;
  while (s.next(Clock::now(), f) == Step::send) {
    size_t consumed = 0;
    auto h = decode_frame_header(f.header.data(), f.header.size(), consumed);
    if (!h.ok()) return h.error();
    auto landing = r.accept(*h);
    if (!landing.ok()) return landing.error();
    if (landing->bytes == 0) continue;
    std::memcpy(landing->at, f.payload, f.payload_bytes);
    EMBER_RETURN_IF_ERROR(r.verify());
  }
  if (!r.complete()) return internal_error("the sender finished before the receiver");
  return r.finish();
}

TEST(FrameSender, ItsFramesFedToAFrameReceiverDeliverTheBlobOrTheFailure) {
  const auto bytes = testing::random_bytes(5 * kChunk + 17, 12);
  std::atomic<uint64_t> sent{0};
  for (auto blob : {std::shared_ptr<const Blob>(MemoryBlob::of(bytes)),
                    std::shared_ptr<const Blob>(std::make_shared<ReadBlob>(bytes))}) {
    testing::VectorSink sink;
    FrameSender s(options_with(), sent);
    auto result = loop_back(s, FetchRequest{kId, "b", 0}, lookup_of({{"b", blob}}), sink);
    ASSERT_TRUE(result.ok()) << result.error().to_string();
    EXPECT_EQ(sink.bytes, bytes);
    EXPECT_EQ(result->digest, Sha256::of(bytes.data(), bytes.size()));
    EXPECT_EQ(sink.chunks.size(), 6u);
  }
  // The seam's flipped bit is caught by the chunk's CRC; a lookup's error reaches the receiver.
  testing::VectorSink corrupted;
  FrameSender seam(options_with(sent.load() + 2), sent);
  auto bad = loop_back(seam, FetchRequest{kId, "b", 0}, lookup_of({{"b", MemoryBlob::of(bytes)}}), corrupted);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("CRC-32C"), std::string::npos) << bad.error().message();
  EXPECT_EQ(corrupted.chunks.size(), 1u);
  testing::VectorSink missing;
  FrameSender unknown(options_with(), sent);
  auto none = loop_back(unknown, FetchRequest{kId, "x", 0}, lookup_of({}), missing);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code(), ErrorCode::not_found);
  EXPECT_EQ(none.error().message(), "the server aborted the transfer: no blob 'x'");
}

}  // namespace frame_sender_test
}  // namespace ember::transport
