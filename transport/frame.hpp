// The data-plane frame: how model bytes travel between hosts (over TCP or UCX), chunk by chunk.
//
// Layout of one frame on the wire:
//   1. 4 bytes   H, little-endian: length of the header that follows (a multiple of 8, at most
//                kMaxFrameHeaderBytes)
//   2. H bytes   the header: one single-segment Cap'n Proto message of struct Frame (frame.capnp):
//                transfer id, kind (data | end | abort), offset in the blob, payload length,
//                CRC-32C of the payload, size of the whole blob, for `end` the blob's SHA-256, and
//                for `abort` an error code and a reason (at most kMaxAbortReasonBytes)
//   3. N bytes   the payload, N = length (at most kMaxChunkBytes; 0 for end and abort)
//
// A receiver decodes the header, reads N bytes, and checks them with verify_payload() before it
// stores or forwards them; once it holds every byte it compares the SHA-256 of the whole blob with
// the end frame's digest. Pure encoding and decoding; anyone, any thread; never throws: a header
// that does not parse or contradicts itself is a `corrupt` Error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "transport/checksum.hpp"

namespace ember::transport {

inline constexpr uint32_t kFramePrefixBytes = 4;
inline constexpr uint32_t kMaxFrameHeaderBytes = 4096;
/// Upper bound on one chunk. Chunks are a few MiB in practice; this only bounds what a receiver
/// must be ready to buffer for one frame.
inline constexpr uint32_t kMaxChunkBytes = 64u << 20;
/// An abort's reason is for a human; longer text is cut at this many bytes when encoded.
inline constexpr uint32_t kMaxAbortReasonBytes = 1024;
// An abort header (fixed fields, pointers, digest-less) with the longest reason stays one segment
// within the header bound.
static_assert(kMaxAbortReasonBytes + 256 <= kMaxFrameHeaderBytes);

enum class FrameKind : uint8_t { data = 0, end = 1, abort = 2 };

struct FrameHeader {
  uint64_t transfer_id = 0;
  FrameKind kind = FrameKind::data;
  uint64_t offset = 0;
  uint32_t length = 0;
  uint32_t crc32c = 0;
  uint64_t blob_bytes = 0;
  Digest digest{};  // end frames only
  ErrorCode error_code = ErrorCode::io_error;  // abort frames only: what the receiver reports
  std::string reason;                          // abort frames only
};

/// The header of a data frame carrying `payload` at `offset` of a `blob_bytes` blob.
FrameHeader data_frame(uint64_t transfer_id, uint64_t offset, const void* payload, uint32_t length, uint64_t blob_bytes);

/// The header of an abort frame: the sender gives up on `transfer_id` because of `error`.
FrameHeader abort_frame(uint64_t transfer_id, const Error& error);

/// Prefix plus Cap'n Proto header, ready to be followed on the wire by header.length payload bytes.
std::vector<uint8_t> encode_frame_header(const FrameHeader& header);

/// Decodes a header from the first `available` bytes of a stream. Returns the header and sets
/// `consumed` to 4 + H. When fewer than 4 + H bytes are available, returns not_found ("need more
/// bytes") with `consumed` set to the bytes needed; any other failure is `corrupt`.
Result<FrameHeader> decode_frame_header(const uint8_t* data, size_t available, size_t& consumed);

/// Checks the payload's length and CRC-32C against the header (`corrupt` on mismatch).
Status verify_payload(const FrameHeader& header, const void* payload, size_t bytes);

}  // namespace ember::transport
