#include "transport/fetch_request.hpp"

#include <gtest/gtest.h>

#include <random>

namespace ember::transport {
namespace fetch_request_test {

TEST(FetchRequest, RoundTrip) {
  FetchRequest r{77, "gpt2/3/weights.safetensors", 12345678901ull, 987654321ull};
  auto wire = encode_fetch_request(r);
  ASSERT_TRUE(wire.ok());
  EXPECT_EQ((wire->size() - 4) % 8, 0u);
  size_t consumed = 0;
  auto back = decode_fetch_request(wire->data(), wire->size(), consumed);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(consumed, wire->size());
  EXPECT_EQ(back->transfer_id, 77u);
  EXPECT_EQ(back->key, r.key);
  EXPECT_EQ(back->offset, r.offset);
  EXPECT_EQ(back->length, r.length);  // a layer range
  EXPECT_TRUE(back->ticket.empty());
}

TEST(FetchRequest, ATicketRoundTripsAndAnOverLongOneIsRefused) {
  FetchRequest r{5, "mlp/1", 0, 0};
  r.ticket = Ticket{"gpu-a", 1'900'000'000ull, std::string(32, '\x9c')};
  auto wire = encode_fetch_request(r);
  ASSERT_TRUE(wire.ok());
  size_t consumed = 0;
  auto back = decode_fetch_request(wire->data(), wire->size(), consumed);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->ticket.receiver, "gpu-a");
  EXPECT_EQ(back->ticket.not_after, 1'900'000'000ull);
  EXPECT_EQ(back->ticket.mac, r.ticket.mac);
  r.ticket.receiver = std::string(kMaxTicketReceiverBytes + 1, 'n');
  EXPECT_FALSE(encode_fetch_request(r).ok());
}

TEST(FetchRequest, PartialInputAsksForMore) {
  auto wire = encode_fetch_request({1, "k", 0});
  ASSERT_TRUE(wire.ok());
  size_t consumed = 0;
  auto r = decode_fetch_request(wire->data(), 3, consumed);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::not_found);
  EXPECT_EQ(consumed, 4u);
  r = decode_fetch_request(wire->data(), wire->size() - 1, consumed);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::not_found);
  EXPECT_EQ(consumed, wire->size());
}

TEST(FetchRequest, KeysOutOfBoundsAreRejected) {
  auto empty = encode_fetch_request({1, "", 0});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code(), ErrorCode::invalid_argument);
  auto too_long = encode_fetch_request({1, std::string(kMaxFetchKeyBytes + 1, 'k'), 0});
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.error().code(), ErrorCode::invalid_argument);
  auto longest = encode_fetch_request({1, std::string(kMaxFetchKeyBytes, 'k'), 0});
  ASSERT_TRUE(longest.ok());
  EXPECT_LE(longest->size(), 4 + kMaxFetchRequestBytes);
}

TEST(FetchRequest, BadLengthsAndRandomCorruptionAreCorruptNeverACrash) {
  std::vector<uint8_t> bad = {5, 0, 0, 0, 0, 0, 0, 0, 0};
  size_t consumed = 0;
  auto odd = decode_fetch_request(bad.data(), bad.size(), consumed);
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.error().code(), ErrorCode::corrupt);
  std::vector<uint8_t> huge = {0, 0x20, 0, 0};
  auto too_big = decode_fetch_request(huge.data(), huge.size(), consumed);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.error().code(), ErrorCode::corrupt);

  auto encoded = encode_fetch_request({9, "resnet50/1", 4096});
  ASSERT_TRUE(encoded.ok()) << encoded.error().to_string();
  const auto good = *encoded;
  std::mt19937 rng(5);
  int decoded = 0;
  int refused = 0;
  for (int i = 0; i < 20000; ++i) {
    auto wire = good;
    for (int flips = 1 + static_cast<int>(rng() % 4); flips > 0; --flips) {
      wire[4 + rng() % (wire.size() - 4)] ^= static_cast<uint8_t>(1u << (rng() % 8));
    }
    auto r = decode_fetch_request(wire.data(), wire.size(), consumed);
    if (r.ok()) {
      ++decoded;
      EXPECT_FALSE(r->key.empty());
      EXPECT_LE(r->key.size(), kMaxFetchKeyBytes);
    } else {
      ++refused;
      // The length prefix is intact, so every byte is there: never "need more bytes".
      EXPECT_EQ(r.error().code(), ErrorCode::corrupt) << r.error().to_string();
    }
  }
  // The premise: the flips reach both outcomes, so both checks above ran (flips in the key's
  // bytes or the offset still decode; flips in the pointers do not).
  EXPECT_GT(decoded, 1000);
  EXPECT_GT(refused, 1000);
}

}  // namespace fetch_request_test
}  // namespace ember::transport
