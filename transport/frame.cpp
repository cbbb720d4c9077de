#include "transport/frame.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>

#include <algorithm>
#include <cstring>

#include "transport/frame.capnp.h"

namespace ember::transport {

namespace {
std::string describe(const FrameHeader& h) {
  return "frame of transfer " + std::to_string(h.transfer_id) + " at offset " + std::to_string(h.offset);
}
}  // namespace

FrameHeader data_frame(uint64_t transfer_id, uint64_t offset, const void* payload, uint32_t length, uint64_t blob_bytes) {
  FrameHeader h;
  h.transfer_id = transfer_id;
  h.kind = FrameKind::data;
  h.offset = offset;
  h.length = length;
  h.crc32c = crc32c(payload, length);
  h.blob_bytes = blob_bytes;
  return h;
}

FrameHeader abort_frame(uint64_t transfer_id, const Error& error) {
  FrameHeader h;
  h.transfer_id = transfer_id;
  h.kind = FrameKind::abort;
  h.error_code = error.code();
  h.reason = error.message();
  return h;
}

std::vector<uint8_t> encode_frame_header(const FrameHeader& h) {
  // One segment big enough for any header (a reason is at most 1 KiB), so the flat array is one
  // segment as the layout promises. Cap'n Proto requires the first segment zeroed.
  capnp::word scratch[kMaxFrameHeaderBytes / sizeof(capnp::word)];
  std::memset(scratch, 0, sizeof(scratch));
  capnp::MallocMessageBuilder message(kj::arrayPtr(scratch, kMaxFrameHeaderBytes / sizeof(capnp::word)));
  auto f = message.initRoot<wire::Frame>();
  f.setTransferId(h.transfer_id);
  f.setKind(static_cast<wire::FrameKind>(h.kind));
  f.setOffset(h.offset);
  f.setLength(h.length);
  f.setCrc32c(h.crc32c);
  f.setBlobBytes(h.blob_bytes);
  if (h.kind == FrameKind::end) f.setDigest(capnp::Data::Reader(h.digest.data(), h.digest.size()));
  if (h.kind == FrameKind::abort) {
    f.setErrorCode(static_cast<uint8_t>(h.error_code));
    const size_t n = std::min<size_t>(h.reason.size(), kMaxAbortReasonBytes);
    f.setReason(capnp::Text::Reader(h.reason.data(), n));
  }
  kj::Array<capnp::word> flat = capnp::messageToFlatArray(message);
  const auto bytes = flat.asBytes();
  std::vector<uint8_t> out(kFramePrefixBytes + bytes.size());
  const auto n = static_cast<uint32_t>(bytes.size());
  for (int i = 0; i < 4; ++i) out[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + kFramePrefixBytes, bytes.begin(), bytes.size());
  return out;
}

Result<FrameHeader> decode_frame_header(const uint8_t* data, size_t available, size_t& consumed) {
  consumed = kFramePrefixBytes;
  if (available < kFramePrefixBytes) return not_found("need more bytes");
  uint32_t n = 0;
  for (int i = 3; i >= 0; --i) n = (n << 8) | data[i];
  if (n == 0 || n % 8 != 0 || n > kMaxFrameHeaderBytes) {
    return corrupt("frame header length " + std::to_string(n) + " is not a multiple of 8 in 8.." +
                   std::to_string(kMaxFrameHeaderBytes));
  }
  consumed = kFramePrefixBytes + n;
  if (available < consumed) return not_found("need more bytes");

  // The reader needs word alignment; a header is small, so copy it.
  capnp::word words[kMaxFrameHeaderBytes / sizeof(capnp::word)];
  std::memcpy(words, data + kFramePrefixBytes, n);
  FrameHeader h;
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = kMaxFrameHeaderBytes / 8;
    options.nestingLimit = 4;
    capnp::FlatArrayMessageReader reader(kj::arrayPtr(words, n / sizeof(capnp::word)), options);
    auto f = reader.getRoot<wire::Frame>();
    h.transfer_id = f.getTransferId();
    const auto kind = static_cast<uint16_t>(f.getKind());
    if (kind > static_cast<uint16_t>(FrameKind::abort)) return corrupt("frame kind " + std::to_string(kind) + " is unknown");
    h.kind = static_cast<FrameKind>(kind);
    h.offset = f.getOffset();
    h.length = f.getLength();
    h.crc32c = f.getCrc32c();
    h.blob_bytes = f.getBlobBytes();
    if (h.kind == FrameKind::end) {
      auto digest = f.getDigest();
      if (digest.size() != h.digest.size()) {
        return corrupt(describe(h) + ": end frame digest has " + std::to_string(digest.size()) + " bytes, not 32");
      }
      std::memcpy(h.digest.data(), digest.begin(), digest.size());
    }
    if (h.kind == FrameKind::abort) {
      // 0 is what an older sender without the field writes: report it as a network failure.
      // Any code ember::to_string knows is accepted, so new codes need no change here.
      const uint8_t code = f.getErrorCode();
      if (code != 0 && to_string(static_cast<ErrorCode>(code)) == "unknown") {
        return corrupt(describe(h) + ": abort error code " + std::to_string(code) + " is unknown");
      }
      h.error_code = code == 0 ? ErrorCode::io_error : static_cast<ErrorCode>(code);
      auto reason = f.getReason();
      if (reason.size() > kMaxAbortReasonBytes) {
        return corrupt(describe(h) + ": abort reason of " + std::to_string(reason.size()) + " bytes exceeds " +
                       std::to_string(kMaxAbortReasonBytes));
      }
      h.reason.assign(reason.begin(), reason.size());
    }
  } catch (const kj::Exception& e) {
    return corrupt(std::string("frame header does not parse: ") + e.getDescription().cStr());
  }
  if (h.length > kMaxChunkBytes) {
    return corrupt(describe(h) + ": payload of " + std::to_string(h.length) + " bytes exceeds the " +
                   std::to_string(kMaxChunkBytes) + "-byte chunk limit");
  }
  if (h.kind != FrameKind::data && h.length != 0) return corrupt(describe(h) + ": end and abort frames carry no payload");
  if (h.offset > h.blob_bytes || h.length > h.blob_bytes - h.offset) {
    return corrupt(describe(h) + ": " + std::to_string(h.length) + " bytes run past the blob's " +
                   std::to_string(h.blob_bytes) + " bytes");
  }
  return h;
}

Status verify_payload(const FrameHeader& h, const void* payload, size_t bytes) {
  if (bytes != h.length) {
    return corrupt(describe(h) + ": payload has " + std::to_string(bytes) + " bytes, header says " + std::to_string(h.length));
  }
  const uint32_t crc = crc32c(payload, bytes);
  if (crc != h.crc32c) {
    return corrupt(describe(h) + ": CRC-32C mismatch (got " + std::to_string(crc) + ", header says " +
                   std::to_string(h.crc32c) + ")");
  }
  return Status::OK();
}

}  // namespace ember::transport
