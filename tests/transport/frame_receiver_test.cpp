// FrameReceiver against transcripts of frames, no sockets: what it asks for (where each payload
// lands), what it tells the sink, and what it returns, for a good blob and for every way a stream
// can break the protocol. The same object runs inside both transports' fetches.
#include "transport/frame_receiver.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tests/transport/transfer_test_util.hpp"
#include "transport/fetch_request.hpp"

namespace ember::transport {
namespace frame_receiver_test {

using testing::VectorSink;

constexpr uint32_t kChunk = 4096;
constexpr uint64_t kId = 7;

FrameHeader end_frame(uint64_t id, const std::vector<uint8_t>& blob) {
  FrameHeader end;
  end.transfer_id = id;
  end.kind = FrameKind::end;
  end.offset = end.blob_bytes = blob.size();
  end.digest = Sha256::of(blob.data(), blob.size());
  return end;
}

FrameHeader chunk_frame(const std::vector<uint8_t>& blob, uint64_t at, uint64_t id = kId) {
  const auto n = static_cast<uint32_t>(std::min<uint64_t>(kChunk, blob.size() - at));
  return data_frame(id, at, blob.data() + at, n, blob.size());
}

/// What a transport does with one data frame that arrived whole: accept, copy the payload to where
/// the receiver says, verify.
Status deliver(FrameReceiver& r, const std::vector<uint8_t>& blob, const FrameHeader& h) {
  auto landing = r.accept(h);
  if (!landing.ok()) return landing.error();
  EXPECT_EQ(landing->bytes, h.length);
  std::memcpy(landing->at, blob.data() + h.offset, h.length);
  return r.verify();
}

FetchOptions options_for(uint64_t resume = 0, uint64_t expected = 0) {
  FetchOptions o;
  o.transfer_id = kId;
  o.resume_offset = resume;
  o.expected_bytes = expected;
  return o;
}

TEST(FrameReceiver, AGoodBlobLandsInTheSinkChunkByChunkAndVerifiesEndToEnd) {
  const auto blob = testing::random_bytes(2 * kChunk + 1000, 1);
  VectorSink sink;
  FrameReceiver r(options_for(), sink);
  for (uint64_t at = 0; at < blob.size(); at += kChunk) {
    auto landing = r.accept(chunk_frame(blob, at));
    ASSERT_TRUE(landing.ok()) << landing.error().to_string();
    ASSERT_EQ(sink.allocations, 1);
    EXPECT_EQ(landing->at, sink.bytes.data() + at);  // straight into the sink's buffer at its offset
    std::memcpy(landing->at, blob.data() + at, landing->bytes);
    ASSERT_TRUE(r.verify().ok());
  }
  EXPECT_FALSE(r.complete());
  auto end = r.accept(end_frame(kId, blob));
  ASSERT_TRUE(end.ok()) << end.error().to_string();
  EXPECT_EQ(end->at, nullptr);
  EXPECT_EQ(end->bytes, 0u);
  ASSERT_TRUE(r.complete());
  auto result = r.finish();
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(result->blob_bytes, blob.size());
  EXPECT_EQ(result->bytes_received, blob.size());
  EXPECT_EQ(result->digest, Sha256::of(blob.data(), blob.size()));
  EXPECT_EQ(sink.bytes, blob);
  const std::vector<std::pair<uint64_t, uint64_t>> chunks = {{0, kChunk}, {kChunk, kChunk}, {2 * kChunk, 1000}};
  EXPECT_EQ(sink.chunks, chunks);
  EXPECT_FALSE(r.finish().ok()) << "finish() twice";
}

TEST(FrameReceiver, OpensWithTheRequestForItsTransferAndOffset) {
  VectorSink sink;
  FrameReceiver r(options_for(5000), sink);
  auto bytes = r.request("gpt2/3/weights");
  ASSERT_TRUE(bytes.ok()) << bytes.error().to_string();
  size_t consumed = 0;
  auto request = decode_fetch_request(bytes->data(), bytes->size(), consumed);
  ASSERT_TRUE(request.ok()) << request.error().to_string();
  EXPECT_EQ(request->transfer_id, kId);
  EXPECT_EQ(request->key, "gpt2/3/weights");
  EXPECT_EQ(request->offset, 5000u);
  EXPECT_EQ(r.request("").error().code(), ErrorCode::invalid_argument);
}

TEST(FrameReceiver, ACorruptChunkFailsItsCheckBeforeTheSinkHearsOfItAndTheFailureSticks) {
  const auto blob = testing::random_bytes(3 * kChunk, 2);
  VectorSink sink;
  FrameReceiver r(options_for(), sink);
  ASSERT_TRUE(deliver(r, blob, chunk_frame(blob, 0)).ok());
  auto landing = r.accept(chunk_frame(blob, kChunk));
  ASSERT_TRUE(landing.ok());
  std::memcpy(landing->at, blob.data() + kChunk, kChunk);
  landing->at[100] ^= 0x40;  // flipped on the wire
  Status st = r.verify();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::corrupt);
  EXPECT_NE(st.error().message().find("CRC-32C"), std::string::npos) << st.error().message();
  EXPECT_NE(st.error().message().find("offset " + std::to_string(kChunk)), std::string::npos) << st.error().message();
  EXPECT_EQ(sink.chunks.size(), 1u);
  EXPECT_EQ(r.verified(), kChunk);
  // Sticky: the stream is not trusted any further.
  auto later = r.accept(chunk_frame(blob, 2 * kChunk));
  ASSERT_FALSE(later.ok());
  EXPECT_EQ(later.error().message(), st.error().message());
}

TEST(FrameReceiver, AFrameOfAnotherTransferIsCorruptAndAllocatesNothing) {
  const auto blob = testing::random_bytes(kChunk, 3);
  VectorSink sink;
  FrameReceiver r(options_for(), sink);
  auto landing = r.accept(chunk_frame(blob, 0, /*id=*/8));
  ASSERT_FALSE(landing.ok());
  EXPECT_EQ(landing.error().code(), ErrorCode::corrupt);
  EXPECT_EQ(landing.error().message(), "frame of transfer 8 in transfer 7");
  EXPECT_EQ(sink.allocations, 0);
}

TEST(FrameReceiver, AnOffsetOutOfOrderIsCorrupt) {
  const auto blob = testing::random_bytes(3 * kChunk, 4);
  VectorSink sink;
  FrameReceiver r(options_for(), sink);
  ASSERT_TRUE(deliver(r, blob, chunk_frame(blob, 0)).ok());
  auto skipped = r.accept(chunk_frame(blob, 2 * kChunk));
  ASSERT_FALSE(skipped.ok());
  EXPECT_EQ(skipped.error().code(), ErrorCode::corrupt);
  EXPECT_NE(skipped.error().message().find("frame at offset 8192 where offset 4096 was due"), std::string::npos)
      << skipped.error().message();
  EXPECT_EQ(sink.chunks.size(), 1u);
}

TEST(FrameReceiver, ASizeOtherThanExpectedOrChangingMidStreamIsCorrupt) {
  const auto blob = testing::random_bytes(2 * kChunk, 5);
  VectorSink expecting;
  FrameReceiver r(options_for(0, blob.size() - 1), expecting);
  auto wrong = r.accept(chunk_frame(blob, 0));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code(), ErrorCode::corrupt);
  EXPECT_EQ(wrong.error().message(), "the server's blob has 8192 bytes, expected 8191");
  EXPECT_EQ(expecting.allocations, 0);

  VectorSink sink;
  FrameReceiver changing(options_for(), sink);
  ASSERT_TRUE(deliver(changing, blob, chunk_frame(blob, 0)).ok());
  FrameHeader second = chunk_frame(blob, kChunk);
  second.blob_bytes = 3 * kChunk;
  auto grown = changing.accept(second);
  ASSERT_FALSE(grown.ok());
  EXPECT_EQ(grown.error().code(), ErrorCode::corrupt);
  EXPECT_NE(grown.error().message().find("says the blob has 12288 bytes, earlier frames 8192"), std::string::npos)
      << grown.error().message();
}

TEST(FrameReceiver, AnEndBeforeEveryByteIsCorrupt) {
  const auto blob = testing::random_bytes(2 * kChunk + 10, 6);
  VectorSink sink;
  FrameReceiver r(options_for(), sink);
  ASSERT_TRUE(deliver(r, blob, chunk_frame(blob, 0)).ok());
  FrameHeader early = end_frame(kId, blob);
  early.offset = kChunk;  // where the stream is: the offset check passes, the byte count does not
  auto end = r.accept(early);
  ASSERT_FALSE(end.ok());
  EXPECT_EQ(end.error().code(), ErrorCode::corrupt);
  EXPECT_EQ(end.error().message(), "end frame after 4096 of 8202 bytes");
  EXPECT_FALSE(r.complete());
}

TEST(FrameReceiver, AnEmptyDataFrameOrAFrameAfterTheEndIsCorrupt) {
  const auto blob = testing::random_bytes(kChunk, 7);
  VectorSink sink;
  FrameReceiver empty(options_for(), sink);
  auto zero = empty.accept(data_frame(kId, 0, blob.data(), 0, blob.size()));
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.error().message(), "empty data frame at offset 0");

  VectorSink sink2;
  FrameReceiver after(options_for(), sink2);
  ASSERT_TRUE(deliver(after, blob, chunk_frame(blob, 0)).ok());
  ASSERT_TRUE(after.accept(end_frame(kId, blob)).ok());
  auto again = after.accept(end_frame(kId, blob));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), ErrorCode::corrupt);
  EXPECT_NE(again.error().message().find("was due"), std::string::npos) << again.error().message();
}

TEST(FrameReceiver, AnAbortFromTheServerIsTheServersErrorEvenBeforeTheRequestWasRead) {
  for (uint64_t id : {kId, uint64_t{0}}) {
    VectorSink sink;
    FrameReceiver r(options_for(), sink);
    auto aborted = r.accept(abort_frame(id, unsupported("no such dtype")));
    ASSERT_FALSE(aborted.ok());
    EXPECT_EQ(aborted.error().code(), ErrorCode::unsupported);
    EXPECT_EQ(aborted.error().message(), "the server aborted the transfer: no such dtype");
    EXPECT_EQ(sink.allocations, 0);
  }
  // Mid-stream too, and an abort of another transfer is a stray frame.
  const auto blob = testing::random_bytes(2 * kChunk, 8);
  VectorSink sink;
  FrameReceiver r(options_for(), sink);
  ASSERT_TRUE(deliver(r, blob, chunk_frame(blob, 0)).ok());
  auto stray = r.accept(abort_frame(9, io_error("not yours")));
  ASSERT_FALSE(stray.ok());
  EXPECT_EQ(stray.error().code(), ErrorCode::corrupt);
}

TEST(FrameReceiver, AResumedFetchStartsAtItsOffsetAndStillVerifiesTheWholeBlob) {
  const auto blob = testing::random_bytes(3 * kChunk, 9);
  const uint64_t resume = kChunk + 123;
  VectorSink sink;
  sink.bytes.assign(blob.begin(), blob.begin() + static_cast<ptrdiff_t>(resume));  // what arrived before
  FrameReceiver r(options_for(resume, blob.size()), sink);
  EXPECT_EQ(r.verified(), resume);
  auto early = r.accept(chunk_frame(blob, 0));
  ASSERT_FALSE(early.ok()) << "a resumed fetch wants its offset first";
  EXPECT_NE(early.error().message().find("where offset 4219 was due"), std::string::npos) << early.error().message();

  VectorSink good;
  good.bytes = sink.bytes;
  FrameReceiver resumed(options_for(resume, blob.size()), good);
  for (uint64_t at = resume; at < blob.size(); at += kChunk)
    ASSERT_TRUE(deliver(resumed, blob, chunk_frame(blob, at)).ok());
  ASSERT_TRUE(resumed.accept(end_frame(kId, blob)).ok());
  auto result = resumed.finish();
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(result->bytes_received, blob.size() - resume);
  EXPECT_EQ(good.chunks.front().first, resume);
  EXPECT_EQ(good.bytes, blob);

  // A wrong prefix fails the whole blob's digest.
  VectorSink wrong;
  wrong.bytes.assign(resume, 0);
  FrameReceiver bad(options_for(resume), wrong);
  for (uint64_t at = resume; at < blob.size(); at += kChunk)
    ASSERT_TRUE(deliver(bad, blob, chunk_frame(blob, at)).ok());
  ASSERT_TRUE(bad.accept(end_frame(kId, blob)).ok());
  auto mismatch = bad.finish();
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.error().code(), ErrorCode::corrupt);
  EXPECT_NE(mismatch.error().message().find("SHA-256 mismatch over 12288 bytes"), std::string::npos)
      << mismatch.error().message();
}

TEST(FrameReceiver, AResumeBeyondTheBlobOrARefusedBufferFailsOnTheFirstFrame) {
  const auto blob = testing::random_bytes(kChunk, 10);
  VectorSink sink;
  FrameReceiver beyond(options_for(blob.size() + 1), sink);
  auto first = beyond.accept(chunk_frame(blob, 0));
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(first.error().message().find("beyond"), std::string::npos);

  VectorSink refusing;
  refusing.refuse = true;
  FrameReceiver refused(options_for(), refusing);
  auto none = refused.accept(chunk_frame(blob, 0));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code(), ErrorCode::out_of_memory);
  EXPECT_EQ(refusing.allocations, 1);
}

TEST(FrameReceiver, AnEmptyBlobIsOneEndFrame) {
  const std::vector<uint8_t> blob;
  VectorSink sink;
  FrameReceiver r(options_for(), sink);
  auto end = r.accept(end_frame(kId, blob));
  ASSERT_TRUE(end.ok()) << end.error().to_string();
  ASSERT_TRUE(r.complete());
  auto result = r.finish();
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(result->blob_bytes, 0u);
  EXPECT_EQ(to_hex(result->digest), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_TRUE(sink.chunks.empty());
}

TEST(FrameReceiver, HeadersAcceptedAheadOfTheirPayloadsAreVerifiedInOrderAsTheyComplete) {
  // What the UCX receiver does: several rendezvous payloads on their way at once.
  const auto blob = testing::random_bytes(3 * kChunk, 11);
  VectorSink sink;
  FrameReceiver r(options_for(), sink);
  std::vector<FrameReceiver::Landing> landings;
  for (uint64_t at = 0; at < blob.size(); at += kChunk) {
    auto landing = r.accept(chunk_frame(blob, at));
    ASSERT_TRUE(landing.ok()) << landing.error().to_string();
    landings.push_back(*landing);
  }
  ASSERT_TRUE(r.accept(end_frame(kId, blob)).ok());
  EXPECT_EQ(r.accepted(), blob.size());
  EXPECT_EQ(r.verified(), 0u);
  EXPECT_EQ(r.unverified(), 3u);
  EXPECT_FALSE(r.complete()) << "the end frame is in, two payloads are not";
  EXPECT_TRUE(sink.chunks.empty());
  for (size_t i = 0; i < landings.size(); ++i) {
    std::memcpy(landings[i].at, blob.data() + i * kChunk, landings[i].bytes);
    ASSERT_TRUE(r.verify().ok());
    EXPECT_EQ(r.verified(), (i + 1) * kChunk);
    EXPECT_EQ(r.complete(), i + 1 == landings.size());
  }
  EXPECT_EQ(sink.chunks.size(), 3u);
  EXPECT_EQ(r.verify().error().code(), ErrorCode::internal) << "nothing left to verify";
  auto result = r.finish();
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(sink.bytes, blob);
}

TEST(FrameReceiver, WordsWhereTheStreamStoodTheSameForEitherTransport) {
  const auto blob = testing::random_bytes(2 * kChunk, 12);
  VectorSink sink;
  FrameReceiver r(options_for(), sink);
  EXPECT_EQ(r.position(), " before the first frame");
  EXPECT_FALSE(r.finish().ok()) << "finish() before the end frame";
  ASSERT_TRUE(deliver(r, blob, chunk_frame(blob, 0)).ok());
  EXPECT_EQ(r.position(), " after 4096 of 8192 bytes");
  EXPECT_EQ(r.cancelled().code(), ErrorCode::unavailable);
  EXPECT_EQ(r.cancelled().message(), "cancelled at offset 4096 (the hop was given another upstream)");
  EXPECT_EQ(r.idle_timeout(std::chrono::milliseconds(300)).message(),
            "server sent nothing for 300 ms (idle timeout) at offset 4096");
  EXPECT_EQ(r.total_timeout(std::chrono::milliseconds(400)).message(),
            "not complete within the total timeout of 400 ms, at offset 4096");
}

}  // namespace frame_receiver_test
}  // namespace ember::transport
