#include "transport/tcp_fetch.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>

#include "transport/fetch_request.hpp"
#include "transport/frame.hpp"
#include "transport/receive_start.hpp"
#include "transport/trailing_hasher.hpp"

namespace ember::transport {

namespace {

using Clock = std::chrono::steady_clock;

/// One fetch in progress: the socket, the stream position, and how to say what went wrong.
class Receiver {
 public:
  Receiver(const Endpoint& from, const std::string& key, const FetchOptions& options, BlobSink& sink)
      : what_("fetch of '" + key + "' from " + from.to_string()), key_(key), from_(from), options_(options),
        sink_(sink) {}

  Result<FetchResult> run();

 private:
  Error fail(Error e) const { return e.with_context(what_); }
  Error cancelled() const {
    return fail(unavailable("cancelled at offset " + std::to_string(next_) + " (the hop was given another upstream)"));
  }
  Result<FetchResult> receive();
  Status read_exact(void* dst, size_t bytes);
  Result<FrameHeader> read_header();
  Status on_first_frame(const FrameHeader& h);

  const std::string what_;
  const std::string& key_;
  const Endpoint& from_;
  const FetchOptions& options_;
  BlobSink& sink_;

  Socket socket_;
  bool sized_ = false;
  uint64_t blob_bytes_ = 0;
  uint64_t next_ = 0;  // the offset the next data frame must carry
  uint8_t* buffer_ = nullptr;
  std::unique_ptr<TrailingHasher> hasher_;
  Clock::time_point deadline_ = Clock::time_point::max();
};

Status Receiver::read_exact(void* dst, size_t bytes) {
  size_t got = 0;
  std::string error_text;
  const RecvEnd end = recv_exact(socket_.fd(), dst, bytes, options_.idle_timeout, got, error_text, deadline_);
  if (end == RecvEnd::timed_out && Clock::now() >= deadline_) {
    return fail(io_error("not complete within the total timeout of " + std::to_string(options_.total_timeout.count()) +
                         " ms, at offset " + std::to_string(next_)));
  }
  switch (end) {
    case RecvEnd::done:
      return Status::OK();
    case RecvEnd::closed: {
      std::string where = sized_ ? " after " + std::to_string(next_) + " of " + std::to_string(blob_bytes_) + " bytes"
                                 : " before the first frame";
      if (!error_text.empty()) where += " (" + error_text + ")";
      return fail(io_error("connection closed by the server" + where + ": truncated stream"));
    }
    case RecvEnd::timed_out:
      return fail(io_error("server sent nothing for " + std::to_string(options_.idle_timeout.count()) +
                           " ms (idle timeout) at offset " + std::to_string(next_)));
    case RecvEnd::failed:
      break;
  }
  return fail(io_error("receive failed at offset " + std::to_string(next_) + ": " + error_text));
}

Result<FrameHeader> Receiver::read_header() {
  uint8_t bytes[kFramePrefixBytes + kMaxFrameHeaderBytes];
  EMBER_RETURN_IF_ERROR(read_exact(bytes, kFramePrefixBytes));
  size_t need = 0;
  auto h = decode_frame_header(bytes, kFramePrefixBytes, need);
  if (!h.ok() && h.error().code() != ErrorCode::not_found) return fail(h.error());
  EMBER_RETURN_IF_ERROR(read_exact(bytes + kFramePrefixBytes, need - kFramePrefixBytes));
  h = decode_frame_header(bytes, need, need);
  if (!h.ok()) return fail(h.error());
  return h;
}

Status Receiver::on_first_frame(const FrameHeader& h) {
  blob_bytes_ = h.blob_bytes;
  auto start = start_receiving(blob_bytes_, options_, sink_);
  if (!start.ok()) return fail(start.error());
  buffer_ = start->buffer;
  hasher_ = std::move(start->hasher);
  sized_ = true;
  return Status::OK();
}

Result<FetchResult> Receiver::run() {
  Result<FetchResult> result = receive();
  if (options_.cancel) {
    options_.cancel->detach();  // before the socket closes: no shutdown of a reused descriptor
    if (!result.ok() && options_.cancel->cancelled()) return cancelled();
  }
  return result;
}

Result<FetchResult> Receiver::receive() {
  next_ = options_.resume_offset;
  const auto t0 = Clock::now();
  if (options_.total_timeout.count() > 0) deadline_ = t0 + options_.total_timeout;
  FetchRequest request{options_.transfer_id, key_, options_.resume_offset};
  auto request_bytes = encode_fetch_request(request);
  if (!request_bytes.ok()) return fail(request_bytes.error());

  auto connect_budget = options_.connect_timeout;
  if (options_.total_timeout.count() > 0) connect_budget = std::min(connect_budget, options_.total_timeout);
  auto connected = connect_tcp(from_, connect_budget, options_.socket_buffer_bytes);
  if (!connected.ok()) return fail(connected.error());
  socket_ = std::move(*connected);
  if (options_.cancel) {
    const int fd = socket_.fd();
    if (!options_.cancel->attach([fd] { ::shutdown(fd, SHUT_RDWR); })) return cancelled();
  }
  set_send_timeout(socket_.fd(), options_.idle_timeout);
  iovec iov{request_bytes->data(), request_bytes->size()};
  if (Status st = send_all(socket_.fd(), &iov, 1); !st.ok()) return fail(st.error().with_context("sending the request"));

  next_ = options_.resume_offset;
  while (true) {
    EMBER_ASSIGN_OR_RETURN(FrameHeader h, read_header());
    if (Status owned = check_frame_owner(h, options_.transfer_id); !owned.ok()) return fail(owned.error());
    if (!sized_) {
      EMBER_RETURN_IF_ERROR(on_first_frame(h));
    } else if (h.blob_bytes != blob_bytes_) {
      return fail(corrupt("frame at offset " + std::to_string(h.offset) + " says the blob has " +
                          std::to_string(h.blob_bytes) + " bytes, earlier frames " + std::to_string(blob_bytes_)));
    }
    if (h.offset != next_) {
      return fail(corrupt("frame at offset " + std::to_string(h.offset) + " where offset " + std::to_string(next_) +
                          " was due"));
    }

    if (h.kind == FrameKind::end) {
      if (next_ != blob_bytes_) {
        return fail(corrupt("end frame after " + std::to_string(next_) + " of " + std::to_string(blob_bytes_) + " bytes"));
      }
      Digest got{};
      if (hasher_) {
        got = hasher_->finish();
      } else {
        Sha256 sha;
        if (blob_bytes_ > 0) sha.update(buffer_, blob_bytes_);
        got = sha.finish();
      }
      if (got != h.digest) {
        return fail(corrupt("SHA-256 mismatch over " + std::to_string(blob_bytes_) + " bytes: received " +
                            to_hex(got) + ", the server says " + to_hex(h.digest)));
      }
      FetchResult result;
      result.blob_bytes = blob_bytes_;
      result.bytes_received = blob_bytes_ - options_.resume_offset;
      result.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      result.digest = got;
      return result;
    }

    // A data frame: its payload lands in the sink's buffer at its offset, then is checked there.
    if (h.length == 0) return fail(corrupt("empty data frame at offset " + std::to_string(h.offset)));
    uint8_t* dst = buffer_ + h.offset;
    EMBER_RETURN_IF_ERROR(read_exact(dst, h.length));
    if (Status st = verify_payload(h, dst, h.length); !st.ok()) return fail(st.error());
    next_ += h.length;
    if (hasher_) hasher_->advance(next_);
    sink_.on_chunk(h.offset, h.length);
  }
}

}  // namespace

Result<FetchResult> fetch_blob(const Endpoint& from, const std::string& key, const FetchOptions& options, BlobSink& sink) {
  Receiver receiver(from, key, options, sink);
  return receiver.run();
}

}  // namespace ember::transport
