#include "transport/frame_receiver.hpp"

#include <system_error>

#include "transport/fetch_request.hpp"

namespace ember::transport {

FrameReceiver::FrameReceiver(const FetchOptions& options, BlobSink& sink)
    : transfer_id_(options.transfer_id),
      resume_offset_(options.resume_offset),
      expected_bytes_(options.expected_bytes),
      sink_(sink),
      accepted_(options.resume_offset),
      verified_(options.resume_offset) {}

Result<std::vector<uint8_t>> FrameReceiver::request(const std::string& key) const {
  return encode_fetch_request(FetchRequest{transfer_id_, key, resume_offset_});
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
  buffer_ = sink_.allocate(blob_bytes);
  if (buffer_ == nullptr && blob_bytes > 0) {
    return out_of_memory("the sink refused " + std::to_string(blob_bytes) + " bytes");
  }
  blob_bytes_ = blob_bytes;
  sized_ = true;
  if (resume_offset_ == 0 && blob_bytes > 0) {
    try {
      hasher_ = std::make_unique<TrailingHasher>(buffer_);
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
    if (accepted_ != blob_bytes_) {
      return fail(
          corrupt("end frame after " + std::to_string(accepted_) + " of " + std::to_string(blob_bytes_) + " bytes"));
    }
    end_ = h.digest;
    return Landing{};
  }
  if (h.length == 0) return fail(corrupt("empty data frame at offset " + std::to_string(h.offset)));
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
  if (hasher_) hasher_->advance(verified_);
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
    Sha256 sha;
    if (blob_bytes_ > 0) sha.update(buffer_, blob_bytes_);
    got = sha.finish();
  }
  if (got != *end_) {
    return fail(corrupt("SHA-256 mismatch over " + std::to_string(blob_bytes_) + " bytes: received " + to_hex(got) +
                        ", the server says " + to_hex(*end_)));
  }
  FetchResult result;
  result.blob_bytes = blob_bytes_;
  result.bytes_received = blob_bytes_ - resume_offset_;
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
