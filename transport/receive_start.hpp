// What both data-plane receivers (tcp_fetch.cpp, ucx_fetch.cpp) do when the first frame tells them
// the blob's size: check it against the caller's options, take the sink's buffer, and start the
// trailing hasher for a fetch from offset 0. Called on the fetch's thread; never throws.
#pragma once

#include <memory>
#include <string>
#include <system_error>

#include "base/status.hpp"
#include "transport/frame.hpp"
#include "transport/tcp_fetch.hpp"
#include "transport/trailing_hasher.hpp"

namespace ember::transport {

struct ReceiveStart {
  uint8_t* buffer = nullptr;
  /// Null for a resumed fetch, an empty blob, or when no thread could be started: the receiver then
  /// hashes the whole buffer once at the end.
  std::unique_ptr<TrailingHasher> hasher;
};

/// corrupt: the size is not options.expected_bytes; invalid_argument: the resume offset is beyond
/// the blob; out_of_memory: the sink refused the buffer. Messages lack the fetch's context.
inline Result<ReceiveStart> start_receiving(uint64_t blob_bytes, const FetchOptions& options, BlobSink& sink) {
  if (options.expected_bytes != 0 && blob_bytes != options.expected_bytes) {
    return corrupt("the server's blob has " + std::to_string(blob_bytes) + " bytes, expected " +
                   std::to_string(options.expected_bytes));
  }
  if (options.resume_offset > blob_bytes) {
    return invalid_argument("resume offset " + std::to_string(options.resume_offset) + " is beyond the blob's " +
                            std::to_string(blob_bytes) + " bytes");
  }
  ReceiveStart start;
  start.buffer = sink.allocate(blob_bytes);
  if (start.buffer == nullptr && blob_bytes > 0) {
    return out_of_memory("the sink refused " + std::to_string(blob_bytes) + " bytes");
  }
  if (options.resume_offset == 0 && blob_bytes > 0) {
    try {
      start.hasher = std::make_unique<TrailingHasher>(start.buffer);
    } catch (const std::system_error&) {
      // No thread to spare: hash the whole buffer at the end instead, as for a resumed transfer.
    }
  }
  return start;
}

/// The checks every frame of a fetch passes before its contents count: an abort for this transfer
/// (or with id 0: the server turned the connection away before reading the request) becomes the
/// server's error; a frame of another transfer is `corrupt`. Messages lack the fetch's context.
inline Status check_frame_owner(const FrameHeader& h, uint64_t transfer_id) {
  if (h.kind == FrameKind::abort && (h.transfer_id == transfer_id || h.transfer_id == 0)) {
    return Error(h.error_code, "the server aborted the transfer: " + h.reason);
  }
  if (h.transfer_id != transfer_id) {
    return corrupt("frame of transfer " + std::to_string(h.transfer_id) + " in transfer " + std::to_string(transfer_id));
  }
  return Status::OK();
}

}  // namespace ember::transport
