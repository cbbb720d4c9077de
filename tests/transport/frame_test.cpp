#include "transport/frame.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace ember::transport {
namespace frame_test {

TEST(Checksum, KnownVectors) {
  // RFC 3720 (iSCSI) check value of CRC-32C.
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  // FIPS 180-2 test vector.
  EXPECT_EQ(to_hex(Sha256::of("abc", 3)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Checksum, IncrementalEqualsWhole) {
  std::vector<uint8_t> data(1 << 20);
  std::mt19937 rng(7);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  uint32_t crc = 0;
  Sha256 h;
  for (size_t off = 0; off < data.size(); off += 4099) {
    const size_t n = std::min<size_t>(4099, data.size() - off);
    crc = crc32c(data.data() + off, n, crc);
    h.update(data.data() + off, n);
  }
  EXPECT_EQ(crc, crc32c(data.data(), data.size()));
  EXPECT_EQ(h.finish(), Sha256::of(data.data(), data.size()));
}

TEST(Checksum, AgreesWithABitwiseReferenceAtEveryPathAndAlignment) {
  // The fast path joins three chains over 8 KiB and 256-byte blocks; lengths around those bounds
  // and odd alignments check the joins and the tails against the definition.
  auto reference = [](const uint8_t* p, size_t n) {
    uint32_t c = ~0u;
    for (size_t i = 0; i < n; ++i) {
      c ^= p[i];
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    }
    return ~c;
  };
  std::vector<uint8_t> data(3 * 8192 * 2 + 3 * 256 + 64);
  std::mt19937 rng(11);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (size_t n : {0ul, 1ul, 7ul, 8ul, 767ul, 768ul, 769ul, 24575ul, 24576ul, 24577ul, 25000ul, 49152ul + 800}) {
    for (size_t align : {0ul, 1ul, 3ul}) {
      if (align + n > data.size()) continue;
      EXPECT_EQ(crc32c(data.data() + align, n), reference(data.data() + align, n)) << n << " at +" << align;
    }
  }
}

TEST(Frame, DataAndEndFramesRoundTrip) {
  const std::string payload = "chunk of model bytes";
  FrameHeader d = data_frame(42, 1000, payload.data(), static_cast<uint32_t>(payload.size()), 5000);
  auto wire = encode_frame_header(d);
  EXPECT_EQ((wire.size() - kFramePrefixBytes) % 8, 0u);
  size_t consumed = 0;
  auto back = decode_frame_header(wire.data(), wire.size(), consumed);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(consumed, wire.size());
  EXPECT_EQ(back->transfer_id, 42u);
  EXPECT_EQ(back->kind, FrameKind::data);
  EXPECT_EQ(back->offset, 1000u);
  EXPECT_EQ(back->length, payload.size());
  EXPECT_EQ(back->blob_bytes, 5000u);
  EXPECT_TRUE(verify_payload(*back, payload.data(), payload.size()).ok());

  FrameHeader e;
  e.transfer_id = 42;
  e.kind = FrameKind::end;
  e.offset = 5000;
  e.blob_bytes = 5000;
  e.digest = Sha256::of("x", 1);
  wire = encode_frame_header(e);
  back = decode_frame_header(wire.data(), wire.size(), consumed);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->kind, FrameKind::end);
  EXPECT_EQ(back->digest, e.digest);
}

TEST(Frame, AbortFramesCarryCodeAndReason) {
  auto wire = encode_frame_header(abort_frame(5, not_found("no blob 'bert/2'")));
  size_t consumed = 0;
  auto back = decode_frame_header(wire.data(), wire.size(), consumed);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->kind, FrameKind::abort);
  EXPECT_EQ(back->transfer_id, 5u);
  EXPECT_EQ(back->error_code, ErrorCode::not_found);
  EXPECT_EQ(back->reason, "no blob 'bert/2'");

  // A reason longer than the bound is cut, and the header stays within its own bound.
  wire = encode_frame_header(abort_frame(5, io_error(std::string(10000, 'x'))));
  EXPECT_LE(wire.size(), kFramePrefixBytes + kMaxFrameHeaderBytes);
  back = decode_frame_header(wire.data(), wire.size(), consumed);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->reason.size(), kMaxAbortReasonBytes);
  EXPECT_EQ(back->error_code, ErrorCode::io_error);

  // A code ember::ErrorCode does not have is a broken header, not a guess.
  FrameHeader odd = abort_frame(5, io_error("x"));
  odd.error_code = static_cast<ErrorCode>(200);
  wire = encode_frame_header(odd);
  back = decode_frame_header(wire.data(), wire.size(), consumed);
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.error().code(), ErrorCode::corrupt);
}

TEST(Frame, PartialInputAsksForMore) {
  const std::string payload = "abc";
  auto wire = encode_frame_header(data_frame(1, 0, payload.data(), 3, 3));
  size_t consumed = 0;
  auto r = decode_frame_header(wire.data(), 2, consumed);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::not_found);
  r = decode_frame_header(wire.data(), wire.size() - 1, consumed);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::not_found);
  EXPECT_EQ(consumed, wire.size());
}

TEST(Frame, CorruptPayloadIsDetected) {
  std::string payload(4096, 'a');
  FrameHeader h = data_frame(9, 0, payload.data(), 4096, 4096);
  payload[100] ^= 0x01;
  Status st = verify_payload(h, payload.data(), payload.size());
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::corrupt);
  EXPECT_NE(st.error().message().find("CRC-32C mismatch"), std::string::npos);
  EXPECT_FALSE(verify_payload(h, payload.data(), 4095).ok());
}

TEST(Frame, HeadersThatContradictThemselvesAreCorrupt) {
  FrameHeader h = data_frame(1, 4000, "abcd", 4, 4002);  // runs past the blob
  auto wire = encode_frame_header(h);
  size_t consumed = 0;
  auto r = decode_frame_header(wire.data(), wire.size(), consumed);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("run past the blob"), std::string::npos) << r.error().message();

  std::vector<uint8_t> bad_len = {3, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(decode_frame_header(bad_len.data(), bad_len.size(), consumed).error().code(), ErrorCode::corrupt);
  std::vector<uint8_t> huge = {0, 0, 1, 0};
  EXPECT_EQ(decode_frame_header(huge.data(), huge.size(), consumed).error().code(), ErrorCode::corrupt);
}

TEST(Frame, RandomCorruptionNeverCrashesTheDecoder) {
  const std::string payload = "0123456789abcdef";
  const auto good = encode_frame_header(data_frame(77, 16, payload.data(), 16, 64));
  std::mt19937 rng(301);
  int rejected = 0;
  for (int i = 0; i < 20000; ++i) {
    auto wire = good;
    for (int flips = 1 + static_cast<int>(rng() % 4); flips > 0; --flips) {
      wire[kFramePrefixBytes + rng() % (wire.size() - kFramePrefixBytes)] ^= static_cast<uint8_t>(1u << (rng() % 8));
    }
    size_t consumed = 0;
    auto r = decode_frame_header(wire.data(), wire.size(), consumed);
    if (!r.ok()) {
      ++rejected;
      continue;
    }
    // Whatever decodes must still be self-consistent.
    EXPECT_LE(r->length, kMaxChunkBytes);
    EXPECT_LE(r->offset + r->length, r->blob_bytes);
  }
  EXPECT_GT(rejected, 0);
}

}  // namespace frame_test
}  // namespace ember::transport
