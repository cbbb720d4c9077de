#include "transport/frame_sender.hpp"

#include <algorithm>

namespace ember::transport {

FrameSender::FrameSender(const BlobServerOptions& options, std::atomic<uint64_t>& data_frames_sent,
                         size_t staging_chunks)
    : chunk_bytes_(options.chunk_bytes),
      corrupt_frame_(options.corrupt_frame),
      corrupt_next_(options.corrupt_next),
      upstream_wait_(options.upstream_wait),
      data_frames_sent_(data_frames_sent),
      staging_chunks_(std::max<size_t>(staging_chunks, 1)) {}

void FrameSender::fail(Error error) {
  abort_ = std::move(error);
  state_ = State::aborting;
}

void FrameSender::open(Result<FetchRequest> request, const BlobLookup& lookup) {
  if (state_ != State::unopened) return;
  if (!request.ok()) return fail(request.error());
  transfer_id_ = request->transfer_id;
  key_ = std::move(request->key);
  Result<std::shared_ptr<const Blob>> blob = lookup(key_);
  if (!blob.ok()) return fail(blob.error());
  if (*blob == nullptr) return fail(internal_error("lookup of '" + key_ + "' returned no blob"));
  blob_ = std::move(*blob);
  size_ = blob_->size();
  at_ = request->offset;
  if (at_ > size_) {
    return fail(invalid_argument("offset " + std::to_string(at_) + " is beyond blob '" + key_ + "' of " +
                                 std::to_string(size_) + " bytes"));
  }
  end_ = size_;
  if (request->length > 0) {
    if (request->length > size_ - at_) {
      return fail(invalid_argument("range of " + std::to_string(request->length) + " bytes at offset " +
                                   std::to_string(at_) + " runs past blob '" + key_ + "' of " + std::to_string(size_) +
                                   " bytes"));
    }
    end_ = at_ + request->length;
    range_sha_ = std::make_unique<Sha256>();
  }
  if (blob_->data() == nullptr && at_ < end_) {
    // Only for blobs that must be read(): one chunk per data frame the transport keeps in flight.
    staging_.resize(staging_chunks_);
    for (auto& s : staging_) s.resize(static_cast<size_t>(std::min<uint64_t>(chunk_bytes_, end_ - at_)));
  }
  state_ = State::streaming;
}

bool FrameSender::data_done() const { return (state_ == State::streaming || state_ == State::waiting) && at_ >= end_; }

FrameSender::Frame FrameSender::abort_frame_for(const Error& error) {
  Frame f;
  f.kind = FrameKind::abort;
  f.header = encode_frame_header(transport::abort_frame(transfer_id_, error));
  result_ = error;
  state_ = State::finished;
  return f;
}

FrameSender::Frame FrameSender::abort(const Error& error) {
  if (state_ == State::waiting) return abort_frame_for(error.with_context(in_context("forwarding")));
  return abort_frame_for(error);
}

Status FrameSender::wait(std::chrono::milliseconds slice) {
  if (state_ != State::waiting) return Status::OK();
  const uint64_t end = at_ + std::min<uint64_t>(chunk_bytes_, end_ - at_);
  Status st = blob_->wait_readable(end, slice);
  // deadline_exceeded: the slice ran out, ask again; any other error is the writer's own.
  if (!st.ok() && st.error().code() != ErrorCode::deadline_exceeded) writer_failed_ = st.error();
  return st;
}

FrameSender::Step FrameSender::next(Clock::time_point now, Frame& out) {
  switch (state_) {
    case State::unopened:
      fail(internal_error("next() before open()"));
      [[fallthrough]];
    case State::aborting:
      out = abort_frame_for(*abort_);
      return Step::send;
    case State::finished:
      return Step::done;
    case State::streaming:
    case State::waiting:
      break;
  }

  if (at_ < end_) {
    const auto n = static_cast<uint32_t>(std::min<uint64_t>(chunk_bytes_, end_ - at_));
    if (blob_->readable() < at_ + n) {
      // A blob still arriving (a multicast hop forwarding cut-through): wait for the chunk.
      if (state_ == State::streaming) {
        state_ = State::waiting;
        wait_deadline_ = now + upstream_wait_;
        return Step::wait;
      }
      if (writer_failed_) {
        out = abort_frame_for(writer_failed_->with_context(in_context("forwarding")));
        return Step::send;
      }
      if (now >= wait_deadline_) {
        out = abort_frame_for(unavailable("upstream stalled: no bytes up to offset " + std::to_string(at_ + n) +
                                          " within " + std::to_string(upstream_wait_.count()) + " ms")
                                  .with_context(in_context("forwarding")));
        return Step::send;
      }
      return Step::wait;
    }
    state_ = State::streaming;
    const uint8_t* payload = blob_->data();
    if (payload != nullptr) {
      payload += at_;
    } else {
      std::vector<uint8_t>& chunk = staging_[chunks_ % staging_.size()];
      if (Status st = blob_->read(at_, chunk.data(), n); !st.ok()) {
        out = abort_frame_for(st.error().with_context(in_context("reading")));
        return Step::send;
      }
      payload = chunk.data();
    }
    out.kind = FrameKind::data;
    out.header = encode_frame_header(data_frame(transfer_id_, at_, payload, n, size_));
    out.payload = payload;
    out.payload_bytes = n;
    out.corrupted.clear();
    if (range_sha_) range_sha_->update(payload, n);  // the good bytes, before the fault seam
    bool corrupt = corrupt_frame_ != 0 && data_frames_sent_.fetch_add(1) + 1 == corrupt_frame_;
    for (uint64_t left = corrupt_next_ ? corrupt_next_->load() : 0; !corrupt && left > 0;) {
      corrupt = corrupt_next_->compare_exchange_weak(left, left - 1);
    }
    if (corrupt) {
      out.corrupted.assign(payload, payload + n);  // the fault seam: the checksum is of the good bytes
      out.corrupted[n / 2] ^= 0x10;
      out.payload = out.corrupted.data();
    }
    at_ += n;
    ++chunks_;
    return Step::send;
  }

  // A range: the digest of the bytes sent. A blob: the digest of the whole blob, whatever the
  // offset (memoized after the first transfer).
  Result<Digest> digest = range_sha_ ? Result<Digest>(range_sha_->finish()) : blob_->digest();
  if (!digest.ok()) {
    out = abort_frame_for(digest.error().with_context(in_context("hashing")));
    return Step::send;
  }
  FrameHeader end;
  end.transfer_id = transfer_id_;
  end.kind = FrameKind::end;
  end.offset = end_;
  end.blob_bytes = size_;
  end.digest = *digest;
  out = Frame{};
  out.kind = FrameKind::end;
  out.header = encode_frame_header(end);
  result_ = Status::OK();
  state_ = State::finished;
  return Step::send;
}

}  // namespace ember::transport
