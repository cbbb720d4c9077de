#include "transport/frame_receiver.hpp"

#include <algorithm>
#include <system_error>

#include "transport/fetch_request.hpp"

namespace ember::transport {

FrameReceiver::FrameReceiver(const FetchOptions& options, BlobSink& sink)
    : transfer_id_(options.transfer_id),
      resume_offset_(options.resume_offset),
      expected_bytes_(options.expected_bytes),
      ranged_(options.range_length > 0),
      first_byte_(ranged_ ? std::max(options.range_offset, options.resume_offset) : options.resume_offset),
      range_end_(options.range_offset + options.range_length),
      ticket_(options.ticket),
      sink_(sink),
      accepted_(first_byte_),
      verified_(first_byte_) {}

Result<std::vector<uint8_t>> FrameReceiver::request(const std::string& key) const {
  if (ranged_ && range_end_ < first_byte_) {
    return invalid_argument("the range ends at " + std::to_string(range_end_) + ", before the resume offset " +
                            std::to_string(first_byte_));
  }
  if (ranged_ && range_end_ == first_byte_) return invalid_argument("the range has no bytes left to fetch");
  return encode_fetch_request(
      FetchRequest{transfer_id_, key, first_byte_, ranged_ ? range_end_ - first_byte_ : 0, ticket_});
}

Error FrameReceiver::fail(Error e) {
  failed_ = e;
  hasher_.reset();  // joined: nothing reads the buffer any more
  return e;
}

Status FrameReceiver::start(uint64_t blob_bytes) {
  if (expected_bytes_ != 0 && blob_bytes != expected_bytes_) {
    return corrupt("the server's blob has " + std::to_string(blob_bytes) + " bytes, expected " +
                   std::to_string(expected_bytes_));
  }
  if (resume_offset_ > blob_bytes) {
    return invalid_argument("resume offset " + std::to_string(resume_offset_) + " is beyond the blob's " +
                            std::to_string(blob_bytes) + " bytes");
  }
  if (ranged_ && (range_end_ < first_byte_ || range_end_ > blob_bytes)) {
    return invalid_argument("range [" + std::to_string(first_byte_) + ", " + std::to_string(range_end_) +
                            ") runs past the blob's " + std::to_string(blob_bytes) + " bytes");
  }
  buffer_ = sink_.allocate(blob_bytes);
  if (buffer_ == nullptr && blob_bytes > 0) {
    return out_of_memory("the sink refused " + std::to_string(blob_bytes) + " bytes");
  }
  blob_bytes_ = blob_bytes;
  end_at_ = ranged_ ? range_end_ : blob_bytes;
  sized_ = true;
  if ((ranged_ || resume_offset_ == 0) && end_at_ > first_byte_) {
    try {
      hasher_ = std::make_unique<TrailingHasher>(buffer_ + first_byte_);
    } catch (const std::system_error&) {
      // No thread to spare: hash the whole buffer at the end instead, as for a resumed transfer.
    }
  }
  return Status::OK();
}

Result<FrameReceiver::Landing> FrameReceiver::accept(const FrameHeader& h) {
  if (failed_) return *failed_;
  if (h.kind == FrameKind::abort && (h.transfer_id == transfer_id_ || h.transfer_id == 0)) {
    return fail(Error(h.error_code, "the server aborted the transfer: " + h.reason));
  }
  if (h.transfer_id != transfer_id_) {
    return fail(
        corrupt("frame of transfer " + std::to_string(h.transfer_id) + " in transfer " + std::to_string(transfer_id_)));
  }
  if (!sized_) {
    if (Status st = start(h.blob_bytes); !st.ok()) return fail(st.error());
  } else if (h.blob_bytes != blob_bytes_) {
    return fail(corrupt("frame at offset " + std::to_string(h.offset) + " says the blob has " +
                        std::to_string(h.blob_bytes) + " bytes, earlier frames " + std::to_string(blob_bytes_)));
  }
  if (end_ || h.offset != accepted_) {
    return fail(corrupt("frame at offset " + std::to_string(h.offset) + " where offset " + std::to_string(accepted_) +
                        " was due"));
  }
  if (h.kind == FrameKind::end) {
    if (accepted_ != end_at_) {
      return fail(corrupt("end frame after " + std::to_string(accepted_) + " of " + std::to_string(end_at_) + " bytes" +
                          (ranged_ ? " of the range" : "")));
    }
    end_ = h.digest;
    return Landing{};
  }
  if (h.length == 0) return fail(corrupt("empty data frame at offset " + std::to_string(h.offset)));
  if (h.length > end_at_ - accepted_) {
    return fail(corrupt("data frame at offset " + std::to_string(h.offset) + " runs past the range's end at " +
                        std::to_string(end_at_)));
  }
  // decode_frame_header guarantees offset + length <= blob_bytes, so the landing is in the buffer.
  unverified_.push_back(h);
  accepted_ += h.length;
  return Landing{buffer_ + h.offset, h.length};
}

Status FrameReceiver::verify() {
  if (failed_) return *failed_;
  if (unverified_.empty()) return internal_error("verify() with no payload awaiting verification");
  const FrameHeader h = unverified_.front();
  unverified_.pop_front();
  if (Status st = verify_payload(h, buffer_ + h.offset, h.length); !st.ok()) return fail(st.error());
  verified_ += h.length;
  if (hasher_) hasher_->advance(verified_ - first_byte_);
  sink_.on_chunk(h.offset, h.length);
  return Status::OK();
}

Result<FetchResult> FrameReceiver::finish() {
  if (failed_) return *failed_;
  if (!complete() || finished_) return internal_error("finish() before the end frame and every payload, or twice");
  finished_ = true;
  Digest got{};
  if (hasher_) {
    got = hasher_->finish();
    hasher_.reset();
  } else {
    // A resumed whole blob is hashed whole (the end frame carries the whole blob's digest).
    const uint64_t from = ranged_ ? first_byte_ : 0;
    Sha256 sha;
    if (end_at_ > from) sha.update(buffer_ + from, end_at_ - from);
    got = sha.finish();
  }
  if (got != *end_) {
    const uint64_t hashed = ranged_ ? end_at_ - first_byte_ : blob_bytes_;
    return fail(corrupt("SHA-256 mismatch over " + std::to_string(hashed) + " bytes: received " + to_hex(got) +
                        ", the server says " + to_hex(*end_)));
  }
  FetchResult result;
  result.blob_bytes = blob_bytes_;
  result.bytes_received = end_at_ - first_byte_;
  result.digest = got;
  return result;
}

std::string FrameReceiver::position() const {
  return sized_ ? " after " + std::to_string(verified_) + " of " + std::to_string(blob_bytes_) + " bytes"
                : " before the first frame";
}

Error FrameReceiver::cancelled() const {
  return unavailable("cancelled at offset " + std::to_string(verified_) + " (the hop was given another upstream)");
}

Error FrameReceiver::idle_timeout(std::chrono::milliseconds idle) const {
  return io_error("server sent nothing for " + std::to_string(idle.count()) + " ms (idle timeout) at offset " +
                  std::to_string(verified_));
}

Error FrameReceiver::total_timeout(std::chrono::milliseconds total) const {
  return io_error("not complete within the total timeout of " + std::to_string(total.count()) + " ms, at offset " +
                  std::to_string(verified_));
}

}  // namespace ember::transport
