// The fetch request: the one message a receiver sends to open a blob transfer over the data plane.
//
// Layout on the wire (the same framing as a frame header, transport/frame.hpp):
//   1. 4 bytes   R, little-endian: length of the message that follows (a multiple of 8, at most
//                kMaxFetchRequestBytes)
//   2. R bytes   one single-segment Cap'n Proto message of struct FetchRequest (frame.capnp):
//                transfer id, key (1..kMaxFetchKeyBytes bytes), offset of the first byte wanted,
//                length (0: to the end of the blob), and the ticket (transport/ticket.hpp) when the
//                cluster's data plane requires one
//
// The server answers on the same connection with frames of that transfer id: data frames from
// `offset` on and an end frame carrying the SHA-256 of the whole blob, or one abort frame. A range
// request (length > 0: one stage's layer range, or the rest of a broken one) gets data frames of
// [offset, offset + length) only and an end frame at offset + length carrying the SHA-256 of exactly
// those bytes (the receiver checks what it holds against the model's per-layer digests too). There is
// no other message: a later multicast hop is a server that is also a receiver.
//
// Pure encoding and decoding; anyone, any thread; never throws. A request that does not parse or
// breaks a bound is a `corrupt` Error; a key out of bounds given to the encoder is invalid_argument.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "transport/ticket.hpp"

namespace ember::transport {

inline constexpr uint32_t kMaxFetchRequestBytes = 4096;
/// Keys are names (model id, version, file), not data; the bound keeps a request one small read.
inline constexpr uint32_t kMaxFetchKeyBytes = 1024;
static_assert(kMaxFetchKeyBytes + 64 <= kMaxFetchRequestBytes, "the longest key must fit one request segment");

struct FetchRequest {
  uint64_t transfer_id = 0;
  std::string key;
  uint64_t offset = 0;  // bytes; 0 = the whole blob
  uint64_t length = 0;  // bytes from offset; 0 = up to the end of the blob
  Ticket ticket;        // empty: none
};

inline constexpr size_t kMaxTicketReceiverBytes = 255;
inline constexpr size_t kMaxTicketMacBytes = 64;

/// Prefix plus Cap'n Proto message. invalid_argument when the key is empty or too long.
Result<std::vector<uint8_t>> encode_fetch_request(const FetchRequest& request);

/// Decodes a request from the first `available` bytes of a stream. Returns it and sets `consumed`
/// to 4 + R. When fewer than 4 + R bytes are available, returns not_found ("need more bytes") with
/// `consumed` set to the bytes needed; any other failure is `corrupt`.
Result<FetchRequest> decode_fetch_request(const uint8_t* data, size_t available, size_t& consumed);

}  // namespace ember::transport
